package softirq

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the softirq probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "softirq", Probe: true, Recipe: true, Section: spec.SectionSoftirq,
	Doc: "softirq count and time per CPU and vector, raise→entry latency of NET_RX/NET_TX (irq:softirq_*)",
	Options: []spec.Option{
		{Name: "cpus", Domain: spec.Domain{Kind: spec.KindCPUs}, Doc: "only these CPUs in the tables (empty: every CPU)"},
		{Name: "latency", Domain: spec.Domain{Kind: spec.KindBool}, Default: true, Doc: "attach irq:softirq_raise for raise→entry latency histograms (one BPF run more per raise)"},
	},
	Hooks: []spec.Hook{
		{Group: "irq", Name: "softirq_raise", UsedFor: "softirq raise→entry latency (softirq, udp)"},
		{Group: "irq", Name: "softirq_entry", UsedFor: "softirq count and time per CPU (softirq, udp)"},
		{Group: "irq", Name: "softirq_exit", UsedFor: "softirq count and time per CPU (softirq, udp)"},
	},
	Needs:      []spec.Need{spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedTracefs},
	Gives:      []spec.Input{spec.InputSoftirq},
	References: map[string]spec.Reference{Group: spec.RefSoftirqs},
}

// The probe's constructor, in its spec (set here: Open reads the spec's
// hooks, so the spec's initializer cannot name it).
func init() { Spec.Open = spec.Loader(Open) }
