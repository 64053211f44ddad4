package evidence

import (
	"sort"
	"time"
)

// NetEvidence is everything one `perfscope udp` run measured and read,
// joined per CPU, per queue and per socket. Each section either holds data
// or says in Unavailable why its source does not exist for this interface
// or kernel (no per-queue driver counters on lo, no IRQs on veth, a
// tracepoint missing): the rest of the report still runs.
type NetEvidence struct {
	Interface  NetInterface `json:"interface"`
	DurationNs int64        `json:"duration_ns"`
	Port       int          `json:"port,omitempty"`
	PID        int          `json:"pid,omitempty"`
	// Filter is the --cgroup, --container or --pod the socket-level rows
	// (sockets, their lock waits, drops per port) were kept to, and
	// FilterPIDs the processes it selected; absent without one.
	Filter     string          `json:"filter,omitempty"`
	FilterPIDs []int           `json:"filter_pids,omitempty"`
	Softirq    SoftirqEvidence `json:"softirq"`
	Queues     QueueSection    `json:"queues"`
	QueueCPU   QueueCPUSection `json:"queue_cpu"`
	IRQs       IRQSection      `json:"irqs"`
	TX         TXSection       `json:"tx"`
	Locks      LockSection     `json:"locks"`
	Drops      DropSection     `json:"drops"`
	Sockets    SocketSection   `json:"sockets"`
	Profile    ProfileSection  `json:"profile"`
	// TCP is the TCP layer of a `perfscope tcp` run (the tcp-rx recipe);
	// absent from a UDP run.
	TCP *TCPEvidence `json:"tcp,omitempty"`
}

// Section is embedded by every section.
type Section struct {
	// Unavailable says why the section has no data ("" when it has).
	Unavailable string `json:"unavailable,omitempty"`
}

// NetInterface describes the measured interface.
type NetInterface struct {
	Name     string `json:"name"`
	Ifindex  int    `json:"ifindex"`
	Driver   string `json:"driver,omitempty"`
	Virtual  bool   `json:"virtual"`
	NUMANode *int   `json:"numa_node"`
	RXQueues int    `json:"rx_queues"`
	TXQueues int    `json:"tx_queues"`
}

// QueueRow is one queue's traffic over the window from the two independent
// sources. Nil means the source does not report it.
type QueueRow struct {
	Queue int `json:"queue"`
	// KernelPackets: netif_receive_skb by recorded RX queue (RX) or
	// net_dev_start_xmit by queue_mapping (TX).
	KernelPackets *uint64 `json:"kernel_packets"`
	// NAPIWork: packets the queue's NAPI instance polled (RX).
	NAPIWork *uint64 `json:"napi_work,omitempty"`
	// DriverPackets: the driver's per-queue counter delta (ethtool -S).
	DriverPackets *uint64 `json:"driver_packets"`
	DriverBytes   *uint64 `json:"driver_bytes,omitempty"`
	DriverDrops   *uint64 `json:"driver_drops,omitempty"`
	// Diff is (kernel − driver) / driver where both exist.
	Diff *float64 `json:"diff,omitempty"`
	Dead bool     `json:"dead"`
	// PerS is the best packet rate known for the queue.
	PerS float64 `json:"packets_per_s"`
	// RelError bounds KernelPackets at 95 % when it is an estimate
	// (QueueSection.Estimate); nil when exact or unknown.
	RelError *float64 `json:"rel_error,omitempty"`
}

// QueueBalance is how evenly one direction's queues carried packets.
type QueueBalance struct {
	Queues int     `json:"queues"`
	Total  uint64  `json:"total_packets"`
	Mean   float64 `json:"mean_packets"`
	Max    uint64  `json:"max_packets"`
	// Skew is max/mean: 1 is even.
	Skew float64 `json:"skew"`
	Dead []int   `json:"dead_queues"`
	// Source names the counter used ("driver", "napi", "kernel").
	Source string `json:"source"`
}

// QueueSection is per-queue traffic.
type QueueSection struct {
	Section
	RX        []QueueRow   `json:"rx"`
	TX        []QueueRow   `json:"tx"`
	RXBalance QueueBalance `json:"rx_balance"`
	TXBalance QueueBalance `json:"tx_balance"`
	// Notes explain per-source gaps ("driver counters: not supported by lo").
	Notes []string `json:"notes,omitempty"`
	// Estimate says how the kernel-side counts (KernelPackets, NAPIWork
	// in the rows) were obtained when the overhead budget sampled the
	// queue probe's per-packet hooks; nil: exact. The driver's counters
	// are always exact.
	Estimate *Estimate `json:"estimate,omitempty"`
	// NICMissed is the packets the NIC dropped for want of a free RX
	// descriptor over the window (ethtool.Missed: rx_missed_errors,
	// rx_out_of_buffer, ...), nil when the driver reports none of those
	// counters; NICMissedCounters names the ones summed.
	NICMissed         *uint64  `json:"nic_missed,omitempty"`
	NICMissedCounters []string `json:"nic_missed_counters,omitempty"`
	// QStats are the driver's own per-queue statistics over the window,
	// from the kernel's netdev netlink family (qstats-get, Linux 6.10+):
	// only the counters the driver fills, named as the kernel names them
	// ("rx-packets", "rx-alloc-fail", "rx-hw-drops",
	// "rx-hw-drop-overruns", …). QStatsUnavailable says why there are
	// none (a kernel without qstats-get, a driver that reports none).
	QStats            []QueueStats `json:"qstats,omitempty"`
	QStatsUnavailable string       `json:"qstats_unavailable,omitempty"`
	// PagePools are the interface's page pools (the pages its RX queues
	// allocate from and recycle to), from the netdev netlink family
	// (page-pool-get, page-pool-stats-get), with their counters over the
	// window where the kernel has them. PagePoolUnavailable says what is
	// missing and why: a kernel built without CONFIG_PAGE_POOL_STATS has
	// no counters, a driver without page_pool no pools.
	PagePools           []PagePool `json:"page_pools,omitempty"`
	PagePoolUnavailable string     `json:"page_pool_unavailable,omitempty"`
	// Intervals are the kernel's packet counts per tick, when the run
	// keeps a timeline.
	Intervals []QueueInterval `json:"intervals,omitempty"`
}

// QueueStats is one queue's driver statistics over the window.
type QueueStats struct {
	Type     string            `json:"type"` // "rx" or "tx"
	Queue    int               `json:"queue"`
	Counters map[string]uint64 `json:"counters"`
}

// PagePool is one page_pool of the interface.
type PagePool struct {
	ID uint64 `json:"id"`
	// NAPIID is the NAPI instance it feeds (0: not reported).
	NAPIID uint32 `json:"napi_id,omitempty"`
	// Inflight and InflightMem are pages (and bytes) handed out and not
	// returned at the end of the window; nil where not reported.
	Inflight    *uint64 `json:"inflight"`
	InflightMem *uint64 `json:"inflight_mem"`
	// Detached: the device let go of it; it waits for in-flight pages.
	Detached bool `json:"detached,omitempty"`
	// Counters are its allocation and recycling counters over the window
	// by the kernel's names ("alloc-fast", "alloc-slow", "recycle-ring",
	// "recycle-ring-full", …); absent without page-pool-stats-get.
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// QStatsSum is counter summed over the queues of type typ ("rx", "tx"),
// and whether any queue reports it.
func (s QueueSection) QStatsSum(typ, counter string) (uint64, bool) {
	var n uint64
	var seen bool
	for _, q := range s.QStats {
		if v, ok := q.Counters[counter]; ok && q.Type == typ {
			n, seen = n+v, true
		}
	}
	return n, seen
}

// QueueCPUCell is the NAPI work of one queue on one CPU.
type QueueCPUCell struct {
	Queue int    `json:"queue"` // -1 when the NAPI id maps to no queue
	NAPI  uint32 `json:"napi_id"`
	CPU   int    `json:"cpu"`
	Polls uint64 `json:"polls"`
	Work  uint64 `json:"work"`
}

// QueueCPUSection is the (queue × CPU) matrix: which CPU serves which queue.
type QueueCPUSection struct {
	Section
	Cells []QueueCPUCell `json:"cells"`
	// Mapping says how NAPI ids were mapped to queues.
	Mapping string `json:"mapping,omitempty"`
	// Estimate: the polls were sampled (nil: exact).
	Estimate *Estimate `json:"estimate,omitempty"`
}

// QueueIRQ is one queue interrupt and where it may and does go.
type QueueIRQ struct {
	IRQ         int    `json:"irq"`
	Name        string `json:"name"`
	Queue       int    `json:"queue"`
	SMPAffinity string `json:"smp_affinity"`
	Effective   string `json:"effective_affinity,omitempty"`
	Hint        string `json:"affinity_hint,omitempty"`
	HintIgnored bool   `json:"hint_ignored"`
	// Count is interrupts over the window, per CPU ("cpuN" → count).
	CountByCPU map[int]uint64 `json:"count_by_cpu"`
}

// IRQSection is the NIC's IRQs, irqbalance and NUMA placement.
type IRQSection struct {
	Section
	IRQs           []QueueIRQ `json:"queue_irqs"`
	Irqbalance     bool       `json:"irqbalance_running"`
	IrqbalanceArgs []string   `json:"irqbalance_args,omitempty"`
	HintPolicy     string     `json:"irqbalance_hint_policy,omitempty"`
	// IrqbalanceVersion is the installed irqbalance's version ("" unknown):
	// which options the advice may name.
	IrqbalanceVersion string `json:"irqbalance_version,omitempty"`
	// NICNode and the CPUs of that node; WorkCPUsOffNode lists CPUs doing
	// NET_RX work outside the NIC's node.
	NICNode         *int  `json:"nic_numa_node"`
	NodeCPUs        []int `json:"nic_node_cpus,omitempty"`
	WorkCPUsOffNode []int `json:"work_cpus_off_node,omitempty"`
}

// TXCPU is what one CPU transmitted on which TX queue, against XPS.
type TXCPU struct {
	CPU int `json:"cpu"`
	// Queues maps TX queue → packets this CPU put on it.
	Queues map[int]uint64 `json:"queues"`
	// XPSQueues are the TX queues whose xps_cpus include this CPU.
	XPSQueues []int `json:"xps_queues"`
}

// QdiscRow is one TX queue's qdisc activity.
type QdiscRow struct {
	TXQueue  int    `json:"tx_queue"`
	Enqueues uint64 `json:"enqueues"`
	Dequeues uint64 `json:"dequeues"`
}

// TXSection is the transmit side.
type TXSection struct {
	Section
	PerCPU []TXCPU        `json:"per_cpu"`
	Qdisc  []QdiscRow     `json:"qdisc"`
	XPSSet bool           `json:"xps_set"`
	XPS    map[int]string `json:"xps_cpus"` // TX queue → cpulist
	// Estimate: the per-CPU queues and qdisc rows were sampled (nil: exact).
	Estimate *Estimate `json:"estimate,omitempty"`
}

// SocketRef names a socket a lock was attributed to. perfscope's BPF
// probe recognises the lock as a socket's and records the socket's inode,
// port and network namespace; Local and PID come from /proc by inode.
type SocketRef struct {
	// Local is the bound address from /proc/net/udp or udp6; "" when
	// the socket is not listed there (another network namespace, TCP, or
	// closed before the end of the run).
	Local    string `json:"local"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol"` // udp, udplite, tcp
	Inode    uint64 `json:"inode"`
	// NetNS is the inode of the socket's network namespace (as in
	// /proc/PID/ns/net); OtherNetNS is set when it is not perfscope's.
	NetNS      uint32 `json:"netns"`
	OtherNetNS bool   `json:"other_netns,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Comm       string `json:"comm,omitempty"`
	// Workload is what PID belongs to (cgroup, container, pod); absent
	// when no owner process was found.
	Workload *Workload `json:"workload,omitempty"`
	// Field is the lock inside the socket with the most wait:
	// sk_receive_queue.lock, reader_queue.lock, sk_lock.slock or
	// socket.wq.wait.lock (the wakeup's wait-queue lock).
	Field string `json:"field"`
}

// LockSite is contention at one kernel call site.
type LockSite struct {
	Class   string     `json:"class"` // socket-receive-queue, socket-wakeup, socket-lock, qdisc-root-lock, tx-queue-xmit-lock, other, unsampled
	Site    string     `json:"site"`  // the first classifying or innermost non-lock frame
	Stack   []string   `json:"stack"` // innermost first
	Count   uint64     `json:"count"`
	TotalNs uint64     `json:"total_ns"`
	MaxNs   uint64     `json:"max_ns"`
	Socket  *SocketRef `json:"socket,omitempty"`
	// SampledCount is the contentions whose stack was taken here; with
	// LockSection.StackEvery > 1, Count and TotalNs are those scaled to
	// every contention of the lock kind (estimates) and MaxNs is the
	// longest sampled wait.
	SampledCount uint64 `json:"sampled_count"`
}

// SocketContention is lock wait attributed to one socket.
type SocketContention struct {
	Socket  SocketRef `json:"socket"`
	Count   uint64    `json:"count"`
	TotalNs uint64    `json:"total_ns"`
	MaxNs   uint64    `json:"max_ns"`
	// ByLock splits it by the socket's lock, most wait first.
	ByLock []SocketLockWait `json:"by_lock"`
	// RelError bounds Count and TotalNs at 95 % when the lock probe was
	// sampled (LockSection.Estimate); nil when exact or unknown.
	RelError *float64 `json:"rel_error,omitempty"`
	// SockLock splits a TCP socket's sk_lock.slock waits by side; nil for
	// other sockets.
	SockLock *SockLockSplit `json:"sock_lock,omitempty"`
}

// SocketLockWait is the wait on one lock of a socket.
type SocketLockWait struct {
	Field   string `json:"field"`
	Count   uint64 `json:"count"`
	TotalNs uint64 `json:"total_ns"`
	MaxNs   uint64 `json:"max_ns"`
}

// LockSection is lock contention over the window.
type LockSection struct {
	Section
	Sites   []LockSite         `json:"sites"`
	Sockets []SocketContention `json:"sockets"`
	// ByClass sums the sites' TotalNs: estimates when StackEvery > 1.
	ByClass map[string]uint64 `json:"total_ns_by_class"`
	Lost    uint64            `json:"lost"`
	// TotalNs is every contention's wait, exact whatever StackEvery.
	TotalNs uint64 `json:"total_ns"`
	// StackEvery is N when the waiter's stack was taken for about 1 in N
	// contentions: sites (and ByClass) are then estimates; Sockets and
	// TotalNs count every contention.
	StackEvery int `json:"stack_every"`
	// Intervals is the wait per tick of the window, when the run keeps a
	// timeline.
	Intervals []LockInterval `json:"intervals,omitempty"`
	// Estimate: the lock probe was attached in sampling windows only and
	// every count and wait (not MaxNs, the longest seen) is scaled to the
	// window, TotalNs included; nil: exact.
	Estimate *Estimate `json:"estimate,omitempty"`
}

// LockInterval is lock contention over one tick of a timeline.
type LockInterval struct {
	End     time.Time `json:"end"`
	Count   uint64    `json:"count"`
	TotalNs uint64    `json:"total_ns"`
	// ByClass is the wait by lock class (estimates when stacks are
	// sampled, as in LockSection).
	ByClass map[string]uint64 `json:"total_ns_by_class"`
}

// PortDrops are drops on one local UDP port for one reason.
type PortDrops struct {
	Port   int    `json:"port"`
	Reason string `json:"reason"`
	Count  uint64 `json:"count"`
	// Workload is what the processes owning the port's sockets belong
	// to, when they all belong to one (a drop in softirq context is the
	// socket owner's, not the interrupted task's); absent otherwise.
	Workload *Workload `json:"workload,omitempty"`
	// RelError bounds Count at 95 % when the drop probe was sampled
	// (DropSection.Estimate); nil when exact or unknown.
	RelError *float64 `json:"rel_error,omitempty"`
}

// DropSection is UDP drops by port and reason, with kernel counters.
type DropSection struct {
	Section
	ByPort   []PortDrops       `json:"by_port"`
	ByReason map[string]uint64 `json:"by_reason"`
	// SNMP is the /proc/net/snmp Udp and snmp6 Udp6 delta; nil when
	// unreadable.
	UDPSNMP *UDPSNMP `json:"udp_snmp"`
	// Softnet is the per-CPU /proc/net/softnet_stat delta (backlog drops,
	// time_squeeze).
	Softnet []SoftnetCPU `json:"softnet"`
	Notes   []string     `json:"notes,omitempty"`
	// UDPSockstat is /proc/net/sockstat's UDP line at the end of the run
	// (mem is host-wide pages, what net.ipv4.udp_mem limits); nil when
	// unreadable.
	UDPSockstat *UDPSockstat `json:"udp_sockstat,omitempty"`
	// Estimate: the drop probe's rows (ByPort from kfree_skb, ByReason)
	// were sampled; nil: exact. SNMP, softnet and sk_drops are exact.
	Estimate *Estimate `json:"estimate,omitempty"`
	// Intervals are the drop probe's counts per tick, when the run keeps
	// a timeline.
	Intervals []DropInterval `json:"intervals,omitempty"`
}

// UDPSocket is one bound UDP socket.
type UDPSocket struct {
	Local string `json:"local"`
	Port  int    `json:"port"`
	Inode uint64 `json:"inode"`
	Addr  string `json:"addr,omitempty"`
	PID   int    `json:"pid,omitempty"`
	// Workload is what PID belongs to; absent when no owner was found.
	Workload   *Workload `json:"workload,omitempty"`
	RxQueueB   uint64    `json:"rx_queue_bytes"`
	DropsDelta uint64    `json:"drops"`
	// ReceivedPkt is the datagrams the socket's owner read in the window
	// (the socket probe, sock:sock_recv_length), ReceivedPerS the same per
	// second; nil when the probe is unavailable (see
	// SocketSection.ReceivedUnavailable).
	ReceivedPkt  *uint64  `json:"received_packets,omitempty"`
	ReceivedPerS *float64 `json:"received_per_s,omitempty"`
	// ReceivedRelError bounds ReceivedPkt at 95 % when the socket probe
	// was sampled (SocketSection.Estimate); nil when exact or unknown.
	ReceivedRelError *float64 `json:"received_rel_error,omitempty"`
	// WakeupsByCPU counts the data-ready wakeups (sock:sk_data_ready) by
	// the CPU that queued the datagram: which CPUs' softirqs fed this
	// socket. Shares, not datagram counts: since 6.13 UDP wakes only an
	// empty queue's reader. Absent without the tracepoint.
	WakeupsByCPU map[int]uint64 `json:"wakeups_by_cpu,omitempty"`
}

// WakeupShares is each CPU's share of the socket's wakeups (nil when none
// were counted).
func (s UDPSocket) WakeupShares() map[int]float64 {
	var total uint64
	for _, n := range s.WakeupsByCPU {
		total += n
	}
	if total == 0 {
		return nil
	}
	shares := make(map[int]float64, len(s.WakeupsByCPU))
	for cpu, n := range s.WakeupsByCPU {
		shares[cpu] = float64(n) / float64(total)
	}
	return shares
}

// FeedingCPUs returns the CPUs that queued at least minShare of the
// socket's wakeups, in order.
func (s UDPSocket) FeedingCPUs(minShare float64) []int {
	var cpus []int
	for cpu, share := range s.WakeupShares() {
		if share >= minShare {
			cpus = append(cpus, cpu)
		}
	}
	sort.Ints(cpus)
	return cpus
}

// ReusePortGroup is the sockets bound to one local address and port.
type ReusePortGroup struct {
	Local  string   `json:"local"`
	Port   int      `json:"port"`
	Size   int      `json:"size"`
	Inodes []uint64 `json:"inodes"`
}

// ThreadCPU is one thread of the server and where it runs.
type ThreadCPU struct {
	TID         int    `json:"tid"`
	Comm        string `json:"comm"`
	LastCPU     int    `json:"last_cpu"`
	AllowedCPUs string `json:"allowed_cpus"`
}

// SocketSection is the UDP sockets of --port / --pid.
type SocketSection struct {
	Section
	Sockets []UDPSocket      `json:"sockets"`
	Groups  []ReusePortGroup `json:"reuseport_groups"`
	Threads []ThreadCPU      `json:"threads"`
	Warning string           `json:"warning,omitempty"`
	// ReceivedUnavailable says why sockets carry no received counts.
	ReceivedUnavailable string `json:"received_unavailable,omitempty"`
	// Estimate: the received counts and wakeups were sampled; nil: exact.
	Estimate *Estimate `json:"estimate,omitempty"`
	// Intervals are the sockets' reads, queue and drops per tick, when
	// the run keeps a timeline.
	Intervals []SocketInterval `json:"intervals,omitempty"`
}

// FunctionShare is the CPU share of a group of kernel functions Makita's talk
// removes.
type FunctionShare struct {
	Group     string   `json:"group"`
	Functions []string `json:"functions"`
	Samples   uint64   `json:"samples"`
	// Share is of all samples on the NET_RX CPUs; AllShare of all samples.
	Share    float64 `json:"share"`
	AllShare float64 `json:"all_share"`
	// NetRXSamples is the group's samples on the NET_RX CPUs (Share's
	// numerator); ShareLow and ShareHigh bound Share at 95 % confidence
	// (Wilson score interval): what a finding built on Share may claim.
	NetRXSamples uint64  `json:"net_rx_samples"`
	ShareLow     float64 `json:"share_low"`
	ShareHigh    float64 `json:"share_high"`
}

// ProfileSection is the on-CPU profile of the run.
type ProfileSection struct {
	Section
	// ProfileSampling: the event, and the CPUs the profile did not see.
	ProfileSampling
	FrequencyHz int    `json:"frequency_hz"`
	Samples     uint64 `json:"samples"`
	NetRXCPUs   []int  `json:"net_rx_cpus"`
	// NetRXSeen are the NET_RX CPUs the profile saw (not undersampled):
	// the CPUs Groups' shares cover. NetRXUnseen are those it did not
	// see, with the softirq probe's NET_RX time on each: the receive work
	// the shares miss. Nil in reports from before they were kept.
	NetRXSeen   []int           `json:"net_rx_cpus_seen"`
	NetRXUnseen []UnseenCPU     `json:"net_rx_cpus_unseen"`
	Groups      []FunctionShare `json:"function_groups"`
	Lost        uint64          `json:"lost"`
	// NetRXSamples is the samples on the NET_RX CPUs (the denominator of
	// every group's Share).
	NetRXSamples uint64 `json:"net_rx_samples"`
	// IdleInterruptSamples are samples of the idle task taken while the
	// idle CPU served an interrupt or a softirq — on a real NIC most
	// NET_RX work — kept in the profile; IdleLoopSamples are the idle
	// loop's, left out of it.
	IdleInterruptSamples uint64 `json:"idle_interrupt_samples"`
	IdleLoopSamples      uint64 `json:"idle_loop_samples"`
	// CPUs is the profile per CPU, to set each CPU's receive work in the
	// profile beside the softirq probe's time on it.
	CPUs []ProfileCPU `json:"per_cpu,omitempty"`
}

// ProfileCPU is one CPU's share of the profile.
type ProfileCPU struct {
	CPU int `json:"cpu"`
	// Samples are the samples kept (threads, and interrupts on idle).
	Samples              uint64 `json:"samples"`
	IdleInterruptSamples uint64 `json:"idle_interrupt_samples"`
	IdleLoopSamples      uint64 `json:"idle_loop_samples"`
	// NetRXSamples are the samples whose stack passes through
	// net_rx_action: NET_RX softirq work, whatever task it interrupted.
	NetRXSamples uint64 `json:"net_rx_samples"`
	// NetRXShare is NetRXSamples over every tick of the CPU (Samples +
	// IdleLoopSamples): comparable with the softirq probe's NET_RX share.
	NetRXShare float64 `json:"net_rx_share"`
	// TakenSamples are the samples the event delivered on the CPU: every
	// run of the sampling program, those the profile keeps, leaves out
	// (the idle loop, other processes than --pid) or loses. Null when not
	// counted.
	TakenSamples *uint64 `json:"taken_samples"`
	// ExpectedSamples is what the CPU should have taken: the frequency ×
	// its online time (cpu-clock) or busy time (cycles) in the window
	// (ProfileSampling.ExpectedFrom). Null when not known.
	ExpectedSamples *uint64 `json:"expected_samples"`
	// Undersampled: TakenSamples below half of ExpectedSamples (of at
	// least MinExpectedSamples): the profile did not see this CPU, for
	// UndersampledReason.
	Undersampled       bool   `json:"undersampled"`
	UndersampledReason string `json:"undersampled_reason,omitempty"`
	// OnlineNs is how long the CPU's event was enabled in the window,
	// CountingNs how long it counted (less with a multiplexed PMU);
	// BusyNs the CPU's non-idle time (/proc/stat), read for cycles.
	OnlineNs   *int64 `json:"online_ns,omitempty"`
	CountingNs *int64 `json:"counting_ns,omitempty"`
	BusyNs     *int64 `json:"busy_ns,omitempty"`
}
