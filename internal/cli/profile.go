package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type profileOptions struct {
	params     *recipeFlags
	All        bool
	KernelOnly bool
	UserOnly   bool
	PerProcess bool
	// PerContainer roots stacks at the process's container or pod.
	PerContainer bool
	Workload     workloadFlags
	PerThread    bool
	PerCPU       bool
	NoComm       bool
	Top          int
	Title        string
	report       reportFlags

	// plan is cpu-profile bound to the flags.
	plan *recipes.Plan
	src  measure.Sources
	// run is the profiling itself; tests replace it to check flag handling.
	run func(ctx context.Context, o *profileOptions, g *Globals) error
}

func newProfileCmd(g *Globals) *cobra.Command {
	return profileCmd(g, &profileOptions{src: measure.Live(), run: runProfile})
}

// profileCmd binds flags to o; tests pass options with a fake run.
func profileCmd(g *Globals, o *profileOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Sample on-CPU stacks (kernel and user) and print top functions or a flame graph",
		Long: `profile samples what every CPU is running at --freq Hz with a perf
event and a BPF program that counts kernel and user stacks in the kernel.
The event is the hardware cycles event where it opens, as perf record's
default (it counts work, so an otherwise idle CPU's softirq work is sampled
in proportion), and the software cpu-clock elsewhere (--event chooses). The
report sets each CPU's samples beside those expected and names the CPUs it
could not see: on a virtual CPU without a PMU the cpu-clock timer stops
while the CPU halts. Frames are named from /proc/kallsyms, the ELF symbols of each
process's binaries (read through /proc/PID/root, so containers work) and JIT
perf maps (/tmp/perf-<pid>.map). The idle task is left out unless
--include-idle is given.

Text output lists the top functions by self and total samples; -o folded,
svg, html, pprof and speedscope write the profile for flame graph tools.

For JVMs, start the JVM with -XX:+PreserveFramePointer so stacks unwind
through Java frames, and use --jit-map to name compiled Java methods: a
HotSpot JVM (JDK 17+) is asked through the attach protocol to write its perf
map (Compiler.perfmap) when the window ends; other runtimes must have written
/tmp/perf-<pid>.map themselves.`,
		Example: `  perfscope profile --duration 10s
  perfscope profile --pid 1234 -o svg --out cpu.svg
  perfscope profile --all --kernel-only --per-cpu -o folded > kernel.folded
  perfscope profile --pid 1234 --jit-map -o html --out jvm.html`,
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
		o.params = newRecipeFlags(cmd, "cpu-profile", "pid/p", "duration/d", "freq/F", "event/e", "include_idle", "jit_map", "stack_map_size", "off_cpu")
	})
	f.BoolVarP(&o.All, "all", "a", false, "profile every process (the default when --pid is not given)")
	f.BoolVar(&o.KernelOnly, "kernel-only", false, "record kernel stacks only")
	f.BoolVar(&o.UserOnly, "user-only", false, "record user stacks only")
	f.BoolVar(&o.PerProcess, "per-process", false, `root each stack at "comm-pid"`)
	f.BoolVar(&o.PerThread, "per-thread", false, `root each stack at "comm-pid/tid"`)
	f.BoolVar(&o.PerCPU, "per-cpu", false, `root each stack at "cpu-N"`)
	f.BoolVar(&o.NoComm, "no-comm", false, "put no process name at the root of stacks")
	f.BoolVar(&o.PerContainer, "per-container", false, `root each stack at its workload: "NAMESPACE/POD/CONTAINER", "pod-UID/ID", "RUNTIME:NAME", a systemd unit or "host"`)
	o.Workload.register(f)
	f.IntVar(&o.Top, "top", 20, "functions listed in text output")
	f.StringVar(&o.Title, "title", "", "flame graph title (svg, html, speedscope)")
	o.report.register(f, "profile", "text", true, false)
	return cmd
}

func (o *profileOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	pid := o.params.value("pid")
	offCPU := o.params.value("off_cpu") == "true"
	switch {
	case pid != "0" && o.All:
		return usageError("--pid and --all exclude each other: give one")
	case o.Top <= 0:
		return usageError("--top must be positive, got %d", o.Top)
	case o.KernelOnly && o.UserOnly:
		return usageError("--kernel-only and --user-only exclude each other: give one")
	case o.KernelOnly:
		o.params.set["stacks"] = "kernel"
	case o.UserOnly:
		o.params.set["stacks"] = "user"
	}
	roots := 0
	for _, r := range []struct {
		set  bool
		root string
	}{{o.PerProcess, "process"}, {o.PerThread, "thread"}, {o.PerCPU, "cpu"}, {o.NoComm, "none"}, {o.PerContainer, "container"}} {
		if r.set {
			roots++
			o.params.set["root"] = r.root
		}
	}
	if roots > 1 {
		return usageError("--per-process, --per-thread, --per-cpu, --per-container and --no-comm exclude each other: give one")
	}
	f := o.report.format
	switch {
	case offCPU && f != report.Text && f != report.JSON && f != report.HTML:
		return usageError("--off-cpu adds a section to the text, json and html reports; -o %s draws the on-CPU profile only (perfscope offcpu -o %s draws the off-CPU one)", f, f)
	case offCPU && o.Workload.given():
		return usageError("--off-cpu watches a --pid or every process: it takes no --cgroup, --container or --pod")
	case pid != "0" && o.Workload.given():
		return usageError("--pid and --cgroup, --container or --pod exclude each other: give one")
	case o.params.value("jit_map") == "true" && pid == "0":
		return usageError("--jit-map needs --pid: perf maps belong to one process")
	}
	if err := o.Workload.resolve(o.src); err != nil {
		return err
	}
	var err error
	o.plan, err = o.params.load(o.src)
	return err
}

func runProfile(ctx context.Context, o *profileOptions, g *Globals) error {
	plan := o.plan
	o.Workload.apply(plan)
	pid, freq := plan.Values["pid"].(int64), plan.Values["freq"].(int64)
	if plan.Values["off_cpu"].(bool) {
		// profile takes no --overhead-budget: the off-CPU section is
		// measured whole, as offcpu --exact (a sampled one would cut every
		// wait longer than a sampling window).
		plan.SetBudget(budget.Budget{})
	}
	hooks := recipes.Hooks{Started: g.Started}
	if f, ok := g.Err.(*os.File); ok && isTerminal(f) {
		hooks.OnStart = func() {
			fmt.Fprintf(g.Err, "sampling for %v at %d Hz (Ctrl-C stops early)…\n", plan.Window().Duration, freq)
		}
	}
	res, err := plan.Run(ctx, o.src, hooks)
	if err != nil {
		return err
	}
	r := res.Report("profile", Version())
	d := res.Profile.Evidence
	of := ""
	if pid != 0 {
		of = fmt.Sprintf("process %d", pid)
	}
	if sel := o.Workload.sel; sel != nil {
		of = sel.Filter.String()
	}
	r.Show = report.ProfileShow(d, o.Top, o.Title, of)
	return writeOut(g, o.report.out, r, o.report.format, fmt.Sprintf("%s, %d samples", o.report.format, d.Samples))
}
