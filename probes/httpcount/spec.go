package httpcount

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the httpcount probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "httpcount", Probe: true,
	Doc: "HTTP/1.x requests a process served, counted from its socket writes (the passive request count of jvm and go)",
	// The process's socket sends and receives, filtered in the kernel by
	// its tgid (Linux 6.3 and later); on older kernels its syscalls.
	Hooks: []spec.Hook{
		{Group: "sock", Name: "sock_send_length", Optional: true, UsedFor: "HTTP/1.x requests a JVM or Go service served, counted from its socket sends (Linux 6.3+)"},
		{Group: "sock", Name: "sock_recv_length", Optional: true, UsedFor: "the request lines a JVM or Go service read, per endpoint (Linux 6.3+)"},
		{Group: "raw_syscalls", Name: "sys_enter", Optional: true, UsedFor: "the passive request count on kernels without the sock tracepoints (before Linux 6.3)"},
		{Group: "raw_syscalls", Name: "sys_exit", Optional: true, UsedFor: "the passive request count on kernels without the sock tracepoints (before Linux 6.3)"},
	},
	Needs: []spec.Need{spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF},
}
