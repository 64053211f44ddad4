package diagnose

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/evidence"
)

// NetInput is what the network rules judge: one `perfscope udp` run's
// measurements and, when it could be read, the configuration of the
// interface and host. Rules that need configuration stay silent when
// Config is nil rather than guess the values they would have to restore.
type NetInput struct {
	Evidence evidence.NetEvidence
	Config   *netconfig.NetConfig
}

// Thresholds of the network rules (documented in docs/readme/netrules.md).
const (
	// NetRXBusyShare: a CPU spending this much of its time in NET_RX does
	// receive work; NetRXIdleShare: below this it is idle for the receive
	// path; NetRXSaturatedShare: the receive path is the bottleneck.
	NetRXBusyShare      = 0.05
	NetRXIdleShare      = 0.01
	NetRXSaturatedShare = 0.30
	// SocketLockShareWarn is lock wait on a socket as a share of the NET_RX
	// CPUs' time; Crit marks Makita's collapse.
	SocketLockShareWarn = 0.02
	SocketLockShareCrit = 0.10
	// SocketLockShareSaturated is enough lock wait for a warning when the
	// socket also drops at least SocketDropShare of its arrivals: it is
	// then the bottleneck, and on a machine with few CPUs the measured
	// wait understates what one socket costs (cache-line bouncing and
	// reader wakeups do not show as lock wait; on the 2-CPU lab 0.4–1.2 %
	// of wait came with 72 % more datagrams received once split).
	SocketLockShareSaturated = 0.002
	SocketDropShare          = 0.01
	// ReuseportRemainingShare: lock wait left in a reuseport group worth
	// CPU steering; ReuseportSkew: busiest socket over the mean.
	ReuseportRemainingShare = 0.005
	ReuseportSkew           = 1.5
	// ReuseportCrossFeed: a socket of a reuseport group counts as fed by a
	// CPU that queued at least this share of its wakeups; a socket fed by
	// two or more NET_RX CPUs is what steering by CPU removes.
	ReuseportCrossFeed = 0.2
	// FunctionShareMin: a Makita function group worth removing, as a
	// share of the NET_RX CPUs' samples; FunctionShareWarn raises severity.
	FunctionShareMin  = 0.01
	FunctionShareWarn = 0.03
	// FunctionShareWaste is enough for hooks that do nothing (netfilter
	// tables without a rule): any cost the profile resolves, with at
	// least FunctionSamplesMin samples, is waste. An empty input chain on
	// the 2-CPU lab costs 0.4 %.
	FunctionShareWaste = 0.0025
	FunctionSamplesMin = 5
	// UDPOnlyShare: UDP datagrams over received packets above which the
	// receive path is UDP-only (GRO only helps TCP and tunnels).
	UDPOnlyShare = 0.90
	// RcvbufDropShare: receive-buffer drops over arrivals worth acting on.
	RcvbufDropShare = 0.001
	// RcvbufStallSeconds is the receiver stall a buffer must absorb, and
	// RcvbufTruesize the memory one small datagram is charged (skb
	// truesize: ~2 KiB for a small datagram on most drivers).
	RcvbufStallSeconds = 0.010
	RcvbufTruesize     = 2048
	RcvbufMaxBytes     = 256 << 20
	// PinningMaxThreads bounds the threads pinned one per CPU: beyond this
	// the process is not a one-thread-per-socket receiver.
	PinningMaxThreads = 64
)

// Makita2016 is the reference measurement every network finding cites.
const Makita2016 = "Toshiaki Makita (NTT), \"Boost UDP Transaction Performance\", LinuxCon Japan 2016 (100-byte UDP echo, 20-core Xeon E5-2650 v3, Intel 82599ES)"

// NetRules are the rules of `perfscope udp`: the ten steps of Makita's talk.
var NetRules = []Rule[NetInput]{
	{ID: "net.softirq-concentrated", Check: checkSoftirqConcentrated},
	{ID: "net.irq-affinity-ignores-hint", Check: checkIRQAffinityHint},
	{ID: "net.rss-indirection-narrow", Check: checkRSSIndirection},
	{ID: "net.dead-rx-queues", Check: checkDeadRXQueues},
	{ID: "net.rps-needed", Check: checkRPSNeeded},
	{ID: "net.socket-lock-contention", Check: checkSocketLockContention},
	{ID: "net.reuseport-steering", Check: checkReuseportSteering},
	{ID: "net.thread-pinning", Check: checkThreadPinning},
	{ID: "net.xps-unset", Check: checkXPSUnset},
	{ID: "net.gro-udp", Check: checkGROUDP},
	{ID: "net.netfilter-unused", Check: checkNetfilterUnused},
	{ID: "net.rp-filter", Check: checkRPFilter},
	{ID: "net.audit", Check: checkAudit},
	{ID: "net.ip-ident", Check: checkIPIdent},
	{ID: "net.smt-off", Check: checkSMTOff},
	{ID: "net.udp-rcvbuf", Check: checkUDPRcvbuf},
}

// DiagnoseNet runs NetRules.
func DiagnoseNet(in NetInput) []Finding { return Run(NetRules, in) }

// --- shared readings -------------------------------------------------------

func pct(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// netRXShares is each measured CPU's NET_RX share, sorted by CPU.
func netRXShares(e evidence.NetEvidence) []evidence.SoftirqCPU {
	cpus := slices.Clone(e.Softirq.CPUs)
	sort.Slice(cpus, func(i, j int) bool { return cpus[i].CPU < cpus[j].CPU })
	return cpus
}

// netRXCPUs are the CPUs doing receive work: NET_RX above NetRXBusyShare,
// else the profile's list.
func netRXCPUs(e evidence.NetEvidence) cpuset.Set {
	var cpus []int
	for _, c := range e.Softirq.CPUs {
		if c.NetRXShare() >= NetRXBusyShare {
			cpus = append(cpus, c.CPU)
		}
	}
	if len(cpus) == 0 {
		cpus = e.Profile.NetRXCPUs
	}
	return cpuset.Of(cpus...)
}

func maxNetRX(e evidence.NetEvidence) (cpu int, share float64) {
	cpu = -1
	for _, c := range e.Softirq.CPUs {
		if s := c.NetRXShare(); s > share {
			cpu, share = c.CPU, s
		}
	}
	return cpu, share
}

// onlineCPUs: the configuration's online set, else the CPUs the softirq
// probe measured.
func onlineCPUs(in NetInput) cpuset.Set {
	if in.Config != nil && !in.Config.Topology.Online.IsEmpty() {
		return in.Config.Topology.Online
	}
	var cpus []int
	for _, c := range in.Evidence.Softirq.CPUs {
		cpus = append(cpus, c.CPU)
	}
	return cpuset.Of(cpus...)
}

// nrCPUs is the cpumask width to print (0: narrowest, which the kernel
// accepts too).
func nrCPUs(in NetInput) int {
	if in.Config != nil {
		return in.Config.Topology.NrCPUIDs()
	}
	return 0
}

func ifaceName(in NetInput) string {
	if in.Evidence.Interface.Name != "" {
		return in.Evidence.Interface.Name
	}
	if in.Config != nil {
		return in.Config.Interface.Name
	}
	return "IFACE"
}

// maskOrZero prints a cpumask for /sys or /proc; the empty set is "0"
// (RPS/XPS off), which the kernel accepts.
func maskOrZero(s cpuset.Set, nr int) string {
	if s.IsEmpty() {
		return "0"
	}
	return s.Mask(nr)
}

// groupShare is the share of the NET_RX CPUs' samples in a Makita
// function group (the all-CPU share when no NET_RX CPU was sampled).
func groupShare(e evidence.NetEvidence, name string) (evidence.FunctionShare, float64, bool) {
	if e.Profile.Unavailable != "" || e.Profile.Samples == 0 {
		return evidence.FunctionShare{}, 0, false
	}
	g, ok := e.Profile.Group(name)
	if !ok {
		return g, 0, false
	}
	share := g.Share
	if share == 0 {
		share = g.AllShare
	}
	return g, share, true
}

// socketLockNs is the wait on socket receive-queue and wakeup locks.
func socketLockNs(e evidence.NetEvidence) uint64 {
	return e.Locks.ByClass["socket-receive-queue"] + e.Locks.ByClass["socket-wakeup"]
}

// lockShare is lock wait as a share of the NET_RX CPUs' time: the fraction
// of receive capacity lost waiting.
func lockShare(e evidence.NetEvidence, ns uint64) float64 {
	if e.DurationNs <= 0 {
		return 0
	}
	n := max(netRXCPUs(e).Len(), 1)
	return math.Min(1, float64(ns)/(float64(e.DurationNs)*float64(n)))
}

func socketsOnPort(e evidence.NetEvidence, port int) []evidence.UDPSocket {
	var out []evidence.UDPSocket
	for _, s := range e.Sockets.Sockets {
		if s.Port == port {
			out = append(out, s)
		}
	}
	return out
}

func reuseportGroup(e evidence.NetEvidence, port int) (evidence.ReusePortGroup, bool) {
	for _, g := range e.Sockets.Groups {
		if g.Port == port && g.Size > 1 {
			return g, true
		}
	}
	return evidence.ReusePortGroup{}, false
}

// contendedSocket is the socket with the most attributed lock wait.
func contendedSocket(e evidence.NetEvidence) (evidence.SocketContention, bool) {
	var best evidence.SocketContention
	for _, s := range e.Locks.Sockets {
		if s.TotalNs > best.TotalNs {
			best = s
		}
	}
	return best, best.TotalNs > 0
}

func dropsOnPort(e evidence.NetEvidence, port int) (n uint64, reasons []string) {
	byReason := map[string]uint64{}
	// One drop can be seen by several tracepoints ("udp_fail_queue_rcv_skb:
	// ENOMEM" and "kfree_skb:SOCKET_RCVBUFF" for the same datagram): sum
	// within a source, take the largest source.
	bySource := map[string]uint64{}
	for _, d := range e.Drops.ByPort {
		if d.Port == port {
			source, _, _ := strings.Cut(d.Reason, ":")
			bySource[source] += d.Count
			byReason[d.Reason] += d.Count
		}
	}
	for _, c := range bySource {
		n = max(n, c)
	}
	for r, c := range byReason {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, c))
	}
	sort.Strings(reasons)
	return n, reasons
}

// functionGroupFinding starts a finding about CPU in one of Makita's
// removable function groups: info, warn from FunctionShareWarn, ranked by
// the share.
func functionGroupFinding(g evidence.FunctionShare, share float64, title string) *Finding {
	f := &Finding{
		Severity: Info,
		Title:    title,
		Evidence: []string{fmt.Sprintf("%d profile samples (%s of the NET_RX CPUs) in %s", g.Samples, pct(share), strings.Join(g.Functions, ", "))},
		Impact:   share,
	}
	if share >= FunctionShareWarn {
		f.Severity = Warn
	}
	return f
}

func boolPtr(b *bool) bool { return b != nil && *b }

// --- 1. softirq concentrated ----------------------------------------------

func checkSoftirqConcentrated(in NetInput) *Finding {
	e := in.Evidence
	busiest, top := maxNetRX(e)
	if top < NetRXSaturatedShare {
		return nil
	}
	var idle, busy []int
	for _, c := range netRXShares(e) {
		switch s := c.NetRXShare(); {
		case s < NetRXIdleShare:
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
			fmt.Sprintf("CPUs %s do receive work (NET_RX ≥ %s); CPUs %s are idle for it (< %s)", busySet.List(), pct(NetRXBusyShare), idleSet.List(), pct(NetRXIdleShare)),
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
	return f
}

// --- 2. IRQ affinity ignores the driver's hint -----------------------------

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
	for i, q := range ignored {
		a := q.Affinity
		allowed = allowed.Union(a.SMPAffinity)
		if i < 6 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("IRQ %d (%s, queue %d): smp_affinity %s, affinity_hint %s", q.IRQ, q.Name, q.Queue, a.SMPAffinity.List(), a.Hint.List()))
		}
		f.Recommendation.Apply = append(f.Recommendation.Apply, fmt.Sprintf("echo %s > /proc/irq/%d/smp_affinity", a.Hint.Mask(nr), q.IRQ))
		f.Recommendation.Revert = append(f.Recommendation.Revert, fmt.Sprintf("echo %s > /proc/irq/%d/smp_affinity", maskOrZero(a.SMPAffinity, nr), q.IRQ))
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
	if c.Irqbalance.Running {
		f.Evidence = append(f.Evidence, fmt.Sprintf("irqbalance runs (pid %d, args %q, hint policy %q)", c.Irqbalance.PID, strings.Join(c.Irqbalance.Args, " "), c.Irqbalance.HintPolicy))
		// irqbalance rewrites smp_affinity every 10 s: stop it first and
		// restart it last when reverting.
		f.Recommendation.Apply = append([]string{"systemctl stop irqbalance"}, f.Recommendation.Apply...)
		f.Recommendation.Revert = append(f.Recommendation.Revert, "systemctl start irqbalance")
	}
	if _, top := maxNetRX(in.Evidence); top < NetRXBusyShare {
		f.Severity = Info // a static misplacement with no receive load to hurt
		f.Evidence = append(f.Evidence, "no CPU did measurable NET_RX work during the run")
	}
	f.Recommendation.Kind = KindSetting
	f.Recommendation.Why = "The driver's affinity_hint spreads queue interrupts one per CPU across both NUMA nodes; irqbalance without a hint policy packs them onto a subset, so the other CPUs never run a queue's softirq."
	f.Recommendation.Expected = "Every queue's softirq moves to the CPU its driver meant; on Makita's server irqbalance had put all IRQs on node 0 (CPUs 0-4,10-14) and `-h exact` spread them over all 20 CPUs."
	f.Recommendation.Reference = Makita2016
	f.Recommendation.Caveats = []string{
		"A running irqbalance moves IRQs back; the apply stops it. To keep it running instead, start it with `--hintpolicy=exact` (irqbalance < 1.8: `-h exact`) or ban these IRQs (IRQBALANCE_BANNED_IRQS).",
		"Spreading softirq alone made Makita's server slower (270k → 17k tps) while one socket took all packets: fix net.socket-lock-contention first.",
	}
	return f
}

// --- 3. RSS indirection narrower than the queues ---------------------------

func rxQueueCount(c *netconfig.NetConfig) int {
	if c.Channels != nil && c.Channels.RXQueues() > 0 {
		return c.Channels.RXQueues()
	}
	return len(c.Interface.RX)
}

// indirectionRevert restores a table: "equal k" when it is the default
// round-robin pattern, else the per-queue weights (same spread, which is
// what RSS hashing sees; entry order can differ).
func indirectionRevert(iface string, table []uint32) string {
	used := 0
	for _, q := range table {
		used = max(used, int(q)+1)
	}
	equal := used > 0
	for i, q := range table {
		if int(q) != i%used {
			equal = false
			break
		}
	}
	if equal {
		return fmt.Sprintf("ethtool -X %s equal %d", iface, used)
	}
	weights := make([]string, used)
	counts := make([]int, used)
	for _, q := range table {
		counts[q]++
	}
	for i, n := range counts {
		weights[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("ethtool -X %s weight %s", iface, strings.Join(weights, " "))
}

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
		Apply:     []string{fmt.Sprintf("ethtool -X %s equal %d", iface, n)},
		Revert:    []string{indirectionRevert(iface, c.RSS.Indirection)},
		Expected:  fmt.Sprintf("Traffic reaches all %d queues and their CPUs. Makita's 82599 refused `ethtool -X ens1f0 equal 20` (its table addresses 16 queues) and used RPS for queues' CPUs 16-19 instead.", n),
		Reference: Makita2016,
		Caveats: []string{
			"Some NICs' tables address fewer queues than the NIC has (ixgbe: 16); ethtool then fails with \"Invalid argument\" and net.rps-needed covers the remaining CPUs.",
		},
	}
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
			fmt.Sprintf("ethtool -n %s rx-flow-hash udp4   # which header fields are hashed; 'sdfn' adds the ports", iface),
			fmt.Sprintf("ethtool -N %s rx-flow-hash udp4 sdfn", iface),
			fmt.Sprintf("ethtool -n %s   # ntuple rules steering flows to fixed queues", iface),
		},
		Expected:  "Traffic on every queue; where the flows are too few to spread, RPS (net.rps-needed) spreads their protocol work in software.",
		Reference: Makita2016 + ": ethtool -S showed rx_queue_16..19_packets = 4, 3, 0, 8 against ~160M on queues 0-15.",
		Caveats:   []string{"Hashing on ports reorders nothing within a flow but spreads fragments of one datagram differently (fragments carry no ports)."},
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

func checkRPSNeeded(in NetInput) *Finding {
	c := in.Config
	e := in.Evidence
	if c == nil || len(c.Interface.RX) == 0 {
		return nil
	}
	_, top := maxNetRX(e)
	if top < NetRXSaturatedShare {
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
		path := fmt.Sprintf("/sys/class/net/%s/queues/rx-%d/rps_cpus", iface, q)
		r.Apply = append(r.Apply, fmt.Sprintf("echo %s > %s", m.Mask(nr), path))
		r.Revert = append(r.Revert, fmt.Sprintf("echo %s > %s", maskOrZero(c.Interface.RX[indexOfRX(c, q)].RPSCPUs, nr), path))
	}
	if len(r.Apply) == 0 {
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

const reuseportC = `int on = 1;
for (int i = 0; i < nthreads; i++) {        /* one socket per receiving thread */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));  /* before bind */
    bind(fd, (struct sockaddr *)&addr, sizeof(addr));           /* same addr:port */
    start_receiver_thread(fd);
}`

const reuseportGo = `lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	return errors.Join(err, serr)
}}
for i := 0; i < runtime.NumCPU(); i++ { // one socket and goroutine each
	pc, _ := lc.ListenPacket(ctx, "udp", ":9000")
	go serve(pc)
}`

func checkSocketLockContention(in NetInput) *Finding {
	e := in.Evidence
	if e.Locks.Unavailable != "" {
		return nil
	}
	ns := socketLockNs(e)
	share := lockShare(e, ns)
	port, label := e.Port, fmt.Sprintf("port %d", e.Port)
	sc, attributed := contendedSocket(e)
	if attributed {
		port = sc.Socket.Port
		where := sc.Socket.Local
		if where == "" { // not in perfscope's network namespace
			where = fmt.Sprintf("port %d in netns %d", sc.Socket.Port, sc.Socket.NetNS)
		}
		label = fmt.Sprintf("socket %s (inode %d", where, sc.Socket.Inode)
		if sc.Socket.PID > 0 {
			label += fmt.Sprintf(", pid %d %s", sc.Socket.PID, sc.Socket.Comm)
		}
		label += ")"
	}
	if _, ok := reuseportGroup(e, port); ok {
		return nil // already split: net.reuseport-steering judges what remains
	}
	drops, reasons := dropsOnPort(e, port)
	delivered, _ := e.Drops.InDatagrams()
	saturated := drops > 0 && float64(drops) >= SocketDropShare*float64(drops+delivered)
	rx := netRXCPUs(e)
	// Several NET_RX CPUs queueing into the one socket of the port.
	var feeders []int
	var fedSocket evidence.UDPSocket
	if socks := socketsOnPort(e, port); len(socks) == 1 {
		fedSocket = socks[0]
		cpus := fedSocket.FeedingCPUs(ReuseportCrossFeed)
		for _, c := range cpus {
			if rx.Contains(c) {
				feeders = append(feeders, c)
			}
		}
	}
	crossFed := len(feeders) >= 2
	switch {
	case share >= SocketLockShareWarn:
	case saturated && (share >= SocketLockShareSaturated || crossFed):
	default:
		return nil
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d CPUs contend on one UDP socket's lock: %s of their time lost waiting", max(rx.Len(), 1), pct(share)),
		Evidence: []string{
			fmt.Sprintf("socket receive-queue and wakeup locks: %s of wait over %.1fs on %d NET_RX CPUs (%s)", ms(float64(ns)), seconds(e.DurationNs), max(rx.Len(), 1), rx.List()),
		},
		Impact: share,
	}
	if attributed {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %d contended acquisitions, %s waiting, longest %s", label, sc.Count, ms(float64(sc.TotalNs)), ms(float64(sc.MaxNs))))
	}
	for _, s := range e.Locks.Sites {
		if (s.Class == "socket-receive-queue" || s.Class == "socket-wakeup") && len(f.Evidence) < 5 {
			est := ""
			if n := e.Locks.StackEvery; n > 1 {
				// Sites are sampled stacks scaled to every contention.
				est = fmt.Sprintf(" (estimated from 1 in %d stacks)", n)
			}
			f.Evidence = append(f.Evidence, fmt.Sprintf("site %s (%s): %d waits, %s%s", s.Site, s.Class, s.Count, ms(float64(s.TotalNs)), est))
		}
	}
	if drops > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d drops on port %d over the window (%s)", drops, port, strings.Join(reasons, ", ")))
	}
	if crossFed {
		f.Evidence = append(f.Evidence, fmt.Sprintf("softirqs on CPUs %s all queue into it (%s of its wakeups)", cpuset.Of(feeders...).List(), feedShares(fedSocket, feeders)))
	}
	if share < SocketLockShareWarn {
		// Below the plain threshold only because the socket is saturated.
		f.Title = fmt.Sprintf("one UDP socket is the bottleneck: it drops %s of its datagrams while %d CPUs feed it", pct(float64(drops)/float64(drops+delivered)), max(rx.Len(), len(feeders), 1))
		f.Impact = math.Max(share, float64(drops)/float64(drops+delivered))
	}
	if socks := socketsOnPort(e, port); len(socks) == 1 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("port %d has one socket and no SO_REUSEPORT group", port))
	}
	if share >= SocketLockShareCrit {
		f.Severity = Crit
	}
	f.Recommendation = Recommendation{
		Kind: KindCode,
		Why: "Every CPU running NET_RX enqueues into the same socket, so they serialise on its receive-queue spinlock (queued_spin_lock_slowpath under __udp_enqueue_schedule_skb) and on the wakeup. " +
			"SO_REUSEPORT lets several sockets bind the same port; the kernel picks one per packet by flow hash, so each socket's lock sees a fraction of the CPUs.",
		Code:      []CodeSketch{{Lang: "c", Code: reuseportC}, {Lang: "go", Code: reuseportGo}},
		Expected:  "Makita (LinuxCon Japan 2016): 17k → 2.54M tps (×150) with one SO_REUSEPORT socket per thread; the flame graph's queued_spin_lock_slowpath shrank to a sliver.",
		Reference: Makita2016,
		Caveats:   []string{"The default flow hash can still put two CPUs' packets on one socket; net.reuseport-steering then steers by CPU (SO_ATTACH_REUSEPORT_CBPF)."},
	}
	return f
}

// --- 7. reuseport group with contention or imbalance left -------------------

const steeringC = `/* Socket i of the group serves packets whose softirq ran on CPU i
   (kernel tools/testing/selftests/net/reuseport_bpf_cpu.c). Create the
   sockets in CPU order, then attach to any one of them: */
struct sock_filter code[] = {
    { BPF_LD  | BPF_W | BPF_ABS, 0, 0, SKF_AD_OFF + SKF_AD_CPU }, /* A = cpu      */
    { BPF_ALU | BPF_MOD | BPF_K, 0, 0, NSOCKS },                  /* A %= nsocks */
    { BPF_RET | BPF_A, 0, 0, 0 },                                 /* socket A    */
};
struct sock_fprog prog = { .len = 3, .filter = code };
setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog));`

const steeringGo = `// golang.org/x/net/bpf; sockets created in CPU order, one per CPU.
insns, _ := bpf.Assemble([]bpf.Instruction{
	bpf.LoadExtension{Num: bpf.ExtCPUID},
	bpf.ALUOpConstant{Op: bpf.ALUOpMod, Val: uint32(nsocks)},
	bpf.RetA{},
})
filter := make([]unix.SockFilter, len(insns))
for i, in := range insns {
	filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
}
prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
raw.Control(func(fd uintptr) {
	err = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog)
})`

func checkReuseportSteering(in NetInput) *Finding {
	e := in.Evidence
	port := e.Port
	if sc, ok := contendedSocket(e); ok {
		port = sc.Socket.Port
	}
	g, ok := reuseportGroup(e, port)
	if !ok {
		// Any group will do when --port was not given.
		for _, gg := range e.Sockets.Groups {
			if gg.Size > 1 {
				g, ok, port = gg, true, gg.Port
				break
			}
		}
		if !ok {
			return nil
		}
	}
	share := 0.0
	if e.Locks.Unavailable == "" {
		share = lockShare(e, socketLockNs(e))
	}
	// Imbalance: packets per socket of the group.
	var counts []float64
	for _, s := range socketsOnPort(e, port) {
		if s.ReceivedPkt != nil {
			counts = append(counts, float64(*s.ReceivedPkt))
		}
	}
	skew, mean, top := 0.0, 0.0, 0.0
	if len(counts) > 1 {
		for _, c := range counts {
			mean += c
			top = math.Max(top, c)
		}
		mean /= float64(len(counts))
		if mean > 0 {
			skew = top / mean
		}
	}
	// Cross-fed sockets: several NET_RX CPUs queue into the same socket.
	rx := netRXCPUs(e)
	var crossFed []string
	for _, s := range socketsOnPort(e, port) {
		cpus := s.FeedingCPUs(ReuseportCrossFeed)
		n := 0
		for _, c := range cpus {
			if rx.Contains(c) {
				n++
			}
		}
		if n >= 2 {
			crossFed = append(crossFed, fmt.Sprintf("socket inode %d was fed by CPUs %s (%s of its wakeups)", s.Inode, cpuset.Of(cpus...).List(), feedShares(s, cpus)))
		}
	}
	if share < ReuseportRemainingShare && skew < ReuseportSkew && len(crossFed) == 0 {
		return nil
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("SO_REUSEPORT group of %d sockets on port %d still contends or is unbalanced: steer by CPU", g.Size, port),
		Impact:   math.Min(1, share+0.2*math.Max(0, skew-1)),
	}
	if share >= ReuseportRemainingShare {
		f.Evidence = append(f.Evidence, fmt.Sprintf("socket lock wait %s over %.1fs = %s of the NET_RX CPUs' time, with %d sockets", ms(float64(socketLockNs(e))), seconds(e.DurationNs), pct(share), g.Size))
	}
	if skew >= ReuseportSkew {
		f.Evidence = append(f.Evidence, fmt.Sprintf("busiest socket received %.0f packets, %.2f× the group mean of %.0f", top, skew, mean))
	}
	if len(crossFed) > 0 {
		f.Evidence = append(f.Evidence, crossFed...)
		// Every cross-fed socket bounces its queue between CPUs' caches.
		f.Impact = math.Min(1, f.Impact+0.1*float64(len(crossFed))/float64(g.Size))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("%d CPUs run NET_RX (%s); the flow hash can send two CPUs' packets to one socket", rx.Len(), rx.List()))
	f.Recommendation = Recommendation{
		Kind: KindCode,
		Why: "SO_REUSEPORT picks the socket by flow hash, independent of the CPU that runs the softirq, so two CPUs still meet on one socket's lock while another socket idles. " +
			"A reuseport BPF program returning the current CPU's index gives every CPU its own socket: no cross-CPU lock, and the receiving thread can sit on that CPU.",
		Code:      []CodeSketch{{Lang: "c", Code: steeringC}, {Lang: "go", Code: steeringGo}},
		Expected:  "Makita (LinuxCon Japan 2016): 2.54M → 4.25M tps (+67%) with SO_ATTACH_REUSEPORT_CBPF; softirqs stopped contending.",
		Reference: Makita2016,
		Caveats:   []string{"Needs one socket per CPU that runs NET_RX, created in CPU order, and packets spread over those CPUs (RSS/RPS); SO_ATTACH_REUSEPORT_EBPF does the same with an eBPF program."},
	}
	return f
}

// feedShares prints the wakeup shares of cpus for a socket: "55%, 45%".
func feedShares(s evidence.UDPSocket, cpus []int) string {
	shares := s.WakeupShares()
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = pct(shares[c])
	}
	return strings.Join(parts, ", ")
}

// --- 8. thread pinning -----------------------------------------------------

func checkThreadPinning(in NetInput) *Finding {
	e := in.Evidence
	threads := slices.Clone(e.Sockets.Threads)
	targets := netRXCPUs(e).CPUs()
	if len(threads) == 0 || len(targets) == 0 || len(threads) > PinningMaxThreads || len(threads) > 2*len(targets) {
		return nil
	}
	sort.Slice(threads, func(i, j int) bool { return threads[i].TID < threads[j].TID })
	targetSet := cpuset.Of(targets...)
	type move struct {
		t       evidence.ThreadCPU
		cpu     int
		allowed cpuset.Set
	}
	var moves []move
	off := 0
	for i, t := range threads {
		allowed, err := cpuset.ParseList(t.AllowedCPUs)
		if err != nil || allowed.Len() == 1 {
			continue // already pinned (or unreadable): the owner chose
		}
		cpu := targets[i%len(targets)]
		if !targetSet.Contains(t.LastCPU) {
			off++
		}
		moves = append(moves, move{t: t, cpu: cpu, allowed: allowed})
	}
	if off == 0 || len(moves) == 0 {
		return nil
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d of %d receiving threads ran off the CPUs that run NET_RX; pin one per CPU", off, len(threads)),
		Evidence: []string{fmt.Sprintf("NET_RX runs on CPUs %s", targetSet.List())},
		Impact:   0.15 * float64(off) / float64(len(threads)),
	}
	r := &f.Recommendation
	var pairs []string
	for _, m := range moves {
		if len(f.Evidence) < 9 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("thread %d (%s) last ran on CPU %d, allowed %s", m.t.TID, m.t.Comm, m.t.LastCPU, m.allowed.List()))
		}
		pairs = append(pairs, fmt.Sprintf("%d→%d", m.t.TID, m.cpu))
		r.Apply = append(r.Apply, fmt.Sprintf("taskset -p -c %d %d", m.cpu, m.t.TID))
		r.Revert = append(r.Revert, fmt.Sprintf("taskset -p -c %s %d", m.allowed.List(), m.t.TID))
	}
	f.Evidence = append(f.Evidence, "pinning (thread→CPU): "+strings.Join(pairs, " "))
	r.Kind = KindSetting
	r.Why = "A thread that reads on another CPU than the one that enqueued its packets pulls every skb and the socket's cache lines across CPUs and wakes remotely; one receiving thread per NET_RX CPU, on that CPU, keeps the path cache-local."
	r.Code = []CodeSketch{{Lang: "c", Code: "cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);   /* the CPU of this thread's socket */\npthread_setaffinity_np(pthread_self(), sizeof(set), &set);"},
		{Lang: "go", Code: "runtime.LockOSThread() // this goroutine owns its OS thread\nvar set unix.CPUSet\nset.Set(cpu)\nunix.SchedSetaffinity(0, &set)"}}
	r.Expected = "Makita (LinuxCon Japan 2016): 4.25M → 5.05M tps (+19%) pinning each thread to its socket's CPU."
	r.Reference = Makita2016
	r.Caveats = []string{
		"taskset lasts for the life of these threads: make it permanent in the application (code above) or the service unit (CPUAffinity=).",
		"Pin thread i to CPU i only if socket i receives CPU i's packets (net.reuseport-steering); otherwise locality is partial.",
	}
	return f
}

// --- 9. XPS unset ----------------------------------------------------------

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

func checkXPSUnset(in NetInput) *Finding {
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
		if share >= SocketLockShareWarn {
			f.Severity = Crit
		}
	}
	cpus := onlineCPUs(in)
	nr := nrCPUs(in)
	masks := XPSMasks(cpus, nTX)
	r := &f.Recommendation
	for q := 0; q < nTX; q++ {
		path := fmt.Sprintf("/sys/class/net/%s/queues/tx-%d/xps_cpus", iface, q)
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
		r.Apply = append(r.Apply, fmt.Sprintf("echo %s > %s", maskOrZero(m, nr), path))
		r.Revert = append(r.Revert, fmt.Sprintf("echo %s > %s", maskOrZero(old, nr), path))
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
	return f
}

// --- 10. GRO on a UDP-only receive path ------------------------------------

func checkGROUDP(in NetInput) *Finding {
	c, e := in.Config, in.Evidence
	if c == nil || !boolPtr(c.Offloads.GRO) {
		return nil
	}
	g, share, ok := groupShare(e, "gro")
	if !ok || share < FunctionShareMin {
		return nil
	}
	// UDP-only: the datagrams the UDP layer saw over the packets received.
	var rxPkts uint64
	for _, q := range e.Queues.RX {
		if q.KernelPackets != nil {
			rxPkts += *q.KernelPackets
		} else if q.DriverPackets != nil {
			rxPkts += *q.DriverPackets
		}
	}
	udp, udpKnown := e.Drops.InDatagrams()
	rcvbuf, _ := e.Drops.RcvbufErrors()
	udp += rcvbuf
	udpOnly, known := false, udpKnown && rxPkts > 0
	if known {
		udpOnly = float64(udp) >= UDPOnlyShare*float64(rxPkts)
		if !udpOnly {
			return nil // other traffic (TCP, tunnels) may need GRO
		}
	}
	iface := c.Interface.Name
	f := functionGroupFinding(g, share, fmt.Sprintf("GRO is on for a UDP receive path and costs %s of the NET_RX CPUs", pct(share)))
	if known {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d UDP datagrams of %d packets received (%s): the receive path is UDP", udp, rxPkts, pct(float64(udp)/float64(rxPkts))))
	} else {
		f.Evidence = append(f.Evidence, "whether other protocols arrive on this interface was not measured")
	}
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "GRO merges TCP segments (and tunnelled flows) into larger packets; UDP datagrams have boundaries and cannot be merged, so GRO only adds per-packet work on a UDP receive path.",
		Apply:     []string{fmt.Sprintf("ethtool -K %s gro off", iface)},
		Revert:    []string{fmt.Sprintf("ethtool -K %s gro on", iface)},
		Expected:  "Makita (LinuxCon Japan 2016): GRO took 4.9% of CPU; turning it off gave 5.05M → 5.18M tps (+2.6%).",
		Reference: Makita2016,
		Caveats: []string{
			"Do not turn GRO off where TCP receive throughput matters: TCP receivers lose it.",
			"Do not turn it off on KVM/VM hosts: GRO carries tunnelled and guest TCP traffic.",
		},
	}
	if e.Interface.Virtual {
		f.Recommendation.Caveats = append(f.Recommendation.Caveats, "On veth, GRO (with rx-udp-gro-forwarding) is what enables per-queue NAPI; off, packets take the per-CPU backlog instead.")
	}
	return f
}

// --- 11. netfilter loaded without rules ------------------------------------

func checkNetfilterUnused(in NetInput) *Finding {
	c, e := in.Config, in.Evidence
	// Loaded() is not required: a built-in nf_tables without module
	// parameters is invisible in /sys/module, but a listed nft table
	// proves it is there.
	if c == nil || c.Netfilter.RuleCounts == nil {
		return nil
	}
	g, share, ok := groupShare(e, "netfilter")
	if !ok || share < FunctionShareWaste || g.Samples < FunctionSamplesMin {
		return nil
	}
	nf := c.Netfilter
	var apply, revert, empty, caveats []string
	legacy := func(family, tableModule, coreModule string) {
		count, listed := nf.RuleCounts[family+"/filter"]
		if !listed || count > 0 || nf.Modules[tableModule] != netconfig.ModuleLoaded {
			if listed && count == 0 && nf.Modules[tableModule] == netconfig.ModuleBuiltin {
				caveats = append(caveats, fmt.Sprintf("%s is built into the kernel: its empty filter table cannot be unloaded", tableModule))
			}
			return
		}
		empty = append(empty, family+"/filter")
		apply = append(apply, "modprobe -r "+tableModule)
		// The core module goes too when no other table of the family holds
		// rules (nat, mangle load their own modules on top of it).
		others := 0
		for k, n := range nf.RuleCounts {
			if strings.HasPrefix(k, family+"/") && k != family+"/filter" {
				others += n + 1
			}
		}
		if others == 0 && nf.Modules[coreModule] == netconfig.ModuleLoaded {
			apply = append(apply, "modprobe -r "+coreModule)
			revert = append(revert, "modprobe "+coreModule)
		}
		revert = append(revert, "modprobe "+tableModule)
	}
	legacy("ipv4", "iptable_filter", "ip_tables")
	legacy("ipv6", "ip6table_filter", "ip6_tables")
	var nftTables []string
	for k, n := range nf.RuleCounts {
		if strings.HasPrefix(k, "nft/") && n == 0 {
			nftTables = append(nftTables, strings.TrimPrefix(k, "nft/"))
		}
	}
	sort.Strings(nftTables)
	for _, t := range nftTables {
		family, name, _ := strings.Cut(t, "/")
		saved := fmt.Sprintf("/var/tmp/perfscope-nft-%s-%s.nft", family, name)
		empty = append(empty, "nft "+t)
		// Save the table (its base chains hook packets even without rules)
		// so that the revert restores it exactly.
		apply = append(apply, fmt.Sprintf("nft list table %s %s > %s && nft delete table %s %s", family, name, saved, family, name))
		revert = append(revert, "nft -f "+saved)
	}
	if len(apply) == 0 {
		return nil
	}
	f := functionGroupFinding(g, share, fmt.Sprintf("netfilter hooks run with empty tables and cost %s of the NET_RX CPUs", pct(share)))
	f.Evidence = append(f.Evidence, fmt.Sprintf("tables without a rule: %s (rule counts from %s)", strings.Join(empty, ", "), nf.RuleSource))
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "A loaded filter table registers netfilter hooks that every packet traverses even when the table has no rule; some distributions load them by default.",
		Apply:     apply,
		Revert:    revert,
		Expected:  "Makita (LinuxCon Japan 2016): iptables took 3% of CPU with no rules; unloading iptable_filter and ip_tables gave 5.18M → 5.38M tps (+3.9%).",
		Reference: Makita2016,
		Caveats:   append([]string{"Only if this host needs no packet filter: a firewall manager (firewalld, ufw, docker) will recreate the tables."}, caveats...),
	}
	return f
}

// --- 12. rp_filter ---------------------------------------------------------

func checkRPFilter(in NetInput) *Finding {
	c, e := in.Config, in.Evidence
	if c == nil || c.RPFilter.EffectiveRPFilter == nil || *c.RPFilter.EffectiveRPFilter == 0 {
		return nil
	}
	g, share, ok := groupShare(e, "fib-validation")
	if !ok || share < FunctionShareMin/2 {
		return nil
	}
	iface := c.Interface.Name
	sv := c.RPFilter
	type knob struct{ name, scope string }
	var apply, revert []string
	set := func(k knob, want int64, values map[string]int64) {
		old, ok := values[k.scope]
		if !ok || old == want {
			return
		}
		key := fmt.Sprintf("net.ipv4.conf.%s.%s", k.scope, k.name)
		apply = append(apply, fmt.Sprintf("sysctl -w %s=%d", key, want))
		revert = append(revert, fmt.Sprintf("sysctl -w %s=%d", key, old))
	}
	set(knob{"rp_filter", "all"}, 0, sv.RPFilter)
	set(knob{"rp_filter", iface}, 0, sv.RPFilter)
	set(knob{"accept_local", "all"}, 1, sv.AcceptLocal)
	if len(apply) == 0 {
		return nil
	}
	f := functionGroupFinding(g, share, fmt.Sprintf("reverse-path filtering (rp_filter=%d) validates every packet's source: %s of the NET_RX CPUs", *sv.EffectiveRPFilter, pct(share)))
	f.Evidence = append(f.Evidence, fmt.Sprintf("rp_filter: all=%d %s=%d (effective %d); accept_local: all=%d", sv.RPFilter["all"], iface, sv.RPFilter[iface], *sv.EffectiveRPFilter, sv.AcceptLocal["all"]))
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "With rp_filter on, fib_validate_source does a second FIB lookup per packet (the reverse path); accept_local=1 also skips the local-address check. Makita measured ~1.8% of CPU per lookup.",
		Apply:     apply,
		Revert:    revert,
		Expected:  "Makita (LinuxCon Japan 2016): 5.38M → 5.49M tps (+2%) with rp_filter=0 and accept_local=1.",
		Reference: Makita2016,
		Caveats: []string{
			"Security trade-off: rp_filter drops packets with spoofed source addresses (a source not routable back through the receiving interface); accept_local=1 accepts packets claiming a local source. Turn them off only where an upstream router or firewall already filters spoofed sources.",
		},
	}
	return f
}

// --- 13. audit -------------------------------------------------------------

func checkAudit(in NetInput) *Finding {
	c, e := in.Config, in.Evidence
	if c == nil || c.Audit.Enabled == nil || *c.Audit.Enabled == 0 {
		return nil
	}
	g, share, ok := groupShare(e, "audit")
	if !ok || share < FunctionShareMin/2 {
		return nil
	}
	enabled := *c.Audit.Enabled
	f := functionGroupFinding(g, share, fmt.Sprintf("kernel audit is on and costs %s of the NET_RX CPUs", pct(share)))
	f.Evidence = append(f.Evidence, fmt.Sprintf("audit enabled=%d, auditd running: %v", enabled, c.Audit.AuditdRunning))
	r := &f.Recommendation
	r.Why = "With audit enabled every recvfrom/sendto syscall goes through the audit entry and exit hooks, a per-packet cost for a one-datagram-per-syscall server."
	r.Expected = "Makita (LinuxCon Japan 2016): audit took ~2.5% of CPU; disabling it gave 5.49M → 5.86M tps (+6.7%)."
	r.Reference = Makita2016
	r.Caveats = []string{"Audit is often a compliance requirement: disable it only where no policy needs the audit trail."}
	if enabled == 2 {
		r.Kind = KindAdvice
		r.Apply = []string{"# audit is locked (-e 2) until reboot: remove '-e 2' from /etc/audit/rules.d/*.rules, `systemctl disable auditd`, reboot"}
		return f
	}
	r.Kind = KindSetting
	r.Apply = []string{"auditctl -e 0"}
	r.Revert = []string{fmt.Sprintf("auditctl -e %d", enabled)}
	r.Caveats = append(r.Caveats, "auditctl -e 0 lasts until auditd restarts and loads its rules; Makita made it permanent with `systemctl disable auditd` and a reboot.")
	return f
}

// --- 14. IP ID selection ---------------------------------------------------

func checkIPIdent(in NetInput) *Finding {
	g, share, ok := groupShare(in.Evidence, "ip-ident")
	if !ok || share < FunctionShareMin {
		return nil
	}
	f := functionGroupFinding(g, share, fmt.Sprintf("IP ID generation (__ip_select_ident) costs %s of the NET_RX CPUs", pct(share)))
	f.Recommendation = Recommendation{
		Kind: KindCode,
		Why:  "Datagrams that may be fragmented need an IP ID, drawn from a shared hashed counter with an atomic per send; many replies to the same peers contend on its cache line. With DF set (IP_PMTUDISC_DO) the kernel skips it.",
		Code: []CodeSketch{
			{Lang: "c", Code: "int pmtu = IP_PMTUDISC_DO;\nsetsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));"},
			{Lang: "go", Code: "raw.Control(func(fd uintptr) {\n\terr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)\n})"},
		},
		Expected:  "Makita (LinuxCon Japan 2016): __ip_select_ident took 4.82% of CPU; skipping it gave 5.86M → 6.01M tps (+2.6%).",
		Reference: Makita2016,
		Caveats:   []string{"MTU: with IP_PMTUDISC_DO a datagram larger than the path MTU is never fragmented — sendto fails with EMSGSIZE. Use it only if replies always fit the MTU."},
	}
	return f
}

// --- 15. SMT off -----------------------------------------------------------

func checkSMTOff(in NetInput) *Finding {
	c := in.Config
	if c == nil || !c.Topology.SMT.Available() || c.Topology.SMT.Active || c.Topology.SMT.Control != "off" {
		return nil
	}
	_, top := maxNetRX(in.Evidence)
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("SMT (hyper-threading) is available but off: %d CPUs online", c.Topology.Online.Len()),
		Evidence: []string{fmt.Sprintf("/sys/devices/system/cpu/smt/control = off, active = 0; busiest CPU spends %s in NET_RX", pct(top))},
		Impact:   0.17 * math.Min(1, top/NetRXSaturatedShare) * 0.5,
	}
	if top >= NetRXSaturatedShare {
		f.Severity = Warn
	}
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "Sibling threads add execution contexts for softirq and receiving threads; a packet-per-syscall workload stalls on memory often enough for siblings to use the gaps.",
		Apply:     []string{"echo on > /sys/devices/system/cpu/smt/control"},
		Revert:    []string{"echo off > /sys/devices/system/cpu/smt/control"},
		Expected:  "Makita (LinuxCon Japan 2016): 6.01M → 7.01M tps (+17%) with hyper-threading on and RPS spread over all 40 logical CPUs.",
		Reference: Makita2016,
		Caveats: []string{
			"SMT may be off on purpose: L1TF/MDS-class side channels let sibling threads leak data between tenants.",
			"The new sibling CPUs get no receive work until RPS/IRQ masks include them: run perfscope again after enabling.",
		},
	}
	return f
}

// --- 16. UDP receive buffer errors -----------------------------------------

// RcvbufSize is the receive buffer one socket needs to absorb a stall of
// RcvbufStallSeconds at ratePerSocket datagrams/s, rounded up to a power of
// two and capped at RcvbufMaxBytes.
func RcvbufSize(ratePerSocket float64) int64 {
	need := ratePerSocket * RcvbufStallSeconds * RcvbufTruesize
	size := int64(1 << 20)
	for float64(size) < need && size < RcvbufMaxBytes {
		size <<= 1
	}
	return size
}

func checkUDPRcvbuf(in NetInput) *Finding {
	e := in.Evidence
	secs := seconds(e.DurationNs)
	if secs <= 0 {
		return nil
	}
	errs, snmpOK := e.Drops.RcvbufErrors()
	for _, d := range e.Drops.ByPort {
		if !snmpOK && d.Reason == "SOCKET_RCVBUFF" {
			errs += d.Count
		}
	}
	delivered, _ := e.Drops.InDatagrams()
	// Per-port numbers are closer to the application when present.
	socks := socketsOnPort(e, e.Port)
	var portRecv uint64
	portKnown := false
	for _, s := range socks {
		if s.ReceivedPkt != nil {
			portRecv += *s.ReceivedPkt
			portKnown = true
		}
	}
	if portKnown {
		delivered = portRecv
		if n, _ := dropsOnPort(e, e.Port); n > 0 {
			errs = n
		}
	}
	arrivals := delivered + errs
	if errs == 0 || arrivals == 0 {
		return nil
	}
	dropShare := float64(errs) / float64(arrivals)
	if dropShare < RcvbufDropShare {
		return nil
	}
	nsock := max(len(socks), 1)
	rate := float64(arrivals) / secs
	need := RcvbufSize(rate / float64(nsock))
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("%s of arriving datagrams dropped: socket receive buffer full", pct(dropShare)),
		Evidence: []string{
			fmt.Sprintf("%d receive-buffer drops and %d datagrams delivered over %.1fs (%.0f arriving/s)", errs, delivered, secs, rate),
			fmt.Sprintf("%.0f datagrams/s per socket × %.0f ms stall × %d B truesize = %d B per socket → %d B (%d MiB)", rate/float64(nsock), RcvbufStallSeconds*1000, RcvbufTruesize, int64(rate/float64(nsock)*RcvbufStallSeconds*RcvbufTruesize), need, need>>20),
		},
		Impact: dropShare,
	}
	switch {
	case dropShare >= 0.10:
		f.Severity = Crit
	case dropShare >= 0.01:
		f.Severity = Warn
	}
	for _, s := range socks {
		if len(f.Evidence) < 6 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("socket %s (inode %d): %d B queued at the end, %d drops", s.Local, s.Inode, s.RxQueueB, s.DropsDelta))
		}
	}
	r := &f.Recommendation
	r.Why = "A UDP socket drops a datagram when its queued bytes (charged at skb truesize) exceed its receive buffer; bursts and short receiver stalls overflow the default buffer long before the receiver is too slow on average."
	r.Code = []CodeSketch{{Lang: "c", Code: fmt.Sprintf("int size = %d;  /* capped by net.core.rmem_max */\nsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));", need)},
		{Lang: "go", Code: fmt.Sprintf("conn.(*net.UDPConn).SetReadBuffer(%d) // capped by net.core.rmem_max", need)}}
	r.Expected = fmt.Sprintf("Buffers of %d MiB per socket absorb a %.0f ms stall at the measured rate; receive-buffer drops stop unless the receiver is slower than arrivals on average.", need>>20, RcvbufStallSeconds*1000)
	r.Reference = Makita2016 + " (its benchmark counts only delivered transactions; drops are what a full buffer costs)."
	r.Caveats = []string{
		"If drops persist at the same rate, the receiver is too slow on average: a bigger buffer only adds latency. Fix throughput (net.socket-lock-contention, net.reuseport-steering) first.",
		"rmem_default applies to sockets created afterwards: restart the service (or have it call SO_RCVBUF).",
	}
	r.Parameters = map[string]int64{"so_rcvbuf_bytes": need}
	var oldMax, oldDefault *int64
	if in.Config != nil {
		oldMax, oldDefault = in.Config.Core.RmemMax, in.Config.Core.RmemDefault
		if w := in.Config.Core.RmemWritable; w != nil && !*w {
			// A network namespace (a container): the sysctls are the
			// host's, read-only here. The socket option is the way.
			r.Kind = KindCode
			f.Evidence = append(f.Evidence, fmt.Sprintf("net.core.rmem_default (%s B) and rmem_max (%s B) are read-only in this network namespace: they follow the host's", intOrUnknown(oldDefault), intOrUnknown(oldMax)))
			if oldMax != nil && *oldMax < need {
				r.Caveats = append(r.Caveats, fmt.Sprintf("SO_RCVBUF is capped at rmem_max (%d B); above it the application needs SO_RCVBUFFORCE (CAP_NET_ADMIN), or the host's rmem_max raised.", *oldMax))
			}
			return f
		}
	}
	if oldMax != nil && oldDefault != nil && *oldDefault >= need && *oldMax >= need {
		// Buffers are already that large: the receiver is the problem.
		r.Kind = KindAdvice
		f.Evidence = append(f.Evidence, fmt.Sprintf("rmem_default is already %d B and rmem_max %d B", *oldDefault, *oldMax))
		r.Code = nil
		return f
	}
	if oldMax == nil || oldDefault == nil {
		// Without the old values there is nothing to restore: say what to
		// set, but do not offer it to --apply.
		r.Kind = KindAdvice
		r.Apply = []string{fmt.Sprintf("sysctl -w net.core.rmem_max=%d", need), fmt.Sprintf("sysctl -w net.core.rmem_default=%d", need)}
		return f
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("net.core.rmem_default = %d B, rmem_max = %d B", *oldDefault, *oldMax))
	r.Kind = KindSetting
	if *oldMax < need {
		r.Apply = append(r.Apply, fmt.Sprintf("sysctl -w net.core.rmem_max=%d", need))
		r.Revert = append(r.Revert, fmt.Sprintf("sysctl -w net.core.rmem_max=%d", *oldMax))
	}
	if *oldDefault < need {
		r.Apply = append(r.Apply, fmt.Sprintf("sysctl -w net.core.rmem_default=%d", need))
		r.Revert = append(r.Revert, fmt.Sprintf("sysctl -w net.core.rmem_default=%d", *oldDefault))
	}
	return f
}

func intOrUnknown(v *int64) string {
	if v == nil {
		return "?"
	}
	return strconv.FormatInt(*v, 10)
}
