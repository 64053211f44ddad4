package cpuprofile

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the cpuprofile probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "cpuprofile", Probe: true, Recipe: true, Section: spec.SectionProfile,
	Doc: "on-CPU stacks, kernel and user, from a perf event on every CPU (cycles where the PMU offers it, else cpu-clock)",
	Options: []spec.Option{
		{Name: "pid", Domain: spec.Domain{Kind: spec.KindPID}, Doc: "sample only this process (0: every process)"},
		{Name: "frequency", Domain: spec.Domain{Kind: spec.KindInt, Min: spec.Bound(1), Max: spec.Bound(10000)}, Default: int64(DefaultFrequency), Doc: "samples per second per CPU"},
		{Name: "event", Domain: spec.Domain{Kind: spec.KindEnum, Values: EventNames}, Default: EventAuto.String(),
			Doc: "the perf event that samples: cycles (counts work: needs a PMU), cpu-clock (a timer: works without one, but stops on a halted virtual CPU), or auto (cycles where it opens, as perf record)"},
		{Name: "stacks", Domain: spec.Domain{Kind: spec.KindEnum, Values: spec.StackKinds}, Default: "kernel+user", Doc: "which stacks to record"},
		{Name: "root", Domain: spec.Domain{Kind: spec.KindEnum, Values: RootFrameNames}, Default: "comm", Doc: "the synthetic frame under each stack"},
		{Name: "include_idle", Domain: spec.Domain{Kind: spec.KindBool}, Default: false, Doc: "keep samples of idle CPUs"},
		{Name: "stack_entries", Domain: spec.Domain{Kind: spec.KindInt, Min: spec.Bound(1024), Max: spec.Bound(1 << 20)}, Default: int64(DefaultStackEntries), Doc: "stack map entries, one per distinct stack (~1 KiB each)"},
		{Name: "jit_map", Domain: spec.Domain{Kind: spec.KindBool}, Default: false, Doc: "name JIT-compiled frames from the process's perf map (a HotSpot JVM is asked to write it; needs pid)"},
	},
	Needs: spec.WithAttribution(spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedSyslog, spec.NeedPtrace, spec.NeedHostPID,
		spec.NeedResults("flame graphs and folded stacks")),
	Gives: []spec.Input{spec.InputStacks},
}

// RootFrameNames are the root option's values, in RootFrame order.
var RootFrameNames = []string{"comm", "none", "process", "thread", "cpu", "container"}

// The probe's constructor, in its spec (set here: Open reads the spec's
// hooks, so the spec's initializer cannot name it).
func init() { Spec.Open = spec.Loader(Open) }
