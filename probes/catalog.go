package probes

// Catalog lists every tracepoint perfscope attaches to, with the probe that
// attaches it and what for. It is the one place hooks are declared: each
// probe package takes its hooks from here (CatalogHooks), and
// `perfscope doctor` checks every entry, so the list cannot drift from the
// code. Adding a tracepoint to a probe is adding a line here.
var Catalog = []CatalogEntry{
	{"softirq", Hook{Group: "irq", Name: "softirq_raise"}, "softirq raise→entry latency (softirq, udp)"},
	{"softirq", Hook{Group: "irq", Name: "softirq_entry"}, "softirq count and time per CPU (softirq, udp)"},
	{"softirq", Hook{Group: "irq", Name: "softirq_exit"}, "softirq count and time per CPU (softirq, udp)"},
	// napi_poll is optional: devices without NAPI instances of their own
	// (lo, veth without GRO) leave it out, and old kernels lack it.
	{"netqueue", Hook{Group: "napi", Name: "napi_poll", Optional: true}, "NAPI polls and work per queue and CPU (udp)"},
	{"netqueue", Hook{Group: "net", Name: "netif_receive_skb"}, "packets per RX queue (udp)"},
	{"netqueue", Hook{Group: "net", Name: "net_dev_start_xmit"}, "packets per TX queue and CPU (udp)"},
	{"netqueue", Hook{Group: "qdisc", Name: "qdisc_enqueue", Optional: true}, "qdisc enqueues per TX queue (udp)"},
	{"netqueue", Hook{Group: "qdisc", Name: "qdisc_dequeue", Optional: true}, "qdisc dequeues per TX queue (udp)"},
	// Linux 5.19+; both are needed to time a wait.
	{"lockstat", Hook{Group: "lock", Name: "contention_begin"}, "lock contention per call site and socket (udp)"},
	{"lockstat", Hook{Group: "lock", Name: "contention_end"}, "lock contention wait time (udp)"},
	{"udpdrop", Hook{Group: "udp", Name: "udp_fail_queue_rcv_skb", Optional: true}, "UDP drops per local port before 6.12 (udp)"},
	{"udpdrop", Hook{Group: "skb", Name: "kfree_skb", Optional: true}, "packet drops by reason, and per UDP port since 6.12 (udp)"},
	{"udpsock", Hook{Group: "sock", Name: "sock_recv_length"}, "datagrams read per UDP socket (udp)"},
	// sk_data_ready is newer than the rest (6.7); without it the sockets
	// table has no "fed by CPUs" column.
	{"udpsock", Hook{Group: "sock", Name: "sk_data_ready", Optional: true}, "which CPUs' softirqs feed each UDP socket (udp)"},
	// TCP loss and aborts: rare events, counted exactly per connection.
	// tcp_retransmit_skb and tcp_send_reset are older than perfscope's
	// floor (4.15-4.16); their err and reason arguments came in 6.10.
	{"tcpevents", Hook{Group: "tcp", Name: "tcp_retransmit_skb"}, "TCP retransmits per connection and kind (tcp)"},
	{"tcpevents", Hook{Group: "tcp", Name: "tcp_retransmit_synack", Optional: true}, "SYN-ACK retransmits per listener and client (tcp)"},
	{"tcpevents", Hook{Group: "tcp", Name: "tcp_send_reset", Optional: true}, "TCP resets sent per connection and reason (tcp)"},
	{"tcpevents", Hook{Group: "tcp", Name: "tcp_receive_reset", Optional: true}, "TCP resets received per connection (tcp)"},
	// Per segment with data (6.7+), sampled under the budget: which CPUs'
	// softirqs feed each TCP connection.
	{"tcpevents", Hook{Group: "sock", Name: "sk_data_ready", Optional: true}, "which CPUs' softirqs feed each TCP connection (tcp)"},
	{"tcpevents", Hook{Group: "sock", Name: "sock_recv_length", Optional: true}, "which CPUs the threads reading each TCP connection run on (tcp)"},
	// The JVM's write-side syscalls, filtered in the kernel by its tgid.
	{"httpcount", Hook{Group: "raw_syscalls", Name: "sys_enter"}, "HTTP/1.x requests a JVM served, counted from its socket writes (jvm)"},
	{"httpcount", Hook{Group: "raw_syscalls", Name: "sys_exit"}, "HTTP/1.x requests a JVM served, counted from its socket writes (jvm)"},
	// Context switches and wakeups: where threads wait off CPU, who woke
	// them, and how long they waited for a CPU. sched_waking runs in the
	// waker's context; sched_wakeup (and _new) start the run-queue clock
	// as bcc's runqlat does, but may run on the wakee's CPU instead.
	{"offcpu", Hook{Group: "sched", Name: "sched_switch"}, "off-CPU time by stack and state, on-CPU and runnable time per thread (offcpu)"},
	{"offcpu", Hook{Group: "sched", Name: "sched_waking"}, "who woke a blocked thread: the waker's thread and stacks (offcpu)"},
	{"offcpu", Hook{Group: "sched", Name: "sched_wakeup"}, "run-queue latency from wakeup to run (offcpu)"},
	{"offcpu", Hook{Group: "sched", Name: "sched_wakeup_new"}, "run-queue latency of new threads (offcpu)"},
}

// CatalogEntry is one tracepoint, the probe package that attaches it, and
// what perfscope uses it for.
type CatalogEntry struct {
	// Probe is the probe package's name ("softirq", "netqueue").
	Probe string
	Hook
	UsedFor string
}

// CatalogHooks returns probe's hooks in catalog order. It panics when the
// catalog has none: a probe package calls it at init, so every test that
// imports the package catches a misspelt name.
func CatalogHooks(probe string) []Hook {
	var out []Hook
	for _, e := range Catalog {
		if e.Probe == probe {
			out = append(out, e.Hook)
		}
	}
	if len(out) == 0 {
		panic("probes: no hooks of probe " + probe + " in probes.Catalog")
	}
	return out
}

// CatalogHook returns one hook of probe by tracepoint name; it panics when
// the catalog lacks it, like CatalogHooks.
func CatalogHook(probe, name string) Hook {
	for _, h := range CatalogHooks(probe) {
		if h.Name == name {
			return h
		}
	}
	panic("probes: tracepoint " + name + " of probe " + probe + " is not in probes.Catalog")
}
