package udpsock

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the udpsock probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "udpsock", Probe: true, Recipe: true, Section: spec.SectionNet,
	Doc: "datagrams read per UDP socket and which CPUs' softirqs woke it (sock:sock_recv_length, sock:sk_data_ready)",
	Options: []spec.Option{
		{Name: "port", Domain: spec.Domain{Kind: spec.KindPort}, Doc: "the sockets bound to this local port"},
		{Name: "pid", Domain: spec.Domain{Kind: spec.KindPID}, Doc: "the sockets of this process"},
	},
	// sock_recv_length appeared in 6.6, sk_data_ready in 6.7 (optional:
	// without it the socket counts stay and the CPU feeding each socket
	// is unknown: the sockets table has no "fed by CPUs" column).
	Hooks: []spec.Hook{
		{Group: "sock", Name: "sock_recv_length", UsedFor: "datagrams read per UDP socket (udp)"},
		{Group: "sock", Name: "sk_data_ready", Optional: true, UsedFor: "which CPUs' softirqs feed each UDP socket (udp)"},
	},
	Needs:      spec.WithAttribution(spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedTracefs, spec.NeedPtrace, spec.NeedHostPID, spec.NeedHostNet),
	Gives:      []spec.Input{spec.InputNet},
	References: map[string]spec.Reference{Group: spec.RefUDPReads},
}

// The probe's constructor, in its spec (set here: Open reads the spec's
// hooks, so the spec's initializer cannot name it).
func init() { Spec.Open = spec.Loader(Open) }
