package lockstat

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the lockstat probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "lockstat", Probe: true, Recipe: true, Section: spec.SectionLocks,
	Doc: "kernel lock contention per call site, lock class and socket, system-wide (lock:contention_*)",
	Options: []spec.Option{
		{Name: "stacks_every", Domain: spec.Domain{Kind: spec.KindInt, Min: spec.Bound(1), Max: spec.Bound(MaxStackEvery)}, Default: int64(DefaultStackEvery),
			Doc: "take the waiter's stack for 1 in N contentions (per-lock and per-socket waits stay exact)"},
		{Name: "tcp", Domain: spec.Domain{Kind: spec.KindBool}, Default: true, Doc: "list TCP sockets among the contended sockets (a network run lists UDP only)"},
	},
	// Linux 5.19+; both are needed to time a wait.
	Hooks: []spec.Hook{
		{Group: "lock", Name: "contention_begin", UsedFor: "lock contention per call site and socket (udp)"},
		{Group: "lock", Name: "contention_end", UsedFor: "lock contention wait time (udp)"},
	},
	Needs: spec.WithAttribution(spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedTracefs, spec.NeedSyslog, spec.NeedPtrace, spec.NeedHostPID, spec.NeedHostNet),
	Gives: []spec.Input{spec.InputLocks},
}

// The probe's constructor, in its spec (set here: Open reads the spec's
// hooks, so the spec's initializer cannot name it).
func init() { Spec.Open = spec.Loader(Open) }
