package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type softirqOptions struct {
	params *recipeFlags
	report reportFlags
	budget budgetFlags
	// plan is softirq-balance bound to the flags.
	plan *recipes.Plan
	src  measure.Sources
	// run is the measurement; tests replace it to check flag handling.
	run func(ctx context.Context, o *softirqOptions, g *Globals) error
}

func newSoftirqCmd(g *Globals) *cobra.Command {
	return softirqCmd(g, &softirqOptions{src: measure.Live(), run: runSoftirq})
}

// softirqCmd binds flags to o; tests pass options with a fake run.
func softirqCmd(g *Globals, o *softirqOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "softirq",
		Short: "Softirq count, time and raise→run latency per CPU, checked against /proc/softirqs",
		Long: `softirq attaches to irq:softirq_raise/entry/exit and measures, per CPU and
vector, how often softirqs ran and for how long, with a bar of NET_RX and NET_TX
share per CPU and the raise→entry latency histograms of NET_RX and NET_TX.
The same counts read from /proc/softirqs over the same window are printed
beside the probe's, so the numbers can be trusted.

With --interval a line per interval is printed while it runs, like mpstat.`,
		Example: `  perfscope softirq
  perfscope softirq --duration 10s --interval 1s --cpus 0-3
  perfscope softirq -o json | jq '.data.cpus[] | {cpu, share}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	g.lateFlags(cmd, func() {
		o.params = newRecipeFlags(cmd, "softirq-balance", "duration/d", "interval/i", "cpus", "attach_method")
	})
	o.report.register(cmd.Flags(), "softirq", "text", false, false)
	o.budget.register(cmd.Flags())
	return cmd
}

func (o *softirqOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	if _, err := o.budget.check(); err != nil {
		return err
	}
	var err error
	o.plan, err = o.params.load(o.src)
	return err
}

func runSoftirq(ctx context.Context, o *softirqOptions, g *Globals) error {
	plan := o.plan
	duration, interval := plan.Window().Duration, plan.Window().Interval
	progress := newProgress(g.Err, duration)
	plan.SetBudget(o.budget.budget)
	hooks := recipes.Hooks{Started: g.Started}
	if interval == 0 && progress.Enabled() {
		hooks.TickEvery = time.Second // ticks for the progress line only
	}
	textIntervals := interval > 0 && o.report.format == report.Text
	if textIntervals {
		report.WriteSoftirqIntervalHeader(g.textOut())
	}
	hooks.OnSoftirqInterval = func(iv evidence.SoftirqInterval) {
		if textIntervals {
			progress.Clear()
			report.WriteSoftirqInterval(g.textOut(), iv)
		}
		progress.Update(iv.End, iv.NetRXPerS)
	}
	res, err := plan.Run(ctx, o.src, hooks)
	progress.Clear()
	if err != nil {
		return err
	}
	return renderRun(g.Out, g, res.Report("softirq", Version()), o.report.format)
}
