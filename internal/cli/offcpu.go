package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type offcpuOptions struct {
	params        *recipeFlags
	All           bool
	NoWakerStacks bool
	report        reportFlags
	budget        budgetFlags
	// plan is the offcpu recipe bound to the flags.
	plan *recipes.Plan
	src  measure.Sources
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
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	g.lateFlags(cmd, func() {
		o.params = newRecipeFlags(cmd, "offcpu", "pid/p", "duration/d", "min_block", "stacks", "stack_every", "top", "attach_method")
	})
	f.BoolVar(&o.NoWakerStacks, "no-waker-stacks", false, "keep who woke each wait but not the waker's stacks (two stack walks fewer per wakeup)")
	f.BoolVarP(&o.All, "all", "a", false, "watch every process (the default when --pid is not given)")
	o.report.register(f, "offcpu", "text", true, true)
	f.Lookup("output").Usage += " (folded in microseconds)"
	o.budget.register(f)
	return cmd
}

func (o *offcpuOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	if o.All && o.params.value("pid") != "0" {
		return usageError("--pid and --all exclude each other: give one")
	}
	if _, err := o.budget.check(); err != nil {
		return err
	}
	o.params.set["waker_stacks"] = strconv.FormatBool(!o.NoWakerStacks)
	var err error
	o.plan, err = o.params.load(o.src)
	return err
}

func runOffCPU(ctx context.Context, o *offcpuOptions, g *Globals) error {
	plan := o.plan
	plan.SetBudget(o.budget.budget)
	duration := plan.Window().Duration
	hooks := recipes.Hooks{Started: g.Started}
	if f, ok := g.Err.(*os.File); ok && isTerminal(f) {
		hooks.OnStart = func() {
			fmt.Fprintf(g.Err, "watching for %v (Ctrl-C stops early)…\n", duration)
		}
	}
	res, err := plan.Run(ctx, o.src, hooks)
	if err != nil {
		return err
	}
	ev := res.OffCPU
	interrupted := ctx.Err() != nil
	if interrupted {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("interrupted after %v of the %v asked for", time.Duration(ev.DurationNs).Round(time.Millisecond), duration))
	}
	r := res.Report("offcpu", Version())
	r.Show = report.OffCPUShow(ev, int(plan.Values["top"].(int64)), int(plan.Values["pid"].(int64)))
	if err := writeOut(g, o.report.out, r, o.report.format, string(o.report.format)); err != nil {
		return err
	}
	if interrupted {
		// The report above is what was measured: the exit says it is
		// partial.
		return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("interrupted: the report covers %v", time.Duration(ev.DurationNs).Round(time.Millisecond))}
	}
	return failOn(r.Findings, o.report.failOn)
}
