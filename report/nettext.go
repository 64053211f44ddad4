package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

func optU(p *uint64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// writeNetText prints one screen of summary (per-CPU bars, queues, top lock
// sites, drops by port, findings), then the details.
func writeNetText(w io.Writer, r *Report, ev evidence.NetEvidence) {
	secs := time.Duration(ev.DurationNs).Seconds()
	drv := ev.Interface.Driver
	if drv == "" {
		drv = "no driver"
	}
	if ev.Interface.Name == "" {
		// A recipe about a port, not an interface.
		fmt.Fprintf(w, "network — UDP port %d, no interface, for %.1fs on %d CPUs, kernel %s\n", ev.Port, secs, r.Meta.CPUs, r.Meta.Kernel)
	} else {
		cmd := "udp"
		if ev.TCP != nil {
			cmd = "tcp"
		}
		fmt.Fprintf(w, "perfscope %s — %s (%s, %d RX / %d TX queues) for %.1fs on %d CPUs, kernel %s\n",
			cmd, ev.Interface.Name, drv, ev.Interface.RXQueues, ev.Interface.TXQueues, secs, r.Meta.CPUs, r.Meta.Kernel)
	}

	if ev.Filter != "" {
		what := "the sockets of its processes (pids %s) with their lock waits and drops; the per-CPU, queue and profile sections are host-wide"
		if ev.TCP != nil {
			what = "the listeners, connections and retransmit/reset rows of its processes' sockets (pids %s) and their lock waits; the TCP counters and event totals are the namespace's, the per-CPU, queue and profile sections host-wide"
		}
		fmt.Fprintf(w, "kept to %s: "+what+"\n", ev.Filter, joinPIDs(ev.FilterPIDs))
	}

	Heading(w, "Softirq per CPU (share of wall time)")
	t := Table{Header: []string{"CPU", "NET_RX/s", "NET_RX", "", "NET_TX/s", "NET_TX", "", "softirq"}}
	for _, c := range ev.Softirq.CPUs {
		rx, tx := c.Vectors["NET_RX"], c.Vectors["NET_TX"]
		t.Add(fmt.Sprint(c.CPU), Count(float64(rx.Count)/secs), Percent(rx.Share), Bar(rx.Share, 20),
			Count(float64(tx.Count)/secs), Percent(tx.Share), Bar(tx.Share, 10), Percent(c.Share))
	}
	t.Write(w)
	estimateNote(w, "softirq counts and times", ev.Softirq.Estimate)

	Heading(w, "RX queues")
	if len(ev.Queues.RX) == 0 {
		fmt.Fprintln(w, "no RX queues reported")
	} else {
		qt := Table{Header: []string{"queue", "packets/s", "kernel", "napi", "driver", "diff", ""}}
		for _, q := range ev.Queues.RX {
			mark := ""
			if q.Dead {
				mark = "DEAD"
			}
			diff := "-"
			if q.Diff != nil {
				diff = fmt.Sprintf("%+.1f%%", *q.Diff*100)
			}
			qt.Add(fmt.Sprint(q.Queue), Count(q.PerS), withError(optU(q.KernelPackets), q.RelError), optU(q.NAPIWork), optU(q.DriverPackets), diff, mark)
		}
		qt.Write(w)
		estimateNote(w, "kernel per-queue counts", ev.Queues.Estimate)
		b := ev.Queues.RXBalance
		if b.Queues > 0 {
			fmt.Fprintf(w, "skew (max/mean, from %s counters): %.2f; dead queues: %v\n", b.Source, b.Skew, b.Dead)
		}
	}
	for _, n := range ev.Queues.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	writePagePools(w, ev.Queues)

	Heading(w, "Top lock contention")
	writeLockSites(w, ev.Locks, 5)

	if ev.TCP != nil {
		writeTCPSummary(w, ev.TCP)
	} else {
		writeUDPDrops(w, ev, secs)
	}

	Heading(w, "Findings")
	WriteFindings(w, r.Findings)

	fmt.Fprintln(w, "\n━━━━ details ━━━━")
	writeNetDetails(w, r, ev)
}

// writeUDPDrops prints the UDP drops by port, SNMP and softnet_stat.
func writeUDPDrops(w io.Writer, ev evidence.NetEvidence, secs float64) {
	Heading(w, "UDP drops by port")
	if ev.Drops.Unavailable != "" {
		fmt.Fprintf(w, "unavailable: %s\n", ev.Drops.Unavailable)
	} else if len(ev.Drops.ByPort) == 0 {
		fmt.Fprintln(w, "no drops")
	} else {
		dt := Table{Header: []string{"port", "reason", "drops", "/s", "workload"}}
		for _, d := range ev.Drops.ByPort {
			dt.Add(fmt.Sprint(d.Port), d.Reason, withError(fmt.Sprint(d.Count), d.RelError), Count(float64(d.Count)/secs), workloadLabel(d.Workload))
		}
		dt.Write(w)
		estimateNote(w, "drop reasons (each port's total from its sockets' exact sk_drops where it has one)", ev.Drops.Estimate)
	}

	if sn := ev.Drops.UDPSNMP; sn != nil {
		fmt.Fprintf(w, "/proc/net/snmp over the run: Udp InDatagrams %d, RcvbufErrors %d, InErrors %d, NoPorts %d",
			sn.UDP.InDatagrams, sn.UDP.RcvbufErrors, sn.UDP.InErrors, sn.UDP.NoPorts)
		if sn.UDP6Known {
			fmt.Fprintf(w, "; Udp6 RcvbufErrors %d", sn.UDP6.RcvbufErrors)
		}
		fmt.Fprintln(w)
	}
	for _, n := range ev.Drops.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	var backlog, squeeze uint64
	for _, c := range ev.Drops.Softnet {
		backlog += c.Dropped
		squeeze += c.TimeSqueeze
	}
	if ev.Drops.Softnet != nil {
		fmt.Fprintf(w, "softnet_stat over the run: backlog drops %d, time_squeeze %d\n", backlog, squeeze)
	}
}

// estimateNote says how a section's numbers were obtained when the
// overhead budget sampled them; nothing when they are exact.
func estimateNote(w io.Writer, what string, e *evidence.Estimate) {
	if e != nil {
		fmt.Fprintf(w, "%s: %s\n", what, e)
	}
}

// withError appends a row's 95 % bound to its number when it is an
// estimate.
func withError(v string, rel *float64) string {
	if rel == nil {
		return v
	}
	return fmt.Sprintf("%s ±%.0f%%", v, 100**rel)
}

func unavailable(w io.Writer, s evidence.Section) bool {
	if s.Unavailable != "" {
		fmt.Fprintf(w, "unavailable: %s\n", s.Unavailable)
		return true
	}
	return false
}

func writeNetDetails(w io.Writer, r *Report, ev evidence.NetEvidence) {
	writeQueueCPU(w, ev.QueueCPU)
	writeIRQs(w, ev.IRQs)
	writeTXQueues(w, ev.TX)
	if ev.TCP != nil {
		writeTCPDetails(w, ev.TCP)
	}
	writeSockets(w, ev.Sockets)
	writeNetRXProfile(w, ev.Profile)
	for _, a := range r.Artifacts {
		fmt.Fprintf(w, "wrote %s: %s\n", a.Kind, a.Path)
	}

	writeOverhead(w, r.Overhead)
}

// writeQueueCPU is the matrix of NAPI work by RX queue and CPU, to show
// which CPUs each queue's receive work lands on.
func writeQueueCPU(w io.Writer, qc evidence.QueueCPUSection) {
	Heading(w, "Queue × CPU (NAPI work)")
	if unavailable(w, qc.Section) {
		return
	}
	cpus := map[int]bool{}
	work := map[[2]int]uint64{}
	for _, c := range qc.Cells {
		cpus[c.CPU] = true
		work[[2]int{c.Queue, c.CPU}] += c.Work
	}
	header := []string{"queue"}
	for _, c := range sortedKeys(cpus) {
		header = append(header, fmt.Sprintf("cpu%d", c))
	}
	mt := Table{Header: header}
	queues := map[int]bool{}
	for _, c := range qc.Cells {
		queues[c.Queue] = true
	}
	for _, q := range sortedKeys(queues) {
		row := []string{fmt.Sprint(q)}
		for _, c := range sortedKeys(cpus) {
			row = append(row, fmt.Sprint(work[[2]int{q, c}]))
		}
		mt.Add(row...)
	}
	mt.Write(w)
	if qc.Mapping != "" {
		fmt.Fprintf(w, "NAPI ids mapped to queues by %s\n", qc.Mapping)
	}
	estimateNote(w, "NAPI polls and work", qc.Estimate)
}

func writeIRQs(w io.Writer, irqs evidence.IRQSection) {
	Heading(w, "IRQs")
	if !unavailable(w, irqs.Section) {
		it := Table{Header: []string{"irq", "queue", "name", "smp_affinity", "effective", "hint", "interrupts by CPU"}}
		for _, q := range irqs.IRQs {
			var by []string
			for _, c := range sortedKeys(q.CountByCPU) {
				by = append(by, fmt.Sprintf("cpu%d:%d", c, q.CountByCPU[c]))
			}
			hint := q.Hint
			if q.HintIgnored {
				hint += " (ignored)"
			}
			it.Add(fmt.Sprint(q.IRQ), fmt.Sprint(q.Queue), q.Name, q.SMPAffinity, q.Effective, hint, strings.Join(by, " "))
		}
		it.Write(w)
	}
	bal := "not running"
	if irqs.Irqbalance {
		bal = "running " + strings.Join(irqs.IrqbalanceArgs, " ")
	}
	fmt.Fprintf(w, "irqbalance: %s\n", bal)
	if irqs.NICNode != nil {
		fmt.Fprintf(w, "NIC NUMA node %d (CPUs %v); NET_RX work off the node: %v\n", *irqs.NICNode, irqs.NodeCPUs, irqs.WorkCPUsOffNode)
	} else {
		fmt.Fprintln(w, "NIC NUMA node: none reported")
	}
}

func writeTXQueues(w io.Writer, tx evidence.TXSection) {
	Heading(w, "TX queues")
	if tx.Unavailable != "" {
		fmt.Fprintf(w, "unavailable: %s\n", tx.Unavailable)
	}
	if tx.XPSSet {
		for _, q := range sortedKeys(tx.XPS) {
			fmt.Fprintf(w, "tx-%d xps_cpus=%s\n", q, tx.XPS[q])
		}
	} else {
		fmt.Fprintln(w, "XPS: not set on any TX queue")
	}
	if len(tx.PerCPU) > 0 && tx.Unavailable == "" {
		tt := Table{Header: []string{"CPU", "TX queues used (packets)", "XPS queues"}}
		for _, c := range tx.PerCPU {
			var used []string
			for _, q := range sortedKeys(c.Queues) {
				used = append(used, fmt.Sprintf("tx-%d:%d", q, c.Queues[q]))
			}
			tt.Add(fmt.Sprint(c.CPU), strings.Join(used, " "), fmt.Sprint(c.XPSQueues))
		}
		tt.Write(w)
		estimateNote(w, "TX packets per CPU and qdisc", tx.Estimate)
	}
}

func writeSockets(w io.Writer, sockets evidence.SocketSection) {
	Heading(w, "Sockets")
	if unavailable(w, sockets.Section) {
		return
	}
	if sockets.Warning != "" {
		fmt.Fprintf(w, "warning: %s\n", sockets.Warning)
	}
	st := Table{Header: []string{"local", "inode", "pid", "workload", "read/s", "read", "rx queue", "drops", "fed by CPUs (wakeups)"}}
	for _, s := range sockets.Sockets {
		rate := "-"
		if s.ReceivedPerS != nil {
			rate = Count(*s.ReceivedPerS)
		}
		pid := "-"
		if s.PID > 0 {
			pid = fmt.Sprint(s.PID)
		}
		st.Add(s.Local, fmt.Sprint(s.Inode), pid, workloadLabel(s.Workload), rate, withError(optU(s.ReceivedPkt), s.ReceivedRelError), Bytes(float64(s.RxQueueB)), fmt.Sprint(s.DropsDelta), feeders(s))
	}
	st.Write(w)
	estimateNote(w, "datagrams read and wakeups", sockets.Estimate)
	if sockets.ReceivedUnavailable != "" {
		fmt.Fprintf(w, "datagrams read per socket unavailable: %s\n", sockets.ReceivedUnavailable)
	}
	for _, g := range sockets.Groups {
		fmt.Fprintf(w, "SO_REUSEPORT group %s: %d sockets\n", g.Local, g.Size)
	}
	if len(sockets.Threads) > 0 {
		th := Table{Header: []string{"tid", "comm", "last CPU", "allowed CPUs"}}
		for _, t := range sockets.Threads {
			th.Add(fmt.Sprint(t.TID), t.Comm, fmt.Sprint(t.LastCPU), t.AllowedCPUs)
		}
		th.Write(w)
	}
}

// writeNetRXProfile is the share of the NET_RX CPUs' time in each group of
// functions the talk's changes take away.
func writeNetRXProfile(w io.Writer, prof evidence.ProfileSection) {
	Heading(w, "CPU in the functions Makita's talk removes")
	if unavailable(w, prof.Section) {
		return
	}
	fmt.Fprintf(w, "%d samples at %d Hz; NET_RX CPUs: %v; lost: %d\n", prof.Samples, prof.FrequencyHz, prof.NetRXCPUs, prof.Lost)
	fmt.Fprintf(w, "interrupts and softirqs on idle CPUs: %d samples kept; idle loop: %d samples left out\n", prof.IdleInterruptSamples, prof.IdleLoopSamples)
	writeSampling(w, prof.ProfileSampling, prof.CPUs, prof.FrequencyHz)
	writeUnseenNetRX(w, prof)
	scope := netRXScope(prof)
	gt := Table{Header: []string{"group", "share on " + scope, "95% interval", "samples (" + scope + ")", "share of all"}}
	for _, g := range prof.Groups {
		gt.Add(g.Group, Percent(g.Share), Percent(g.ShareLow)+"–"+Percent(g.ShareHigh),
			fmt.Sprintf("%d of %d", g.NetRXSamples, prof.NetRXSamples), Percent(g.AllShare))
	}
	gt.Write(w)
}

// socketLabel names a socket a lock was attributed to: its address, or,
// when this namespace's /proc/net/udp does not list it, its port and
// namespace; then its inode and first process.
func socketLabel(s evidence.SocketRef) string {
	where := s.Local
	switch {
	case where != "" && s.Protocol != "udp":
		where = s.Protocol + " " + where
	case where == "" && s.OtherNetNS:
		where = fmt.Sprintf("%s port %d in netns %d", s.Protocol, s.Port, s.NetNS)
	case where == "":
		where = fmt.Sprintf("%s port %d", s.Protocol, s.Port)
	}
	label := fmt.Sprintf("%s (inode %d", where, s.Inode)
	if s.PID > 0 {
		label += fmt.Sprintf(", pid %d %s", s.PID, s.Comm)
	}
	if s.Workload != nil {
		label += ", " + s.Workload.Label()
	}
	return label + ")"
}

// workloadLabel names a row's workload in a column; "-" when unknown.
func workloadLabel(w *evidence.Workload) string {
	if w == nil {
		return "-"
	}
	return w.Label()
}

// lockSplit is a socket's wait by lock: "sk_receive_queue.lock 80%, ...".
func lockSplit(locks []evidence.SocketLockWait) string {
	var all uint64
	for _, l := range locks {
		all += l.TotalNs
	}
	var parts []string
	for _, l := range locks {
		share := 0.0
		if all > 0 {
			share = 100 * float64(l.TotalNs) / float64(all)
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", l.Field, share))
	}
	return strings.Join(parts, ", ")
}

// feeders prints a socket's wakeups by CPU, busiest first: "1 62%, 0 38%".
func feeders(s evidence.UDPSocket) string {
	shares := s.WakeupShares()
	if shares == nil {
		return "-"
	}
	cpus := make([]int, 0, len(shares))
	for cpu := range shares {
		cpus = append(cpus, cpu)
	}
	sort.Slice(cpus, func(i, j int) bool { return shares[cpus[i]] > shares[cpus[j]] })
	var parts []string
	for _, cpu := range cpus {
		if shares[cpu] < 0.01 || len(parts) == 4 {
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", cpu, Percent(shares[cpu])))
	}
	return strings.Join(parts, ", ")
}

// writeLockSites prints the top sites of a lock section and the sockets
// whose locks were contended.
func writeLockSites(w io.Writer, locks evidence.LockSection, top int) {
	if locks.Unavailable != "" {
		fmt.Fprintf(w, "unavailable: %s\n", locks.Unavailable)
	} else if len(locks.Sites) == 0 {
		fmt.Fprintln(w, "no contended locks")
	} else {
		lt := Table{Header: []string{"class", "site", "count", "total wait", "max", "socket"}}
		for i, s := range locks.Sites {
			if i == top {
				break
			}
			sock := "-"
			if s.Socket != nil {
				sock = socketLabel(*s.Socket)
			}
			lt.Add(s.Class, s.Site, fmt.Sprint(s.Count), Nanos(float64(s.TotalNs)), Nanos(float64(s.MaxNs)), sock)
		}
		lt.Write(w)
		if n := locks.StackEvery; n > 1 {
			fmt.Fprintf(w, "sites sampled 1/%d: each site's count and wait are its sampled stacks' scaled to all contentions of its lock kind (estimates); sockets below count every contention\n", n)
		}
		estimateNote(w, "lock contention (max: the longest seen)", locks.Estimate)
		const shownSockets = 5
		for i, sc := range locks.Sockets {
			if i == shownSockets {
				fmt.Fprintf(w, "… %d more sockets with lock wait (all in -o json)\n", len(locks.Sockets)-shownSockets)
				break
			}
			fmt.Fprintf(w, "socket %s: %s waits, %s total (%s)\n", socketLabel(sc.Socket), withError(fmt.Sprint(sc.Count), sc.RelError), Nanos(float64(sc.TotalNs)), lockSplit(sc.ByLock))
		}
	}
}

// sortedKeys are a map's int keys (CPUs, queues) in order.
func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// joinPIDs lists pids, the first 10 and how many more.
func joinPIDs(pids []int) string {
	var b strings.Builder
	for i, p := range pids {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(pids)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}
