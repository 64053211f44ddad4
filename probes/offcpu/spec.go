package offcpu

import (
	"time"

	"github.com/perfscope/perfscope/spec"
)

// Spec is the offcpu probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "offcpu", Probe: true, Recipe: true, Section: spec.SectionOffCPU,
	Doc: "off-CPU time by kernel and user stack, state, reason and waker, run-queue latency, thread pools' on-CPU/runnable/blocked time (sched:sched_switch, sched:sched_waking, sched:sched_wakeup*)",
	Options: []spec.Option{
		{Name: "pid", Domain: spec.Domain{Kind: spec.KindPID}, Doc: "watch only this process (0: every process)"},
		{Name: "min_block", Domain: spec.Domain{Kind: spec.KindDuration, Min: spec.Bound(0), Max: spec.Bound(float64(time.Second))}, Default: DefaultMinBlock,
			Doc: "the shortest wait kept by stack; shorter ones count in the thread and pool totals only (0: every wait)"},
		{Name: "stacks", Domain: spec.Domain{Kind: spec.KindEnum, Values: spec.StackKinds}, Default: "kernel+user", Doc: "which stacks to record"},
		{Name: "stack_every", Domain: spec.Domain{Kind: spec.KindInt, Min: spec.Bound(1), Max: spec.Bound(MaxStackEvery)}, Default: int64(1),
			Doc: "take stacks at 1 in N switch-outs (every wait is still timed in the totals and histograms)"},
		{Name: "waker_stacks", Domain: spec.Domain{Kind: spec.KindBool}, Default: true, Doc: "take the waker's stacks (who woke each wait is kept either way)"},
		{Name: "top", Domain: spec.Domain{Kind: spec.KindInt, Min: spec.Bound(1), Max: spec.Bound(10000)}, Default: int64(20), Doc: "waits listed by stack"},
	},
	// Context switches and wakeups: where threads wait off CPU, who woke
	// them, and how long they waited for a CPU. sched_waking runs in the
	// waker's context; sched_wakeup (and _new) start the run-queue clock
	// as bcc's runqlat does, but may run on the wakee's CPU instead.
	Hooks: []spec.Hook{
		{Group: "sched", Name: "sched_switch", UsedFor: "off-CPU time by stack and state, on-CPU and runnable time per thread (offcpu)"},
		{Group: "sched", Name: "sched_waking", UsedFor: "who woke a blocked thread: the waker's thread and stacks (offcpu)"},
		{Group: "sched", Name: "sched_wakeup", UsedFor: "run-queue latency from wakeup to run (offcpu)"},
		{Group: "sched", Name: "sched_wakeup_new", UsedFor: "run-queue latency of new threads (offcpu)"},
	},
	Needs: []spec.Need{spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedTracefs, spec.NeedSyslog, spec.NeedPtrace, spec.NeedHostPID,
		spec.NeedResults("the off-CPU flame graph and folded stacks")},
	Once:  true, // it names its stacks once, after its probe is closed
	Gives: []spec.Input{spec.InputOffCPU, spec.InputStacks},
}

// The probe's constructor, in its spec (set here: Open reads the spec's
// hooks, so the spec's initializer cannot name it).
func init() { Spec.Open = spec.Loader(Open) }
