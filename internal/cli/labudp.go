package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/lab/udplab"
	"github.com/perfscope/perfscope/report"
	"github.com/perfscope/perfscope/report/compare"
)

type labUDPOptions struct {
	labFlags
	Freq int

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
			if err := o.check(); err != nil {
				return err
			}
			if o.Freq <= 0 || o.Freq > 10000 {
				return usageError("--freq must be between 1 and 10000 Hz, got %d", o.Freq)
			}
			var err error
			if o.scenarios, err = udplab.Select(o.Scenarios); err != nil {
				return asUsage(err)
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	o.register(cmd.Flags(), "lab udp", "servers are stopped")
	cmd.Flags().IntVar(&o.Freq, "freq", 499, "CPU profile samples per second per CPU")
	return cmd
}

func runLabUDP(ctx context.Context, o *labUDPOptions, g *Globals) error {
	return runLab(ctx, g, labRun{name: "lab udp", flags: &o.labFlags,
		missing: func() ([]string, []string) { return udplab.MissingTools(o.scenarios) },
		run: func(bin, dir string) (labScenarios, *netlab.Interrupted, error) {
			opts := udplab.Options{Binary: bin, Duration: o.Duration, Freq: o.Freq, Dir: dir, Keep: o.Keep, Log: g.Err}
			results, stop, err := udplab.RunAll(ctx, opts, o.scenarios, func(res udplab.Result) {
				if o.report.format == report.Text {
					compare.WriteLabUDPScenario(g.textOut(), res)
				}
			})
			return compare.LabUDPData(results), stop, err
		}})
}
