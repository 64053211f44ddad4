package evidence

import "time"

// QueueInterval is one tick of a queue timeline: packets the kernel
// counted on the interface's queues (netif_receive_skb,
// net_dev_start_xmit) in the interval.
type QueueInterval struct {
	End       time.Time `json:"end"`
	RXPackets uint64    `json:"rx_packets"`
	TXPackets uint64    `json:"tx_packets"`
	// RXByQueue is the RX packets per recorded queue.
	RXByQueue map[int]uint64 `json:"rx_by_queue,omitempty"`
}

// DropInterval is one tick of a drop timeline: drops the drop probe
// counted on the section's port (every port when the run has none).
type DropInterval struct {
	End      time.Time         `json:"end"`
	Count    uint64            `json:"count"`
	ByReason map[string]uint64 `json:"by_reason,omitempty"`
}

// SocketInterval is one tick of a socket timeline for the section's port
// or process: datagrams its owner read (the socket probe), the bytes
// waiting in its receive queues at the tick and the socket drop counters'
// growth (/proc/net/udp). Nil fields had no source.
type SocketInterval struct {
	End        time.Time `json:"end"`
	Datagrams  *uint64   `json:"datagrams_read,omitempty"`
	QueueBytes *uint64   `json:"queue_bytes,omitempty"`
	// Drops is the growth of the sockets' drop counters (sk_drops).
	Drops *uint64 `json:"drops,omitempty"`
}

// Timeline is a run's intervals joined across its parts: one row per tick
// of the window, every part's numbers for the same interval side by side,
// so a finding can quote two of them for one moment ("drops on port 9000
// rose to 1.4k/s in the interval the JVM was stopped for 310 ms").
type Timeline struct {
	IntervalNs int64 `json:"interval_ns"`
	// Port and PID are the port and JVM the rows are about (0: none).
	Port int `json:"port,omitempty"`
	PID  int `json:"pid,omitempty"`
	// FeedingCPUs are the CPUs whose softirqs queued the port's
	// datagrams over the window (the socket probe's wakeups).
	FeedingCPUs []int `json:"feeding_cpus,omitempty"`
	// TCPPort is the TCP port the TCP columns are about (0: every
	// listener of the run's process, or of the namespace).
	TCPPort int `json:"tcp_port,omitempty"`
	// DropSource says where Drops come from: "probe" (the drop probe,
	// every reason) or "socket" (the sockets' sk_drops counters).
	DropSource string        `json:"drop_source,omitempty"`
	Rows       []TimelineRow `json:"rows"`
}

// TimelineRow is one interval. A field is absent when no part of the run
// measures it.
type TimelineRow struct {
	End        time.Time `json:"end"`
	DurationNs int64     `json:"duration_ns"`
	// Softirq: NET_RX runs per second and share of the CPUs' time, the
	// busiest CPU, and the NET_RX share of the CPUs feeding the port.
	NetRXPerS         *float64 `json:"net_rx_per_s,omitempty"`
	NetRXShare        *float64 `json:"net_rx_share,omitempty"`
	BusiestCPU        *int     `json:"busiest_cpu,omitempty"`
	BusiestShare      *float64 `json:"busiest_share,omitempty"`
	FeedingNetRXShare *float64 `json:"feeding_cpus_net_rx_share,omitempty"`
	// Locks: contentions and wait, all locks and socket locks.
	Contentions      *uint64 `json:"contentions,omitempty"`
	LockWaitNs       *uint64 `json:"lock_wait_ns,omitempty"`
	SocketLockWaitNs *uint64 `json:"socket_lock_wait_ns,omitempty"`
	// Queues: packets on the interface.
	RXPackets *uint64 `json:"rx_packets,omitempty"`
	TXPackets *uint64 `json:"tx_packets,omitempty"`
	// Port: drops, datagrams read, receive queue bytes at the tick.
	Drops            *uint64  `json:"drops,omitempty"`
	DropsPerS        *float64 `json:"drops_per_s,omitempty"`
	Datagrams        *uint64  `json:"datagrams_read,omitempty"`
	DatagramsPerS    *float64 `json:"datagrams_read_per_s,omitempty"`
	SocketQueueBytes *uint64  `json:"socket_queue_bytes,omitempty"`
	// JVM: collections and their time, safepoints and the time threads
	// were stopped for them (GC pauses included).
	JVMGCs        *int64 `json:"jvm_gcs,omitempty"`
	JVMGCTimeNs   *int64 `json:"jvm_gc_time_ns,omitempty"`
	JVMSafepoints *int64 `json:"jvm_safepoints,omitempty"`
	JVMStoppedNs  *int64 `json:"jvm_stopped_ns,omitempty"`
	// TCP: the namespace's ListenOverflows, ListenDrops, TCPBacklogDrop
	// and PassiveOpens in the interval (nstat's counters), and the
	// fullest accept queue of the run's listeners at its samples.
	ListenOverflows *uint64 `json:"listen_overflows,omitempty"`
	ListenDrops     *uint64 `json:"listen_drops,omitempty"`
	TCPBacklogDrops *uint64 `json:"tcp_backlog_drops,omitempty"`
	PassiveOpens    *uint64 `json:"tcp_passive_opens,omitempty"`
	AcceptQueuePeak *uint32 `json:"accept_queue_peak,omitempty"`
	// AcceptBacklog is that listener's backlog (listen()'s, capped by
	// somaxconn).
	AcceptBacklog *uint32 `json:"accept_backlog,omitempty"`
}

// StoppedNs is how long the JVM was stopped in the row: its safepoint
// time when published, else its GC time (nil without a JVM).
func (r TimelineRow) StoppedNs() *int64 {
	if r.JVMStoppedNs != nil {
		return r.JVMStoppedNs
	}
	return r.JVMGCTimeNs
}
