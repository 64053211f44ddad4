package diagnose

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/base/shellquote"
	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/netconfig"
)

// The NAPI rules read the receive path's polling settings (netconfig's
// NAPI section: sysfs and the netdev netlink family) beside the IRQs and
// threads the run measured. Their source is the kernel's own
// documentation, Documentation/networking/napi.rst.
const (
	// NAPIDocs names the source of the NAPI rules.
	NAPIDocs = "Linux kernel documentation, networking/napi.rst (\"Software IRQ coalescing\", \"Threaded NAPI\", \"Busy polling\")"
	// NAPIStormIRQsPerS: all queue IRQs of the device together at or
	// above this rate, with NAPI deferral off, are an interrupt storm worth
	// deferring (ten queues at net.irq-coalescing's per-queue rate).
	NAPIStormIRQsPerS = 100_000
	// NAPIDeferHardIRQs and NAPIGROFlushTimeoutNs are napi.rst's example
	// values: up to 2 empty polls with the IRQ kept masked, re-polled
	// every 200 µs meanwhile.
	NAPIDeferHardIRQs     = 2
	NAPIGROFlushTimeoutNs = 200_000
)

// NAPIDeferChange and NAPIFlushTimeoutChange set the device-wide NAPI
// deferral settings (/sys/class/net/IF/napi_defer_hard_irqs and
// gro_flush_timeout), which every NAPI instance of the device takes.
func NAPIDeferChange(iface string, old, new int64) Change {
	return Change{Kind: ChangeSysfs, Iface: iface, Path: "/sys/class/net/" + iface + "/napi_defer_hard_irqs",
		Old: strconv.FormatInt(old, 10), New: strconv.FormatInt(new, 10)}
}

// NAPIFlushTimeoutChange: see NAPIDeferChange.
func NAPIFlushTimeoutChange(iface string, old, new int64) Change {
	return Change{Kind: ChangeSysfs, Iface: iface, Path: "/sys/class/net/" + iface + "/gro_flush_timeout",
		Old: strconv.FormatInt(old, 10), New: strconv.FormatInt(new, 10)}
}

var napiDeferChanges = []ChangeShape{
	{Kind: ChangeSysfs, Target: "/sys/class/net/<iface>/napi_defer_hard_irqs", Old: Decimal, New: Decimal},
	{Kind: ChangeSysfs, Target: "/sys/class/net/<iface>/gro_flush_timeout", Old: Decimal, New: Decimal},
}

// deviceIRQRate is all queue IRQs of the device together, per second.
func deviceIRQRate(in NetInput) (rate float64, irqs int) {
	secs := seconds(in.Evidence.DurationNs)
	if secs <= 0 {
		return 0, 0
	}
	var n uint64
	for _, q := range in.Evidence.IRQs.IRQs {
		for _, c := range q.CountByCPU {
			n += c
		}
	}
	return float64(n) / secs, len(in.Evidence.IRQs.IRQs)
}

// napiDeferralOff is true when neither the device nor any of its NAPI
// instances defers IRQs (every setting read is 0, and at least the
// device's files or every instance's own settings were read), with the
// device's values (0 where it has no files).
func napiDeferralOff(n netconfig.NAPIConfig) (off bool, defer_, flush int64) {
	sysfs := n.DeferHardIRQs != nil && n.GROFlushTimeoutNs != nil
	if !sysfs && !napiPerInstance(n) {
		return false, 0, 0
	}
	if sysfs {
		defer_, flush = *n.DeferHardIRQs, *n.GROFlushTimeoutNs
	}
	if defer_ != 0 || flush != 0 {
		return false, defer_, flush
	}
	for _, i := range n.Instances {
		if (i.DeferHardIRQs != nil && *i.DeferHardIRQs != 0) || (i.GROFlushTimeoutNs != nil && *i.GROFlushTimeoutNs != 0) {
			return false, defer_, flush
		}
	}
	return true, defer_, flush
}

func checkNAPIDeferIRQs(in NetInput, t Thresholds) *Finding {
	c := in.Config
	if c == nil {
		return nil
	}
	off, oldDefer, oldFlush := napiDeferralOff(c.NAPI)
	if !off {
		return nil
	}
	// Per-packet hardware interrupts are net.irq-coalescing's: the NIC's
	// own moderation comes first.
	if c.Coalesce != nil && c.Coalesce.PerPacketInterrupts() {
		return nil
	}
	rate, irqs := deviceIRQRate(in)
	if rate < NAPIStormIRQsPerS {
		return nil
	}
	iface := c.Interface.Name
	_, top := maxNetRX(in.Evidence)
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("%s takes %.0f interrupts/s over %d queue IRQs with NAPI deferral off: defer hard IRQs so a busy queue is polled, not interrupted", iface, rate, irqs),
		Impact:   0.05,
		Evidence: []string{
			fmt.Sprintf("%d queue IRQs: %.0f interrupts/s together; busiest CPU %s in NET_RX", irqs, rate, pct(top)),
		},
	}
	if c.NAPI.DeferHardIRQs != nil && c.NAPI.GROFlushTimeoutNs != nil {
		f.Evidence = append([]string{fmt.Sprintf("/sys/class/net/%s: napi_defer_hard_irqs %d, gro_flush_timeout %d ns", iface, oldDefer, oldFlush)}, f.Evidence...)
	}
	if n := len(c.NAPI.Instances); n > 0 && napiPerInstance(c.NAPI) {
		f.Evidence = append(f.Evidence, fmt.Sprintf("netdev netlink: %d NAPI instances, every one with defer-hard-irqs 0 and gro-flush-timeout 0", n))
	}
	perInstance, note := napiGranularity(in)
	if note != "" {
		f.Evidence = append(f.Evidence, note)
	}
	if top >= t.Get(NetThresholds.NetRXSaturated) {
		f.Severity, f.Impact = Warn, 0.1
	}
	r := &f.Recommendation
	r.Kind = KindSetting
	r.Why = "Each hard IRQ re-arms after a poll finds its queue empty, so a queue under steady load interrupts once per poll cycle. With napi_defer_hard_irqs N and gro_flush_timeout T the kernel keeps the IRQ masked through up to N empty polls and re-polls from a timer every T ns instead — fewer interrupts and larger batches on busy queues, the IRQ back when the queue stays empty."
	r.Reference = NAPIDocs + "; Eric Dumazet, \"net: napi: add hard irqs deferral feature\" (2020)"
	if perInstance != nil {
		addNAPIInstanceChanges(in, r, perInstance)
		r.Reference += "; " + NAPISetSource
		r.Caveats = []string{
			"napi-set writes the NAPI instances by id: a device reset or a change of its channel count gives its queues new NAPI instances, which start from the device-wide files' values — perfscope refuses the apply (and skips the revert) of an id that no longer belongs to " + iface + ".",
		}
	} else {
		r.AddChanges(NAPIDeferChange(iface, oldDefer, NAPIDeferHardIRQs), NAPIFlushTimeoutChange(iface, oldFlush, NAPIGROFlushTimeoutNs))
		if napiPerInstance(c.NAPI) {
			r.Caveats = []string{"The device-wide files set every NAPI instance of the device; `" + shellquote.Join("ynl", "--family", "netdev", "--do", "napi-set") + "` sets one instance (" + NAPISetSource + ")."}
		} else {
			r.Caveats = []string{"The device-wide files set every NAPI instance of the device: this kernel has no per-instance settings (napi-set, Linux 6.13+)."}
		}
	}
	r.Expected = fmt.Sprintf("Fewer interrupts per packet on the busy queues (re-polls every %d µs while busy); up to %d µs more latency when a queue goes quiet.", NAPIGROFlushTimeoutNs/1000, NAPIGROFlushTimeoutNs/1000)
	r.Caveats = append(r.Caveats, "Measure the tail latency before and after: a timer re-poll delays the first packet after a quiet spell by up to gro_flush_timeout.")
	r.Parameters = map[string]int64{"napi_defer_hard_irqs": NAPIDeferHardIRQs, "gro_flush_timeout_ns": NAPIGROFlushTimeoutNs}
	return f
}

// napiThreadChanges: a NAPI kernel thread's affinity.
var napiThreadChanges = []ChangeShape{{Kind: ChangeThreadAffinity, Target: "<n>", Old: KindForm, New: OneCPU}}

func checkNAPIThreadsUnpinned(in NetInput) *Finding {
	c := in.Config
	if c == nil {
		return nil
	}
	irqCPU := map[int]int{} // IRQ → the one CPU it is delivered to
	for _, q := range c.IRQs {
		if q.Affinity == nil {
			continue
		}
		to := q.Affinity.SMPAffinity
		if q.Affinity.EffectiveKnown {
			to = q.Affinity.Effective
		}
		if to.Len() == 1 {
			irqCPU[q.IRQ] = to.CPUs()[0]
		}
	}
	appCPUs := map[int][]int{} // CPU → receiving threads last on it
	for _, th := range in.Evidence.Sockets.Threads {
		appCPUs[th.LastCPU] = append(appCPUs[th.LastCPU], th.TID)
	}
	type move struct {
		inst    netconfig.NAPIInstance
		allowed cpuset.Set
		cpu     int
	}
	var moves []move
	var unpinned, shared int
	var evidence []string
	for _, inst := range c.NAPI.Instances {
		if inst.PID <= 0 || inst.ThreadCPUs == "" {
			continue
		}
		allowed, err := cpuset.ParseList(inst.ThreadCPUs)
		if err != nil || allowed.Len() <= 1 {
			continue
		}
		unpinned++
		line := fmt.Sprintf("NAPI %d: thread %d may run on CPUs %s", inst.ID, inst.PID, allowed.List())
		if inst.ThreadLastCPU != nil {
			line += fmt.Sprintf(", last on CPU %d", *inst.ThreadLastCPU)
			if tids := appCPUs[*inst.ThreadLastCPU]; len(tids) > 0 {
				shared++
				line += fmt.Sprintf(" beside receiving thread %d", tids[0])
			}
		}
		if cpu, ok := irqCPU[inst.IRQ]; ok {
			line += fmt.Sprintf("; its IRQ %d goes to CPU %d", inst.IRQ, cpu)
			moves = append(moves, move{inst: inst, allowed: allowed, cpu: cpu})
		}
		if len(evidence) < 8 {
			evidence = append(evidence, line)
		}
	}
	if unpinned == 0 {
		return nil
	}
	iface := c.Interface.Name
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("%d threaded NAPI instances of %s poll from kernel threads free to run on any CPU", unpinned, iface),
		Impact:   0.03,
		Evidence: evidence,
	}
	if shared > 0 {
		f.Severity, f.Impact = Warn, 0.08
		f.Title += fmt.Sprintf("; %d last ran beside the receiving threads", shared)
	}
	r := &f.Recommendation
	slices.SortFunc(moves, func(a, b move) int { return int(a.inst.ID) - int(b.inst.ID) })
	if len(moves) > 0 {
		r.Kind = KindSetting
		var pairs []string
		for _, m := range moves {
			r.AddChanges(ThreadAffinityChange(m.inst.PID, m.allowed, cpuset.Of(m.cpu)))
			pairs = append(pairs, fmt.Sprintf("%d→%d", m.inst.PID, m.cpu))
		}
		f.Evidence = append(f.Evidence, "pinning (thread→CPU of its IRQ): "+strings.Join(pairs, " "))
	} else {
		r.Kind = KindAdvice
		r.Apply = []string{"Pin each NAPI thread (`ps -eo pid,psr,comm | grep napi/" + iface + "`) with taskset -pc CPU PID to the CPU its queue's IRQ is delivered to, away from the application's threads."}
	}
	r.Why = "A threaded NAPI instance is polled by a kernel thread the scheduler places like any other: it migrates, and it competes for CPU with the application threads that read its packets. The kernel documentation recommends pinning each thread to one CPU, the one that services its interrupt."
	r.Expected = "Polling stays on the IRQ's CPU, its cache warm; the receiving threads stop being preempted by packet processing on their CPUs."
	r.Reference = NAPIDocs
	r.Caveats = []string{"A thread's affinity lasts until the device is reset or threaded NAPI toggled: make it permanent in a udev rule or the service that configures the NIC."}
	return f
}

func checkBusyPollNothingToPoll(in NetInput) *Finding {
	c := in.Config
	if c == nil || c.NAPI.Unavailable != "" || len(c.NAPI.Instances) > 0 {
		return nil
	}
	var set []string
	if c.Core.BusyRead != nil && *c.Core.BusyRead > 0 {
		set = append(set, fmt.Sprintf("net.core.busy_read %d µs", *c.Core.BusyRead))
	}
	if c.Core.BusyPoll != nil && *c.Core.BusyPoll > 0 {
		set = append(set, fmt.Sprintf("net.core.busy_poll %d µs", *c.Core.BusyPoll))
	}
	if len(set) == 0 {
		return nil
	}
	iface := c.Interface.Name
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("busy polling is configured (%s) but %s has no NAPI instance to poll: its sockets never busy-poll", strings.Join(set, ", "), iface),
		Impact:   0.01,
		Evidence: []string{
			strings.Join(set, ", "),
			fmt.Sprintf("netdev netlink napi-get lists no NAPI instance of %s", iface),
		},
	}
	r := &f.Recommendation
	r.Kind = KindAdvice
	r.Why = "A socket busy-polls the NAPI instance that delivered its last packet (its napi_id); packets that arrive through a device without NAPI instances of its own (loopback, veth without GRO or XDP, many tunnels) carry none, so the setting does nothing for this interface's traffic — the latency it was meant to save is not saved."
	r.Apply = []string{"Busy-poll where the packets enter: on the physical NIC's traffic, or give veth NAPI (`" + shellquote.Join("ethtool", "-K", iface, "gro", "on") + "` on the receiving side)."}
	r.Expected = "Nothing changes on this interface either way; the finding explains a latency setting that is not taking effect."
	r.Reference = NAPIDocs
	return f
}

// RXAllocFailShare: RX buffer allocation failures at or above this share
// of the packets received make the finding a warning.
const RXAllocFailShare = 0.001

func checkRXAllocFail(in NetInput) *Finding {
	e := in.Evidence
	fails, ok := e.Queues.QStatsSum("rx", "rx-alloc-fail")
	if !ok || fails == 0 {
		return nil
	}
	rx, _ := e.Queues.QStatsSum("rx", "rx-packets")
	iface := ifaceName(in)
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("%s's driver failed %d times to allocate RX buffers in the window", iface, fails),
		Impact:   0.02,
	}
	var per []string
	for _, q := range e.Queues.QStats {
		if n := q.Counters["rx-alloc-fail"]; q.Type == "rx" && n > 0 && len(per) < 8 {
			per = append(per, fmt.Sprintf("rx-%d %d", q.Queue, n))
		}
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("netdev netlink qstats: rx-alloc-fail %d against rx-packets %d in %.1f s (%s)", fails, rx, seconds(e.DurationNs), strings.Join(per, ", ")))
	if rx > 0 && float64(fails)/float64(rx) >= RXAllocFailShare {
		f.Severity, f.Impact = Warn, math.Min(1, 0.05+float64(fails)/float64(rx))
	}
	r := &f.Recommendation
	r.Kind = KindAdvice
	r.Why = "When NAPI refills the RX ring, the driver allocates a buffer (a page or an skb) per descriptor; an allocation that fails leaves the descriptor empty, and depending on the driver the packet is dropped or the ring runs short until a later poll retries. Failures mean the kernel's free memory for atomic allocations ran low at softirq time."
	r.Apply = []string{
		"# memory the kernel keeps free for atomic allocations (raise with care: it is taken from applications): " + shellquote.Join("sysctl", "vm.min_free_kbytes"),
		"# the pressure behind it: " + shellquote.Join("grep", "-E", "MemFree|MemAvailable", "/proc/meminfo") + "; " + shellquote.Join("cat", "/proc/buddyinfo"),
	}
	r.Expected = "No rx-alloc-fail at the same load once atomic allocations find free pages."
	r.Reference = "Linux kernel netlink spec, Documentation/netlink/specs/netdev.yaml (qstats: rx-alloc-fail); Documentation/admin-guide/sysctl/vm.rst (min_free_kbytes)"
	return f
}
