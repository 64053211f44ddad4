package evidence

// The kernel counters below mirror collectors/netstat's field for field, so
// a recipe converts them with a plain Go conversion (which stops compiling
// if the two ever differ) and evidence imports no collector.

// UDPCounters are the Udp (or Udp6) MIB counters over a window, in
// datagrams (/proc/net/snmp, /proc/net/snmp6).
type UDPCounters struct {
	InDatagrams  uint64 `json:"in_datagrams"`
	NoPorts      uint64 `json:"no_ports"`
	InErrors     uint64 `json:"in_errors"`
	OutDatagrams uint64 `json:"out_datagrams"`
	// RcvbufErrors counts datagrams dropped because the socket receive
	// buffer was full (also counted in InErrors).
	RcvbufErrors uint64 `json:"rcvbuf_errors"`
	SndbufErrors uint64 `json:"sndbuf_errors"`
	InCsumErrors uint64 `json:"in_csum_errors"`
	MemErrors    uint64 `json:"mem_errors"`
}

// UDPSNMP holds both families. UDP6Known is false when /proc/net/snmp6 is
// absent (IPv6 disabled).
type UDPSNMP struct {
	UDP       UDPCounters `json:"udp"`
	UDP6      UDPCounters `json:"udp6"`
	UDP6Known bool        `json:"udp6_known"`
}

// SoftnetCPU is one CPU's /proc/net/softnet_stat over a window.
type SoftnetCPU struct {
	// CPU is the CPU number; CPUKnown is false on kernels before 5.10,
	// which do not print it (the line's position is used then).
	CPU      int  `json:"cpu"`
	CPUKnown bool `json:"cpu_known"`
	// Processed packets taken off this CPU's backlog and processed.
	Processed uint64 `json:"processed"`
	// Dropped packets because the backlog exceeded netdev_max_backlog.
	Dropped uint64 `json:"dropped"`
	// TimeSqueeze counts NET_RX runs that ended with work left because
	// netdev_budget or netdev_budget_usecs ran out.
	TimeSqueeze uint64 `json:"time_squeeze"`
	// ReceivedRPS counts RPS IPIs this CPU received to process packets.
	ReceivedRPS    uint64 `json:"received_rps"`
	FlowLimitCount uint64 `json:"flow_limit_count"`
}

// UDPSockstat is the UDP line of /proc/net/sockstat: sockets in use (this
// network namespace) and the pages all UDP sockets hold (host-wide, what
// net.ipv4.udp_mem limits).
type UDPSockstat struct {
	InUse    int64 `json:"inuse"`
	MemPages int64 `json:"mem_pages"`
}
