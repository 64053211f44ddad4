package diagnose

import (
	"fmt"
	"math"
	"slices"
	"sort"

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

// Thresholds of the network rules (documented in docs/rules.md).
const (
	// NetRXBusyShare: a CPU spending this much of its time in NET_RX does
	// receive work; NetRXIdleShare: below this it is idle for the receive
	// path; NetRXSaturatedShare: the receive path is the bottleneck.
	NetRXBusyShare      = evidence.NetRXBusyShare
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

// NetThresholds are the network rules' thresholds a recipe may override
// (rules: - family: net or - id: net.…, thresholds: {name: value}); their
// defaults are the constants above. NetRXBusyShare is not among them: it
// is the one definition of a CPU doing receive work, which the report's
// profile split uses too.
var NetThresholds = struct {
	NetRXSaturated, NetRXIdle                                        Threshold
	SocketLockWarn, SocketLockCrit, SocketLockSaturated, SocketDrop  Threshold
	CrossFeed, ReuseportLock, ReuseportSkew                          Threshold
	FunctionShare, FunctionWarn, FunctionWaste, FunctionWasteSamples Threshold
	UDPOnly, RcvbufDrop                                              Threshold
}{
	NetRXSaturated: Threshold{Name: "netrx_saturated_share", Default: NetRXSaturatedShare, Min: 0, Max: 1,
		Doc: "a CPU spending this share of its time in NET_RX makes the receive path the bottleneck"},
	NetRXIdle: Threshold{Name: "netrx_idle_share", Default: NetRXIdleShare, Min: 0, Max: 1,
		Doc: "below this NET_RX share a CPU is idle for the receive path"},
	SocketLockWarn: Threshold{Name: "socket_lock_warn_share", Default: SocketLockShareWarn, Min: 0, Max: 1,
		Doc: "socket (and qdisc) lock wait as a share of the NET_RX CPUs' time that makes a warning"},
	SocketLockCrit: Threshold{Name: "socket_lock_crit_share", Default: SocketLockShareCrit, Min: 0, Max: 1,
		Doc: "the socket lock wait share that makes it critical"},
	SocketLockSaturated: Threshold{Name: "socket_lock_saturated_share", Default: SocketLockShareSaturated, Min: 0, Max: 1,
		Doc: "socket lock wait enough for a warning when the socket also drops socket_drop_share of its arrivals"},
	SocketDrop: Threshold{Name: "socket_drop_share", Default: SocketDropShare, Min: 0, Max: 1,
		Doc: "drops over arrivals that make a socket saturated"},
	CrossFeed: Threshold{Name: "cross_feed_share", Default: ReuseportCrossFeed, Min: 0, Max: 1,
		Doc: "a socket counts as fed by a CPU that queued this share of its wakeups"},
	ReuseportLock: Threshold{Name: "reuseport_lock_share", Default: ReuseportRemainingShare, Min: 0, Max: 1,
		Doc: "lock wait left in a SO_REUSEPORT group worth steering by CPU"},
	ReuseportSkew: Threshold{Name: "reuseport_skew", Default: ReuseportSkew, Min: 1, Max: 1000,
		Doc: "busiest socket of a SO_REUSEPORT group over the group's mean worth steering"},
	FunctionShare: Threshold{Name: "function_share", Default: FunctionShareMin, Min: 0, Max: 1,
		Doc: "a removable kernel function group's share of the NET_RX CPUs' samples worth a finding (rp_filter and audit: half of it)"},
	FunctionWarn: Threshold{Name: "function_warn_share", Default: FunctionShareWarn, Min: 0, Max: 1,
		Doc: "the function group share that makes a warning"},
	FunctionWaste: Threshold{Name: "function_waste_share", Default: FunctionShareWaste, Min: 0, Max: 1,
		Doc: "the share of hooks that do nothing (netfilter tables without a rule) worth removing"},
	FunctionWasteSamples: Threshold{Name: "function_waste_samples", Default: FunctionSamplesMin, Min: 1, Max: 1e9,
		Doc: "profile samples those hooks need at least"},
	UDPOnly: Threshold{Name: "udp_only_share", Default: UDPOnlyShare, Min: 0, Max: 1,
		Doc: "UDP datagrams over received packets above which the receive path is UDP-only"},
	RcvbufDrop: Threshold{Name: "rcvbuf_drop_share", Default: RcvbufDropShare, Min: 0, Max: 1,
		Doc: "receive-buffer drops over arrivals worth acting on"},
}

// Makita2016 is the reference measurement every network finding cites.
const Makita2016 = "Toshiaki Makita (NTT), \"Boost UDP Transaction Performance\", LinuxCon Japan 2016 (100-byte UDP echo, 20-core Xeon E5-2650 v3, Intel 82599ES)"

// NetRules are the rules of `perfscope udp`: the ten steps of Makita's talk.
var NetRules = []Rule[NetInput]{
	{ID: "net.softirq-concentrated", Tunables: []Threshold{NetThresholds.NetRXSaturated, NetThresholds.NetRXIdle}, CheckTuned: checkSoftirqConcentrated},
	{ID: "net.irq-affinity-ignores-hint", Check: checkIRQAffinityHint, Changes: irqAffinityChanges},
	{ID: "net.rss-indirection-narrow", Check: checkRSSIndirection, Changes: rssChanges},
	{ID: "net.dead-rx-queues", Check: checkDeadRXQueues},
	{ID: "net.rps-needed", Tunables: []Threshold{NetThresholds.NetRXSaturated}, CheckTuned: checkRPSNeeded, Changes: rpsChanges},
	{ID: "net.socket-lock-contention", Tunables: []Threshold{NetThresholds.SocketLockWarn, NetThresholds.SocketLockCrit, NetThresholds.SocketLockSaturated, NetThresholds.SocketDrop, NetThresholds.CrossFeed}, CheckTuned: checkSocketLockContention},
	{ID: "net.reuseport-steering", Tunables: []Threshold{NetThresholds.ReuseportLock, NetThresholds.ReuseportSkew, NetThresholds.CrossFeed}, CheckTuned: checkReuseportSteering},
	{ID: "net.thread-pinning", Check: checkThreadPinning, Changes: pinningChanges},
	{ID: "net.xps-unset", Tunables: []Threshold{NetThresholds.SocketLockWarn}, CheckTuned: checkXPSUnset, Changes: xpsChanges},
	{ID: "net.gro-udp", Tunables: []Threshold{NetThresholds.FunctionShare, NetThresholds.FunctionWarn, NetThresholds.UDPOnly}, CheckTuned: checkGROUDP, Changes: groChanges},
	{ID: "net.netfilter-unused", Tunables: []Threshold{NetThresholds.FunctionWaste, NetThresholds.FunctionWasteSamples, NetThresholds.FunctionWarn}, CheckTuned: checkNetfilterUnused, Changes: netfilterChanges},
	{ID: "net.rp-filter", Tunables: []Threshold{NetThresholds.FunctionShare, NetThresholds.FunctionWarn}, CheckTuned: checkRPFilter, Changes: rpFilterChanges},
	{ID: "net.audit", Tunables: []Threshold{NetThresholds.FunctionShare, NetThresholds.FunctionWarn}, CheckTuned: checkAudit, Changes: auditChanges},
	{ID: "net.ip-ident", Tunables: []Threshold{NetThresholds.FunctionShare, NetThresholds.FunctionWarn}, CheckTuned: checkIPIdent},
	{ID: "net.smt-off", Tunables: []Threshold{NetThresholds.NetRXSaturated}, CheckTuned: checkSMTOff, Changes: smtChanges},
	{ID: "net.udp-rcvbuf", Tunables: []Threshold{NetThresholds.RcvbufDrop}, CheckTuned: checkUDPRcvbuf, Changes: rcvbufChanges},
	{ID: "net.softnet-squeeze", Check: checkSoftnetSqueeze, Changes: budgetChangeShapes},
	{ID: "net.backlog-drops", Check: checkBacklogDrops, Changes: backlogChanges},
	{ID: "net.nic-ring-drops", Check: checkNICRingDrops, Changes: ringChanges},
	{ID: "net.irq-coalescing", Tunables: []Threshold{NetThresholds.NetRXSaturated}, CheckTuned: checkIRQCoalescing, Changes: coalescingChanges},
	{ID: "net.rfs-off", Check: checkRFSOff, Changes: rfsChanges},
	{ID: "net.udp-mem-pressure", Check: checkUDPMemPressure, Changes: udpMemChanges},
	{ID: "net.napi-defer-irqs", Tunables: []Threshold{NetThresholds.NetRXSaturated}, CheckTuned: checkNAPIDeferIRQs, Changes: append(slices.Clone(napiDeferChanges), napiInstanceChanges...)},
	{ID: "net.napi-irq-suspend-misconfigured", Check: checkNAPIIRQSuspend, Changes: napiInstanceChanges},
	{ID: "net.napi-threads-unpinned", Check: checkNAPIThreadsUnpinned, Changes: napiThreadChanges},
	{ID: "net.busy-poll-nothing-to-poll", Check: checkBusyPollNothingToPoll},
	{ID: "net.rx-alloc-fail", Check: checkRXAllocFail},
}

// NetChangeShapes are the shapes of the changes the network rule id can
// make (Rule.Changes); ok is false when no rule has that id.
func NetChangeShapes(id string) (shapes []ChangeShape, ok bool) {
	for _, r := range NetRules {
		if r.ID == id {
			return r.Changes, true
		}
	}
	return nil, false
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

// netRXCPUs are the CPUs doing receive work, by the one definition the
// report's profile split uses too (evidence.SoftirqEvidence.NetRXCPUs).
func netRXCPUs(e evidence.NetEvidence) cpuset.Set {
	return cpuset.Of(e.Softirq.NetRXCPUs()...)
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
// function group: 0 when none of those samples is in it, however much of
// the other CPUs' time it takes (the rules judge the receive path, on the
// NET_RX CPUs of evidence.SoftirqEvidence.NetRXCPUs). Only when the
// profile has no sample on a NET_RX CPU at all (or is from before that
// count was kept and shows no NET_RX share) is it the all-CPU share, with
// allCPUs set.
func groupShare(e evidence.NetEvidence, name string) (g evidence.FunctionShare, share float64, allCPUs, ok bool) {
	if e.Profile.Unavailable != "" || e.Profile.Samples == 0 {
		return evidence.FunctionShare{}, 0, false, false
	}
	g, ok = e.Profile.Group(name)
	if !ok {
		return g, 0, false, false
	}
	if e.Profile.NetRXSamples == 0 && g.Share == 0 {
		return g, g.AllShare, true, true
	}
	return g, g.Share, false, true
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

func boolPtr(b *bool) bool { return b != nil && *b }

// --- 1. softirq concentrated ----------------------------------------------
