package budget

import (
	"math"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

// use is the window's record for the report and the parts' estimates.
func (g *Governor) Use() (*evidence.BudgetUse, *Coverage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := &evidence.BudgetUse{CPUShare: g.budget.CPUShare, PeriodNs: int64(g.budget.OpensEvery()), SwitchNs: int64(g.switched)}
	if span := g.ended.Sub(g.began); span > 0 && g.cpus > 0 {
		u.ProcessShare = float64(g.procSpent) / (float64(span) * float64(g.cpus))
	}
	cov := &Coverage{groups: map[string]groupCoverage{}}
	for _, gg := range g.groups {
		gc := groupCoverage{exact: !gg.detached, spans: append([]span(nil), gg.spans...)}
		if !gc.exact {
			// Per-packet events follow the packets: scaled by the
			// reference when there is one. Batch ones (softirq runs of
			// every vector, lock contention) do not, and scale by time,
			// unless their programs count their reference themselves
			// (the softirq probe: the kernel's softirqs).
			var ref string
			if gg.ref != nil && (gg.hg.Class == probes.PerPacket || gg.ownRef || gg.follows) {
				ref = gg.ref.name
			}
			gc.estimate = estimateOf(gg.periods, ref)
			gc.estimate.Hooks = gg.hg.Hooks
		}
		cov.groups[gg.hg.Name] = gc
		for _, p := range gg.periods {
			u.MaxPeriodNs = max(u.MaxPeriodNs, int64(p.length))
		}
		u.Groups = append(u.Groups, evidence.HookSampling{Group: gg.hg.Name, Class: gg.hg.Class.String(),
			Hooks: gg.hg.Hooks, Exact: gc.exact, Estimate: gc.estimate})
	}
	return u, cov
}

// estimateOf scales what a group's windows counted to the whole window:
// each period's count over its attached time is that period's rate, and
// the periods' rates times their lengths add up to the estimate — a
// stratified estimate, so windows the governor shortened in busy periods
// weigh as much as the long ones of quiet periods. A period the window
// ended before its sampling window opened (or cut it to a sliver) takes
// the mean rate. The error
// comes from how much the rate moved from period to period (successive
// differences, which also take in any drift: conservative), with the
// finite-population correction of each period's coverage, and, scaled by
// a reference, the reference's uncertainty at the windows' edges.
func estimateOf(periods []samplePeriod, ref string) *evidence.Estimate {
	periods = countedPeriods(periods)
	e := &evidence.Estimate{}
	var total, on time.Duration
	var seen uint64
	for _, p := range periods {
		total += p.length
		on += p.on
		seen += p.runs
	}
	e.SampledEvents = seen
	if total > 0 {
		e.Coverage = float64(on) / float64(total)
	}
	// size is what a period holds and cover what its window saw of it:
	// seconds, or with a reference, the reference's counts — a ratio
	// estimate, which also corrects for the traffic the attached hooks
	// slowed (the reference counts the same slowed traffic inside the
	// windows, and the unslowed one outside).
	size := func(p samplePeriod) (float64, float64, bool) {
		return p.length.Seconds(), p.on.Seconds(), p.on >= minRateWindow
	}
	if ref != "" && referenced(periods) {
		e.Reference = ref
		size = func(p samplePeriod) (float64, float64, bool) {
			return float64(p.ref), float64(p.refOn), p.on >= minRateWindow && p.refOn > 0
		}
	}
	// count is what a period held: its window's rate times its size —
	// or, by time, when the guard ended a window that opened with the
	// period, the window's runs plus the rest of the period at the rate
	// of the window's end (the window is the period's start, not a random
	// part of it, and a flood began in it).
	count := func(p samplePeriod) float64 {
		n, c, _ := size(p)
		if e.Reference == "" && p.tailRate > 0 && p.on < p.length {
			return float64(p.runs) + p.tailRate*(p.length-p.on).Seconds()
		}
		return float64(p.runs) / c * n
	}
	var rates []float64
	for _, p := range periods {
		if n, _, ok := size(p); ok {
			e.Windows++
			rates = append(rates, count(p)/n)
		}
	}
	if len(rates) == 0 {
		e.Scale = 1
		return e
	}
	var mean float64
	for _, r := range rates {
		mean += r
	}
	mean /= float64(len(rates))
	// spread is the variance from how the rate moved between periods,
	// edges that of the reference's readings at the windows' edges.
	var est, spread, edges float64
	var s2 float64
	if len(rates) >= 2 {
		for i := 1; i < len(rates); i++ {
			d := rates[i] - rates[i-1]
			s2 += d * d
		}
		s2 /= 2 * float64(len(rates)-1)
	}
	for _, p := range periods {
		n, c, ok := size(p)
		if !ok {
			// A period the reference counted nothing in held nothing
			// (bar what its window saw anyway); one whose window was
			// missing or a sliver takes the mean rate.
			est += mean * n
			if n == 0 && e.Reference != "" {
				est += float64(p.runs)
			}
			spread += n * n * s2
			continue
		}
		est += count(p)
		spread += n * n * s2 * (1 - math.Min(1, c/n))
		if e.Reference != "" {
			// The windows' edges: refOn may be off by refSlack, and the
			// period's count with it (taken as one standard deviation:
			// conservative for a half-width).
			d := count(p) * float64(p.refSlack) / c
			edges += d * d
		}
	}
	switch {
	case seen > 0:
		e.Scale = est / float64(seen)
	case on > 0:
		e.Scale = float64(total) / float64(on)
	default:
		e.Scale = 1
	}
	if len(rates) >= 2 && est > 0 {
		// The spread is estimated from the windows themselves (Student's
		// t for how few they are); the edges are known half-widths.
		t := tQuantile(len(rates) - 1)
		bias := shareBias(periods, e.Reference)
		rel := math.Sqrt(t*t*spread+1.96*1.96*edges)/est + bias
		e.RelError = &rel
		if rel > targetBound {
			e.DurationFor10PctNs = int64(durationFor(total, len(rates), math.Sqrt(spread)/est, math.Sqrt(edges)/est, bias))
		}
	} else if seen > 0 && len(periods) > 0 {
		// Fewer than two windows: a run with boundWindows of them has a
		// bound.
		e.DurationFor10PctNs = int64(roundUpRun(total / time.Duration(len(periods)) * boundWindows))
	}
	return e
}

// targetBound is the bound a run should reach: the sections whose bound
// is wider say how long a run would reach it (DurationFor10PctNs).
const targetBound = 0.10

// durationFor is how long a run like this one — k windows over total,
// spreadRel and edgesRel the relative standard errors their spread and
// edges gave, bias the share's possible shift — must be for its bound to
// reach targetBound: both errors shrink as one over the root of the
// windows, at the same period, and Student's t with them. 0 when the
// bias alone is wider, or no run under a day would do.
func durationFor(total time.Duration, k int, spreadRel, edgesRel, bias float64) time.Duration {
	if k < 1 || total <= 0 || bias >= targetBound {
		return 0
	}
	period := total / time.Duration(k)
	for n := k + 1; time.Duration(n)*period <= 24*time.Hour; n++ {
		f := math.Sqrt(float64(k) / float64(n))
		t := tQuantile(n - 1)
		if math.Hypot(t*spreadRel*f, 1.96*edgesRel*f)+bias <= targetBound {
			return roundUpRun(time.Duration(n) * period)
		}
	}
	return 0
}

// roundUpRun rounds a run length up to whole 5 s, as --duration is given.
func roundUpRun(d time.Duration) time.Duration {
	const step = 5 * time.Second
	return (d + step - 1) / step * step
}

// countedPeriods is the periods as the estimate reads them. When every
// period's events were counted, those rather than the programs' runs: a
// tracepoint's programs run for every socket read on the machine, of any
// namespace, port or protocol, while the numbers built on the group are
// made of the reads of the sockets it counts; scaled by runs, their share
// of the reference moved with everything else the machine read. And when
// every window's share of the reference was counted by the programs too,
// that, exact, rather than the reference's readings on either side of
// each switch: the sole reader of a namespace then has a share of exactly
// 1 in every window, and its estimate is the reference's own count.
func countedPeriods(periods []samplePeriod) []samplePeriod {
	counted, own := len(periods) > 0, len(periods) > 0
	for _, p := range periods {
		counted = counted && p.counted
		own = own && p.ownRef
	}
	if !counted {
		return periods
	}
	out := make([]samplePeriod, len(periods))
	for i, p := range periods {
		if p.runs > 0 {
			// The guard's tail rate is in runs per second.
			p.tailRate *= float64(p.events) / float64(p.runs)
		}
		p.runs = p.events
		if own {
			p.refOn, p.refSlack = min(p.inRef, p.ref), 0
		}
		out[i] = p
	}
	return out
}

// t975 is Student's t distribution's 97.5 % quantile by degrees of
// freedom (1–30).
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tQuantile is the factor of a 95 % bound whose spread was estimated
// from df+1 windows: a few windows' spread is itself uncertain, and with
// the normal 1.96 a bound from three windows covered the truth in far
// fewer than 95 % of synthetic runs (TestEstimateBoundCovers).
func tQuantile(df int) float64 {
	switch {
	case df < 1:
		return math.Inf(1)
	case df <= len(t975):
		return t975[df-1]
	}
	return 1.96 + (t975[len(t975)-1]-1.96)*float64(len(t975))/float64(df)
}

// shareBias bounds how far the hooks' own slowdown can move a share of
// the UDP reads reference: the windows' hooks slow the port they measure,
// maybe not the namespace's other readers, so the port's share of the
// reads inside the windows can be lower than outside — a bias no spread
// between periods shows. With d the reference's slowdown inside the
// windows (1 − rate in / rate out) and s the port's share inside them,
// the share outside, if only the port was slowed, is off by
// d(1 − s) / (s(1 − d)). The sole reader (s = 1) or an unslowed
// reference adds nothing; neither does scaling by packets, where the
// events are not a share of the reference.
func shareBias(periods []samplePeriod, ref string) float64 {
	if ref != UDPReadsReference {
		return 0
	}
	var refIn, refOut, runs uint64
	var on, off time.Duration
	for _, p := range periods {
		if !p.refOK || p.on <= 0 || p.on >= p.length {
			continue
		}
		refIn += p.refOn
		refOut += p.ref - p.refOn
		runs += p.runs
		on += p.on
		off += p.length - p.on
	}
	if refIn == 0 || refOut == 0 || on <= 0 || off <= 0 {
		return 0
	}
	d := 1 - (float64(refIn)/on.Seconds())/(float64(refOut)/off.Seconds())
	share := math.Min(1, float64(runs)/float64(refIn))
	if d <= 0 || share <= 0 {
		return 0
	}
	d = math.Min(d, 0.9)
	return d * (1 - share) / (share * (1 - d))
}

// referenced says whether every period has a usable reference count
// and the windows saw some of it.
func referenced(periods []samplePeriod) bool {
	var on uint64
	for _, p := range periods {
		if !p.refOK && p.length > 0 {
			return false
		}
		on += p.refOn
	}
	return on > 0
}
