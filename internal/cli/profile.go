package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

// The cpu-profile recipe's names of the stacks and root-frame choices.
var (
	stackNames = map[cpuprofile.Stacks]string{cpuprofile.KernelAndUser: "kernel+user", cpuprofile.KernelOnly: "kernel", cpuprofile.UserOnly: "user"}
	rootNames  = map[cpuprofile.RootFrame]string{cpuprofile.RootComm: "comm", cpuprofile.RootNone: "none",
		cpuprofile.RootProcess: "process", cpuprofile.RootThread: "thread", cpuprofile.RootCPU: "cpu", cpuprofile.RootContainer: "container"}
)

type profileOptions struct {
	PID        int
	All        bool
	Duration   time.Duration
	Frequency  int
	Event      string
	KernelOnly bool
	UserOnly   bool
	PerProcess bool
	// PerContainer roots stacks at the process's container or pod.
	PerContainer bool
	Workload     workloadFlags
	PerThread    bool
	PerCPU       bool
	NoComm       bool
	IncludeIdle  bool
	JITMap       bool
	// OffCPU adds the off-CPU section (the offcpu probe) to the window.
	OffCPU   bool
	Top      int
	StackMap int
	Title    string
	Output   string
	OutFile  string

	format report.Format
	stacks cpuprofile.Stacks
	root   cpuprofile.RootFrame
	src    measure.Sources
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
	f.IntVarP(&o.PID, "pid", "p", 0, "profile only this process")
	f.BoolVarP(&o.All, "all", "a", false, "profile every process (the default when --pid is not given)")
	f.DurationVarP(&o.Duration, "duration", "d", 10*time.Second, "how long to sample (Ctrl-C stops early and still reports)")
	f.IntVarP(&o.Frequency, "freq", "F", cpuprofile.DefaultFrequency, "samples per second per CPU")
	eventFlag(f, &o.Event)
	f.BoolVar(&o.KernelOnly, "kernel-only", false, "record kernel stacks only")
	f.BoolVar(&o.UserOnly, "user-only", false, "record user stacks only")
	f.BoolVar(&o.PerProcess, "per-process", false, `root each stack at "comm-pid"`)
	f.BoolVar(&o.PerThread, "per-thread", false, `root each stack at "comm-pid/tid"`)
	f.BoolVar(&o.PerCPU, "per-cpu", false, `root each stack at "cpu-N"`)
	f.BoolVar(&o.NoComm, "no-comm", false, "put no process name at the root of stacks")
	f.BoolVar(&o.PerContainer, "per-container", false, `root each stack at its workload: "NAMESPACE/POD/CONTAINER", "pod-UID/ID", "RUNTIME:NAME", a systemd unit or "host"`)
	o.Workload.register(f)
	f.BoolVar(&o.IncludeIdle, "include-idle", false, "keep samples of idle CPUs (the swapper task)")
	f.BoolVar(&o.JITMap, "jit-map", false, "name JIT-compiled code from the process's perf map: a HotSpot JVM (JDK 17+) is asked to write it, other runtimes must have written /tmp/perf-<pid>.map (needs --pid)")
	f.BoolVar(&o.OffCPU, "off-cpu", false, "also measure where the threads waited off CPU in the same window (as perfscope offcpu --exact): a section of the text, JSON and HTML report")
	f.IntVar(&o.Top, "top", 20, "functions listed in text output")
	f.IntVar(&o.StackMap, "stack-map-size", cpuprofile.DefaultStackEntries, "stack map entries, one per distinct stack (~1 KiB each): raise it when samples are lost with the stack map full")
	f.StringVar(&o.Title, "title", "", "flame graph title (svg, html, speedscope)")
	f.StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("profile"))
	f.StringVar(&o.OutFile, "out", "", "write the output to this file instead of standard output")
	return cmd
}

func (o *profileOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat("profile", o.Output); err != nil {
		return asUsage(err)
	}
	if o.PID != 0 && o.All {
		return usageError("--pid and --all exclude each other: give one")
	}
	if o.Duration <= 0 {
		return usageError("--duration must be positive, got %v", o.Duration)
	}
	if o.StackMap < 1024 || o.StackMap > 1<<20 {
		return usageError("--stack-map-size must be between 1024 and 1048576, got %d", o.StackMap)
	}
	if o.OutFile != "" {
		// Checked before sampling, not after a window spent for nothing
		// (and again when written).
		if err := safeio.CheckOutput(o.OutFile); err != nil {
			return usageError("--out: cannot write %s: %v", o.OutFile, err)
		}
	}
	if o.Top <= 0 {
		return usageError("--top must be positive, got %d", o.Top)
	}
	if o.Frequency <= 0 {
		return usageError("--freq must be positive, got %d", o.Frequency)
	}
	if err := checkEvent(o.Event); err != nil {
		return err
	}
	if max, ok, _ := o.src.Root.SysctlInt("kernel.perf_event_max_sample_rate"); ok && int64(o.Frequency) > max {
		return usageError("--freq %d is above kernel.perf_event_max_sample_rate (%d): lower it", o.Frequency, max)
	}
	switch {
	case o.KernelOnly && o.UserOnly:
		return usageError("--kernel-only and --user-only exclude each other: give one")
	case o.KernelOnly:
		o.stacks = cpuprofile.KernelOnly
	case o.UserOnly:
		o.stacks = cpuprofile.UserOnly
	}
	o.root = cpuprofile.RootComm
	roots := 0
	for _, r := range []struct {
		set  bool
		root cpuprofile.RootFrame
	}{{o.PerProcess, cpuprofile.RootProcess}, {o.PerThread, cpuprofile.RootThread}, {o.PerCPU, cpuprofile.RootCPU}, {o.NoComm, cpuprofile.RootNone}, {o.PerContainer, cpuprofile.RootContainer}} {
		if r.set {
			roots++
			o.root = r.root
		}
	}
	if roots > 1 {
		return usageError("--per-process, --per-thread, --per-cpu, --per-container and --no-comm exclude each other: give one")
	}
	if o.PID < 0 {
		return usageError("--pid must be positive, got %d", o.PID)
	}
	if o.PID > 0 {
		if err := measure.CheckProcess(o.src.Root, "--pid", o.PID); err != nil {
			return err
		}
	}
	if o.OffCPU && o.format != report.Text && o.format != report.JSON && o.format != report.HTML {
		return usageError("--off-cpu adds a section to the text, json and html reports; -o %s draws the on-CPU profile only (perfscope offcpu -o %s draws the off-CPU one)", o.format, o.format)
	}
	if o.OffCPU && o.Workload.given() {
		return usageError("--off-cpu watches a --pid or every process: it takes no --cgroup, --container or --pod")
	}
	if o.PID > 0 && o.Workload.given() {
		return usageError("--pid and --cgroup, --container or --pod exclude each other: give one")
	}
	if err := o.Workload.resolve(o.src); err != nil {
		return err
	}
	if o.JITMap {
		if o.PID == 0 {
			return usageError("--jit-map needs --pid: perf maps belong to one process")
		}
		// Checked here for the sentence before anything loads; the recipe
		// asks again when it is loaded, for the JVM to ask.
		_, err = measure.CheckJITMap(o.src, o.PID)
		return err
	}
	return nil
}

// eventFlag is --event, the perf event a profile samples with, named as
// perf names it.
func eventFlag(f *pflag.FlagSet, event *string) {
	f.StringVarP(event, "event", "e", cpuprofile.EventAuto.String(),
		"perf event to sample with: cycles (counts work; needs a PMU), cpu-clock (a timer: works without a PMU, stops while a virtual CPU halts) or auto (cycles where it opens, else cpu-clock, as perf record)")
}

// checkEvent refuses an --event perf does not name this way.
func checkEvent(event string) error {
	if _, err := cpuprofile.ParseEvent(event); err != nil {
		return usageError("--event: %v", err)
	}
	return nil
}

func runProfile(ctx context.Context, o *profileOptions, g *Globals) error {
	// The flags are the cpu-profile recipe's parameters.
	plan, err := recipes.Load("cpu-profile", recipeSet("pid", strconv.Itoa(o.PID), "duration", o.Duration.String(),
		"freq", strconv.Itoa(o.Frequency), "event", o.Event, "stacks", stackNames[o.stacks], "root", rootNames[o.root],
		"include_idle", strconv.FormatBool(o.IncludeIdle), "jit_map", strconv.FormatBool(o.JITMap),
		"stack_map_size", strconv.Itoa(o.StackMap), "off_cpu", strconv.FormatBool(o.OffCPU)), o.src)
	if err != nil {
		return err
	}
	o.Workload.apply(plan)
	if o.OffCPU {
		// profile takes no --overhead-budget: the off-CPU section is
		// measured whole, as offcpu --exact (a sampled one would cut every
		// wait longer than a sampling window).
		plan.SetBudget(budget.Budget{})
	}
	hooks := recipes.Hooks{Started: g.Started}
	if f, ok := g.Err.(*os.File); ok && isTerminal(f) {
		hooks.OnStart = func() {
			fmt.Fprintf(g.Err, "sampling for %v at %d Hz (Ctrl-C stops early)…\n", o.Duration, o.Frequency)
		}
	}
	res, err := plan.Run(ctx, o.src, hooks)
	if err != nil {
		return err
	}
	r := res.Report("profile", Version())
	d := res.Profile.Evidence
	of := ""
	if o.PID != 0 {
		of = fmt.Sprintf("process %d", o.PID)
	}
	if sel := o.Workload.sel; sel != nil {
		of = sel.Filter.String()
	}
	r.Show = report.ProfileShow(d, o.Top, o.Title, of)
	return writeOut(g, o.OutFile, r, o.format, fmt.Sprintf("%s, %d samples", o.format, d.Samples))
}
