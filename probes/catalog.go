package probes

// Catalog lists every tracepoint perfscope uses, with the feature that
// needs it. `perfscope doctor` checks each one; probes declare their hooks
// from these names so the list cannot drift from the code.
var Catalog = []CatalogEntry{
	{Hook{Group: "irq", Name: "softirq_raise"}, "softirq raise→entry latency (softirq, udp)"},
	{Hook{Group: "irq", Name: "softirq_entry"}, "softirq count and time per CPU (softirq, udp)"},
	{Hook{Group: "irq", Name: "softirq_exit"}, "softirq count and time per CPU (softirq, udp)"},
	{Hook{Group: "napi", Name: "napi_poll"}, "NAPI polls and work per queue and CPU (udp)"},
	{Hook{Group: "net", Name: "netif_receive_skb"}, "packets per RX queue (udp)"},
	{Hook{Group: "net", Name: "net_dev_start_xmit"}, "packets per TX queue and CPU (udp)"},
	{Hook{Group: "qdisc", Name: "qdisc_enqueue"}, "qdisc enqueues per TX queue (udp)"},
	{Hook{Group: "qdisc", Name: "qdisc_dequeue"}, "qdisc dequeues per TX queue (udp)"},
	{Hook{Group: "lock", Name: "contention_begin"}, "lock contention per call site and socket (udp)"},
	{Hook{Group: "lock", Name: "contention_end"}, "lock contention wait time (udp)"},
	{Hook{Group: "udp", Name: "udp_fail_queue_rcv_skb"}, "UDP drops per local port before 6.12 (udp)"},
	{Hook{Group: "skb", Name: "kfree_skb"}, "packet drops by reason, and per UDP port since 6.12 (udp)"},
	{Hook{Group: "sock", Name: "sock_recv_length"}, "datagrams read per UDP socket (udp)"},
	{Hook{Group: "sock", Name: "sk_data_ready"}, "which CPUs' softirqs feed each UDP socket (udp)"},
	{Hook{Group: "raw_syscalls", Name: "sys_enter"}, "HTTP/1.x requests a JVM served, counted from its socket writes (jvm)"},
	{Hook{Group: "raw_syscalls", Name: "sys_exit"}, "HTTP/1.x requests a JVM served, counted from its socket writes (jvm)"},
}

// CatalogEntry is one tracepoint and what perfscope uses it for.
type CatalogEntry struct {
	Hook
	UsedFor string
}
