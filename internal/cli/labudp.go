package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/lab/udplab"
	"github.com/perfscope/perfscope/report"
	"github.com/perfscope/perfscope/report/compare"
)

type labUDPOptions struct {
	Scenarios []string
	Keep      bool
	Duration  time.Duration
	Freq      int
	Output    string

	format report.Format
	run    func(ctx context.Context, o *labUDPOptions, g *Globals) error
}

func newLabUDPCmd(g *Globals) *cobra.Command {
	return labUDPCmd(g, &labUDPOptions{run: runLabUDP})
}

func labUDPCmd(g *Globals, o *labUDPOptions) *cobra.Command {
	var list strings.Builder
	for _, s := range udplab.Scenarios {
		fmt.Fprintf(&list, "  %-22s %s\n", s.Name, s.Fault)
	}
	cmd := &cobra.Command{
		Use:   "udp",
		Short: "Toshiaki Makita's UDP tuning steps end to end: plant each network fault, let perfscope find it, apply the fix, measure again",
		Long: `lab udp builds two network namespaces joined by a 4-queue veth pair (nothing
outside them is touched), and for each scenario plants one fault Makita's talk
describes, runs a UDP server and a bounded flood, runs ` + "`perfscope udp`" + ` in the
receiver's namespace, applies the fix perfscope recommends (its own --apply
for system settings, a restarted server for code changes), runs again, and
prints the before/after table. The namespaces, processes and files of each
scenario are removed when it ends, also on Ctrl-C (--keep leaves the
namespaces and the JSON reports).

Scenarios:
` + list.String() + `
Exit status 1 when a scenario's finding did not appear, or did not go away
after its fix (or the tuned rig has a finding of severity warn or worse).`,
		Example: `  perfscope lab udp
  perfscope lab udp --scenario single-socket,rps-off
  perfscope lab udp --scenario gro-on --keep -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.format, err = report.ParseFormat("lab udp", o.Output); err != nil {
				return asUsage(err)
			}
			if o.Duration < time.Second || o.Duration > time.Minute {
				return usageError("--duration must be between 1s and 1m, got %v", o.Duration)
			}
			if o.Freq <= 0 || o.Freq > 10000 {
				return usageError("--freq must be between 1 and 10000 Hz, got %d", o.Freq)
			}
			for _, name := range o.Scenarios {
				if _, ok := udplab.Lookup(name); !ok {
					return usageError("--scenario %q: unknown; the scenarios are %s", name, strings.Join(udplab.Names(), ", "))
				}
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Scenarios, "scenario", nil, "run only these scenarios (comma-separated; default all)")
	f.BoolVar(&o.Keep, "keep", false, "keep each scenario's namespaces and JSON reports (servers are stopped)")
	f.DurationVarP(&o.Duration, "duration", "d", 3*time.Second, "each perfscope udp measurement")
	f.IntVar(&o.Freq, "freq", 499, "CPU profile samples per second per CPU")
	f.StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("lab udp"))
	return cmd
}

// labUDPTools fails with exit 3 naming what the lab needs and is missing.
func labUDPTools(scenarios []udplab.Scenario) error {
	missing, pkgs := udplab.MissingTools(scenarios)
	if len(missing) == 0 {
		return nil
	}
	return unavailableError("lab udp needs %s: apt-get install %s", strings.Join(missing, ", "), strings.Join(pkgs, " "))
}

func runLabUDP(ctx context.Context, o *labUDPOptions, g *Globals) error {
	if err := labPrivileged("lab udp"); err != nil {
		return err
	}
	scenarios := udplab.Scenarios
	if len(o.Scenarios) > 0 {
		scenarios = nil
		for _, name := range o.Scenarios {
			s, _ := udplab.Lookup(name)
			scenarios = append(scenarios, s)
		}
	}
	if err := labUDPTools(scenarios); err != nil {
		return err
	}
	bin, dir, done, err := labWorkspace(g, "lab udp", o.Keep)
	if err != nil {
		return err
	}
	defer done()
	opts := udplab.Options{Binary: bin, Duration: o.Duration, Freq: o.Freq, Dir: dir, Keep: o.Keep, Log: g.Err}
	started := time.Now()
	// interrupted ends the run with exit 130, after the scenarios that
	// finished are reported: an interrupted lab has not proved the fixes it
	// did not get to, so it never exits 0.
	var interrupted error
	results, stop, err := udplab.RunAll(ctx, opts, scenarios, func(res udplab.Result) {
		if o.format == report.Text {
			compare.WriteLabUDPScenario(g.textOut(), res)
		}
	})
	if err != nil {
		return err
	}
	if stop != nil {
		interrupted = &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("lab udp interrupted during %s, whose namespaces were removed; %d of %d scenarios finished, not run: %s",
			stop.During, len(results), len(scenarios), strings.Join(stop.NotRun, ", "))}
	}
	if interrupted != nil && len(results) == 0 {
		return interrupted
	}
	r := report.New("lab udp", Version(), started)
	r.Meta.DurationNs = int64(time.Since(started))
	r.Data = compare.LabUDPData(results)
	if err := report.Render(g.Out, r, o.format); err != nil {
		return err
	}
	if o.format == report.Text && o.Keep {
		compare.WriteLabUDPKept(g.Out, dir, results)
	}
	if interrupted != nil {
		return interrupted
	}
	failed := 0
	for _, r := range results {
		if !r.OK() {
			failed++
		}
	}
	if failed > 0 {
		return &ExitError{Code: ExitFindings, Err: fmt.Errorf("%d of %d scenarios did not prove their fix", failed, len(results))}
	}
	return nil
}
