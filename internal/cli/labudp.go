package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/lab/netlab"
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

	format    report.Format
	scenarios []udplab.Scenario
	run       func(ctx context.Context, o *labUDPOptions, g *Globals) error
}

func newLabUDPCmd(g *Globals) *cobra.Command {
	return labUDPCmd(g, &labUDPOptions{run: runLabUDP})
}

func labUDPCmd(g *Globals, o *labUDPOptions) *cobra.Command {
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
` + udplab.Help() + `
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
			if o.scenarios, err = udplab.Select(o.Scenarios); err != nil {
				return asUsage(err)
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

func runLabUDP(ctx context.Context, o *labUDPOptions, g *Globals) error {
	var results []udplab.Result
	return runLab(ctx, g, labRun{name: "lab udp", keep: o.Keep, format: o.format,
		missing: func() ([]string, []string) { return udplab.MissingTools(o.scenarios) },
		run: func(bin, dir string) (any, int, int, int, *netlab.Interrupted, error) {
			opts := udplab.Options{Binary: bin, Duration: o.Duration, Freq: o.Freq, Dir: dir, Keep: o.Keep, Log: g.Err}
			var stop *netlab.Interrupted
			var err error
			results, stop, err = udplab.RunAll(ctx, opts, o.scenarios, func(res udplab.Result) {
				if o.format == report.Text {
					compare.WriteLabUDPScenario(g.textOut(), res)
				}
			})
			failed := 0
			for _, r := range results {
				if !r.OK() {
					failed++
				}
			}
			return compare.LabUDPData(results), len(results), len(o.scenarios), failed, stop, err
		},
		kept: func(dir string) { compare.WriteLabUDPKept(g.Out, dir, results) }})
}
