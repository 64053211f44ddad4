package budget

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

func TestEstimateOf(t *testing.T) {
	sec := time.Second
	steady := []samplePeriod{sp(sec, 100*time.Millisecond, 1000), sp(sec, 50*time.Millisecond, 500), sp(sec, 200*time.Millisecond, 2000)}
	e := estimateOf(steady, "")
	if e.Windows != 3 || math.Abs(e.Scale*3500-30000) > 1e-6 || e.RelError == nil || *e.RelError > 1e-9 {
		t.Errorf("steady: %+v (scale×seen %.0f)", e, e.Scale*3500)
	}
	if math.Abs(e.Coverage-350.0/3000) > 1e-9 {
		t.Errorf("coverage %v", e.Coverage)
	}
	// A period that ended before its window opened takes the mean rate.
	cut := append(steady, sp(sec/2, 0, 0))
	if e := estimateOf(cut, ""); math.Abs(e.Scale*3500-35000) > 1e-6 {
		t.Errorf("cut: %.0f", e.Scale*3500)
	}
	// Moving rates: a bound, wider with less coverage.
	moving := []samplePeriod{sp(sec, 100*time.Millisecond, 1000), sp(sec, 100*time.Millisecond, 3000), sp(sec, 100*time.Millisecond, 1000), sp(sec, 100*time.Millisecond, 3000)}
	m := estimateOf(moving, "")
	full := []samplePeriod{sp(sec, 900*time.Millisecond, 9000), sp(sec, 900*time.Millisecond, 27000), sp(sec, 900*time.Millisecond, 9000), sp(sec, 900*time.Millisecond, 27000)}
	f := estimateOf(full, "")
	if m.RelError == nil || f.RelError == nil || *m.RelError <= *f.RelError || *f.RelError <= 0 {
		t.Errorf("moving: %v, nearly full coverage: %v", m, f)
	}
	// One window: no bound; nothing seen: no bound, scale by coverage.
	if e := estimateOf(steady[:1], ""); e.RelError != nil {
		t.Errorf("one window: %v", e)
	}
	if e := estimateOf([]samplePeriod{sp(sec, 100*time.Millisecond, 0), sp(sec, 100*time.Millisecond, 0)}, ""); e.RelError != nil || e.Scale != 10 {
		t.Errorf("nothing seen: %+v", e)
	}
	// A flood that begins 300 ms into a period planned from quiet ones:
	// its window opened with the period and the guard ended it 50 ms into
	// the flood. Scaled by time, the window's mean rate (quiet part
	// included) would put 14 300 runs in a period that held 70 000; the
	// rate of the window's end carries the rest of the period.
	const R = 100000.0 // runs per second in the flood
	step := samplePeriod{length: sec, on: 350 * time.Millisecond, runs: uint64(0.05 * R), tailRate: R}
	flood := sp(sec, 100*time.Millisecond, uint64(0.1*R))
	quiet := sp(sec, sec, 0)
	run := []samplePeriod{quiet, step, flood, flood, flood}
	truth := 0.7*R + 3*R
	if e := estimateOf(run, ""); math.Abs(e.Scale*float64(e.SampledEvents)-truth) > 1 {
		t.Errorf("flood starting mid-period: estimated %.0f, ran %.0f", e.Scale*float64(e.SampledEvents), truth)
	}
	step.tailRate = 0
	if e := estimateOf([]samplePeriod{quiet, step, flood, flood, flood}, ""); math.Abs(e.Scale*float64(e.SampledEvents)-truth) < 0.1*truth {
		t.Errorf("without the tail rate the estimate is %.0f, %.0f ran: the case does not test the tail", e.Scale*float64(e.SampledEvents), truth)
	}
	rel := 0.1
	row := (&evidence.Estimate{RelError: &rel, SampledEvents: 10000}).RowError(400)
	if row == nil || math.Abs(*row-math.Hypot(0.1, 1.96/20)) > 1e-12 {
		t.Errorf("row error %v", row)
	}
	// A row of every sampled event is the section's total.
	if row := (&evidence.Estimate{RelError: &rel, SampledEvents: 400}).RowError(400); row == nil || *row != rel {
		t.Errorf("the whole section's row: %v", row)
	}
}

func TestCoverageScaleBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c := &Coverage{groups: map[string]groupCoverage{
		"g":     {spans: []span{{at(100), at(200)}, {at(1100), at(1150)}}},
		"exact": {exact: true},
	}}
	if k := c.ScaleBetween("g", at(0), at(1000)); k != 10 {
		t.Errorf("first second: %v", k)
	}
	if k := c.ScaleBetween("g", at(0), at(2000)); k != 2000.0/150 {
		t.Errorf("two seconds: %v", k)
	}
	if k := c.ScaleBetween("g", at(300), at(1000)); k != 0 {
		t.Errorf("never attached: %v", k)
	}
	if c.ScaleBetween("exact", at(0), at(1000)) != 1 || c.ScaleBetween("unknown", at(0), at(1000)) != 1 || (*Coverage)(nil).ScaleBetween("g", at(0), at(1)) != 1 {
		t.Error("exact, unknown and nil coverage scale by 1")
	}
}

// The 95 % bound of estimateOf covers the truth in about 95 % of runs on
// synthetic traffic that is bursty within each period (a random walk of
// the rate, Poisson arrivals) and sampled in windows at random offsets —
// the traffic the governor meets, with the truth known. Below 90 % the
// bound would be a lie. Each run is planned as the governor plans one:
// ten 1 s periods with windows of 2–10 % of each (as before the run's
// length planned them), and runs of 4 s, 5 s and 10 s whose periods the
// governor chose from their length and the budget, every run with at
// least boundWindows windows. Scaled by time, and by a reference whose
// share the programs count (a port's reads among other readers', its
// share drifting): the socket reads' estimate.
func TestEstimateBoundCovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	poisson := func(lambda float64) float64 {
		if lambda <= 0 {
			return 0
		}
		return math.Max(0, math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64()))
	}
	const trials, slot = 400, 5 * time.Millisecond
	// plan returns the next period and its window's length.
	type planner func(start time.Time, done []samplePeriod) (time.Duration, time.Duration)
	fixed := func(time.Time, []samplePeriod) (time.Duration, time.Duration) {
		return time.Second, time.Duration((0.02 + 0.08*rng.Float64()) * float64(time.Second))
	}
	// governed plans like the governor, for a sampled group whose
	// programs would take 15–75 % of a CPU attached (windows of 2–10 %
	// of the budget's 1.5 %) and switch in 0.3 ms.
	governed := func(length time.Duration) (planner, func()) {
		var g *Governor
		reset := func() {
			cost := 0.015 * 1e9 / (0.02 + 0.08*rng.Float64())
			gg := &governedGroup{hg: &probes.HookGroup{Name: "g", Class: probes.PerPacket}, rate: rates(cost, cost), switchNs: 0.3e6}
			g = &Governor{budget: Budget{CPUShare: Default}, cpus: 2, fixRate: rates(0, 0),
				groups: []*governedGroup{gg}, length: length, began: time.Unix(1000, 0)}
		}
		return func(start time.Time, done []samplePeriod) (time.Duration, time.Duration) {
			g.periodStart, g.groups[0].periods = start, done
			duty, period := g.plan()
			return period, time.Duration(duty * float64(period))
		}, reset
	}
	type run struct {
		name   string
		length time.Duration
		plan   planner
		reset  func()
		share  bool
	}
	runs := []run{
		{name: "10 × 1 s, by time", length: 10 * time.Second, plan: fixed},
		{name: "10 × 1 s, by a counted share", length: 10 * time.Second, plan: fixed, share: true},
	}
	for _, l := range []time.Duration{4 * time.Second, 5 * time.Second, 10 * time.Second} {
		for _, share := range []bool{false, true} {
			p, reset := governed(l)
			name := fmt.Sprintf("%v planned, by time", l)
			if share {
				name = fmt.Sprintf("%v planned, by a counted share", l)
			}
			runs = append(runs, run{name: name, length: l, plan: p, reset: reset, share: share})
		}
	}
	for _, c := range runs {
		covered, withBound, fewWindows := 0, 0, 0
		var bounds float64
		for trial := 0; trial < trials; trial++ {
			if c.reset != nil {
				c.reset()
			}
			var ps []samplePeriod
			var truth float64
			rate := 2e4 * (0.5 + rng.Float64()) // events per second
			share := 0.5 + 0.5*rng.Float64()    // the port's share of the reads
			start, end := time.Unix(1000, 0), time.Unix(1000, 0).Add(c.length)
			for start.Before(end) {
				period, window := c.plan(start, ps)
				period = min(period, end.Sub(start))
				slots := int(period / slot)
				w := min(slots, int(window/slot))
				at := rng.IntN(slots - w + 1)
				var seen, ref, in float64
				for j := 0; j < slots; j++ {
					// A multiplicative random walk, bounded: bursts and lulls.
					rate = math.Min(1e5, math.Max(1e3, rate*math.Exp(0.05*rng.NormFloat64())))
					share = math.Min(1, math.Max(0.3, share+0.01*rng.NormFloat64()))
					all := poisson(rate * slot.Seconds())
					mine := all
					if c.share {
						mine = math.Round(all * share)
					}
					truth += mine
					ref += all
					if j >= at && j < at+w {
						seen += mine
						in += all
					}
				}
				p := samplePeriod{length: time.Duration(slots) * slot, on: time.Duration(w) * slot, runs: uint64(seen)}
				if c.share {
					p.ref, p.refOK, p.events, p.counted, p.inRef, p.ownRef = uint64(ref), true, uint64(seen), true, uint64(in), true
				}
				ps = append(ps, p)
				start = start.Add(p.length)
			}
			ref := ""
			if c.share {
				ref = UDPReadsReference
			}
			e := estimateOf(ps, ref)
			if e.Windows < boundWindows {
				fewWindows++
			}
			if e.RelError == nil {
				continue
			}
			withBound++
			bounds += *e.RelError
			est := e.Scale * float64(e.SampledEvents)
			if math.Abs(est-truth) <= *e.RelError*est {
				covered++
			}
		}
		share := float64(covered) / float64(withBound)
		t.Logf("%s: the bound (±%.1f %% on average) covered the truth in %d of %d runs (%.1f %%)",
			c.name, 100*bounds/float64(withBound), covered, withBound, 100*share)
		if withBound < trials*9/10 || share < 0.90 {
			t.Errorf("%s: the 95 %% bound covered the truth in %.1f %% of %d runs", c.name, 100*share, withBound)
		}
		if fewWindows > 0 {
			t.Errorf("%s: %d of %d runs had fewer than %d windows", c.name, fewWindows, trials, boundWindows)
		}
	}
}

func sp(length, on time.Duration, runs uint64) samplePeriod {
	return samplePeriod{length: length, on: on, runs: runs}
}

// The hooks slow the traffic they sample (their cost is paid by the
// packets inside the windows): scaled by time, the windows' slower rate
// under-counts the run; scaled by an exact reference that counted the
// same slowed traffic inside the windows and the full traffic outside,
// the estimate lands on the truth and says what it was scaled by.
func TestEstimateByReferenceCorrectsTheHooksOwnSlowdown(t *testing.T) {
	const rate, slowed = 1e6, 0.75 // packets/s; 25 % slower while attached
	var ps []samplePeriod
	var truth float64
	for i := 0; i < 10; i++ {
		on := time.Duration(50+10*i) * time.Millisecond
		inside := rate * slowed * on.Seconds()
		outside := rate * (time.Second - on).Seconds()
		truth += inside + outside
		// One event per packet; the reference counts two per packet (rx
		// and tx of loopback).
		ps = append(ps, samplePeriod{length: time.Second, on: on, runs: uint64(inside),
			ref: uint64(2 * (inside + outside)), refOn: uint64(2 * inside), refOK: true})
	}
	byTime, byRef := estimateOf(ps, ""), estimateOf(ps, PacketsReference)
	est := func(e *evidence.Estimate) float64 { return e.Scale * float64(e.SampledEvents) }
	if est(byTime)/truth > 0.8 || byTime.Reference != "" {
		t.Errorf("by time: %.0f of %.0f (%+v)", est(byTime), truth, byTime)
	}
	if math.Abs(est(byRef)/truth-1) > 1e-6 || byRef.Reference != PacketsReference || byRef.RelError == nil || *byRef.RelError > 1e-6 {
		t.Errorf("by reference: %.0f of %.0f (%+v)", est(byRef), truth, byRef)
	}
	// Quiet periods before the traffic, the reference read and counting
	// nothing: still scaled by it, the quiet periods holding nothing.
	quiet := append([]samplePeriod{{length: time.Second, on: time.Second, refOK: true},
		{length: time.Second, on: time.Second, refOK: true}}, ps...)
	if e := estimateOf(quiet, PacketsReference); e.Reference != PacketsReference || math.Abs(est(e)/truth-1) > 1e-6 {
		t.Errorf("after quiet periods: %.0f of %.0f (%+v)", est(e), truth, e)
	}
	// A period without a usable reference: scaled by time throughout.
	ps[3].ref, ps[3].refOn, ps[3].refOK = 0, 0, false
	if e := estimateOf(ps, PacketsReference); e.Reference != "" {
		t.Errorf("a period without the reference still scaled by it: %+v", e)
	}
}

// One port's reads among others', scaled by the namespace's UDP reads:
// when the windows' hooks slow the port (and so the reference) the bound
// takes in how far the port's share may have moved; the sole reader's
// share cannot move, and packets scaling adds nothing.
func TestShareBias(t *testing.T) {
	sec := time.Second
	// Outside the windows 100 k reads/s, 80 % the port's; inside, the
	// port slowed by a quarter: 60 k + 20 k = 80 k/s, the port's share 75 %.
	var ps []samplePeriod
	for range 4 {
		ps = append(ps, samplePeriod{length: sec, on: 100 * time.Millisecond, runs: 6000,
			ref: 8000 + 90000, refOn: 8000, refOK: true})
	}
	// d = 1 − 80/100 = 0.2, s = 0.75: 0.2 × 0.25 / (0.75 × 0.8) = 8.3 %;
	// the truth is 80/75 − 1 = 6.7 % above the estimate.
	if b := shareBias(ps, UDPReadsReference); math.Abs(b-0.2*0.25/(0.75*0.8)) > 1e-9 {
		t.Errorf("bias %.4f", b)
	}
	e := estimateOf(ps, UDPReadsReference)
	truth := 4 * (6000 + 0.8*90000)
	if got := e.Scale * float64(e.SampledEvents); e.RelError == nil || math.Abs(got/truth-1) > *e.RelError {
		t.Errorf("estimate %.0f of %.0f outside its bound %v", got, truth, e)
	}
	if b := shareBias(ps, PacketsReference); b != 0 {
		t.Errorf("packets reference: bias %v", b)
	}
	for i := range ps {
		ps[i].runs = ps[i].refOn // the sole reader
	}
	if b := shareBias(ps, UDPReadsReference); b != 0 {
		t.Errorf("sole reader: bias %v", b)
	}
}

// The socket reads of a DNS server that is its namespace's only UDP
// reader, sampled in five windows: the socket probe's programs run for
// every socket read on the machine (the load generator's replies in
// another namespace too) and every wakeup, 3.5–6 runs per datagram the
// server read, moving from window to window. Scaled by runs, the
// server's reads came out off by a fifth with a wide bound; scaled by
// what the probe counted — the server's reads, and every UDP read of the
// namespace, at the same instants — its share is exactly 1 in every
// window and the estimate is the namespace's exact count, ±0. A port
// with a steady 80 % share gets 80 % of it, just as exactly.
func TestEstimateScalesTheCountedEventsByTheirShare(t *testing.T) {
	sec := time.Second
	runsPerRead := []float64{6, 3.5, 6, 3.5, 5}
	cover := []float64{0.10, 0.02, 0.10, 0.02, 0.05}
	var ps []samplePeriod
	var truth float64
	for i := range runsPerRead {
		ref := 100000.0 + 30000*float64(i%2) // the namespace's reads this period
		in := ref * cover[i]                 // while the group was attached
		truth += ref
		ps = append(ps, samplePeriod{length: sec, on: time.Duration(cover[i] * float64(sec)),
			runs: uint64(in * runsPerRead[i]), ref: uint64(ref), refOK: true,
			// The reference read on either side of each switch.
			refOn: uint64(in) + 40, refSlack: 60,
			events: uint64(in), counted: true, inRef: uint64(in), ownRef: true})
	}
	est := func(e *evidence.Estimate, seen float64) float64 { return e.Scale * seen }
	seenReads := 0.0
	for _, p := range ps {
		seenReads += float64(p.events)
	}
	e := estimateOf(ps, UDPReadsReference)
	if got := est(e, seenReads); math.Abs(got-truth) > 1e-6*truth || e.RelError == nil || *e.RelError > 1e-9 ||
		e.Reference != UDPReadsReference || e.SampledEvents != uint64(seenReads) || e.DurationFor10PctNs != 0 {
		t.Errorf("sole reader: estimated %.0f reads of %.0f (%+v, ±%s)", got, truth, e, pctOf(e.RelError))
	}
	// The same windows as the estimator read them before it used the
	// probe's counts: runs, and the reference's readings at the edges.
	old := append([]samplePeriod(nil), ps...)
	for i := range old {
		old[i].counted, old[i].ownRef = false, false
	}
	if o := estimateOf(old, UDPReadsReference); math.Abs(est(o, seenReads)/truth-1) < 0.05 {
		t.Errorf("scaled by runs the reads came out %.0f of %.0f: the case does not test the counts", est(o, seenReads), truth)
	}
	// A steady 80 % share among other readers (the same traffic every
	// period, so the windows' hooks slowed nothing: no share shift).
	truth = 0
	for i := range ps {
		ps[i].ref = 100000
		ps[i].inRef = uint64(100000 * cover[i])
		ps[i].events = uint64(0.8 * float64(ps[i].inRef))
		truth += 100000
	}
	e = estimateOf(ps, UDPReadsReference)
	seenReads = 0
	for _, p := range ps {
		seenReads += float64(p.events)
	}
	if got := est(e, seenReads); math.Abs(got/(0.8*truth)-1) > 1e-4 || e.RelError == nil || *e.RelError > 0.01 {
		t.Errorf("80 %% share: estimated %.0f of %.0f (±%s)", got, 0.8*truth, pctOf(e.RelError))
	}
	// One period whose counts could not be read: the whole estimate falls
	// back to the runs and edges rather than mixing the two.
	ps[2].counted, ps[2].ownRef = false, false
	if e := estimateOf(ps, UDPReadsReference); e.SampledEvents == uint64(seenReads) {
		t.Errorf("a period without counts still scaled the counts: %+v", e)
	}
}

// A bound wider than ±10 % says how long a run would bring it there: the
// windows' spread shrinks as one over the root of their number, Student's
// t with it; a bound the share's shift alone makes wider has no length;
// one window says how long a run has a bound at all.
func TestEstimateSaysHowLongARunWouldBoundIt(t *testing.T) {
	sec := time.Second
	var ps []samplePeriod
	for i := range 5 {
		ps = append(ps, sp(sec, 50*time.Millisecond, uint64(1000+600*(i%2))))
	}
	e := estimateOf(ps, "")
	if e.RelError == nil || *e.RelError <= targetBound || e.DurationFor10PctNs <= int64(5*sec) || e.DurationFor10PctNs%int64(5*sec) != 0 {
		t.Fatalf("%+v (±%s)", e, pctOf(e.RelError))
	}
	// A run that long, the same traffic: within ±10 %.
	var long []samplePeriod
	for i := range int(e.DurationFor10PctNs / int64(sec)) {
		long = append(long, sp(sec, 50*time.Millisecond, uint64(1000+600*(i%2))))
	}
	if l := estimateOf(long, ""); l.RelError == nil || *l.RelError > targetBound || l.DurationFor10PctNs != 0 {
		t.Errorf("%v later: ±%s, still says %v", time.Duration(e.DurationFor10PctNs), pctOf(l.RelError), time.Duration(l.DurationFor10PctNs))
	}
	if !strings.Contains(e.String(), "; --duration "+evidence.DurationText(e.DurationFor10PctNs)+" would bound it to ±10 %") {
		t.Errorf("text %q", e)
	}
	if d := durationFor(5*sec, 5, 0.01, 0, 0.12); d != 0 {
		t.Errorf("a share's shift of 12 %% alone: %v", d)
	}
	one := estimateOf([]samplePeriod{sp(2*sec, 50*time.Millisecond, 1000)}, "")
	if one.RelError != nil || one.DurationFor10PctNs != int64(10*sec) || !strings.Contains(one.String(), "error unknown; --duration 10s would give it a bound") {
		t.Errorf("one window: %+v, %q", one, one)
	}
}

func pctOf(rel *float64) string {
	if rel == nil {
		return "?"
	}
	return strconv.FormatFloat(100**rel, 'f', 2, 64) + "%"
}
