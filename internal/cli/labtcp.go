package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/lab/tcplab"
	"github.com/perfscope/perfscope/report"
)

type labTCPOptions struct {
	labFlags
	scenarios []tcplab.Scenario
	run       func(ctx context.Context, o *labTCPOptions, g *Globals) error
}

func newLabTCPCmd(g *Globals) *cobra.Command {
	return labTCPCmd(g, &labTCPOptions{run: runLabTCP})
}

func labTCPCmd(g *Globals, o *labTCPOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tcp",
		Short: "TCP faults end to end: plant each one in the lab's namespaces, let perfscope tcp find it, apply its fix, measure again",
		Long: `lab tcp builds two network namespaces joined by a veth pair (nothing outside
them is touched), and for each scenario plants one TCP fault inside them,
runs a TCP server and its clients (goroutines of this process, their sockets
in the namespaces), runs ` + "`perfscope tcp --apply FINDING`" + ` in the receiver's
namespace, restarts the server and its clients, measures again, and prints the
before/after table. Where a scenario needs a round-trip delay (rmem-bdp), the
sender's packets pass through the lab's own delay line (a TUN device). The
namespaces, goroutines, devices and files of each scenario are removed when it
ends, also on Ctrl-C (--keep leaves the namespaces and the JSON reports).

Scenarios:
` + tcplab.Help() + `
Exit status 1 when a scenario's finding did not appear, or did not go away
after its fix.`,
		Example: `  perfscope lab tcp
  perfscope lab tcp --scenario backlog-overflow
  perfscope lab tcp --scenario gro-off --keep -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := o.check()
			if err == nil {
				o.scenarios, err = tcplab.Select(o.Scenarios)
			}
			if err != nil {
				return asUsage(err)
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	o.register(cmd.Flags(), "lab tcp", "load stopped")
	return cmd
}

func runLabTCP(ctx context.Context, o *labTCPOptions, g *Globals) error {
	return runLab(ctx, g, labRun{name: "lab tcp", flags: &o.labFlags, missing: tcplab.MissingTools,
		run: func(bin, dir string) (labScenarios, *netlab.Interrupted, error) {
			opts := tcplab.Options{Binary: bin, Duration: o.Duration, Dir: dir, Keep: o.Keep, Log: g.Err}
			data, stop, err := tcplab.RunAll(ctx, opts, o.scenarios, func(res report.LabTCPScenario) {
				if o.report.format == report.Text {
					report.WriteLabTCPScenario(g.textOut(), res)
				}
			})
			return data, stop, err
		}})
}
