package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/lab/tcplab"
	"github.com/perfscope/perfscope/report"
)

type labTCPOptions struct {
	Scenarios []string
	Keep      bool
	Duration  time.Duration
	Output    string

	format    report.Format
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
namespace, restarts the server, measures again, and prints the before/after
table. The namespaces, goroutines and files of each scenario are removed when
it ends, also on Ctrl-C (--keep leaves the namespaces and the JSON reports).

Scenarios:
` + tcplab.Help() + `
Exit status 1 when a scenario's finding did not appear, or did not go away
after its fix.`,
		Example: `  perfscope lab tcp
  perfscope lab tcp --scenario backlog-overflow
  perfscope lab tcp --scenario gro-off --keep -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.format, err = report.ParseFormat("lab tcp", o.Output); err != nil {
				return asUsage(err)
			}
			if o.Duration < time.Second || o.Duration > time.Minute {
				return usageError("--duration must be between 1s and 1m, got %v", o.Duration)
			}
			if o.scenarios, err = tcplab.Select(o.Scenarios); err != nil {
				return asUsage(err)
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Scenarios, "scenario", nil, "run only these scenarios (comma-separated; default all)")
	f.BoolVar(&o.Keep, "keep", false, "keep each scenario's namespaces and JSON reports (load stopped)")
	f.DurationVarP(&o.Duration, "duration", "d", 3*time.Second, "each perfscope tcp measurement")
	f.StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("lab tcp"))
	return cmd
}

func runLabTCP(ctx context.Context, o *labTCPOptions, g *Globals) error {
	var data report.LabTCPData
	return runLab(ctx, g, labRun{name: "lab tcp", keep: o.Keep, format: o.format, missing: tcplab.MissingTools,
		run: func(bin, dir string) (any, int, int, int, *netlab.Interrupted, error) {
			opts := tcplab.Options{Binary: bin, Duration: o.Duration, Dir: dir, Keep: o.Keep, Log: g.Err}
			var stop *netlab.Interrupted
			var err error
			data, stop, err = tcplab.RunAll(ctx, opts, o.scenarios, func(res report.LabTCPScenario) {
				if o.format == report.Text {
					report.WriteLabTCPScenario(g.textOut(), res)
				}
			})
			total := len(data.Scenarios)
			if stop != nil {
				total += len(stop.NotRun)
			}
			return data, len(data.Scenarios), total, data.Failed(), stop, err
		},
		kept: func(dir string) { report.WriteLabTCPKept(g.Out, dir, data) }})
}
