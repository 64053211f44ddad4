package diagnose

import (
	"fmt"
	"math"
	"sort"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/evidence"
)

// Rules on /proc/net/softnet_stat: NET_RX runs cut short by the budget
// (time_squeeze) and packets dropped because a CPU's backlog was full.

const (
	// SqueezeRunShare: time_squeeze over NET_RX runs on a CPU above which
	// the budget, not the arrivals, ends receive processing; warn from
	// SqueezeRunShareWarn. SqueezeMinPerS keeps a handful out.
	SqueezeRunShare     = 0.05
	SqueezeRunShareWarn = 0.20
	SqueezeMinPerS      = 10
	// BacklogDropShare: backlog drops over packets queued to the backlog
	// worth acting on; BacklogStallSeconds is the stall of the processing
	// CPU the backlog must absorb.
	BacklogDropShare    = 0.001
	BacklogStallSeconds = 0.010
	BacklogMax          = 1 << 16
	// Kernel defaults, used when the namespace cannot show the values.
	defaultNetdevBudget      = 300
	defaultNetdevBudgetUsecs = 2000
	defaultNetdevMaxBacklog  = 1000
)

type squeezedCPU struct {
	cpu       int
	squeezes  uint64
	runs      uint64
	share     float64
	runTimeNs float64
}

// squeezedCPUs are the CPUs whose NET_RX runs ran out of budget often.
func squeezedCPUs(in NetInput) (out []squeezedCPU) {
	e := in.Evidence
	runs := map[int]struct {
		n  uint64
		ns uint64
	}{}
	for _, c := range e.Softirq.CPUs {
		v := c.Vectors["NET_RX"]
		runs[c.CPU] = struct {
			n  uint64
			ns uint64
		}{v.Count, v.TimeNs}
	}
	secs := seconds(e.DurationNs)
	for _, s := range e.Drops.Softnet {
		r := runs[s.CPU]
		if r.n == 0 || secs <= 0 || float64(s.TimeSqueeze)/secs < SqueezeMinPerS {
			continue
		}
		share := float64(s.TimeSqueeze) / float64(r.n)
		if share >= SqueezeRunShare {
			out = append(out, squeezedCPU{cpu: s.CPU, squeezes: s.TimeSqueeze, runs: r.n, share: math.Min(share, 1), runTimeNs: float64(r.ns) / float64(r.n)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].share > out[j].share })
	return out
}

// budgetChanges computes the new budget: when the mean NET_RX run lasts at
// least half of netdev_budget_usecs the time limit is what ends runs, else
// the packet budget. The binding limit grows with the squeezed share of
// runs (1 + 4 × share: a quarter of runs squeezed doubles it), at most 4×.
func budgetChanges(c *netconfig.NetConfig, worst squeezedCPU) []sysctlSetting {
	budget, usecs := int64(defaultNetdevBudget), int64(defaultNetdevBudgetUsecs)
	var oldBudget, oldUsecs *int64
	if c != nil {
		oldBudget, oldUsecs = c.Core.NetdevBudget, c.Core.NetdevBudgetUsecs
	}
	if oldBudget != nil {
		budget = *oldBudget
	}
	if oldUsecs != nil {
		usecs = *oldUsecs
	}
	factor := math.Min(4, 1+4*worst.share)
	grow := func(v int64, round int64) string {
		n := int64(math.Ceil(float64(v)*factor/float64(round))) * round
		return fmt.Sprint(max(n, v+round))
	}
	if worst.runTimeNs >= 0.5*float64(usecs)*1e3 {
		return []sysctlSetting{{Key: "net.core.netdev_budget_usecs", Old: i64s(oldUsecs), New: grow(usecs, 500)}}
	}
	return []sysctlSetting{{Key: "net.core.netdev_budget", Old: i64s(oldBudget), New: grow(budget, 100)}}
}

// budgetChangeShapes: one of the two NET_RX budgets.
var budgetChangeShapes = []ChangeShape{{Kind: ChangeSysctl, Target: "net.core.{netdev_budget|netdev_budget_usecs}", Old: Decimal, New: Decimal}}

func checkSoftnetSqueeze(in NetInput) *Finding {
	sq := squeezedCPUs(in)
	if len(sq) == 0 {
		return nil
	}
	worst := sq[0]
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("NET_RX runs out of budget on %d CPUs: %s of CPU %d's runs ended with packets left (time_squeeze)", len(sq), pct(worst.share), worst.cpu),
		Impact:   0.2 * worst.share,
	}
	if worst.share >= SqueezeRunShareWarn {
		f.Severity = Warn
	}
	for i, s := range sq {
		if i == 6 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("... and %d more CPUs", len(sq)-6))
			break
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("CPU %d: %d time_squeeze in %d NET_RX runs (%s, %.0f/s), mean run %.0f µs",
			s.cpu, s.squeezes, s.runs, pct(s.share), float64(s.squeezes)/seconds(in.Evidence.DurationNs), s.runTimeNs/1e3))
	}
	changes := budgetChanges(in.Config, worst)
	r := &f.Recommendation
	r.Why = "net_rx_action stops after netdev_budget packets or netdev_budget_usecs, whichever comes first, and leaves the rest for the next run (counted as time_squeeze): under a steady flood the NIC ring or backlog fills in between and drops. The limit that ends the runs here is " + changes[0].Key + "."
	r.Expected = "Fewer squeezed runs and fewer ring/backlog drops on these CPUs; each NET_RX run may take longer, delaying other work on the CPU by up to the new limit."
	r.Reference = "Linux kernel documentation, networking/scaling.rst and admin-guide/sysctl/net.rst (netdev_budget, netdev_budget_usecs)"
	r.Caveats = []string{"A CPU that is saturated by NET_RX needs the load spread (RSS, RPS: see net.rps-needed) more than a bigger budget."}
	hostOnly := in.Config != nil && in.Config.Core.HostOnly
	settingOrAdvice(r, changes, hostOnly)
	r.Parameters = map[string]int64{}
	var n int64
	fmt.Sscan(changes[0].New, &n)
	r.Parameters[changes[0].Key] = n
	return f
}

// backlogChange sizes netdev_max_backlog for the busiest CPU's backlog
// arrivals over BacklogStallSeconds, rounded up to a power of two, at least
// twice the old value.
func backlogChange(c *netconfig.NetConfig, perSecond float64) sysctlSetting {
	var old *int64
	cur := int64(defaultNetdevMaxBacklog)
	if c != nil && c.Core.NetdevMaxBacklog != nil {
		old, cur = c.Core.NetdevMaxBacklog, *c.Core.NetdevMaxBacklog
	}
	want := max(int64(math.Ceil(perSecond*BacklogStallSeconds)), 2*cur)
	size := int64(1)
	for size < want {
		size <<= 1
	}
	return sysctlSetting{Key: "net.core.netdev_max_backlog", Old: i64s(old), New: fmt.Sprint(min(size, max(BacklogMax, cur)))}
}

// backlogChanges: the per-CPU backlog's size, and flow limiting on the
// dropping CPUs.
var backlogChanges = []ChangeShape{
	{Kind: ChangeSysctl, Target: "net.core.netdev_max_backlog", Old: Decimal, New: Decimal},
	{Kind: ChangeSysctl, Target: "net.core.flow_limit_cpu_bitmap", Old: CPUMask, New: CPUMask},
}

func checkBacklogDrops(in NetInput) *Finding {
	e := in.Evidence
	secs := seconds(e.DurationNs)
	if secs <= 0 {
		return nil
	}
	var dropped, queued uint64
	var cpus []int
	var busiest evidence.SoftnetCPU
	for _, s := range e.Drops.Softnet {
		if s.Dropped == 0 {
			continue
		}
		dropped += s.Dropped
		queued += s.Processed + s.Dropped
		cpus = append(cpus, s.CPU)
		if s.Processed+s.Dropped > busiest.Processed+busiest.Dropped {
			busiest = s
		}
	}
	if dropped == 0 || float64(dropped) < BacklogDropShare*float64(queued) {
		return nil
	}
	share := float64(dropped) / float64(queued)
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d packets dropped at full per-CPU backlogs (%s of those queued on CPUs %s)", dropped, pct(share), cpuset.Of(cpus...).List()),
		Impact:   math.Min(1, share),
		Evidence: []string{fmt.Sprintf("/proc/net/softnet_stat: %d dropped, %d processed on CPUs %s in %.1f s; busiest CPU %d: %.0f packets/s into its backlog",
			dropped, queued-dropped, cpuset.Of(cpus...).List(), secs, busiest.CPU, float64(busiest.Processed+busiest.Dropped)/secs)},
	}
	if share >= 0.1 {
		f.Severity = Crit
	}
	change := backlogChange(in.Config, float64(busiest.Processed+busiest.Dropped)/secs)
	r := &f.Recommendation
	r.Why = "Packets that RPS, netif_rx (veth, tunnels) or a NAPI-less driver hands to a CPU wait in that CPU's backlog, at most netdev_max_backlog of them; beyond it they are dropped before any socket sees them. The size here holds " + fmt.Sprintf("%.0f ms", BacklogStallSeconds*1e3) + " of the busiest CPU's arrivals."
	r.Expected = "No backlog drops while a CPU's receive processing stalls for up to 10 ms; a backlog that stays full means the CPU is too slow on average, which only spreading the load (RPS, more queues) fixes."
	r.Reference = "Linux kernel documentation, admin-guide/sysctl/net.rst (netdev_max_backlog, flow_limit_cpu_bitmap) and networking/scaling.rst (RPS flow limit)"
	hostOnly := in.Config != nil && in.Config.Core.HostOnly
	settings := []sysctlSetting{change}
	// Flow limit: under backlog pressure the packets of a flow that holds
	// more than half of a CPU's recent backlog are dropped first instead of
	// everyone's. Set with the backlog on the dropping CPUs when it is off;
	// a kernel without CONFIG_NET_FLOW_LIMIT has no such key.
	if fl := flowLimitSetting(in, cpus); fl != nil {
		settings = append(settings, *fl)
		r.Caveats = append(r.Caveats, fmt.Sprintf("Flow limiting (net.core.flow_limit_cpu_bitmap = CPUs %s, the dropping ones) changes who is dropped, not how many: when one large flow fills a backlog, that flow's packets go first and the other flows' get through.", cpuset.Of(cpus...).List()))
	}
	settingOrAdvice(r, settings, hostOnly)
	var n int64
	fmt.Sscan(change.New, &n)
	r.Parameters = map[string]int64{"netdev_max_backlog": n}
	return f
}

// flowLimitSetting turns flow limiting on for cpus when it is off (or
// when this namespace cannot show it: then the recommendation is advice
// for the host); nil when it is on or the kernel lacks it.
func flowLimitSetting(in NetInput, cpus []int) *sysctlSetting {
	var old *string
	if c := in.Config; c != nil && c.Core.FlowLimitCPUBitmap != nil {
		cur, err := cpuset.ParseMask(*c.Core.FlowLimitCPUBitmap)
		if err != nil || !cur.IsEmpty() {
			return nil
		}
		v := normalizeSysctl(*c.Core.FlowLimitCPUBitmap)
		old = &v
	} else if c == nil || !c.Core.HostOnly {
		return nil
	}
	return &sysctlSetting{Key: "net.core.flow_limit_cpu_bitmap", Old: old, New: cpuset.Of(cpus...).Mask(nrCPUs(in))}
}
