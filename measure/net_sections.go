package measure

import (
	"fmt"
	"sort"
	"time"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/irq"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/evidence"
)

// QueueCounts are kernel-side per-queue packet counts over the window, from
// the queue probe (nil maps when the probe is unavailable).
type QueueCounts struct {
	RX       map[int]uint64 // netif_receive_skb by recorded RX queue
	NAPIWork map[int]uint64 // NAPI work by the queue its NAPI id serves
	TX       map[int]uint64 // net_dev_start_xmit by queue_mapping
}

// deadShare is the share of the mean below which a queue counts as dead
// while others carry traffic (Makita's rx_queue_16..19 had ~0 of ~160 M).
const deadShare = ethtool.DeadShare

// BuildQueues joins the driver's per-queue counters (ethtool -S deltas; nil
// when the driver has none) with the kernel's counts, flags dead queues and
// computes skew per direction.
func BuildQueues(iface netdev.Interface, driver []ethtool.QueueCounters, driverErr error, kernel QueueCounts, window time.Duration) evidence.QueueSection {
	var s evidence.QueueSection
	if driverErr != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("driver per-queue counters: %v", driverErr))
	} else if len(driver) == 0 {
		s.Notes = append(s.Notes, "driver per-queue counters: the driver reports none for "+iface.Name)
	}
	byDir := map[ethtool.Direction]map[int]ethtool.QueueCounters{ethtool.RX: {}, ethtool.TX: {}}
	for _, q := range driver {
		byDir[q.Dir][q.Queue] = q
	}
	secs := window.Seconds()
	build := func(dir ethtool.Direction, n int, kern, napi map[int]uint64) ([]evidence.QueueRow, evidence.QueueBalance) {
		var rows []evidence.QueueRow
		for q := 0; q < n; q++ {
			r := evidence.QueueRow{Queue: q}
			if v, ok := kern[q]; ok || kern != nil {
				v := v
				r.KernelPackets = &v
			}
			if napi != nil {
				v := napi[q]
				r.NAPIWork = &v
			}
			if dq, ok := byDir[dir][q]; ok {
				r.DriverPackets, r.DriverBytes, r.DriverDrops = dq.Packets, dq.Bytes, dq.Drops
			}
			kernelSide := r.KernelPackets
			if r.NAPIWork != nil && (kernelSide == nil || *kernelSide == 0) {
				kernelSide = r.NAPIWork
			}
			if kernelSide != nil && r.DriverPackets != nil && *r.DriverPackets > 0 {
				d := (float64(*kernelSide) - float64(*r.DriverPackets)) / float64(*r.DriverPackets)
				r.Diff = &d
			}
			if best := bestCount(r); best != nil && secs > 0 {
				r.PerS = float64(*best) / secs
			}
			rows = append(rows, r)
		}
		bal := balance(rows)
		for i := range rows {
			for _, d := range bal.Dead {
				if rows[i].Queue == d {
					rows[i].Dead = true
				}
			}
		}
		return rows, bal
	}
	s.RX, s.RXBalance = build(ethtool.RX, len(iface.RX), kernel.RX, kernel.NAPIWork)
	s.TX, s.TXBalance = build(ethtool.TX, len(iface.TX), kernel.TX, nil)
	return s
}

// bestCount prefers the driver's counter (it counts on the wire side), then
// NAPI work, then the kernel's per-skb count.
func bestCount(r evidence.QueueRow) *uint64 {
	switch {
	case r.DriverPackets != nil:
		return r.DriverPackets
	case r.NAPIWork != nil && *r.NAPIWork > 0:
		return r.NAPIWork
	}
	return r.KernelPackets
}

func balance(rows []evidence.QueueRow) evidence.QueueBalance {
	b := evidence.QueueBalance{Dead: []int{}}
	var counts []uint64
	var queues []int
	for _, r := range rows {
		c := bestCount(r)
		if c == nil {
			continue
		}
		switch {
		case r.DriverPackets != nil:
			b.Source = "driver"
		case r.NAPIWork != nil && *r.NAPIWork > 0:
			b.Source = "napi"
		default:
			b.Source = "kernel"
		}
		counts = append(counts, *c)
		queues = append(queues, r.Queue)
	}
	b.Queues = len(counts)
	if b.Queues == 0 {
		return b
	}
	for _, c := range counts {
		b.Total += c
		if c > b.Max {
			b.Max = c
		}
	}
	b.Mean = float64(b.Total) / float64(b.Queues)
	if b.Mean > 0 {
		b.Skew = float64(b.Max) / b.Mean
		for i, c := range counts {
			if float64(c) < deadShare*b.Mean {
				b.Dead = append(b.Dead, queues[i])
			}
		}
	}
	return b
}

// BuildIRQs describes the NIC's queue IRQs: counts over the window per CPU
// and where each may, does and should go.
func BuildIRQs(iface netdev.Interface, qirqs []irq.QueueIRQ, delta irq.Interrupts, aff map[int]irq.Affinity, bal irq.Irqbalance, topo cpuset.Topology, netRXWorkCPUs []int) evidence.IRQSection {
	s := evidence.IRQSection{Irqbalance: bal.Running, IrqbalanceArgs: bal.Args, HintPolicy: bal.HintPolicy, IrqbalanceVersion: bal.Version, NICNode: iface.NUMANode}
	if iface.Virtual {
		s.Unavailable = fmt.Sprintf("%s is a virtual device: it has no IRQs", iface.Name)
	} else if len(qirqs) == 0 {
		s.Unavailable = fmt.Sprintf("no queue IRQs of %s found in /proc/interrupts", iface.Name)
	}
	for _, q := range qirqs {
		row := evidence.QueueIRQ{IRQ: q.IRQ, Name: q.Name, Queue: q.Queue, CountByCPU: map[int]uint64{}}
		if a, ok := aff[q.IRQ]; ok {
			row.SMPAffinity = a.SMPAffinity.List()
			if a.EffectiveKnown {
				row.Effective = a.Effective.List()
			}
			if a.HintKnown {
				row.Hint = a.Hint.List()
			}
			row.HintIgnored = a.HintIgnored()
		}
		for _, cpu := range delta.CPUs {
			if n, ok := delta.CountOn(q.IRQ, cpu); ok && n > 0 {
				row.CountByCPU[cpu] = n
			}
		}
		s.IRQs = append(s.IRQs, row)
	}
	if iface.NUMANode != nil {
		node := topo.NodeCPUs(*iface.NUMANode)
		s.NodeCPUs = node.CPUs()
		if !node.IsEmpty() {
			for _, c := range netRXWorkCPUs {
				if !node.Contains(c) {
					s.WorkCPUsOffNode = append(s.WorkCPUsOffNode, c)
				}
			}
		}
	}
	return s
}

// BuildTX joins the TX queues each CPU used with the configured XPS masks.
// perCPU maps CPU → TX queue → packets (nil when the probe is unavailable).
func BuildTX(iface netdev.Interface, perCPU map[int]map[int]uint64, qdisc []evidence.QdiscRow) evidence.TXSection {
	s := evidence.TXSection{XPS: map[int]string{}, Qdisc: qdisc}
	xpsByCPU := map[int][]int{}
	for _, q := range iface.TX {
		if q.XPSKnown && !q.XPSCPUs.IsEmpty() {
			s.XPSSet = true
			s.XPS[q.Index] = q.XPSCPUs.List()
			for _, c := range q.XPSCPUs.CPUs() {
				xpsByCPU[c] = append(xpsByCPU[c], q.Index)
			}
		}
	}
	cpus := map[int]bool{}
	for c := range perCPU {
		cpus[c] = true
	}
	for c := range xpsByCPU {
		cpus[c] = true
	}
	for _, c := range sortedKeys(cpus) {
		row := evidence.TXCPU{CPU: c, Queues: perCPU[c], XPSQueues: xpsByCPU[c]}
		if row.Queues == nil {
			row.Queues = map[int]uint64{}
		}
		s.PerCPU = append(s.PerCPU, row)
	}
	return s
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// BuildSockets lists the UDP sockets of port and/or pid (owned = the pid's
// socket inodes, or with pid 0 those of the processes a --cgroup,
// --container or --pod selected), their reuseport groups, drop deltas,
// and the pid's threads.
func BuildSockets(port int, pid int, start, end sockets.UDPTable, owned map[uint64]bool, threads []sockets.Thread) evidence.SocketSection {
	var s evidence.SocketSection
	selected := pid == 0 && owned != nil
	if port == 0 && pid == 0 && !selected {
		s.Unavailable = "no --port or --pid given: socket view skipped"
		return s
	}
	prevDrops := map[uint64]uint64{}
	for _, k := range start.Sockets {
		prevDrops[k.Inode] = k.Drops
	}
	chosen := func(k sockets.UDPSocket) bool {
		if port != 0 && int(k.Local.Port()) != port {
			return false
		}
		if (pid != 0 || selected) && !owned[k.Inode] {
			return false
		}
		return true
	}
	var mine sockets.UDPTable
	for _, k := range end.Sockets {
		if !chosen(k) {
			continue
		}
		mine.Sockets = append(mine.Sockets, k)
		row := evidence.UDPSocket{Local: k.Local.String(), Port: int(k.Local.Port()), Inode: k.Inode, RxQueueB: k.RxQueueBytes, PID: pid}
		if p, ok := prevDrops[k.Inode]; ok && k.Drops >= p {
			row.DropsDelta = k.Drops - p
		}
		s.Sockets = append(s.Sockets, row)
	}
	for _, g := range mine.ReusePortGroups() {
		s.Groups = append(s.Groups, evidence.ReusePortGroup{Local: g.Local.String(), Port: int(g.Local.Port()), Size: g.Size, Inodes: g.Inodes})
	}
	for _, t := range threads {
		s.Threads = append(s.Threads, evidence.ThreadCPU{TID: t.TID, Comm: t.Comm, LastCPU: t.LastCPU, AllowedCPUs: t.Allowed.List()})
	}
	if len(s.Sockets) == 0 {
		what := fmt.Sprintf("port %d", port)
		if selected {
			what = "the selected processes"
			if port != 0 {
				what += fmt.Sprintf(" on port %d", port)
			}
		} else if pid != 0 {
			what = fmt.Sprintf("pid %d", pid)
			if port != 0 {
				what += fmt.Sprintf(" on port %d", port)
			}
		}
		s.Warning = fmt.Sprintf("no UDP socket is bound for %s; the system-wide view still runs", what)
	}
	return s
}

// AddSocketWakeups fills each socket's data-ready wakeups by CPU.
func AddSocketWakeups(s *evidence.SocketSection, wakeups map[uint64]map[int]uint64) {
	for i := range s.Sockets {
		if w := wakeups[s.Sockets[i].Inode]; len(w) > 0 {
			s.Sockets[i].WakeupsByCPU = w
		}
	}
}

// AddSocketReads fills each socket's received datagrams and rate from
// per-inode counts of the window (a socket absent from reads read nothing).
func AddSocketReads(s *evidence.SocketSection, reads map[uint64]uint64, window time.Duration) {
	for i := range s.Sockets {
		n := reads[s.Sockets[i].Inode]
		s.Sockets[i].ReceivedPkt = &n
		if window > 0 {
			rate := float64(n) / window.Seconds()
			s.Sockets[i].ReceivedPerS = &rate
		}
	}
}

// UDPSNMPEvidence converts collectors/netstat's counters to evidence's
// mirror of them.
func UDPSNMPEvidence(s netstat.UDPSNMP) evidence.UDPSNMP {
	return evidence.UDPSNMP{UDP: evidence.UDPCounters(s.UDP), UDP6: evidence.UDPCounters(s.UDP6), UDP6Known: s.UDP6Known}
}
