package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	probe "github.com/perfscope/perfscope/probes/offcpu"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type offcpuOptions struct {
	PID           int
	All           bool
	Duration      time.Duration
	MinBlock      time.Duration
	Stacks        string
	StackEvery    int
	NoWakerStacks bool
	Top           int
	Method        string
	Output        string
	OutFile       string
	FailOn        string
	// Budget (percent of a CPU) and Exact: see budgetFlags.
	Budget    float64
	Exact     bool
	budgetSet bool

	budget budget.Budget
	format report.Format
	failOn diagnose.Severity
	src    measure.Sources
	// run is the measurement; tests replace it to check flag handling.
	run func(ctx context.Context, o *offcpuOptions, g *Globals) error
}

func newOffCPUCmd(g *Globals) *cobra.Command {
	return offcpuCmd(g, &offcpuOptions{src: measure.Live(), run: runOffCPU})
}

// offcpuCmd binds flags to o; tests pass options with a fake run.
func offcpuCmd(g *Globals, o *offcpuOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "offcpu",
		Short: "Where threads wait: off-CPU time by stack, state, reason and waker, run-queue latency, thread pools",
		Long: `offcpu attaches to sched:sched_switch and the sched wakeup tracepoints and
measures, for one process (--pid) or every process (--all, the default),
where its threads wait off CPU: time by kernel and user stack, split by the
state each thread left the CPU in (sleeping, uninterruptible, preempted
while runnable) and by reason classified from the stack (lock, socket
read/accept, poll, disk IO, page fault, sleep, other), with who woke the
longest waits and from which stack (as bcc's offcputime and offwaketime);
run-queue latency per CPU and per process as log2 histograms (as runqlat);
and each thread pool's time on CPU, runnable and blocked.

Waits shorter than --min-block are timed into every total but not kept by
stack. -o folded, svg, html, pprof and speedscope write the off-CPU profile:
folded values are microseconds off CPU, as offcputime -f prints them.

The sched tracepoints fire at the machine's context-switch rate: under the
overhead budget they are attached in sampling windows and the report says
what share of the run they covered; --exact keeps them attached.`,
		Example: `  perfscope offcpu --pid 1234 --duration 10s
  perfscope offcpu -a -o folded > offcpu.folded
  perfscope offcpu --pid 1234 --exact -o svg --out offcpu.svg
  perfscope offcpu --pid 1234 -o json | jq '.data.by_reason[] | {reason, ns}'`,
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
	f.IntVarP(&o.PID, "pid", "p", 0, "watch only this process")
	f.BoolVarP(&o.All, "all", "a", false, "watch every process (the default when --pid is not given)")
	f.DurationVarP(&o.Duration, "duration", "d", 10*time.Second, "how long to watch (Ctrl-C stops early and still reports)")
	f.DurationVar(&o.MinBlock, "min-block", probe.DefaultMinBlock, "the shortest wait kept by stack (0 keeps every wait); shorter waits count in the totals only")
	f.StringVar(&o.Stacks, "stacks", "kernel+user", "which stacks to record: kernel+user, kernel or user")
	f.IntVar(&o.StackEvery, "stack-every", 1, fmt.Sprintf("take stacks at 1 in N switch-outs (1-%d); every wait is still timed in the totals", probe.MaxStackEvery))
	f.BoolVar(&o.NoWakerStacks, "no-waker-stacks", false, "keep who woke each wait but not the waker's stacks (two stack walks fewer per wakeup)")
	f.IntVar(&o.Top, "top", 20, "waits listed by stack")
	f.StringVar(&o.Method, "attach-method", "", "force tp_btf, raw_tp or tracepoint (default: the best the kernel accepts)")
	f.StringVar(&o.FailOn, "fail-on", "", "exit 1 when a finding is at or above this severity: info, warn or crit")
	f.StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("offcpu")+" (folded in microseconds)")
	f.StringVar(&o.OutFile, "out", "", "write the output to this file instead of standard output")
	budgetFlags(f, &o.Budget, &o.Exact)
	return cmd
}

func (o *offcpuOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat("offcpu", o.Output); err != nil {
		return asUsage(err)
	}
	if o.PID != 0 && o.All {
		return usageError("--pid and --all exclude each other: give one")
	}
	if o.PID < 0 {
		return usageError("--pid must be positive, got %d", o.PID)
	}
	if o.Duration <= 0 {
		return usageError("--duration must be positive, got %v", o.Duration)
	}
	if o.MinBlock < 0 || o.MinBlock > time.Second {
		return usageError("--min-block must be between 0 and 1s, got %v", o.MinBlock)
	}
	switch o.Stacks {
	case "kernel+user", "kernel", "user":
	default:
		return usageError("--stacks must be kernel+user, kernel or user, got %q", o.Stacks)
	}
	if o.StackEvery < 1 || o.StackEvery > probe.MaxStackEvery {
		return usageError("--stack-every must be between 1 and %d, got %d", probe.MaxStackEvery, o.StackEvery)
	}
	if o.Top <= 0 {
		return usageError("--top must be positive, got %d", o.Top)
	}
	if _, err := probes.ParseMethod(o.Method); err != nil {
		return asUsage(err)
	}
	if o.budget, err = parseBudget(o.Budget, o.Exact, o.budgetSet); err != nil {
		return err
	}
	if o.FailOn != "" {
		if o.failOn, err = diagnose.ParseSeverity(o.FailOn); err != nil {
			return usageError("--fail-on: %v", err)
		}
	}
	if o.OutFile != "" {
		// Checked before watching, not after a window spent for nothing
		// (and again when written).
		if err := safeio.CheckOutput(o.OutFile); err != nil {
			return usageError("--out: cannot write %s: %v", o.OutFile, err)
		}
	}
	if o.PID > 0 {
		return measure.CheckProcess(o.src.Root, "--pid", o.PID)
	}
	return nil
}

func runOffCPU(ctx context.Context, o *offcpuOptions, g *Globals) error {
	// The flags are the offcpu recipe's parameters.
	plan, err := recipes.Load("offcpu", recipeSet("pid", strconv.Itoa(o.PID), "duration", o.Duration.String(),
		"min_block", o.MinBlock.String(), "stacks", o.Stacks, "stack_every", strconv.Itoa(o.StackEvery),
		"waker_stacks", strconv.FormatBool(!o.NoWakerStacks), "top", strconv.Itoa(o.Top), "attach_method", o.Method), o.src)
	if err != nil {
		return err
	}
	plan.SetBudget(o.budget)
	hooks := recipes.Hooks{Started: g.Started}
	if f, ok := g.Err.(*os.File); ok && isTerminal(f) {
		hooks.OnStart = func() {
			fmt.Fprintf(g.Err, "watching for %v (Ctrl-C stops early)…\n", o.Duration)
		}
	}
	res, err := plan.Run(ctx, o.src, hooks)
	if err != nil {
		return err
	}
	ev := res.OffCPU
	interrupted := ctx.Err() != nil
	if interrupted {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("interrupted after %v of the %v asked for", time.Duration(ev.DurationNs).Round(time.Millisecond), o.Duration))
	}
	r := res.Report("offcpu", Version())
	r.Show = report.OffCPUShow(ev, o.Top, o.PID)
	if err := writeOut(g, o.OutFile, r, o.format, string(o.format)); err != nil {
		return err
	}
	if interrupted {
		// The report above is what was measured: the exit says it is
		// partial.
		return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("interrupted: the report covers %v", time.Duration(ev.DurationNs).Round(time.Millisecond))}
	}
	return failOn(r.Findings, o.failOn)
}
