package diagnose

import (
	"fmt"
	"math"
	"strconv"

	"github.com/perfscope/perfscope/base/shellquote"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/evidence"
)

// Rules on the NIC end of the receive path: RX rings that overflow, and
// interrupts taken for every packet.

const (
	// RingMissShare: packets the NIC dropped for want of an RX descriptor,
	// over the packets it received, worth acting on.
	RingMissShare = 0.001
	// RingPollSeconds is the time a ring must hold between two polls of a
	// loaded queue: one NET_RX run at the default netdev_budget_usecs.
	RingPollSeconds = 0.002
	// CoalesceIRQsPerS: interrupts per second of one queue IRQ above which
	// per-packet interrupts cost more than they save in latency.
	CoalesceIRQsPerS = 10_000
	// CoalesceRXUsecs is the interrupt delay recommended instead: ~20k
	// interrupts/s per queue at most, a few tens of µs of latency.
	CoalesceRXUsecs = 50
)

// rxPackets is what the RX queues received (kernel counts, else the
// driver's; the driver's when the kernel's are the budget's estimates).
func rxPackets(e evidence.NetEvidence) uint64 {
	var n uint64
	for _, q := range e.Queues.RX {
		if q.KernelPackets != nil && (q.DriverPackets == nil || e.Queues.Estimate == nil) {
			n += *q.KernelPackets
		} else if q.DriverPackets != nil {
			n += *q.DriverPackets
		}
	}
	return n
}

// ringChange sizes the RX ring for RingPollSeconds of the busiest queue's
// arrivals, a power of two, at least twice the current size, at most the
// hardware's maximum; ok is false when the ring is already at its maximum.
func ringChange(r netconfigRings, busiestPerS float64) (size uint32, ok bool) {
	if r.RX >= r.RXMax {
		return 0, false
	}
	want := max(uint32(math.Ceil(busiestPerS*RingPollSeconds)), 2*r.RX)
	size = 1
	for size < want {
		size <<= 1
	}
	return min(size, r.RXMax), true
}

type netconfigRings = struct{ RX, RXMax uint32 }

// ringChanges: the interface's RX ring size.
var ringChanges = []ChangeShape{{Kind: ChangeEthtoolRing, Target: "<iface> rx", Old: KindForm, New: KindForm}}

func checkNICRingDrops(in NetInput) *Finding {
	e := in.Evidence
	if e.Queues.NICMissed == nil || *e.Queues.NICMissed == 0 {
		return nil
	}
	missed, rx := *e.Queues.NICMissed, rxPackets(e)
	share := float64(missed) / float64(rx+missed)
	if share < RingMissShare {
		return nil
	}
	iface := ifaceName(in)
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("the NIC dropped %d packets for want of RX descriptors (%s of arrivals)", missed, pct(share)),
		Impact:   math.Min(1, share),
		Evidence: []string{fmt.Sprintf("%s: %d missed (%v) against %d received in %.1f s", iface, missed, e.Queues.NICMissedCounters, rx, seconds(e.DurationNs))},
	}
	if share >= 0.1 {
		f.Severity = Crit
	}
	r := &f.Recommendation
	r.Why = "The NIC writes packets into a ring of RX descriptors that the driver refills when NAPI polls; a ring that fills between two polls (a CPU busy in other softirqs, a budget-limited poll, a burst) makes the NIC drop, before the kernel counts anything."
	r.Expected = "No missed packets at the same load as long as the CPUs keep up on average; a bigger ring absorbs bursts, it cannot fix a CPU that is too slow (spread the load: RSS, RPS)."
	r.Reference = "ethtool(8) -g/-G; Linux kernel documentation, networking/scaling.rst"
	r.Caveats = []string{"A larger ring holds more packets in flight: more memory and cache footprint, and longer queueing delay under sustained overload.",
		"Some drivers reset the interface to resize rings: expect a short link flap when applying."}
	var busiest float64
	for _, q := range e.Queues.RX {
		busiest = max(busiest, q.PerS)
	}
	if in.Config == nil || in.Config.Rings == nil {
		r.Kind = KindAdvice
		r.Apply = []string{"# read the ring sizes: " + shellquote.Join("ethtool", "-g", iface) + ", then raise rx towards the maximum: " + shellquote.Join("ethtool", "-G", iface, "rx") + " N"}
		return f
	}
	rings := in.Config.Rings
	f.Evidence = append(f.Evidence, fmt.Sprintf("RX ring %d descriptors of %d possible; busiest queue %.0f packets/s", rings.RX, rings.RXMax, busiest))
	size, ok := ringChange(netconfigRings{RX: rings.RX, RXMax: rings.RXMax}, busiest)
	if !ok {
		r.Kind = KindAdvice
		r.Apply = []string{"# the ring is at its maximum: spread the receive load over more queues and CPUs (RSS, RPS) or coalesce interrupts so each poll takes more"}
		return f
	}
	r.Kind = KindSetting
	// Only rx: the driver keeps the other rings (read-modify-write).
	r.AddChanges(EthtoolRingChange(in.Config.Interface.Name, map[string]uint32{"rx": rings.RX}, map[string]uint32{"rx": size}))
	r.Parameters = map[string]int64{"rx_ring": int64(size)}
	return f
}

// busiestQueueIRQ is the queue IRQ with the most interrupts per second.
func busiestQueueIRQ(e evidence.NetEvidence) (evidence.QueueIRQ, float64) {
	var best evidence.QueueIRQ
	var bestRate float64
	secs := seconds(e.DurationNs)
	if secs <= 0 {
		return best, 0
	}
	for _, q := range e.IRQs.IRQs {
		var n uint64
		for _, c := range q.CountByCPU {
			n += c
		}
		if r := float64(n) / secs; r > bestRate {
			best, bestRate = q, r
		}
	}
	return best, bestRate
}

// coalescingChanges: the interface's rx-usecs.
var coalescingChanges = []ChangeShape{{Kind: ChangeEthtoolCoalesce, Target: "<iface> rx-usecs", Old: KindForm, New: KindForm}}

func checkIRQCoalescing(in NetInput, t Thresholds) *Finding {
	c := in.Config
	if c == nil || c.Coalesce == nil || !c.Coalesce.PerPacketInterrupts() {
		return nil
	}
	q, rate := busiestQueueIRQ(in.Evidence)
	if rate < CoalesceIRQsPerS {
		return nil
	}
	iface := ifaceName(in)
	_, top := maxNetRX(in.Evidence)
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("interrupt coalescing is off on %s: IRQ %d takes %.0f interrupts/s, one per packet", iface, q.IRQ, rate),
		Impact:   0.05,
		Evidence: []string{
			fmt.Sprintf("ethtool -c %s: rx-usecs %d, rx-frames %d, adaptive-rx off", iface, c.Coalesce.RXUsecs, c.Coalesce.RXFrames),
			fmt.Sprintf("IRQ %d (%s): %.0f interrupts/s; busiest CPU %s in NET_RX", q.IRQ, q.Name, rate, pct(top)),
		},
	}
	if top >= t.Get(NetThresholds.NetRXSaturated) {
		f.Severity, f.Impact = Warn, 0.1
	}
	r := &f.Recommendation
	r.Kind = KindSetting
	r.Why = "With rx-usecs 0 and rx-frames 1 the NIC interrupts for every packet; each interrupt costs an entry, an exit and a NAPI schedule, and a poll finds one packet. Delaying the interrupt a few tens of µs lets one poll take a batch."
	// Only rx-usecs: rx-frames and the rest stay as the driver has them.
	r.AddChanges(EthtoolCoalesceChange(c.Interface.Name, map[string]uint32{"rx-usecs": c.Coalesce.RXUsecs}, map[string]uint32{"rx-usecs": CoalesceRXUsecs}))
	r.Expected = fmt.Sprintf("At most ~%d interrupts/s per queue and more packets per poll; up to %d µs more latency per packet at low load.", 1_000_000/CoalesceRXUsecs, CoalesceRXUsecs)
	r.Reference = "ethtool(8) -c/-C; Linux kernel documentation, networking/napi.rst (interrupt moderation)"
	r.Caveats = []string{"Where the driver supports it, `" + shellquote.Join("ethtool", "-C", iface, "adaptive-rx", "on") + "` picks the delay by load instead: low latency when idle, batching when busy.",
		"Latency-critical request/response traffic may prefer per-packet interrupts: measure the tail latency before and after."}
	r.Parameters = map[string]int64{"rx_usecs": CoalesceRXUsecs}
	return f
}

// rfsEntries sizes RFS: the global socket flow table for the flows the
// host sees concurrently (32768, the kernel documentation's suggestion for
// a moderately loaded server) and rps_flow_cnt per queue as its share,
// rounded up to a power of two as the kernel sizes the table (it reads
// back the rounded value, which --apply compares).
func rfsEntries(c *netconfig.NetConfig) (global, perQueue int64) {
	global = 32768
	share := global / int64(max(len(c.Interface.RX), 1))
	perQueue = 1
	for perQueue < share {
		perQueue <<= 1
	}
	return global, perQueue
}

// rfsChanges: the global flow table and each RPS queue's share of it.
var rfsChanges = []ChangeShape{
	{Kind: ChangeSysctl, Target: "net.core.rps_sock_flow_entries", Old: Decimal, New: Decimal},
	{Kind: ChangeSysfs, Target: "/sys/class/net/<iface>/queues/rx-<n>/rps_flow_cnt", Old: Decimal, New: Decimal},
}

func checkRFSOff(in NetInput) *Finding {
	c := in.Config
	if c == nil {
		return nil
	}
	rpsOn, flowOff := 0, []int{}
	for _, q := range c.Interface.RX {
		if q.RPSKnown && !q.RPSCPUs.IsEmpty() {
			rpsOn++
			if q.RPSFlowCnt == 0 {
				flowOff = append(flowOff, q.Index)
			}
		}
	}
	globalOff := c.Core.RPSSockFlowEntries != nil && *c.Core.RPSSockFlowEntries == 0
	if rpsOn == 0 || (!globalOff && len(flowOff) == 0) {
		return nil
	}
	iface := c.Interface.Name
	global, perQueue := rfsEntries(c)
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("RPS is on for %d queues of %s but RFS is off: packets are processed on a hashed CPU, not the one the receiving thread runs on", rpsOn, iface),
		Impact:   0.03,
	}
	if globalOff {
		f.Evidence = append(f.Evidence, "net.core.rps_sock_flow_entries = 0")
	} else if c.Core.HostOnly {
		f.Evidence = append(f.Evidence, "net.core.rps_sock_flow_entries: not visible in this network namespace (host-wide)")
	}
	if len(flowOff) > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("rps_flow_cnt = 0 on RX queues %v", flowOff))
	}
	r := &f.Recommendation
	r.Why = "RPS spreads packets by flow hash; RFS (rps_sock_flow_entries and each queue's rps_flow_cnt) steers each flow to the CPU where its socket was last read, so the protocol work and the application share a cache. The kernel documentation recommends configuring them together."
	r.Expected = "Receive processing on the CPU of the reading thread; fewer cache misses and cross-CPU wakeups for connected or long-lived flows."
	r.Reference = "Linux kernel documentation, networking/scaling.rst (RFS: rps_sock_flow_entries 32768, rps_flow_cnt = entries / queues)"
	r.Caveats = []string{"A UDP server with one socket per CPU steered by SO_ATTACH_REUSEPORT_CBPF (net.reuseport-steering) already keeps each flow on its CPU; RFS then adds little."}
	if globalOff {
		settingOrAdvice(r, []sysctlSetting{{Key: "net.core.rps_sock_flow_entries", Old: i64s(c.Core.RPSSockFlowEntries), New: strconv.FormatInt(global, 10)}}, c.Core.HostOnly)
	} else {
		r.Kind = KindSetting
		if c.Core.RPSSockFlowEntries == nil {
			r.Caveats = append(r.Caveats, "rps_flow_cnt steers nothing while the host-wide net.core.rps_sock_flow_entries is 0: check it on the host ("+
				SysctlChange("net.core.rps_sock_flow_entries", "0", strconv.FormatInt(global, 10)).Command(strconv.FormatInt(global, 10))+")")
		}
	}
	for _, q := range flowOff {
		ch := RPSFlowCntChange(iface, q, 0, perQueue)
		if r.Kind == KindSetting {
			r.AddChanges(ch)
		} else {
			r.Apply = append(r.Apply, "# and: "+ch.Command(ch.New))
		}
	}
	r.Parameters = map[string]int64{"rps_sock_flow_entries": global, "rps_flow_cnt": perQueue}
	return f
}
