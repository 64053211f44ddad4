package measure

import (
	"github.com/perfscope/perfscope/spec"
)

// NetCountersSpec is the netcounters collector: what a network run reads
// of /proc and /sys, exact and attached to nothing.
var NetCountersSpec = spec.Part{Name: "netcounters", Recipe: true, Section: spec.SectionNet,
	Doc: "driver per-queue counters, /proc/interrupts, /proc/net/udp (socket queues and drops), SNMP, softnet_stat; the interface's configuration",
	Options: []spec.Option{
		{Name: "interface", Domain: spec.Domain{Kind: spec.KindInterface}, Doc: "the interface whose driver counters, IRQs and configuration are read (empty: none)"},
		{Name: "port", Domain: spec.Domain{Kind: spec.KindPort}, Doc: "list the sockets of this local port"},
		{Name: "pid", Domain: spec.Domain{Kind: spec.KindPID}, Doc: "list the sockets and threads of this process"},
	},
	Needs: spec.WithAttribution(spec.NeedNetAdmin, spec.NeedPtrace, spec.NeedHostPID, spec.NeedHostNet),
	Gives: []spec.Input{spec.InputNet, spec.InputPortDrop},
}
