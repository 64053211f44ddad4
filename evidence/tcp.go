package evidence

import (
	"net/netip"
	"time"
)

// TCPEvidence is what one `perfscope tcp` window measured and read for the
// TCP layer: the namespace's TCP counters over the window, the settings
// that size TCP's queues and buffers, the listeners with their accept
// queues, the busiest connections with their tcp_info, and the
// retransmits and resets the tcpevents probe counted per connection. The
// softirq, queue, IRQ, lock and profile sections are NetEvidence's, shared
// with `perfscope udp`.
type TCPEvidence struct {
	DurationNs int64 `json:"duration_ns"`
	Port       int   `json:"port,omitempty"`
	PID        int   `json:"pid,omitempty"`
	// Netns names the network namespace the TCP layer was read in when
	// it is --pid's, not perfscope's ("net:[4026532001]"): its sockets,
	// counters, sysctls, sockstat and probe events; empty for
	// perfscope's own.
	Netns string `json:"netns,omitempty"`
	// SettingsUnavailable says why Settings could not be read (all null
	// then).
	SettingsUnavailable string `json:"settings_unavailable,omitempty"`
	// Counters are the Tcp and TcpExt counters over the window.
	Counters TCPCounterSection `json:"counters"`
	// Settings are read at the end of the window.
	Settings TCPSettings `json:"settings"`
	// Sockstat is /proc/net/sockstat's TCP line at the end; nil when it
	// could not be read.
	Sockstat    *TCPSockstat      `json:"sockstat"`
	Listeners   ListenerSection   `json:"listeners"`
	Connections ConnectionSection `json:"connections"`
	Events      TCPEventSection   `json:"events"`
	// Intervals are the window's ticks when the run keeps a timeline
	// (jvm-net): the counters and accept queues per interval.
	Intervals []TCPInterval `json:"intervals,omitempty"`
	// SocketLocks are the listeners and connections whose socket lock was
	// contended, split by side (the lock section's TCP sockets joined with
	// sock_diag by inode).
	SocketLocks TCPSocketLockSection `json:"socket_locks"`
	// Drops are the TCP packets the kernel freed with a drop reason
	// (skb:kfree_skb) per local port and reason.
	Drops TCPDropSection `json:"drops"`
}

// TCPDropSection counts dropped TCP packets by local port and drop reason
// (skb:kfree_skb, reason names from the kernel's BTF). A SYN refused at a
// full accept queue is not among them: the kernel frees it without a
// reason, and ListenOverflows counts it.
type TCPDropSection struct {
	Section
	// ByPort is sorted by count, largest first. Port 0: drops of the
	// namespace not attributable to a local port (dropped before the TCP
	// header was parsed, or sent by the kernel's control socket).
	ByPort []PortDrops `json:"by_port"`
	// Estimate is set when the drop probe was sampled (stats: sampled):
	// counts are scaled from its sampling windows.
	Estimate *Estimate `json:"estimate,omitempty"`
}

// The TCP counters, settings and sockstat below mirror collectors/netstat's
// field for field (tags aside), so the runner converts them with a plain
// Go conversion and evidence imports no collector.

// TCPCounters are the Tcp (/proc/net/snmp) and TcpExt (/proc/net/netstat)
// counters over a window, under the kernel's names (nstat prints them as
// TcpRetransSegs, TcpExtListenOverflows).
type TCPCounters struct {
	ActiveOpens  uint64 `json:"active_opens"`
	PassiveOpens uint64 `json:"passive_opens"`
	AttemptFails uint64 `json:"attempt_fails"`
	EstabResets  uint64 `json:"estab_resets"`
	InSegs       uint64 `json:"in_segs"`
	OutSegs      uint64 `json:"out_segs"`
	RetransSegs  uint64 `json:"retrans_segs"`
	InErrs       uint64 `json:"in_errs"`
	OutRsts      uint64 `json:"out_rsts"`

	ListenOverflows      uint64 `json:"listen_overflows"`
	ListenDrops          uint64 `json:"listen_drops"`
	TCPReqQFullDrop      uint64 `json:"req_q_full_drop"`
	TCPReqQFullDoCookies uint64 `json:"req_q_full_do_cookies"`
	SyncookiesSent       uint64 `json:"syncookies_sent"`
	SyncookiesRecv       uint64 `json:"syncookies_recv"`
	SyncookiesFailed     uint64 `json:"syncookies_failed"`

	TCPBacklogDrop    uint64 `json:"backlog_drop"`
	PruneCalled       uint64 `json:"prune_called"`
	RcvPruned         uint64 `json:"rcv_pruned"`
	OfoPruned         uint64 `json:"ofo_pruned"`
	TCPRcvCollapsed   uint64 `json:"rcv_collapsed"`
	TCPRcvQDrop       uint64 `json:"rcv_q_drop"`
	TCPOFODrop        uint64 `json:"ofo_drop"`
	TCPZeroWindowDrop uint64 `json:"zero_window_drop"`

	TCPMemoryPressures       uint64 `json:"memory_pressures"`
	TCPMemoryPressuresChrono uint64 `json:"memory_pressures_ms"`
	TCPAbortOnMemory         uint64 `json:"abort_on_memory"`

	TCPTimeouts          uint64 `json:"timeouts"`
	TCPLossProbes        uint64 `json:"loss_probes"`
	TCPLossProbeRecovery uint64 `json:"loss_probe_recovery"`
	TCPFastRetrans       uint64 `json:"fast_retrans"`
	TCPSlowStartRetrans  uint64 `json:"slow_start_retrans"`
	TCPSynRetrans        uint64 `json:"syn_retrans"`
	TCPRetransFail       uint64 `json:"retrans_fail"`
	TCPSpuriousRTOs      uint64 `json:"spurious_rtos"`

	TCPAbortOnData    uint64 `json:"abort_on_data"`
	TCPAbortOnClose   uint64 `json:"abort_on_close"`
	TCPAbortOnTimeout uint64 `json:"abort_on_timeout"`

	// Missing names the counters this kernel lacks ("TcpExt.TCPRcvQDrop"):
	// they read 0 and mean "not counted".
	Missing []string `json:"missing,omitempty"`
}

// Has reports whether the kernel counts name ("TcpExt.TCPRcvQDrop").
func (c TCPCounters) Has(name string) bool {
	for _, m := range c.Missing {
		if m == name {
			return false
		}
	}
	return true
}

// TCPCounterSection holds the window's counters, nil when they could not
// be read (Unavailable says why).
type TCPCounterSection struct {
	Section
	Window *TCPCounters `json:"window"`
}

// TCPSettings are the TCP sysctls; nil when this kernel or namespace does
// not show one (tcp_mem is host-wide: a container's namespace hides it).
type TCPSettings struct {
	Somaxconn       *int64    `json:"somaxconn"`
	MaxSynBacklog   *int64    `json:"tcp_max_syn_backlog"`
	Syncookies      *int64    `json:"tcp_syncookies"`
	AbortOnOverflow *int64    `json:"tcp_abort_on_overflow"`
	Rmem            *[3]int64 `json:"tcp_rmem_bytes"`
	Wmem            *[3]int64 `json:"tcp_wmem_bytes"`
	Mem             *[3]int64 `json:"tcp_mem_pages"`
	WindowScaling   *int64    `json:"tcp_window_scaling"`
	AdvWinScale     *int64    `json:"tcp_adv_win_scale"`
	ModerateRcvbuf  *int64    `json:"tcp_moderate_rcvbuf"`
}

// TCPSockstat is /proc/net/sockstat's TCP line: sockets of this namespace,
// and MemPages, the pages all TCP sockets of the host hold (what tcp_mem
// limits).
type TCPSockstat struct {
	InUse    int64  `json:"inuse"`
	Orphan   int64  `json:"orphan"`
	TimeWait int64  `json:"tw"`
	Alloc    int64  `json:"alloc"`
	MemPages int64  `json:"mem_pages"`
	InUse6   *int64 `json:"inuse6"`
}

// TCPListener is one listening socket and its accept queue, sampled over
// the window (inet_diag's idiag_rqueue and idiag_wqueue of a listener).
type TCPListener struct {
	Local netip.AddrPort `json:"local"`
	Inode uint64         `json:"inode"`
	PIDs  []int          `json:"pids,omitempty"`
	Comm  string         `json:"comm,omitempty"`
	// Backlog is the accept queue's size: listen()'s backlog capped by
	// net.core.somaxconn (sk_max_ack_backlog).
	Backlog uint32 `json:"backlog"`
	// QueueLast and QueuePeak are the connections waiting for accept() at
	// the last sample and at the fullest one; FullSamples counts samples
	// at which the queue was over Backlog (full: the kernel refuses the
	// next handshake), of Samples taken.
	QueueLast   uint32 `json:"queue_last"`
	QueuePeak   uint32 `json:"queue_peak"`
	FullSamples int    `json:"full_samples"`
	Samples     int    `json:"samples"`
	// ReusePort is the number of listeners on the same address and port
	// (an SO_REUSEPORT group when > 1).
	ReusePort int `json:"reuseport_group"`
	// SynQueueLast and SynQueuePeak are the half-open connections (SYN
	// received, handshake not completed) at the last sample and the
	// fullest, and SynFullSamples the samples at which they reached
	// Backlog, the SYN queue's bound; for an SO_REUSEPORT group, the
	// group's.
	SynQueueLast   uint32 `json:"syn_queue_last"`
	SynQueuePeak   uint32 `json:"syn_queue_peak"`
	SynFullSamples int    `json:"syn_full_samples"`
	// SynSamples is how many of the Samples read the SYN queue too: the
	// half-open connections are dumped from the table of every
	// connection of the namespace (TIME_WAIT included), which costs
	// milliseconds when it holds tens of thousands, so those dumps are
	// spaced out to keep their cost near 0.1 % of a CPU (at least one
	// every 5 s).
	SynSamples int `json:"syn_samples"`
}

// Full reports whether the listener's accept queue was seen full.
func (l TCPListener) Full() bool { return l.FullSamples > 0 }

// NoListenerFound begins a ListenerSection's Unavailable when the section
// was read and found no listener (on --port, or at all): not a failed read.
const NoListenerFound = "no listener"

// ListenerSection lists the listeners (of Port, when set).
type ListenerSection struct {
	Section
	Rows []TCPListener `json:"rows"`
}

// TCPConnection is one connection at the end of the window, with its
// tcp_info; optional fields are nil where the kernel does not report them.
type TCPConnection struct {
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	State  string         `json:"state"`
	PIDs   []int          `json:"pids,omitempty"`
	// RecvQ and SendQ are bytes not yet read and not yet acked.
	RecvQ        uint32  `json:"recv_q"`
	SendQ        uint32  `json:"send_q"`
	RTTUs        uint32  `json:"rtt_us"`
	RTTVarUs     uint32  `json:"rttvar_us"`
	MinRTTUs     *uint32 `json:"min_rtt_us"`
	SndCwnd      uint32  `json:"snd_cwnd"`
	TotalRetrans uint32  `json:"total_retrans"`
	// BytesReceived and BytesAcked are over the connection's life;
	// BytesWindow is received plus acked over the window when the
	// connection was seen at both ends (nil otherwise): the ranking key.
	BytesReceived *uint64 `json:"bytes_received"`
	BytesAcked    *uint64 `json:"bytes_acked"`
	BytesRetrans  *uint64 `json:"bytes_retrans"`
	BytesWindow   *uint64 `json:"bytes_window"`
	RcvSpace      uint32  `json:"rcv_space"`
	RcvWnd        *uint32 `json:"rcv_wnd"`
	// RcvSsthresh is the most the receive window may grow to now (ss's
	// rcv_ssthresh); RcvRTTUs the receiver's own RTT estimate (ss's
	// rcv_rtt), nil until the kernel has one.
	RcvSsthresh uint32  `json:"rcv_ssthresh"`
	RcvRTTUs    *uint32 `json:"rcv_rtt_us"`
	// Rcvbuf and Sndbuf are the socket's buffer limits now; Drops is
	// sk_drops and Backlog the bytes in its socket backlog.
	Rcvbuf  uint32  `json:"rcvbuf"`
	Sndbuf  uint32  `json:"sndbuf"`
	Drops   *uint32 `json:"drops"`
	Backlog *uint32 `json:"backlog_bytes"`
	// Steering is which CPUs fed the connection and which read it over
	// the window; nil when the tcpevents probe's sk_data_ready and
	// sock_recv_length hooks did not count it.
	Steering *TCPSteering `json:"steering,omitempty"`
}

// ConnectionSection holds the busiest connections: Rows are the top
// Shown of Total connections seen, by bytes over the window.
type ConnectionSection struct {
	Section
	Total int             `json:"total"`
	Rows  []TCPConnection `json:"rows"`
	// SteeringLost counts segments delivered and reads done that the
	// steering counts missed: no entry could be made for the socket
	// (absent when 0).
	SteeringLost uint64 `json:"steering_lost,omitempty"`
}

// TCPEventCount is events and the segments they carried.
type TCPEventCount struct {
	Events uint64 `json:"events"`
	Segs   uint64 `json:"segs"`
}

// TCPConnEvents is one connection's events of one kind over the window.
type TCPConnEvents struct {
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	// Event is "retransmit", "synack_retransmit", "reset_sent" or
	// "reset_received".
	Event string `json:"event"`
	// State is the TCP state then ("ESTABLISHED"), "" when a reset
	// answered a segment no socket owned.
	State string `json:"state,omitempty"`
	// Kind is a retransmit's kind ("rto", "fast", "tlp", "syn", "other")
	// or a sent reset's reason as the kernel names it ("NO_SOCKET").
	Kind   string `json:"kind,omitempty"`
	Events uint64 `json:"events"`
	Segs   uint64 `json:"segs"`
}

// TCPEventSection is the tcpevents probe's counts over the window: totals
// per event (exact), retransmits per kind, and the connections with the
// most events.
type TCPEventSection struct {
	Section
	Retransmits       TCPEventCount            `json:"retransmits"`
	SynAckRetransmits TCPEventCount            `json:"synack_retransmits"`
	ResetsSent        TCPEventCount            `json:"resets_sent"`
	ResetsReceived    TCPEventCount            `json:"resets_received"`
	RetransmitKinds   map[string]TCPEventCount `json:"retransmit_kinds"`
	Top               []TCPConnEvents          `json:"top"`
	// LostConns counts events missing from Top's source because the
	// per-connection map was full (they are in the totals).
	LostConns uint64 `json:"lost_conns"`
	// Unattributed counts, under --pid, --cgroup, --container or --pod,
	// the events of sockets closed before the end of the window: their
	// owner cannot be learned, so their rows are left out of Top (the
	// totals, which are the namespace's, have them).
	Unattributed uint64 `json:"unattributed_events,omitempty"`
}

// TCPInterval is one tick of a TCP timeline: the namespace's counters in
// the interval (nil when they could not be read at its ends) and the
// fullest accept queue of the run's listeners at its samples, with that
// listener's backlog.
type TCPInterval struct {
	End             time.Time `json:"end"`
	ListenOverflows *uint64   `json:"listen_overflows"`
	ListenDrops     *uint64   `json:"listen_drops"`
	BacklogDrops    *uint64   `json:"backlog_drop"`
	PassiveOpens    *uint64   `json:"passive_opens"`
	QueuePeak       uint32    `json:"queue_peak"`
	Backlog         uint32    `json:"backlog"`
	FullSamples     int       `json:"full_samples"`
}
