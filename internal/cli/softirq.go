package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type softirqOptions struct {
	Duration time.Duration
	Interval time.Duration
	CPUs     string
	Output   string
	Method   string
	// Budget (percent of a CPU) and Exact: see budgetFlags.
	Budget    float64
	Exact     bool
	budgetSet bool

	budget budget.Budget
	format report.Format
	cpus   cpuset.Set
	method probes.AttachMethod
	fs     procfs.FS
	src    measure.Sources
	// run is the measurement; tests replace it to check flag handling.
	run func(ctx context.Context, o *softirqOptions, g *Globals) error
}

func newSoftirqCmd(g *Globals) *cobra.Command {
	return softirqCmd(g, &softirqOptions{fs: procfs.Default, src: measure.Live(), run: runSoftirq})
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
			o.budgetSet = cmd.Flags().Changed("overhead-budget")
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.DurationVarP(&o.Duration, "duration", "d", 5*time.Second, "how long to measure")
	f.DurationVarP(&o.Interval, "interval", "i", 0, "print a summary line every interval while measuring (e.g. 1s)")
	f.StringVar(&o.CPUs, "cpus", "", "only these CPUs, as a list like 0-3,8")
	f.StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("softirq"))
	f.StringVar(&o.Method, "attach-method", "", "force tp_btf, raw_tp or tracepoint (default: the best the kernel accepts)")
	budgetFlags(f, &o.Budget, &o.Exact)
	return cmd
}

func (o *softirqOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat("softirq", o.Output); err != nil {
		return asUsage(err)
	}
	if o.Duration <= 0 {
		return usageError("--duration must be positive, got %v", o.Duration)
	}
	if o.Interval < 0 || o.Interval > o.Duration {
		return usageError("--interval must be between 0 and --duration (%v), got %v", o.Duration, o.Interval)
	}
	if o.budget, err = parseBudget(o.Budget, o.Exact, o.budgetSet); err != nil {
		return err
	}
	if o.method, err = probes.ParseMethod(o.Method); err != nil {
		return asUsage(err)
	}
	if o.CPUs != "" {
		o.cpus, err = measure.CheckCPUs(o.fs, o.CPUs)
	}
	return err
}

func runSoftirq(ctx context.Context, o *softirqOptions, g *Globals) error {
	// The flags are the softirq-balance recipe's parameters.
	plan, err := recipes.Load("softirq-balance", recipeSet("duration", o.Duration.String(), "interval", o.Interval.String(),
		"cpus", o.CPUs, "attach_method", o.Method), o.src)
	if err != nil {
		return err
	}
	progress := newProgress(g.Err, o.Duration)
	plan.SetBudget(o.budget)
	hooks := recipes.Hooks{Started: g.Started}
	if o.Interval == 0 && progress.Enabled() {
		hooks.TickEvery = time.Second // ticks for the progress line only
	}
	textIntervals := o.Interval > 0 && o.format == report.Text
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
	return renderRun(g.Out, g, res.Report("softirq", Version()), o.format)
}
