package budget

import (
	"math"
	"time"

	"github.com/perfscope/perfscope/probes"
)

// closePeriod records the period [start, end) of every group and updates
// the measured costs (g.mu held).
func (g *Governor) closePeriod(start, end time.Time) {
	cur := g.readCounters()
	now := map[*reference]uint64{}
	for _, r := range g.refs {
		now[r] = r.count()
	}
	length := end.Sub(start) + g.lead
	g.lead = 0
	for _, gg := range g.groups {
		if !gg.onSince.IsZero() { // attached across the boundary
			gg.spans = append(gg.spans, span{gg.onSince, end})
			gg.curOn += end.Sub(gg.onSince)
			gg.onSince = end
			if ref := now[gg.edgeRef()]; ref >= gg.refSince {
				gg.refOn += ref - gg.refSince
			}
			gg.refSince = now[gg.edgeRef()]
		}
	}
	// A reference's count over the period; 0 (unusable) when a read
	// failed or it went backwards.
	total := map[*reference]uint64{}
	for _, r := range g.refs {
		r.mu.Lock()
		if !r.failed && now[r] >= r.start {
			total[r] = now[r] - r.start
		}
		r.failed = false
		r.mu.Unlock()
		r.start = now[r]
	}
	runs := g.measure(cur, length, func(gg *governedGroup) time.Duration { return min(gg.curOn, length) })
	g.measureProcess(length)
	for _, gg := range g.groups {
		p := samplePeriod{length: length, on: min(gg.curOn, length), runs: runs[gg], tailRate: gg.tailRate}
		if t, ok := total[gg.ref]; ok && gg.ref != nil {
			p.ref, p.refOn, p.refSlack, p.refOK = t, min(gg.refOn, t), gg.refSlack, true
		}
		gg.countPeriod(&p)
		gg.periods = append(gg.periods, p)
		gg.curOn, gg.refOn, gg.refSlack, gg.tailRate = 0, 0, 0, 0
	}
}

// countPeriod reads what the group's programs counted (when they count)
// and records the period's share of it in p: the events since the last
// boundary and, when the programs count the reference's events too, those.
// A failed or backward reading leaves the period uncounted, which makes
// the group's estimate scale its runs (estimateOf).
func (gg *governedGroup) countPeriod(p *samplePeriod) {
	if gg.hg.Counts == nil {
		return
	}
	c, err := gg.hg.Counts()
	if err == nil && gg.countsOK && c.Events >= gg.counts.Events && c.InReference >= gg.counts.InReference {
		p.events, p.counted = c.Events-gg.counts.Events, true
		if gg.ownRef && p.refOK {
			p.inRef, p.ownRef = c.InReference-gg.counts.InReference, true
		}
	} else if gg.ownRef {
		// Its edges were not read: without its own count of the
		// reference the period has none.
		p.refOK = false
	}
	gg.counts, gg.countsOK = c, err == nil
}

// measure updates the cost rates from the counters cur against the last
// reading, length apart, each group attached for onOf(group) of it, and
// returns each group's runs (g.mu held).
func (g *Governor) measure(cur []probes.SelfCosts, length time.Duration, onOf func(*governedGroup) time.Duration) map[*governedGroup]uint64 {
	runs := map[*governedGroup]uint64{}
	fix := make([]float64, g.cpus)
	for i, c := range cur {
		var prev probes.SelfCosts
		if i < len(g.last) {
			prev = g.last[i]
		}
		d := c.Sub(prev)
		for hook, perCPU := range d {
			if !g.grouped[i][hook] && length > 0 {
				for cpu, v := range perCPU {
					if cpu < len(fix) {
						fix[cpu] += float64(v.Runs) * g.perRun(c[hook]) / length.Seconds()
					}
				}
			}
		}
		for _, gg := range g.groups {
			if gg.counter != g.counters[i] {
				continue
			}
			costs := make([]float64, g.cpus)
			for _, hook := range gg.hg.Hooks {
				for cpu, v := range d[hook] {
					runs[gg] += v.Runs
					if cpu < len(costs) {
						costs[cpu] += float64(v.Runs) * g.perRun(c[hook])
					}
				}
			}
			if on := onOf(gg); on > 0 {
				rate := make([]float64, g.cpus)
				for cpu := range rate {
					rate[cpu] = costs[cpu] / on.Seconds()
				}
				gg.rate = riseAtOnce(gg.rate, rate)
			}
			if gg.surge != nil {
				for cpu := range gg.rate {
					if cpu < len(gg.surge) {
						gg.rate[cpu] = math.Max(gg.rate[cpu], gg.surge[cpu])
					}
				}
				gg.surge = nil
			}
		}
	}
	g.fixRate = riseAtOnce(g.fixRate, fix)
	g.last = cur
	return runs
}

// measureProcess updates the process's CPU rate over a period of length
// just ended (g.mu held). It rises at once and falls halfway, as the
// groups' rates do.
func (g *Governor) measureProcess(length time.Duration) {
	if g.cpuTime == nil || length <= 0 || g.cpus == 0 {
		return
	}
	now := g.cpuTime()
	spent := max(0, now-g.procAt)
	g.procAt = now
	g.procSpent += spent
	rate := float64(spent) / length.Seconds() / float64(g.cpus)
	g.procRate = riseAtOnce([]float64{g.procRate}, []float64{rate})[0]
	switching := float64(g.periodSwitched) / length.Seconds() / float64(g.cpus)
	g.switchRate = riseAtOnce([]float64{g.switchRate}, []float64{switching})[0]
	g.periodSwitched = 0
}

// programBudget is what the programs may take of each CPU, ns per
// second: the budget less the process's own CPU spread over every CPU
// (attaching and detaching, the guard's and the profile's reads), so the
// budget bounds what perfscope as a whole takes of a saturated CPU — that
// is what a flood loses. The process may take at most maxProcessShare of
// it: a busy moment of its own (a symbol read) must not starve the
// windows of the estimates. g.mu held.
func (g *Governor) programBudget() float64 {
	budget := g.budget.CPUShare * 1e9
	return budget - math.Min(g.procRate, maxProcessShare*budget)
}

// calibrate measures every group's cost with all of them attached for a
// moment before the first window (g.mu held), so that the first period is
// planned from costs rather than guessed: a batch group that costs too
// much is sampled from the start and its counts are not half exact.
func (g *Governor) calibrate() error {
	for _, gg := range g.groups {
		if _, err := gg.hg.Attach(); err != nil {
			return err
		}
	}
	g.last = g.readCounters()
	t0 := time.Now()
	time.Sleep(calibration)
	d := time.Since(t0)
	g.measure(g.readCounters(), d, func(*governedGroup) time.Duration { return d })
	return nil
}

// riseAtOnce smooths per-CPU cost rates over periods: a rate that rose is
// taken whole, one that fell only halfway (half old, half new). A governor
// must plan the next period for traffic at least as heavy as the last:
// averaging a flood's first period with the quiet ones before it planned
// windows twice too long, and the second loaded period spent twice the
// budget (the benchmark's budget figure came out at 2.6–3.1 % under 2 %).
// Falling slowly keeps one quiet period from opening the windows wide.
func riseAtOnce(old, cur []float64) []float64 {
	if old == nil {
		return cur
	}
	out := make([]float64, len(cur))
	for i := range cur {
		out[i] = cur[i]
		if i < len(old) && old[i] > cur[i] {
			out[i] = (old[i] + cur[i]) / 2
		}
	}
	return out
}

// perRun is a hook's cost per run: its programs' own timing (cumulative,
// so it steadies as the run goes) plus the entry cost.
func (g *Governor) perRun(perCPU []probes.SelfRuns) float64 {
	t := probes.Total(perCPU)
	body := untimedPerRun
	if t.TimedRuns > 0 {
		body = t.PerRun()
	}
	return float64(body + g.entry)
}

func (g *Governor) readCounters() []probes.SelfCosts {
	out := make([]probes.SelfCosts, len(g.counters))
	for i, c := range g.counters {
		out[i], _ = c.SelfCosts() // unreadable: counted as no runs
	}
	return out
}
