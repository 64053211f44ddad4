package measure

import (
	"time"

	"github.com/perfscope/perfscope/probes/tcpevents"
	"github.com/perfscope/perfscope/spec"
)

// TCPSpec is the tcp part: sock_diag's listeners and connections, the
// Tcp/TcpExt counters, and the tcpevents probe's retransmits and resets.
var TCPSpec = spec.Part{Name: "tcp", Probe: true, Recipe: true, Section: spec.SectionNet,
	Doc: "TCP per listener and connection: accept queues sampled through sock_diag, the busiest connections' tcp_info and owners, Tcp/TcpExt counters, sockstat and sysctls over the window, retransmits by kind and resets by reason per connection (tcp:tcp_retransmit_skb, tcp:tcp_retransmit_synack, tcp:tcp_send_reset, tcp:tcp_receive_reset)",
	Options: []spec.Option{
		{Name: "port", Domain: spec.Domain{Kind: spec.KindPort}, Doc: "the listeners, connections and events of this local port (0: every port)"},
		{Name: "pid", Domain: spec.Domain{Kind: spec.KindPID}, Doc: "the listeners and connections this process holds (0: every process)"},
		{Name: "top", Domain: spec.Domain{Kind: spec.KindInt, Min: spec.Bound(1), Max: spec.Bound(10000)}, Default: int64(DefaultTCPTop), Doc: "connections and per-connection event rows listed"},
		{Name: "sample_interval", Domain: spec.Domain{Kind: spec.KindDuration, Min: spec.Bound(float64(10 * time.Millisecond)), Max: spec.Bound(float64(10 * time.Second))}, Default: DefaultTCPSampleEvery, Doc: "how often the listeners' accept queues are sampled"},
	},
	Uses: []*spec.Part{&tcpevents.Spec},
	// the tcpevents tracepoints, sock_diag of the host's network
	// namespace, and the listeners' and connections' owners through /proc.
	Needs: spec.WithAttribution(spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedTracefs, spec.NeedPtrace, spec.NeedHostPID, spec.NeedHostNet),
	Gives: []spec.Input{spec.InputNet, spec.InputTCP},
}
