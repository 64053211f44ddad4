package budget

import (
	"math"
	"time"

	"github.com/perfscope/perfscope/probes"
)

// guardTick is how often an attached sampled group's cost so far in the
// period is checked against its allowance.
const guardTick = 25 * time.Millisecond

// guardSlack is how far over its planned share a group may go before the
// guard ends a window the budget shortened: twice, so that windows of
// steady traffic are not cut (a window cut while its packets' reads still
// lag behind them counts too few reads per packet: at 1.25 the benchmark's
// reads came out up to 25 % low), while a flood starting mid-period is
// still stopped.
const guardSlack = 2.0

// allowances are what each sampled group may cost each CPU in a period of
// length period, in ns: the budget left after the exact groups and the
// fixed costs, split by the groups' measured rates (evenly while none is
// known), times slack. g.mu held.
func (g *Governor) allowances(period time.Duration, slack float64) map[*governedGroup][]float64 {
	budget := g.programBudget()
	left := make([]float64, g.cpus)
	sum := make([]float64, g.cpus)
	var sampled []*governedGroup
	for cpu := range left {
		left[cpu] = budget
		if cpu < len(g.fixRate) {
			left[cpu] -= g.fixRate[cpu]
		}
	}
	for _, gg := range g.groups {
		if gg.sampled() {
			sampled = append(sampled, gg)
			addRate(sum, gg.rate)
			continue
		}
		for cpu := range left {
			if cpu < len(gg.rate) {
				left[cpu] -= gg.rate[cpu]
			}
		}
	}
	out := map[*governedGroup][]float64{}
	for _, gg := range sampled {
		a := make([]float64, g.cpus)
		for cpu := range a {
			share := 1 / float64(len(sampled))
			if sum[cpu] > 0 {
				r := 0.0
				if cpu < len(gg.rate) {
					r = gg.rate[cpu]
				}
				share = r / sum[cpu]
			}
			a[cpu] = slack * math.Max(0, left[cpu]) * period.Seconds() * share
		}
		out[gg] = a
	}
	return out
}

// guardedSleep waits for t like sleepUntil and meanwhile detaches any
// sampled group whose cost in the period so far passed its allowance:
// traffic that rises within a period (a flood starting while the windows
// were planned from a quiet one) ends the window early instead of taking
// the whole period's budget and more.
//
// A window it ends also leaves the rate its group ran at over the last
// tick, for the next period's plan: the period's own mean rate mixes the
// quiet part before the flood with the flood, and planned from it the
// next window was twice too long.
//
// whole says the period's windows opened with it and would last it (the
// budget did not shorten them).
func (g *Governor) guardedSleep(t time.Time, allow map[*governedGroup][]float64, whole bool) bool {
	type reading struct {
		at   time.Time
		cost []float64
		runs uint64
	}
	last := map[*governedGroup]reading{}
	for {
		var attached []*governedGroup
		for gg := range allow {
			if gg.hg.IsAttached() {
				attached = append(attached, gg)
			}
		}
		if len(attached) == 0 {
			return g.sleepUntil(t)
		}
		next := minTime(t, time.Now().Add(guardTick))
		if g.sleepUntil(next) {
			return true
		}
		// Groups of one probe share its counters: read once a tick.
		read := map[probes.SelfCounted]selfReading{}
		for _, gg := range attached {
			cost, runs, ok := g.costInPeriod(gg, read)
			if !ok {
				continue
			}
			now := time.Now()
			if !overAny(cost, allow[gg]) {
				last[gg] = reading{now, cost, runs}
				continue
			}
			g.mu.Lock()
			prev, seen := last[gg]
			if !seen {
				prev = reading{at: gg.onSince}
			}
			if d := now.Sub(prev.at); !prev.at.IsZero() && d > 0 {
				surge := make([]float64, len(cost))
				for cpu := range cost {
					var before float64
					if cpu < len(prev.cost) {
						before = prev.cost[cpu]
					}
					surge[cpu] = math.Max(0, cost[cpu]-before) / d.Seconds()
				}
				gg.surge = surge
				if whole && runs >= prev.runs {
					gg.tailRate = float64(runs-prev.runs) / d.Seconds()
				}
			}
			g.mu.Unlock()
			g.switchGroup(gg, false)
		}
		if !time.Now().Before(t) {
			return false
		}
	}
}

func overAny(cost, allow []float64) bool {
	for cpu := range cost {
		if cpu < len(allow) && cost[cpu] > allow[cpu] {
			return true
		}
	}
	return false
}

// selfReading is one reading of a probe's counters.
type selfReading struct {
	costs probes.SelfCosts
	err   error
}

// costInPeriod is what gg's runs since the period began cost each CPU,
// in ns, and how many they were; false when its counters cannot be read.
// read keeps this tick's readings of each probe's counters.
func (g *Governor) costInPeriod(gg *governedGroup, read map[probes.SelfCounted]selfReading) ([]float64, uint64, bool) {
	r, ok := read[gg.counter]
	if !ok {
		r.costs, r.err = gg.counter.SelfCosts()
		read[gg.counter] = r
	}
	cur, err := r.costs, r.err
	if err != nil {
		return nil, 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var prev probes.SelfCosts
	for i, c := range g.counters {
		if c == gg.counter && i < len(g.last) {
			prev = g.last[i]
		}
	}
	d := cur.Sub(prev)
	cost := make([]float64, g.cpus)
	var runs uint64
	for _, hook := range gg.hg.Hooks {
		for cpu, v := range d[hook] {
			runs += v.Runs
			if cpu < len(cost) {
				cost[cpu] += float64(v.Runs) * g.perRun(cur[hook])
			}
		}
	}
	return cost, runs, true
}

// sleepUntil waits for t; true when the governor was stopped first.
func (g *Governor) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-g.stop:
			return true
		default:
			return false
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-g.stop:
		return true
	case <-timer.C:
		return false
	}
}

// switchGroup attaches or detaches one sampled group and returns when it
// did (zero: nothing changed). An attach that fails (the kernel refused)
// leaves the group detached: its estimate then rests on the windows it
// had.
func (g *Governor) switchGroup(gg *governedGroup, on bool) time.Time {
	if on == gg.hg.IsAttached() {
		return time.Time{}
	}
	// The programs start or stop counting somewhere inside the switch
	// (it patches every CPU), and on a saturated machine the thread may
	// wait for a CPU on either side of it: the reference is read before
	// and after, its midpoint taken and half the difference kept as the
	// edge's uncertainty, which the estimate's bound carries.
	began := threadCPU()
	edge := gg.edgeRef()
	before := edge.count()
	if on {
		t, err := gg.hg.Attach()
		if err != nil {
			return time.Time{}
		}
		ref, slack := midpoint(before, edge.count())
		g.mu.Lock()
		g.noteSwitch(gg, threadCPU()-began)
		gg.onSince, gg.refSince = t, ref
		gg.refSlack += slack
		g.mu.Unlock()
		return t
	}
	t, _ := gg.hg.Detach()
	ref, slack := midpoint(before, edge.count())
	g.mu.Lock()
	g.noteSwitch(gg, threadCPU()-began)
	gg.refSlack += slack
	gg.closeSpan(t, ref)
	gg.detached = true
	g.mu.Unlock()
	return t
}

// noteSwitch keeps what a switch of the group took of the governor's
// thread's CPU: the kernel patches the tracepoints' call sites and waits,
// spinning, on every CPU (text_poke's IPIs). Wall time would also count
// the waits for a CPU a flood keeps busy (g.mu held).
func (g *Governor) noteSwitch(gg *governedGroup, d time.Duration) {
	g.switched += d
	g.periodSwitched += d
	if gg.switchNs == 0 {
		gg.switchNs = float64(d)
		return
	}
	gg.switchNs = (7*gg.switchNs + float64(d)) / 8
}

func (gg *governedGroup) closeSpan(t time.Time, ref uint64) {
	if gg.onSince.IsZero() {
		return
	}
	if t.After(gg.onSince) {
		gg.spans = append(gg.spans, span{gg.onSince, t})
		gg.curOn += t.Sub(gg.onSince)
	}
	if ref >= gg.refSince {
		gg.refOn += ref - gg.refSince
	}
	gg.onSince = time.Time{}
}
