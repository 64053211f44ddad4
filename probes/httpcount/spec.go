package httpcount

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the httpcount probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "httpcount", Probe: true,
	Doc: "HTTP/1.x requests a process served, counted from its socket writes (the passive request count of jvm and go)",
	// The process's write-side syscalls, filtered in the kernel by its tgid.
	Hooks: []spec.Hook{
		{Group: "raw_syscalls", Name: "sys_enter", UsedFor: "HTTP/1.x requests a JVM served, counted from its socket writes (jvm)"},
		{Group: "raw_syscalls", Name: "sys_exit", UsedFor: "HTTP/1.x requests a JVM served, counted from its socket writes (jvm)"},
	},
	Needs: []spec.Need{spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF},
}
