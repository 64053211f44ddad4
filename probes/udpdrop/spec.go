package udpdrop

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the udpdrop probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "udpdrop", Probe: true, Recipe: true, Section: spec.SectionNet,
	Doc: "dropped packets per local UDP or TCP port and drop reason (udp:udp_fail_queue_rcv_skb, skb:kfree_skb)",
	Options: []spec.Option{
		{Name: "port", Domain: spec.Domain{Kind: spec.KindPort}, Doc: "count drops of this local port (0: every port; TCP drops not attributable to a port are always counted, on port 0)"},
	},
	Hooks: []spec.Hook{
		{Group: "udp", Name: "udp_fail_queue_rcv_skb", Optional: true, UsedFor: "UDP drops per local port before 6.12 (udp)"},
		{Group: "skb", Name: "kfree_skb", Optional: true, UsedFor: "packet drops by reason, per TCP port, and per UDP port since 6.12 (udp, tcp)"},
	},
	Needs: []spec.Need{spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedTracefs, spec.NeedHostNet},
	Gives: []spec.Input{spec.InputNet, spec.InputPortDrop},
}

// The probe's constructor, in its spec (set here: Open reads the spec's
// hooks, so the spec's initializer cannot name it).
func init() { Spec.Open = spec.Loader(Open) }
