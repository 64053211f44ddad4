package golang

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/goalloc"
)

// fakePoolHooks is a program calling one pool at a steady rate: its
// counts grow with the time the hooks are attached, its CPU time with the
// wall clock.
type fakePoolHooks struct {
	mu        sync.Mutex
	attached  bool
	since     time.Time
	onTime    time.Duration
	start     time.Time
	callsPerS float64 // Gets per second (Puts the same, News a tenth)
	cpuPerS   float64 // the program's CPU seconds per second
	selfNs    uint64  // the programs' own time per run
	detaches  int
	// closeDelay is how long DetachPools takes; closeFires: the hooks
	// keep counting until it returns, else they stop when it starts.
	closeDelay time.Duration
	closeFires bool
	// oneLink: PoolsOneLink's answer.
	oneLink bool
	// onAtDetach is the time attached when the first detach started.
	onAtDetach time.Duration
	detachAt   time.Time
	// idleAfter, when set, is how long after start the program stops
	// calling the pool and allocating, its CPU down to a hundredth:
	// busyOn is the time attached before then, up to the last detach.
	idleAfter time.Duration
	busyOn    time.Duration
	attaches  int
}

func newFakePoolHooks(callsPerS, cpuPerS float64) *fakePoolHooks {
	now := time.Now()
	return &fakePoolHooks{attached: true, since: now, start: now, callsPerS: callsPerS, cpuPerS: cpuPerS, selfNs: 300}
}

func (f *fakePoolHooks) on() time.Duration {
	d := f.onTime
	if f.attached {
		d += time.Since(f.since)
	}
	return d
}

// busy is the part of the program's time from a to b in which it calls
// the pool: all of it unless idleAfter is set.
func (f *fakePoolHooks) busy(a, b time.Time) time.Duration {
	if f.idleAfter > 0 {
		b = minTime(b, f.start.Add(f.idleAfter))
	}
	return max(b.Sub(a), 0)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// called is the time attached while the program called the pool: what
// the hooks' counts grow with.
func (f *fakePoolHooks) called() time.Duration {
	d := f.busyOn
	if f.attached {
		d += f.busy(f.since, time.Now())
	}
	return d
}

func (f *fakePoolHooks) DetachPools() error {
	f.mu.Lock()
	if f.detaches == 0 {
		f.onAtDetach, f.detachAt = f.on(), time.Now()
	}
	if f.closeFires {
		f.mu.Unlock()
		time.Sleep(f.closeDelay)
		f.mu.Lock()
	} else {
		defer time.Sleep(f.closeDelay)
	}
	defer f.mu.Unlock()
	if f.attached {
		f.onTime += time.Since(f.since)
		f.busyOn += f.busy(f.since, time.Now())
		f.attached = false
		f.detaches++
	}
	return nil
}

func (f *fakePoolHooks) AttachPools() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.attached {
		f.attached, f.since = true, time.Now()
		f.attaches++
	}
	return nil
}

func (f *fakePoolHooks) PoolCounts() (map[uint64]goalloc.PoolCounts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := uint64(f.called().Seconds() * f.callsPerS)
	return map[uint64]goalloc.PoolCounts{0xc000: {Gets: n, Puts: n, News: n / 10}}, nil
}

func (f *fakePoolHooks) SelfCosts() (probes.SelfCosts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := uint64(f.called().Seconds() * f.callsPerS)
	return probes.SelfCosts{goalloc.HookPoolGet: {{Runs: n, TimedRuns: n / 64, TimedNs: n / 64 * f.selfNs}}}, nil
}

// AllocSamples: one allocation sample per 10 Gets, whether or not the
// hooks are attached.
func (f *fakePoolHooks) AllocSamples() (uint64, error) {
	return uint64(f.busy(f.start, time.Now()).Seconds() * f.callsPerS / 10), nil
}

func (f *fakePoolHooks) PoolsOneLink() bool { return f.oneLink }

func (f *fakePoolHooks) cpu() (time.Duration, error) {
	busy := f.busy(f.start, time.Now())
	idle := time.Since(f.start) - busy
	return time.Duration((busy.Seconds() + idle.Seconds()/100) * f.cpuPerS * 1e9), nil
}

// runGuard runs a guard over a window of w on f.
func runGuard(t *testing.T, f *fakePoolHooks, exact bool, w time.Duration) (*poolGuard, time.Duration) {
	t.Helper()
	g := &poolGuard{hooks: f, cpu: f.cpu, budget: DefaultPoolBudget, trapNs: UprobeTrapNs, exact: exact,
		calibration: 20 * time.Millisecond, period: 100 * time.Millisecond, minOn: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), w)
	defer cancel()
	start := time.Now()
	if err := g.run(ctx); err != nil {
		t.Fatal(err)
	}
	return g, time.Since(start)
}

func TestPoolGuardSamplesHooksOverBudget(t *testing.T) {
	// 50,000 Gets and as many Puts a second at ~6 µs each against one CPU
	// of program: 60 % of its CPU, over a hundred times the budget.
	f := newFakePoolHooks(50000, 1)
	g, window := runGuard(t, f, false, 1500*time.Millisecond)
	if f.detaches == 0 || g.detached == 0 {
		t.Fatalf("the guard never took the hooks off (cost share %.3f, budget %.3f)", g.costShare(), g.budget)
	}
	s := g.sampling(window)
	if s.Mode != "sampled" || s.OnFraction >= 1 || s.Note == "" {
		t.Fatalf("sampling = %+v, want sampled with a note", s)
	}
	if !strings.Contains(s.Note, "attached one by one") {
		t.Errorf("note %q does not say the one-by-one hooks' traps after a detach are not charged", s.Note)
	}
	f.oneLink = true
	if n := g.sampling(window).Note; strings.Contains(n, "one by one") {
		t.Errorf("one uprobe_multi link, but the note says the hooks were attached one by one: %q", n)
	}
	if want := 2 * 50000 * (300 + UprobeTrapNs) / 1e9; math.Abs(s.CostShare-want) > 0.25*want {
		t.Errorf("cost share %.3f, want ~%.3f (2 × 50,000 calls/s × (0.3 µs + the trap) over 1 CPU)", s.CostShare, want)
	}
	est := estimatePools(g.periods, window, g.ref, true)[0xc000]
	truth := 50000 * window.Seconds()
	if est.GetsErr <= 0 || math.Abs(est.Gets-truth) > est.GetsErr+0.02*truth {
		t.Errorf("gets %.0f ± %.0f, the program made %.0f", est.Gets, est.GetsErr, truth)
	}
	if s.ScaledBy != "allocation samples" {
		t.Errorf("scaled by %q, want allocation samples (the fake takes %d)", s.ScaledBy, g.ref.total)
	}
	if seen := float64(est.getsSeen); seen >= 0.9*truth {
		t.Errorf("the hooks saw %.0f of %.0f Gets: they were not off for most of the window", seen, truth)
	}
}

// A service that goes idle once the guard samples: its stretches cost
// nothing and pay back the off time sized ahead for them, so the off time
// after each came to nothing and the guard took the hooks off and put them
// back every few milliseconds (every ~50 ms on the service: 20 ms on, the
// close's 16–44 ms), each time writing breakpoints into the service's text,
// a cost the guard does not charge. At most once a period now.
func TestPoolGuardSwitchesAtMostOncePerPeriodWhenIdle(t *testing.T) {
	// 50,000 Gets and Puts a second for 300 ms (60 % of one CPU, a
	// hundred times the budget), then nothing.
	f := newFakePoolHooks(50000, 1)
	f.idleAfter = 300 * time.Millisecond
	g, window := runGuard(t, f, false, 2*time.Second)
	f.mu.Lock()
	attaches, detaches := f.attaches, f.detaches
	f.mu.Unlock()
	if detaches == 0 || g.detached == 0 {
		t.Fatalf("the guard never took the hooks off (cost share %.3f, budget %.3f)", g.costShare(), g.budget)
	}
	// The hooks go back on at least a period after the last stretch
	// started, so a window holds at most window/period + 1 detaches and
	// as many attaches (timers fire late, never early).
	most := int(window/g.period) + 1
	t.Logf("%d detaches, %d attaches in %v (period %v, at most %d)", detaches, attaches, window, g.period, most)
	if detaches > most || attaches > most {
		t.Errorf("%d detaches and %d attaches in %v, want at most %d: the guard switched more than once a %v period", detaches, attaches, window, most, g.period)
	}
	if s := g.sampling(window); s.Mode != "sampled" || s.Periods != len(g.periods) {
		t.Errorf("sampling = %+v, want sampled over the %d stretches", s, len(g.periods))
	}
	est := estimatePools(g.periods, window, g.ref, true)[0xc000]
	truth := 50000 * f.idleAfter.Seconds()
	t.Logf("gets %.0f ± %.0f, truth %.0f", est.Gets, est.GetsErr, truth)
	if math.Abs(est.Gets-truth) > est.GetsErr+0.05*truth {
		t.Errorf("gets %.0f ± %.0f, the program made %.0f", est.Gets, est.GetsErr, truth)
	}
}

func TestPoolGuardKeepsCheapHooksAttached(t *testing.T) {
	// 100 calls a second: 0.02 % of one CPU.
	f := newFakePoolHooks(100, 1)
	g, window := runGuard(t, f, false, 400*time.Millisecond)
	if f.detaches != 0 {
		t.Fatalf("the guard took hooks costing %.4f of the CPU off (budget %.3f)", g.costShare(), g.budget)
	}
	if s := g.sampling(window); s.Mode != "exact" {
		t.Fatalf("sampling = %+v, want exact", s)
	}
}

func TestPoolGuardExactPoolsNeverDetaches(t *testing.T) {
	f := newFakePoolHooks(50000, 1)
	g, window := runGuard(t, f, true, 400*time.Millisecond)
	if f.detaches != 0 {
		t.Fatal("--exact-pools: the guard took the hooks off")
	}
	if s := g.sampling(window); s.Mode != "exact" || s.CostShare < 0.1 {
		t.Fatalf("sampling = %+v, want exact with the cost it measured", s)
	}
}

func TestStudentT975(t *testing.T) {
	for df, want := range map[int]float64{1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 9: 2.262, 30: 2.042, 1000: 1.962} {
		if got := studentT975(df); math.Abs(got-want)/want > 0.01 {
			t.Errorf("t(0.975, %d) = %.3f, want %.3f", df, got, want)
		}
	}
}

func TestEstimatePools(t *testing.T) {
	const pool = 0x10
	mk := func(on time.Duration, gets uint64) poolPeriodCounts {
		return poolPeriodCounts{on: on, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: gets, Puts: gets / 2}}}
	}
	// Ten 100 ms stretches of a 10 s window, 1,000 Gets each give or
	// take 100. The first (the calibration, at the window's start) is
	// exact, 900; the other nine, 9,100 in 0.9 s, scale to the other
	// 9.9 s: 100,100, 101,000 in the window.
	var periods []poolPeriodCounts
	for i := 0; i < 10; i++ {
		periods = append(periods, mk(100*time.Millisecond, uint64(900+200*(i%2))))
	}
	e := estimatePools(periods, 10*time.Second, poolReference{}, true)[pool]
	if math.Abs(e.Gets-101000) > 1 || math.Abs(e.Puts-50500) > 1 {
		t.Fatalf("estimate %+v, want 101,000 Gets and 50,500 Puts", e)
	}
	// The nine periods' spread: residuals 88.9 (5) and −111.1 (4), v =
	// (1 − 0.9/9.9)·88,889/8/(9·0.01) = 112,234, √v = 335.0, × t(0.975,
	// 8 df) = 2.306 × 9.9 s: 7,648; the counts' own (Poisson) bound,
	// 1.96·√(9,100·0.909)·11 = 1,961, is smaller.
	if math.Abs(e.GetsErr-7648) > 10 {
		t.Errorf("gets bound %.0f, want 7,648 (the periods' spread)", e.GetsErr)
	}
	// Steady periods: the counts' own noise is the bound.
	steady := []poolPeriodCounts{}
	for i := 0; i < 10; i++ {
		steady = append(steady, mk(100*time.Millisecond, 1000))
	}
	// Poisson over the nine scaled: 1.96·√(9,000·(1 − 0.9/9.9))·9.9/0.9.
	if e := estimatePools(steady, 10*time.Second, poolReference{}, true)[pool]; math.Abs(e.GetsErr-1950) > 2 {
		t.Errorf("steady: gets bound %.0f, want 1,950 (Poisson)", e.GetsErr)
	}
	// Unsampled: summed as they are, no bound.
	e = estimatePools(periods, 10*time.Second, poolReference{}, false)[pool]
	if e.Gets != 10000 || e.GetsErr != 0 {
		t.Errorf("unsampled %+v, want 10,000 exact", e)
	}
	// A bursty program: the spread wins over the counts' own noise.
	periods = periods[:0]
	for i := 0; i < 10; i++ {
		periods = append(periods, mk(100*time.Millisecond, uint64(20000*(i%2))))
	}
	e = estimatePools(periods, 10*time.Second, poolReference{}, true)[pool]
	poisson := 1.96 * math.Sqrt(100000*0.9) * 100
	if e.GetsErr <= poisson {
		t.Errorf("bursty: bound %.0f not above the Poisson %.0f", e.GetsErr, poisson)
	}
}

// A load that stops mid-window: scaled by time, the stretches that saw it
// are extrapolated over the idle rest; scaled by the allocation samples,
// which follow the load, the estimate keeps to what was made.
func TestEstimatePoolsFollowsTheLoad(t *testing.T) {
	const pool = 0x10
	// Ten 100 ms stretches a second over 8 s. The program serves for the
	// first 2 s: 1,000 Gets and 100 samples a stretch; then nothing.
	// 20,000 Gets in 2 s, 2,000 samples.
	var periods []poolPeriodCounts
	for i := 0; i < 8; i++ {
		var gets, samples uint64
		if i < 2 {
			gets, samples = 1000, 100
		}
		periods = append(periods, poolPeriodCounts{on: 100 * time.Millisecond, samples: samples,
			counts: map[uint64]goalloc.PoolCounts{pool: {Gets: gets}}})
	}
	// Each stretch saw 1/10 of its second: the program made 10,000 Gets
	// a second for 2 s.
	const truth = 20000
	byTime := estimatePools(periods, 8*time.Second, poolReference{}, true)[pool]
	bySamples := estimatePools(periods, 8*time.Second, poolReference{total: 2000, ok: true}, true)[pool]
	t.Logf("by time %.0f ± %.0f, by samples %.0f ± %.0f, truth %d", byTime.Gets, byTime.GetsErr, bySamples.Gets, bySamples.GetsErr, truth)
	if math.Abs(bySamples.Gets-truth) > 1 {
		t.Errorf("scaled by samples: %.0f Gets, want %d", bySamples.Gets, truth)
	}
	if math.Abs(byTime.Gets-truth) < 0.3*truth {
		t.Errorf("scaled by time: %.0f Gets, want it far from %d (the fixture no longer tells the two apart)", byTime.Gets, truth)
	}
	// Too few samples to follow (20 in the stretches after the first):
	// the time it is.
	for i := range periods {
		periods[i].samples /= 10
	}
	few := estimatePools(periods, 8*time.Second, poolReference{total: 200, ok: true}, true)[pool]
	if few.Gets != byTime.Gets {
		t.Errorf("20 samples: %.0f Gets, want the time's %.0f", few.Gets, byTime.Gets)
	}
}

// The stretches that cover the window's start whole are counted as they
// are, not extrapolated: a start whose allocations are not pool calls (a
// service's connections set up) would pull the ratio down for the whole
// window.
func TestEstimatePoolsCountsTheWholeStartAsIs(t *testing.T) {
	const pool = 0x10
	// 400 ms attached from the start: 200 samples (connection buffers)
	// and 400 Gets. Then 20 stretches of 20 ms, one a second: 40 Gets and
	// 10 samples each, the steady state (4 Gets a sample), while the
	// window's other 19,000 samples were taken detached.
	periods := []poolPeriodCounts{
		{on: 200 * time.Millisecond, samples: 100, whole: true, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: 200}}},
		{on: 200 * time.Millisecond, samples: 100, whole: true, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: 200}}},
	}
	for i := 0; i < 20; i++ {
		periods = append(periods, poolPeriodCounts{on: 20 * time.Millisecond, samples: 10, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: 40}}})
	}
	const total = 200 + 200 + 19000 // the window's samples
	truth := 400.0 + 4*(total-200)
	e := estimatePools(periods, 20*time.Second, poolReference{total: total, ok: true}, true)[pool]
	t.Logf("%.0f ± %.0f Gets, truth %.0f", e.Gets, e.GetsErr, truth)
	if math.Abs(e.Gets-truth) > 1 {
		t.Errorf("%.0f Gets, want %.0f: the whole start counted as it is, the rest scaled by the steady stretches", e.Gets, truth)
	}
	// Without the start marked whole it is extrapolated with the rest.
	for i := range periods[:2] {
		periods[i].whole = false
	}
	mixed := estimatePools(periods, 20*time.Second, poolReference{total: total, ok: true}, true)[pool]
	if mixed.Gets > 0.9*truth {
		t.Errorf("unmarked start: %.0f Gets, want it well below %.0f (the fixture no longer tells the two apart)", mixed.Gets, truth)
	}
}

// Stretches that saw neither an allocation sample nor a call (the load
// over before the window ended) say nothing of the ratio: they do not
// narrow the bound.
func TestEstimatePoolsIdleStretchesDoNotNarrowTheBound(t *testing.T) {
	const pool = 0x10
	busy := []poolPeriodCounts{
		{on: 20 * time.Millisecond, samples: 40, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: 150}}},
		{on: 20 * time.Millisecond, samples: 40, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: 170}}},
		{on: 20 * time.Millisecond, samples: 40, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: 160}}},
	}
	idle := append(append([]poolPeriodCounts{}, busy...),
		poolPeriodCounts{on: 20 * time.Millisecond}, poolPeriodCounts{on: 20 * time.Millisecond}, poolPeriodCounts{on: 20 * time.Millisecond})
	ref := poolReference{total: 3000, ok: true}
	a := estimatePools(busy, 8*time.Second, ref, true)[pool]
	b := estimatePools(idle, 8*time.Second, ref, true)[pool]
	t.Logf("busy only %.0f ± %.0f, with idle stretches %.0f ± %.0f", a.Gets, a.GetsErr, b.Gets, b.GetsErr)
	if b.Gets != a.Gets || b.GetsErr < a.GetsErr {
		t.Errorf("idle stretches changed the estimate %.0f ± %.0f to %.0f ± %.0f", a.Gets, a.GetsErr, b.Gets, b.GetsErr)
	}
}

func TestPoolGuardExactPoolsChargesTheMeasuredTrap(t *testing.T) {
	// --exact-pools keeps the hooks on whatever they cost, but the report
	// still says what they cost: with the traps timed on the machine, not
	// the 6 µs assumed when they cannot be.
	saved := trapCosts
	defer func() { trapCosts = saved }()
	trapCosts = func() (trapTimes, error) { return trapTimes{stepped: 14000, emulated: 700}, nil }
	f := newFakePoolHooks(50000, 1)
	g := newPoolGuard(f, f.cpu, 0, true, true)
	if g.budget != DefaultPoolBudget {
		t.Errorf("budget %v, want the default %v", g.budget, DefaultPoolBudget)
	}
	g.calibration, g.period, g.minOn = 20*time.Millisecond, 100*time.Millisecond, 5*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := g.run(ctx); err != nil {
		t.Fatal(err)
	}
	s := g.sampling(time.Since(start))
	if f.detaches != 0 || s.Mode != "exact" {
		t.Fatalf("--exact-pools: %d detaches, sampling %+v", f.detaches, s)
	}
	// Gets and Puts on the emulated trap, News (a tenth as many as
	// either, 1/21 of the calls) on the stepped one, plus 300 ns self-timed.
	want := 300 + (20*700+14000)/21.0
	if math.Abs(s.CostPerCallNs-want) > 0.05*want {
		t.Errorf("cost per call %.0f ns, want ~%.0f (the measured traps, not %d ns assumed)", s.CostPerCallNs, want, UprobeTrapNs)
	}
	if !strings.Contains(s.Note, "measured on this machine") {
		t.Errorf("note %q does not say where the trap's cost came from", s.Note)
	}
}

// A detach that takes long (the kernel releasing the uprobes) while the
// hooks keep firing until it returns: the guard charges those hits and
// keeps the hooks off longer for them, so what they really cost stays
// within the budget, and the estimate, from the stretches before each
// detach, within its bound. Where they stop when the detach starts (as on
// 6.18), the wait is time off, not a stretch seen.
func TestPoolGuardPaysForASlowDetach(t *testing.T) {
	// 4,000 Gets and as many Puts a second at ~6.3 µs each against one
	// CPU: 5 % of it, ten times the budget; 10 ms on a 100 ms period.
	const rate = 4000
	perCall := 300 + UprobeTrapNs
	for _, fires := range []bool{true, false} {
		t.Run(map[bool]string{true: "fires", false: "stops"}[fires], func(t *testing.T) {
			quick := newFakePoolHooks(rate, 1)
			gq, _ := runGuard(t, quick, false, 1500*time.Millisecond)
			f := newFakePoolHooks(rate, 1)
			f.closeDelay, f.closeFires = 25*time.Millisecond, fires
			g, window := runGuard(t, f, false, 3*time.Second)
			end := time.Now()
			if len(g.cycles) < 3 || len(gq.cycles) < 3 {
				t.Fatalf("%d and %d detaches: the fixture no longer samples", len(g.cycles), len(gq.cycles))
			}
			// What the hooks really cost from the first detach on, and what
			// the guard charged for it.
			f.mu.Lock()
			on, total := f.on()-f.onAtDetach, f.on()
			f.mu.Unlock()
			cpu := end.Sub(f.detachAt).Seconds() * 1e9
			real := on.Seconds() * rate * 2.1 * float64(perCall) / cpu
			var charged float64
			for _, c := range g.cycles {
				charged += c.cost
			}
			t.Logf("on %v of %v after the first detach: the hooks cost %.2f %% (charged %.2f %%), budget %.2f %%; %d calls charged of %.0f made attached (%d late)",
				on, end.Sub(f.detachAt), 100*real, 100*charged/cpu, 100*g.budget, g.calls, total.Seconds()*rate*2.1, g.lateCalls)
			if real > 1.25*g.budget || charged/cpu > 1.25*g.budget {
				t.Errorf("the hooks cost %.2f %% of the CPU (charged %.2f %%), over the %.2f %% budget", 100*real, 100*charged/cpu, 100*g.budget)
			}
			if made := total.Seconds() * rate * 2.1; float64(g.calls) < 0.97*made {
				t.Errorf("%d calls charged of %.0f the hooks saw", g.calls, made)
			}
			if fires && g.lateCalls == 0 {
				t.Errorf("no hit charged from the detaches")
			}
			mean := func(c []poolCycle) time.Duration {
				var s time.Duration
				for _, x := range c[1:] {
					s += x.off
				}
				return s / time.Duration(len(c)-1)
			}
			if fires && mean(g.cycles) < mean(gq.cycles)+3*f.closeDelay {
				t.Errorf("off %v a cycle with the slow detach, %v with a quick one: not paid back", mean(g.cycles), mean(gq.cycles))
			}
			est := estimatePools(g.periods, window, g.ref, true)[0xc000]
			truth := rate * window.Seconds()
			t.Logf("gets %.0f ± %.0f, truth %.0f", est.Gets, est.GetsErr, truth)
			if math.Abs(est.Gets-truth) > est.GetsErr+0.02*truth {
				t.Errorf("gets %.0f ± %.0f, the program made %.0f", est.Gets, est.GetsErr, truth)
			}
		})
	}
}

// Scaled by allocation samples, one sampled stretch's ratio carries the
// noise of the samples it saw as well as of the calls: the calibration's
// 1,000 Gets and 100 samples counted whole, then one stretch of 250 Gets
// and 25 samples, of 500 samples in the window, scale the other 400
// samples at 10 Gets each: 5,000. The bound is the calls' Poisson noise
// (1.96·√(250·(1 − 25/400))·400/25 = 480), the 25 samples' (1.96·10·400·
// √((1 − 25/400)/25) = 1,518) and the 375 samples not seen (1.96·10·√375
// = 380), together 1,637; without the samples' own noise it was 612,
// and such a stretch missed the lab service's Gets by 17 %.
func TestEstimatePoolsOneStretchCarriesTheSamplesNoise(t *testing.T) {
	const pool = 0x10
	periods := []poolPeriodCounts{
		{on: 200 * time.Millisecond, samples: 100, whole: true, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: 1000}}},
		{on: 20 * time.Millisecond, samples: 25, counts: map[uint64]goalloc.PoolCounts{pool: {Gets: 250}}},
	}
	e := estimatePools(periods, 2*time.Second, poolReference{total: 500, ok: true}, true)[pool]
	if math.Abs(e.Gets-5000) > 1 {
		t.Fatalf("estimate %.0f Gets, want 5,000", e.Gets)
	}
	if math.Abs(e.GetsErr-1637) > 2 {
		t.Errorf("bound %.0f, want 1,637 (the calls', the samples' seen and the samples' not seen noise)", e.GetsErr)
	}
}
