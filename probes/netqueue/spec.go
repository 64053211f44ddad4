package netqueue

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the netqueue probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "netqueue", Probe: true, Recipe: true, Section: spec.SectionNet,
	Doc: "packets per RX/TX queue and CPU, NAPI polls, qdisc activity of one interface (net:*, napi:napi_poll, qdisc:*)",
	Options: []spec.Option{
		{Name: "interface", Domain: spec.Domain{Kind: spec.KindInterface}, Required: true, Doc: "the interface whose queues are counted"},
	},
	Hooks: []spec.Hook{
		// napi_poll is optional: devices without NAPI instances of their
		// own (lo, veth without GRO) leave it out, and old kernels lack it.
		{Group: "napi", Name: "napi_poll", Optional: true, UsedFor: "NAPI polls and work per queue and CPU (udp)"},
		{Group: "net", Name: "netif_receive_skb", UsedFor: "packets per RX queue (udp)"},
		{Group: "net", Name: "net_dev_start_xmit", UsedFor: "packets per TX queue and CPU (udp)"},
		{Group: "qdisc", Name: "qdisc_enqueue", Optional: true, UsedFor: "qdisc enqueues per TX queue (udp)"},
		{Group: "qdisc", Name: "qdisc_dequeue", Optional: true, UsedFor: "qdisc dequeues per TX queue (udp)"},
	},
	Needs:      []spec.Need{spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedTracefs, spec.NeedHostNet},
	Gives:      []spec.Input{spec.InputNet},
	References: map[string]spec.Reference{GroupNAPI: spec.RefFollows},
}

// The probe's constructor, in its spec (set here: Open reads the spec's
// hooks, so the spec's initializer cannot name it).
func init() { Spec.Open = spec.Loader(Open) }
