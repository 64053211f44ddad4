package diagnose

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/base/shellquote"
	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/netconfig"
)

// Rules about where receive and transmit work runs: softirq spread, IRQ
// affinity, RSS, RPS, XPS and SMT.

func checkSoftirqConcentrated(in NetInput, t Thresholds) *Finding {
	e := in.Evidence
	busiest, top := maxNetRX(e)
	if top < t.Get(NetThresholds.NetRXSaturated) {
		return nil
	}
	var idle, busy []int
	for _, c := range netRXShares(e) {
		switch s := c.NetRXShare(); {
		case s < t.Get(NetThresholds.NetRXIdle):
			idle = append(idle, c.CPU)
		case s >= NetRXBusyShare:
			busy = append(busy, c.CPU)
		}
	}
	total := len(e.Softirq.CPUs)
	if len(idle) == 0 || len(idle) < total/4 {
		return nil
	}
	idleSet, busySet := cpuset.Of(idle...), cpuset.Of(busy...)
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("receive softirq runs on %d of %d CPUs while %d idle (CPU %d: %s in NET_RX)", len(busy), total, len(idle), busiest, pct(top)),
		Evidence: []string{
			fmt.Sprintf("CPU %d spends %s of its time in NET_RX softirq", busiest, pct(top)),
			fmt.Sprintf("CPUs %s do receive work (NET_RX ≥ %s); CPUs %s are idle for it (< %s)", busySet.List(), pct(NetRXBusyShare), idleSet.List(), pct(t.Get(NetThresholds.NetRXIdle))),
		},
		Impact: top * float64(len(idle)) / float64(total),
	}
	if top >= 0.8 {
		f.Severity = Crit
	}
	if in.Config != nil && len(in.Config.Topology.Nodes) > 1 {
		nodes := map[int]bool{}
		for _, c := range busy {
			nodes[in.Config.Topology.NodeOf(c)] = true
		}
		if len(nodes) == 1 {
			for n := range nodes {
				f.Title = fmt.Sprintf("receive softirq runs only on NUMA node %d (%d CPUs) while %d CPUs idle", n, len(busy), len(idle))
				f.Evidence = append(f.Evidence, fmt.Sprintf("every CPU doing receive work is on node %d; node CPUs: %s", n, in.Config.Topology.NodeCPUs(n).List()))
			}
		}
	}
	f.Recommendation = Recommendation{
		Kind: KindAdvice,
		Why:  "Each RX queue's softirq runs on the CPU its interrupt is delivered to; when interrupts, the RSS table or RPS cover only some CPUs, those saturate while the others wait, and the socket sees what the busiest CPU can push.",
		Expected: "Spreading NET_RX over every CPU is what made Makita's later steps possible; the spreading alone (affinity_hint + RPS, 270k → 17k tps) made things worse " +
			"until SO_REUSEPORT removed the socket lock contention it exposed (→ 2.54M tps).",
		Reference: Makita2016,
		Caveats:   []string{"Act on the specific findings that explain the concentration: net.irq-affinity-ignores-hint, net.rss-indirection-narrow, net.dead-rx-queues, net.rps-needed — and on net.socket-lock-contention first if it is reported."},
	}
	weighEstimate(f, "softirq", fmt.Sprintf("CPU %d's NET_RX share", busiest), top, NetRXSaturatedShare, e.Softirq.Estimate, nil)
	return f
}

// --- 2. IRQ affinity ignores the driver's hint -----------------------------

// irqAffinityChanges: each ignoring IRQ's smp_affinity set to its hint,
// after a ban of those IRQs in a running irqbalance's configuration.
var irqAffinityChanges = []ChangeShape{
	{Kind: ChangeSysfs, Target: "/proc/irq/<n>/smp_affinity", Old: CPUMask, New: CPUMask},
	{Kind: ChangeIrqbalanceBan, Target: alternatives(IrqbalanceConfigFiles), Old: Values(ValueUnbanned), New: Values(ValueBanned)},
}

func checkIRQAffinityHint(in NetInput) *Finding {
	if in.Config == nil {
		return nil
	}
	c := in.Config
	nr := nrCPUs(in)
	var ignored []netconfig.QueueIRQ
	withHint := 0
	for _, q := range c.IRQs {
		if q.Affinity == nil || !q.Affinity.HintKnown || q.Affinity.Hint.IsEmpty() {
			continue
		}
		withHint++
		if q.Affinity.HintIgnored() {
			ignored = append(ignored, q)
		}
	}
	if len(ignored) == 0 {
		return nil
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d of %d queue IRQs of %s ignore the driver's affinity_hint", len(ignored), withHint, c.Interface.Name),
		Impact:   0.3 * float64(len(ignored)) / float64(max(withHint, 1)),
	}
	allowed := cpuset.Set{}
	var changes []Change
	var irqs []int
	for i, q := range ignored {
		a := q.Affinity
		allowed = allowed.Union(a.SMPAffinity)
		if i < 6 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("IRQ %d (%s, queue %d): smp_affinity %s, affinity_hint %s", q.IRQ, q.Name, q.Queue, a.SMPAffinity.List(), a.Hint.List()))
		}
		changes = append(changes, IRQAffinityChange(q.IRQ, a.SMPAffinity, a.Hint, nr))
		irqs = append(irqs, q.IRQ)
	}
	if len(ignored) > 6 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("... and %d more", len(ignored)-6))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("the ignoring IRQs may only run on CPUs %s", allowed.List()))
	if len(c.Topology.Nodes) > 1 {
		nodes := map[int]bool{}
		for _, cpu := range allowed.CPUs() {
			nodes[c.Topology.NodeOf(cpu)] = true
		}
		if len(nodes) == 1 {
			f.Severity = Crit
			f.Evidence = append(f.Evidence, "all of them on one NUMA node: the other node's CPUs get no receive work")
		}
	}
	var irqbalanceCaveats []string
	if c.Irqbalance.Running {
		ver := c.Irqbalance.Version
		if ver == "" {
			ver = "(version unknown)"
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("irqbalance %s runs (pid %d, args %q, hint policy %q)", ver, c.Irqbalance.PID, strings.Join(c.Irqbalance.Args, " "), c.Irqbalance.HintPolicy))
		// irqbalance rewrites smp_affinity every 10 s. perfscope does not
		// stop or restart services: it bans the IRQs in the daemon's
		// configuration (first, so the revert restores it last) and says
		// to restart it.
		var ban []Change
		ban, irqbalanceCaveats = irqbalanceFix(c.Irqbalance, irqs)
		changes = append(ban, changes...)
	}
	f.Recommendation.AddChanges(changes...)
	if _, top := maxNetRX(in.Evidence); top < NetRXBusyShare {
		f.Severity = Info // a static misplacement with no receive load to hurt
		f.Evidence = append(f.Evidence, "no CPU did measurable NET_RX work during the run")
	}
	f.Recommendation.Kind = KindSetting
	f.Recommendation.Why = "The driver's affinity_hint spreads queue interrupts one per CPU across both NUMA nodes; irqbalance without a hint policy packs them onto a subset, so the other CPUs never run a queue's softirq."
	f.Recommendation.Expected = "Every queue's softirq moves to the CPU its driver meant; on Makita's server irqbalance had put all IRQs on node 0 (CPUs 0-4,10-14) and `-h exact` spread them over all 20 CPUs."
	f.Recommendation.Reference = Makita2016
	f.Recommendation.Caveats = append([]string{
		"Spreading softirq alone made Makita's server slower (270k → 17k tps) while one socket took all packets: fix net.socket-lock-contention first.",
	}, irqbalanceCaveats...)
	return f
}

// --- 3. RSS indirection narrower than the queues ---------------------------

func rxQueueCount(c *netconfig.NetConfig) int {
	if c.Channels != nil && c.Channels.RXQueues() > 0 {
		return c.Channels.RXQueues()
	}
	return len(c.Interface.RX)
}

// rssChanges: the interface's indirection table spread over all queues.
var rssChanges = []ChangeShape{{Kind: ChangeEthtoolRSS, Target: "<iface>", Old: KindForm, New: KindForm}}

func checkRSSIndirection(in NetInput) *Finding {
	c := in.Config
	if c == nil || c.RSS == nil || len(c.RSS.Indirection) == 0 {
		return nil
	}
	n := rxQueueCount(c)
	used := c.RSS.QueuesUsed()
	if n <= 1 || len(used) >= n {
		return nil
	}
	usedSet := cpuset.Of(used...) // a set of queue numbers, printed as a list
	var unused []int
	for q := 0; q < n; q++ {
		if !usedSet.Contains(q) {
			unused = append(unused, q)
		}
	}
	iface := c.Interface.Name
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("RSS indirection table of %s spreads packets over %d of its %d RX queues", iface, len(used), n),
		Evidence: []string{
			fmt.Sprintf("the %d-entry indirection table points at queues %s", len(c.RSS.Indirection), usedSet.List()),
			fmt.Sprintf("queues %s receive nothing from RSS", cpuset.Of(unused...).List()),
		},
		Impact: 0.5 * float64(len(unused)) / float64(n),
	}
	if _, top := maxNetRX(in.Evidence); top < NetRXBusyShare {
		f.Severity = Info
		f.Evidence = append(f.Evidence, "no CPU did measurable NET_RX work during the run")
	}
	for _, r := range in.Evidence.Queues.RX {
		if slices.Contains(unused, r.Queue) && len(f.Evidence) < 8 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("queue %d: %.0f packets/s", r.Queue, r.PerS))
		}
	}
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "The NIC hashes each flow to an entry of the indirection table and delivers it to the queue stored there; queues missing from the table stay idle however many exist.",
		Expected:  fmt.Sprintf("Traffic reaches all %d queues and their CPUs. Makita's 82599 refused `ethtool -X ens1f0 equal 20` (its table addresses 16 queues) and used RPS for queues' CPUs 16-19 instead.", n),
		Reference: Makita2016,
		Caveats: []string{
			"Some NICs' tables address fewer queues than the NIC has (ixgbe: 16); the write then fails with \"Invalid argument\" and net.rps-needed covers the remaining CPUs.",
		},
	}
	f.Recommendation.AddChanges(EthtoolRSSChange(iface, c.RSS.Indirection, EqualTable(len(c.RSS.Indirection), n)))
	return f
}

// --- 4. dead RX queues -----------------------------------------------------

func checkDeadRXQueues(in NetInput) *Finding {
	e := in.Evidence
	b := e.Queues.RXBalance
	if e.Queues.Unavailable != "" || len(b.Dead) == 0 || b.Total == 0 || b.Queues < 2 {
		return nil
	}
	// When the RSS table is known to exclude exactly these queues,
	// net.rss-indirection-narrow says it with the fix.
	if c := in.Config; c != nil && c.RSS != nil && len(c.RSS.Indirection) > 0 {
		used := cpuset.Of(c.RSS.QueuesUsed()...)
		explained := true
		for _, q := range b.Dead {
			if used.Contains(q) {
				explained = false
			}
		}
		if explained {
			return nil
		}
	}
	iface := ifaceName(in)
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d of %d RX queues of %s carried no traffic", len(b.Dead), b.Queues, iface),
		Evidence: []string{
			fmt.Sprintf("dead queues %s (%s counters); the others carried %d packets, %.0f per queue on average, busiest %d (skew %.2f)", cpuset.Of(b.Dead...).List(), b.Source, b.Total, b.Mean, b.Max, b.Skew),
		},
		Impact: 0.5 * float64(len(b.Dead)) / float64(b.Queues),
	}
	f.Recommendation = Recommendation{
		Kind: KindAdvice,
		Why:  "Queues the hash never selects leave their CPUs without receive work. For UDP many NICs hash only the IP addresses by default, so few clients land on few queues; ntuple filters can also pin flows.",
		Apply: []string{
			shellquote.Join("ethtool", "-n", iface, "rx-flow-hash", "udp4") + "   # which header fields are hashed; 'sdfn' adds the ports",
			shellquote.Join("ethtool", "-N", iface, "rx-flow-hash", "udp4", "sdfn"),
			shellquote.Join("ethtool", "-n", iface) + "   # ntuple rules steering flows to fixed queues",
		},
		Expected:  "Traffic on every queue; where the flows are too few to spread, RPS (net.rps-needed) spreads their protocol work in software.",
		Reference: Makita2016 + ": ethtool -S showed rx_queue_16..19_packets = 4, 3, 0, 8 against ~160M on queues 0-15.",
		Caveats:   []string{"Hashing on ports reorders nothing within a flow but spreads fragments of one datagram differently (fragments carry no ports)."},
	}
	switch b.Source {
	case "kernel":
		onEstimate(f, "queues", "the kernel's per-queue counts", e.Queues.Estimate)
	case "napi":
		onEstimate(f, "queue_cpu", "the NAPI work per queue", e.QueueCPU.Estimate)
	}
	return f
}

// --- 5. RPS needed -----------------------------------------------------------

// queueHomes finds the CPU that runs each active RX queue's softirq: the
// CPU with most NAPI work in the (queue × CPU) matrix, else the IRQ's
// effective affinity.
func queueHomes(in NetInput, queues []int) map[int]int {
	homes := map[int]int{}
	work := map[int]uint64{}
	for _, cell := range in.Evidence.QueueCPU.Cells {
		if cell.Queue < 0 {
			continue
		}
		if cell.Work > work[cell.Queue] {
			work[cell.Queue], homes[cell.Queue] = cell.Work, cell.CPU
		}
	}
	if in.Config != nil {
		for _, q := range in.Config.IRQs {
			if _, ok := homes[q.Queue]; ok || q.Affinity == nil || q.Queue < 0 {
				continue
			}
			set := q.Affinity.Effective
			if set.IsEmpty() {
				set = q.Affinity.SMPAffinity
			}
			if cpus := set.CPUs(); len(cpus) > 0 {
				homes[q.Queue] = cpus[0]
			}
		}
	}
	// Queues with no known home (veth, lo): the busiest NET_RX CPUs in
	// order.
	busy := netRXCPUs(in.Evidence).CPUs()
	i := 0
	for _, q := range queues {
		if _, ok := homes[q]; !ok && len(busy) > 0 {
			homes[q] = busy[i%len(busy)]
			i++
		}
	}
	return homes
}

// RPSMasks computes per-queue RPS CPU sets: each active queue keeps its
// home CPU and the other target CPUs are dealt round-robin to the queues
// whose home is on the same NUMA node (cross-node RPS pays remote memory
// on every packet). CPUs on a node without a queue home are returned in
// left.
func RPSMasks(queues []int, homes map[int]int, targets cpuset.Set, nodeOf func(int) int) (masks map[int]cpuset.Set, left cpuset.Set) {
	masks = map[int]cpuset.Set{}
	used := cpuset.Set{}
	for _, q := range queues {
		if h, ok := homes[q]; ok {
			masks[q] = cpuset.Of(h)
			used = used.Union(cpuset.Of(h))
		}
	}
	var leftCPUs []int
	for _, cpu := range targets.Difference(used).CPUs() {
		best := -1
		for _, q := range queues {
			h, ok := homes[q]
			if !ok || nodeOf(h) != nodeOf(cpu) {
				continue
			}
			if best < 0 || masks[q].Len() < masks[best].Len() {
				best = q
			}
		}
		if best < 0 {
			leftCPUs = append(leftCPUs, cpu)
			continue
		}
		masks[best] = masks[best].Union(cpuset.Of(cpu))
	}
	return masks, cpuset.Of(leftCPUs...)
}

// rpsChanges: an RPS mask per active RX queue of the interface.
var rpsChanges = []ChangeShape{{Kind: ChangeSysfs, Target: "/sys/class/net/<iface>/queues/rx-<n>/rps_cpus", Old: CPUMask, New: CPUMask}}

func checkRPSNeeded(in NetInput, t Thresholds) *Finding {
	c := in.Config
	e := in.Evidence
	if c == nil || len(c.Interface.RX) == 0 {
		return nil
	}
	_, top := maxNetRX(e)
	if top < t.Get(NetThresholds.NetRXSaturated) {
		return nil
	}
	// Active queues: those that carried traffic (all when unmeasured).
	dead := map[int]bool{}
	for _, q := range e.Queues.RXBalance.Dead {
		dead[q] = true
	}
	var queues []int
	for _, q := range c.Interface.RX {
		if !q.RPSKnown {
			return nil // no rps_cpus file: kernel without CONFIG_RPS
		}
		if !q.RPSCPUs.IsEmpty() {
			return nil // RPS already configured: not this rule's business
		}
		if !dead[q.Index] {
			queues = append(queues, q.Index)
		}
	}
	targets := c.Topology.Online
	if len(queues) == 0 || len(queues) >= targets.Len() || netRXCPUs(e).Len() >= targets.Len() {
		return nil
	}
	homes := queueHomes(in, queues)
	nodeOf := func(cpu int) int { return c.Topology.NodeOf(cpu) }
	masks, left := RPSMasks(queues, homes, targets, nodeOf)
	nr := nrCPUs(in)
	iface := c.Interface.Name
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d active RX queues feed %d of %d CPUs; RPS is off", len(queues), netRXCPUs(e).Len(), targets.Len()),
		Evidence: []string{
			fmt.Sprintf("busiest CPU spends %s in NET_RX; CPUs doing receive work: %s of online %s", pct(top), netRXCPUs(e).List(), targets.List()),
			fmt.Sprintf("rps_cpus is 0 on every queue of %s", iface),
		},
		Impact: top * float64(targets.Len()-netRXCPUs(e).Len()) / float64(targets.Len()),
	}
	r := &f.Recommendation
	for _, q := range queues {
		m, ok := masks[q]
		if !ok || m.Len() < 2 {
			continue
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("queue %d (softirq on CPU %d, node %d) → RPS CPUs %s", q, homes[q], nodeOf(homes[q]), m.List()))
		r.AddChanges(QueueMaskChange(iface, "rx", q, c.Interface.RX[indexOfRX(c, q)].RPSCPUs, m, nr))
	}
	if len(r.Changes) == 0 {
		return nil
	}
	if !left.IsEmpty() {
		f.Evidence = append(f.Evidence, fmt.Sprintf("CPUs %s are on a NUMA node without an active queue and are left out", left.List()))
	}
	r.Kind = KindSetting
	r.Why = "RPS is RSS in software: the queue's CPU hashes each packet and hands the protocol work (IP, UDP, socket enqueue) to another CPU of the queue's rps_cpus. With fewer queues than CPUs it is the only way to use the rest; masks stay NUMA-local."
	r.Expected = "NET_RX spreads over the listed CPUs. On Makita's server RPS for queues 6-9 brought CPUs 16-19 into play, but only paid off (17k → 2.54M tps) once SO_REUSEPORT removed the socket lock it exposed."
	r.Reference = Makita2016
	r.Caveats = []string{"Makita (LinuxCon Japan 2016): RPS without SO_REUSEPORT dropped 270k → 17k tps because more CPUs fought over one socket's lock. Apply it only with several sockets (see net.socket-lock-contention)."}
	if len(socketsOnPort(e, e.Port)) == 1 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("only one socket receives on port %d: spreading now will contend on its lock", e.Port))
		f.Severity = Info
	}
	weighEstimate(f, "softirq", "the busiest CPU's NET_RX share", top, NetRXSaturatedShare, e.Softirq.Estimate, nil)
	return f
}

func indexOfRX(c *netconfig.NetConfig, q int) int {
	for i, r := range c.Interface.RX {
		if r.Index == q {
			return i
		}
	}
	return 0
}

// --- 6. socket lock contention → SO_REUSEPORT -----------------------------

// XPSMasks deals CPUs to TX queues round-robin: CPU k (k-th of cpus)
// transmits on queue k mod nTX, so no two CPUs share a queue while there
// are as many queues as CPUs.
func XPSMasks(cpus cpuset.Set, nTX int) map[int]cpuset.Set {
	masks := map[int]cpuset.Set{}
	for i, c := range cpus.CPUs() {
		q := i % nTX
		masks[q] = masks[q].Union(cpuset.Of(c))
	}
	return masks
}

// xpsChanges: an XPS mask per TX queue of the interface.
var xpsChanges = []ChangeShape{{Kind: ChangeSysfs, Target: "/sys/class/net/<iface>/queues/tx-<n>/xps_cpus", Old: CPUMask, New: CPUMask}}

func checkXPSUnset(in NetInput, t Thresholds) *Finding {
	e := in.Evidence
	nTX := e.Interface.TXQueues
	if in.Config != nil && len(in.Config.Interface.TX) > 0 {
		nTX = len(in.Config.Interface.TX)
	}
	if e.TX.Unavailable != "" || nTX < 2 {
		return nil
	}
	// A CPU in no queue's xps_cpus picks its TX queue by flow hash.
	covered := cpuset.Set{}
	if in.Config != nil {
		for _, q := range in.Config.Interface.TX {
			covered = covered.Union(q.XPSCPUs)
		}
	} else {
		for _, text := range e.TX.XPS {
			if s, err := cpuset.ParseList(text); err == nil {
				covered = covered.Union(s)
			}
		}
		if e.TX.XPSSet && covered.IsEmpty() {
			return nil // set, but the masks were not reported
		}
	}
	uncovered := onlineCPUs(in).Difference(covered)
	if uncovered.IsEmpty() {
		return nil // the driver (ixgbe does) or the admin set XPS
	}
	// Which CPUs shared a TX queue.
	users := map[int][]int{}
	pkts := map[int]uint64{}
	for _, c := range e.TX.PerCPU {
		for q, n := range c.Queues {
			if n > 0 {
				users[q] = append(users[q], c.CPU)
				pkts[q] += n
			}
		}
	}
	var shared []int
	for q, cpus := range users {
		if len(cpus) > 1 {
			shared = append(shared, q)
		}
	}
	sort.Ints(shared)
	qdiscNs := e.Locks.ByClass["qdisc-root-lock"] + e.Locks.ByClass["tx-queue-xmit-lock"]
	share := lockShare(e, qdiscNs)
	if len(shared) == 0 && qdiscNs == 0 {
		return nil
	}
	iface := ifaceName(in)
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("XPS does not cover CPUs %s of %s: they share TX queues and their qdisc locks", uncovered.List(), iface),
		Impact:   math.Min(1, math.Max(share, 0.1)),
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("xps_cpus covers CPUs %q of %d TX queues; CPUs %s pick a queue by flow hash", covered.List(), nTX, uncovered.List()))
	for _, q := range shared {
		if len(f.Evidence) < 6 {
			cpus := users[q]
			sort.Ints(cpus)
			f.Evidence = append(f.Evidence, fmt.Sprintf("TX queue %d carried %d packets from CPUs %s", q, pkts[q], cpuset.Of(cpus...).List()))
		}
	}
	if qdiscNs > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("qdisc/TX queue lock wait %s over %.1fs (%s of the NET_RX CPUs' time)", ms(float64(qdiscNs)), seconds(e.DurationNs), pct(share)))
		if share >= t.Get(NetThresholds.SocketLockWarn) {
			f.Severity = Crit
		}
	}
	cpus := onlineCPUs(in)
	nr := nrCPUs(in)
	masks := XPSMasks(cpus, nTX)
	r := &f.Recommendation
	for q := 0; q < nTX; q++ {
		old := cpuset.Set{}
		if in.Config != nil && q < len(in.Config.Interface.TX) {
			old = in.Config.Interface.TX[q].XPSCPUs
		} else if text, ok := e.TX.XPS[q]; ok {
			old, _ = cpuset.ParseList(text)
		}
		m := masks[q]
		if m.IsEmpty() && old.IsEmpty() {
			continue
		}
		r.AddChanges(QueueMaskChange(iface, "tx", q, old, m, nr))
		if len(f.Evidence) < 10 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("tx-%d → CPUs %s", q, m.List()))
		}
	}
	r.Kind = KindSetting
	r.Why = "Without XPS the TX queue (and its qdisc, with its own lock) is chosen by flow hash, so replies from different CPUs meet on the same qdisc lock. XPS maps each CPU to its own queue."
	r.Expected = "Makita (LinuxCon Japan 2016): disabling XPS on ixgbe (which sets it by itself) cut 5.05M → 1.086M tps with heavy qdisc lock contention; setting xps_cpus one CPU per queue restores it."
	r.Reference = Makita2016
	if in.Evidence.Interface.Virtual {
		r.Caveats = append(r.Caveats, "On a virtual device the qdisc is usually noqueue; XPS then only spreads the TX queues the peer sees.")
	}
	if len(shared) > 0 {
		// That CPUs shared a queue is what the windows saw, whatever its
		// count.
		notesEstimate(f, "tx", "the TX packets per CPU and queue", e.TX.Estimate)
	}
	if qdiscNs > 0 {
		onEstimate(f, "locks", "the qdisc lock wait", e.Locks.Estimate)
	}
	return f
}

// --- 10. GRO on a UDP-only receive path ------------------------------------

// smtChanges: SMT control from off to on (never from forceoff, which
// only a reboot undoes, and never back to it).
var smtChanges = []ChangeShape{{Kind: ChangeSysfs, Target: smtControl, Old: Values("off"), New: Values("on")}}

func checkSMTOff(in NetInput, t Thresholds) *Finding {
	c := in.Config
	if c == nil || !c.Topology.SMT.Available() || c.Topology.SMT.Active || c.Topology.SMT.Control != "off" {
		return nil
	}
	_, top := maxNetRX(in.Evidence)
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("SMT (hyper-threading) is available but off: %d CPUs online", c.Topology.Online.Len()),
		Evidence: []string{fmt.Sprintf("/sys/devices/system/cpu/smt/control = off, active = 0; busiest CPU spends %s in NET_RX", pct(top))},
		Impact:   0.17 * math.Min(1, top/t.Get(NetThresholds.NetRXSaturated)) * 0.5,
	}
	if top >= t.Get(NetThresholds.NetRXSaturated) {
		f.Severity = Warn
	}
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "Sibling threads add execution contexts for softirq and receiving threads; a packet-per-syscall workload stalls on memory often enough for siblings to use the gaps.",
		Expected:  "Makita (LinuxCon Japan 2016): 6.01M → 7.01M tps (+17%) with hyper-threading on and RPS spread over all 40 logical CPUs.",
		Reference: Makita2016,
		Caveats: []string{
			"SMT may be off on purpose: L1TF/MDS-class side channels let sibling threads leak data between tenants.",
			"The new sibling CPUs get no receive work until RPS/IRQ masks include them: run perfscope again after enabling.",
		},
	}
	f.Recommendation.AddChanges(SMTControlChange("off", "on"))
	return f
}

// --- 16. UDP receive buffer errors -----------------------------------------
