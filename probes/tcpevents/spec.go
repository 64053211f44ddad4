package tcpevents

import (
	"github.com/perfscope/perfscope/spec"
)

// Spec is the tcpevents probe's one declaration: what recipes, doctor, the
// container needs and the budget know of it.
var Spec = spec.Part{Name: "tcpevents", Probe: true,
	Doc: "TCP retransmits by kind and resets by reason per connection, and which CPUs feed and read each connection (the tcp part's tracepoints)",
	// TCP loss and aborts: rare events, counted exactly per connection.
	// tcp_retransmit_skb and tcp_send_reset are older than perfscope's
	// floor (4.15-4.16); their err and reason arguments came in 6.10.
	Hooks: []spec.Hook{
		{Group: "tcp", Name: "tcp_retransmit_skb", UsedFor: "TCP retransmits per connection and kind (tcp)"},
		{Group: "tcp", Name: "tcp_retransmit_synack", Optional: true, UsedFor: "SYN-ACK retransmits per listener and client (tcp)"},
		{Group: "tcp", Name: "tcp_send_reset", Optional: true, UsedFor: "TCP resets sent per connection and reason (tcp)"},
		{Group: "tcp", Name: "tcp_receive_reset", Optional: true, UsedFor: "TCP resets received per connection (tcp)"},
		// Per segment with data (6.7+), sampled under the budget (FeedGroup):
		// which CPUs' softirqs feed each TCP connection and which read it.
		// The UDP socket probe attaches programs of its own to the same
		// tracepoints.
		{Group: "sock", Name: "sk_data_ready", Optional: true, UsedFor: "which CPUs' softirqs feed each TCP connection (tcp)"},
		{Group: "sock", Name: "sock_recv_length", Optional: true, UsedFor: "which CPUs the threads reading each TCP connection run on (tcp)"},
	},
	Needs: []spec.Need{spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedTracefs, spec.NeedHostNet},
}

// The probe's constructor, in its spec (set here: Open reads the spec's
// hooks, so the spec's initializer cannot name it).
func init() { Spec.Open = spec.Loader(Open) }
