package golang

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/goalloc"
)

// The sync.Pool hooks' cost guard. Get and Put trap into the kernel on
// every call — net/http alone calls each ~3 times a request — so on a busy
// service they would cost far more than the rest of the probe (8 % of the
// lab service's requests/s, BENCHMARKS.md). The guard measures what the
// hooks cost the program while attached: calls × (the programs' own time
// per run + the uprobe trap) over the program's CPU time. Under the budget
// they stay attached for the whole window and the counts are exact; over
// it they are attached for a fraction of each period (budget / cost) and
// the counts are scaled up to the window, each with a 95 % bound.
const (
	// DefaultPoolBudget is the share of the program's CPU time the pool
	// hooks may take: half of the < 1 % requests/s target, the rest left
	// to the allocation and GC hooks.
	DefaultPoolBudget = 0.005
	// UprobeTrapNs is what one uprobe hit costs the program outside the
	// BPF program (the breakpoint trap, the kernel's uprobe dispatch and
	// the single-step back), which the programs cannot time themselves,
	// when it cannot be measured on the machine (measureUprobeTrap): what
	// the lab service lost per pool call with the hooks always attached
	// on the project's 2-vCPU KVM guest (BENCHMARKS.md, "go: requests/s
	// lost under a fixed-rate load").
	UprobeTrapNs = 6000
	// poolCalibration is the first stretch with the hooks attached, after
	// which the guard first decides, and how often it decides again while
	// they cost less than the budget.
	poolCalibration = 200 * time.Millisecond
	// poolPeriod is, once the guard samples, the length of one on+off
	// period (longer when the on part would be shorter than minPoolOn),
	// and the shortest: the hooks go back on at most once a period (run).
	poolPeriod = time.Second
	minPoolOn  = 20 * time.Millisecond
)

// poolPeriodCounts is one stretch with the pool hooks attached and what
// they counted in it.
type poolPeriodCounts struct {
	on     time.Duration
	counts map[uint64]goalloc.PoolCounts
	// samples is the allocation samples the runtime took in the stretch,
	// the reference the counts are scaled by (poolReference).
	samples uint64
	// whole: the stretch is one of those that cover the window's start
	// without a gap, before the guard first took the hooks off; their
	// counts are exact for that part of the window.
	whole bool
}

// poolReference is what the counts seen while attached are scaled by: the
// allocation samples the runtime took over the whole window (counted by
// hooks that are never taken off), or, without them, the time. Scaled by
// time, a load that changes over the window was extrapolated from the
// stretches that saw it: 3,000 requests sent in the first 2 s of an 8 s
// window gave 8,306 Gets for the lab service's 12,000. Allocation and pool
// use both follow the requests, so the samples follow the load.
type poolReference struct {
	// total is the window's allocation samples; ok false when they could
	// not be read.
	total uint64
	ok    bool
}

// minReferenceSamples is how many allocation samples the stretches with
// the hooks attached must hold for the guard to scale by them rather than
// by time: fewer say less about the load than the clock.
const minReferenceSamples = 30

// poolHooks are the probe's methods the guard uses (a fake in tests).
type poolHooks interface {
	DetachPools() error
	AttachPools() error
	PoolCounts() (map[uint64]goalloc.PoolCounts, error)
	SelfCosts() (probes.SelfCosts, error)
	// AllocSamples is the allocation samples counted so far.
	AllocSamples() (uint64, error)
	// PoolsOneLink: the hooks are one uprobe_multi link, whose close
	// takes their breakpoints out of the text as it starts.
	PoolsOneLink() bool
}

// poolGuard attaches and detaches the pool hooks over one window.
type poolGuard struct {
	hooks  poolHooks
	cpu    func() (time.Duration, error) // the program's CPU time so far
	budget float64
	// trapNs is what a Get or Put hook's trap costs, newTrapNs what the
	// New call's does (stepped out of line: an indirect call).
	trapNs, newTrapNs float64
	// trapNote says where they came from.
	trapNote string
	// exact keeps the hooks attached whatever they cost (--exact-pools).
	exact bool
	// calibration, period and minOn: poolCalibration, poolPeriod and
	// minPoolOn unless set (tests).
	calibration, period, minOn time.Duration

	periods  []poolPeriodCounts
	detached int // times the guard took the hooks off
	calls    uint64
	newCalls uint64 // of calls, those of New (a miss)
	cpuOn    time.Duration
	// lateCalls: of calls, the hits counted after a detach started,
	// charged but no stretch's sample.
	lateCalls uint64
	// cycles: each detach, what it charged and the time off after it.
	cycles []poolCycle
	// prepaid is the cycle the last off time was sized ahead for.
	prepaid  time.Duration
	costNs   float64 // the programs' own time per hit, self-timed
	fraction float64 // the current share of time attached
	cpuErr   error
	ref      poolReference
}

// run drives the hooks until ctx ends (the window's end). The hooks are
// attached when it starts; it returns with them attached or not (Close
// takes them off).
//
// A detach is not instant (DetachPools): one uprobe_multi link's close
// takes ~16 ms on Linux 6.18, the breakpoints out as it starts; hooks
// attached one by one (kernels before 6.10) take 70–140 ms each, their
// breakpoints left in the text until then. The programs stop when the
// closes start, but the guard reads the counts again once the detach has
// returned and charges every hit they hold: a kernel on which the hooks
// fire until the close returns is charged what they cost there too. What
// it cannot charge is the traps of one-by-one hooks whose programs no
// longer run: the sampling note says so. The off time is sized from what
// the stretch cost, those hits included, and is counted from the detach's
// start, its wait part of it. Only the hits up to the detach's start, over
// the time up to it, are the stretch's sample: when each hook stopped
// inside the close is not known to the guard.
//
// The hooks go back on no sooner than a period after the last stretch
// started, however short the budget would let the off time be: a switch
// costs the program what the guard does not charge (each attach and
// detach writes the breakpoints into or out of its text, a page replaced
// in its memory map, and the close waits for a grace period), so it is
// bounded at one detach and one attach a period. Without the floor an
// idle service switched every ~50 ms: each stretch, costing nothing, paid
// back the off time sized ahead for it, the off time came to nothing, and
// the cycle was the on time (minPoolOn) and the detach's wait. The floor
// applies to any off time short of it, not only a vanished one: a few
// milliseconds off buy next to nothing and cost a switch. It only
// lengthens off times, so the hooks cost less, never more, than the
// budget allows; the time it adds is not credited to later stretches
// (prepaid stays the plan): credited, an idle spell would excuse a load
// that comes back from paying back what its stretches cost over the plan.
func (g *poolGuard) run(ctx context.Context) error {
	first, refErr := g.hooks.AllocSamples()
	defer func() {
		last, err := g.hooks.AllocSamples()
		g.ref = poolReference{total: last - first, ok: refErr == nil && err == nil && last >= first}
	}()
	g.fraction = 1
	if g.calibration <= 0 {
		g.calibration, g.period, g.minOn = poolCalibration, poolPeriod, minPoolOn
	}
	on := g.calibration
	for {
		start := time.Now()
		c0, err := g.hooks.PoolCounts()
		if err != nil {
			return err
		}
		cpu0, cpuErr := g.cpu()
		self0, _ := g.hooks.SelfCosts()
		ref0, _ := g.hooks.AllocSamples()
		ended := sleep(ctx, on)
		c1, err := g.hooks.PoolCounts()
		if err != nil {
			return err
		}
		cpu1, cpuErr1 := g.cpu()
		self1, _ := g.hooks.SelfCosts()
		ref1, _ := g.hooks.AllocSamples()
		span := time.Since(start)
		d := subPools(c1, c0)
		g.periods = append(g.periods, poolPeriodCounts{on: span, counts: d, samples: ref1 - min(ref0, ref1), whole: g.detached == 0})
		g.charge(d)
		cpuSpan := cpu1 - cpu0
		if cpuErr == nil && cpuErr1 == nil {
			g.cpuOn += cpuSpan
		} else {
			g.cpuErr = fmt.Errorf("the program's CPU time could not be read (%v): its wall time on one CPU stands for it", firstErr(cpuErr, cpuErr1))
			cpuSpan = span
			g.cpuOn += span
		}
		if ns := poolSelfNs(self1.Sub(self0)); ns > 0 {
			g.costNs = ns
		}
		if ended {
			return nil
		}
		share := g.costShare()
		if g.exact || (share <= g.budget && g.detached == 0) {
			// Checked as often as at first: a program idle so far can
			// take load at any moment, at the hooks' full cost.
			on = g.calibration
			continue
		}
		g.fraction = math.Min(1, g.budget/share)
		on = time.Duration(g.fraction * float64(g.period))
		if on < g.minOn {
			on = g.minOn
		}
		if g.fraction >= 1 {
			continue
		}
		if err := g.hooks.DetachPools(); err != nil {
			return err
		}
		g.detached++
		c2, err := g.hooks.PoolCounts()
		if err != nil {
			return err
		}
		late := subPools(c2, c1)
		g.charge(late)
		g.lateCalls += callsIn(late)
		// The hooks may cost budget × the program's CPU over on + off.
		// The off time after a stretch is sized ahead for the next one's
		// planned on time (on / fraction from this stretch's start), and
		// corrected by what this one really cost against what was sized
		// ahead for it: the hits charged after the detach started and
		// a share over the plan are paid back, the detach's wait counts as
		// time off. The whole start's cost is not paid back (the guard's
		// reaction, at full cost). The next stretch starts a period after
		// this one at the earliest (see above).
		rate := 1.0 // the program's CPU per wall second
		if cpuSpan > 0 && span > 0 {
			rate = float64(cpuSpan) / float64(span)
		}
		whole := g.periods[len(g.periods)-1].whole
		cost := float64(callsIn(late)) * g.costPerCall()
		if !whole {
			cost += float64(callsIn(d)) * g.costPerCall()
		}
		ahead := time.Duration(float64(on) / g.fraction)
		cycle := time.Duration(cost/g.budget/rate) - g.prepaid + ahead
		if whole {
			cycle += span
		}
		g.prepaid = ahead
		off := max(max(cycle, g.period)-time.Since(start), 0)
		g.cycles = append(g.cycles, poolCycle{start: start, cost: cost, off: off, whole: whole})
		if ended = sleep(ctx, off); ended {
			return nil
		}
		if err := g.hooks.AttachPools(); err != nil {
			return err
		}
	}
}

// poolCycle is one stretch the guard detached after.
type poolCycle struct {
	start time.Time // the stretch's
	// cost is the hooks' cost charged to it (ns): the stretch's hits
	// (none for the whole start's, not paid back) and the late ones.
	cost  float64
	off   time.Duration // the hooks then kept off, the detach's wait not included
	whole bool
}

// callsIn is the calls in d.
func callsIn(d map[uint64]goalloc.PoolCounts) uint64 {
	var n uint64
	for _, c := range d {
		n += c.Gets + c.Puts + c.News
	}
	return n
}

// charge adds a stretch's hits to the calls the hooks' cost is charged for.
func (g *poolGuard) charge(d map[uint64]goalloc.PoolCounts) {
	g.calls += callsIn(d)
	for _, c := range d {
		g.newCalls += c.News
	}
}

// newPoolGuard is the guard over hooks, whose program's CPU time cpu
// reads, with budget (DefaultPoolBudget when 0) and the traps timed on
// this machine (setTrap), with --exact-pools (exact) too: the hooks stay
// attached then, but the report's cost share and cost per call are still
// the model's, and with the 6 µs assumed they said 6,213 ns a call and
// 248 % of a tight Get+Put loop's CPU where 1,064 ns a hit was measured
// (bench/results/go.md, "the pool hooks' cost per call").
func newPoolGuard(hooks poolHooks, cpu func() (time.Duration, error), budget float64, exact, emulated bool) *poolGuard {
	g := &poolGuard{hooks: hooks, cpu: cpu, budget: budget, exact: exact}
	if g.budget <= 0 {
		g.budget = DefaultPoolBudget
	}
	g.setTrap(emulated)
	return g
}

// costPerCall is the mean cost of a hook's hit: the programs' own time
// and the trap, stepped for New's calls, emulated or stepped for Get and
// Put's (setTrap).
func (g *poolGuard) costPerCall() float64 {
	if g.calls == 0 {
		return g.costNs + g.trapNs
	}
	news := float64(min(g.newCalls, g.calls))
	return g.costNs + (g.trapNs*(float64(g.calls)-news)+g.newTrapNs*news)/float64(g.calls)
}

// costShare is what the hooks cost the program while attached: hits ×
// (self-timed time per run + the trap) over its CPU time then.
func (g *poolGuard) costShare() float64 {
	if g.calls == 0 {
		return 0
	}
	cost := g.costPerCall() * float64(g.calls)
	if g.cpuOn <= 0 {
		return math.Inf(1)
	}
	return cost / float64(g.cpuOn)
}

// sleep waits d or until ctx ends, and says whether ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// poolSelfNs is the pool hooks' mean self-timed time per run.
func poolSelfNs(s probes.SelfCosts) float64 {
	var timed, ns uint64
	for _, hook := range []string{goalloc.HookPoolGet, goalloc.HookPoolPut, goalloc.HookPoolNew} {
		for _, v := range s[hook] {
			timed += v.TimedRuns
			ns += v.TimedNs
		}
	}
	if timed == 0 {
		return 0
	}
	return float64(ns) / float64(timed)
}

// subPools is the counts between two readings.
func subPools(now, before map[uint64]goalloc.PoolCounts) map[uint64]goalloc.PoolCounts {
	out := map[uint64]goalloc.PoolCounts{}
	for addr, c := range now {
		p := before[addr]
		if c.Gets < p.Gets || c.Puts < p.Puts || c.News < p.News {
			p = goalloc.PoolCounts{}
		}
		if d := (goalloc.PoolCounts{Gets: c.Gets - p.Gets, Puts: c.Puts - p.Puts, News: c.News - p.News}); d != (goalloc.PoolCounts{}) {
			out[addr] = d
		}
	}
	return out
}

// PoolEstimate is one pool's counts over the window: exact when the hooks
// stayed attached (errors zero), else scaled from the periods they were.
type PoolEstimate struct {
	Gets, Puts, News             float64
	GetsErr, PutsErr, NewsErr    float64
	getsSeen, putsSeen, newsSeen uint64
}

// EstimatePools scales the periods' counts to the window with the ratio
// estimator (counts per allocation sample seen attached × the window's
// samples, or, without enough samples, counts per second attached × the
// window), each with a 95 % bound: the spread of the periods' ratios
// (finite-population corrected for the share attached, Student's t for
// their number) or the counts' Poisson error, whichever is larger, and,
// scaled by samples, the unseen samples' own Poisson error beside it.
// sampled false: the periods cover the window and the counts are summed
// as they are.
func estimatePools(periods []poolPeriodCounts, window time.Duration, ref poolReference, sampled bool) map[uint64]PoolEstimate {
	out := map[uint64]PoolEstimate{}
	var on time.Duration
	for _, p := range periods {
		on += p.on
		for addr, c := range p.counts {
			e := out[addr]
			e.getsSeen += c.Gets
			e.putsSeen += c.Puts
			e.newsSeen += c.News
			out[addr] = e
		}
	}
	sc := scaleOf(periods, window, ref)
	for addr, e := range out {
		e.Gets, e.Puts, e.News = float64(e.getsSeen), float64(e.putsSeen), float64(e.newsSeen)
		if sampled && on > 0 {
			pick := []func(goalloc.PoolCounts) uint64{
				func(c goalloc.PoolCounts) uint64 { return c.Gets },
				func(c goalloc.PoolCounts) uint64 { return c.Puts },
				func(c goalloc.PoolCounts) uint64 { return c.News },
			}
			vals := []*float64{&e.Gets, &e.Puts, &e.News}
			errs := []*float64{&e.GetsErr, &e.PutsErr, &e.NewsErr}
			for i, f := range pick {
				*vals[i], *errs[i] = ratioEstimate(periods, addr, f, sc)
			}
		}
		out[addr] = e
	}
	return out
}

// poolScale is what the counts are scaled by: of(p) for each stretch,
// total for the window.
type poolScale struct {
	of    func(poolPeriodCounts) float64
	total float64
	// counted: the reference is itself a count (allocation samples),
	// with its own Poisson noise in the part not seen.
	counted bool
}

// scaleOf is the allocation samples when they were read and the
// stretches after the first hold enough of them, else the time.
func scaleOf(periods []poolPeriodCounts, window time.Duration, ref poolReference) poolScale {
	var all uint64
	for _, p := range periods {
		all += p.samples
	}
	if ref.ok && all >= minReferenceSamples && ref.total >= all {
		return poolScale{of: func(p poolPeriodCounts) float64 { return float64(p.samples) }, total: float64(ref.total), counted: true}
	}
	return poolScale{of: func(p poolPeriodCounts) float64 { return p.on.Seconds() }, total: window.Seconds()}
}

// ratioEstimate is one count's total over the window and its 95 % bound.
// Scaled by allocation samples, every stretch gives the ratio, the first
// too. Scaled by time, the first stretch, the calibration at the window's
// start, was seen whole: its count is exact and only the rest of the
// window is scaled, by the stretches after it. Scaled with the others,
// the start's transient (a load ramping up) was extrapolated over the
// whole window: 51,359 ± 1,814 Gets estimated against the lab service's
// 48,000. (Scaled by samples, a load over before the second stretch
// would leave no ratio to scale with: 3,340 ± 0 Gets against 12,000.)
func ratioEstimate(periods []poolPeriodCounts, addr uint64, count func(goalloc.PoolCounts) uint64, sc poolScale) (float64, float64) {
	// The stretches that cover the window's start whole (the calibration,
	// and those after it while the hooks cost less than the budget) are
	// counted as they are, and only the rest of the window is scaled, by
	// the stretches after them: a start that differs from the rest (a
	// load ramping up, a service's connections being set up, whose
	// allocations are not pool calls) is not extrapolated. An h2c
	// service's first stretches allocated connection buffers and frames
	// with few pool calls: scaled with the others, 11,423 ± 349 Gets were
	// estimated against 12,000.
	k := 0
	for k < len(periods) && periods[k].whole {
		k++
	}
	if k == 0 && !sc.counted && len(periods) >= 2 {
		k = 1 // a guard that samples from the start: its first stretch
	}
	if k > 0 && k < len(periods) {
		var x0, exact float64
		for _, p := range periods[:k] {
			x0 += sc.of(p)
			exact += float64(count(p.counts[addr]))
		}
		var xRest float64
		for _, p := range periods[k:] {
			xRest += sc.of(p)
		}
		if sc.total > x0 && xRest > 0 {
			rest, bound := scaledEstimate(periods[k:], addr, count, poolScale{of: sc.of, total: sc.total - x0, counted: sc.counted})
			return exact + rest, bound
		}
	}
	return scaledEstimate(periods, addr, count, sc)
}

// scaledEstimate scales the counts seen in periods to the window: the
// count per unit of the reference seen × the window's total.
func scaledEstimate(periods []poolPeriodCounts, addr uint64, count func(goalloc.PoolCounts) uint64, sc poolScale) (float64, float64) {
	var seen, x float64
	for _, p := range periods {
		seen += float64(count(p.counts[addr]))
		x += sc.of(p)
	}
	if x <= 0 {
		return 0, 0
	}
	w := math.Max(sc.total, x)
	rate := seen / x
	fpc := 1 - x/w // the share of the window not seen
	// Poisson: the seen count's own noise, scaled; none seen is no
	// evidence of none made, so it is bounded as if one was.
	bound := 1.96 * math.Sqrt(math.Max(seen, 1)*fpc) * w / x
	if sc.counted {
		// The allocation samples the stretches saw are a count too: the
		// ratio carries both counts' noise. Left out, one stretch that saw
		// 25 samples was bounded at ±9 % and missed by 17 % (24,869 ±
		// 2,193 Gets estimated against the lab service's 30,000).
		bound = math.Hypot(bound, 1.96*rate*w*math.Sqrt(fpc/x))
	}
	// A stretch that saw neither the reference nor a call (the program
	// idle then: a load over before the window ended) says nothing of the
	// ratio: counted among the stretches, its zero residual narrowed the
	// bound as if it agreed (CI: 11,652 ± 343 Gets against 12,000, the
	// load seen by 2 of 6 stretches).
	var informative []poolPeriodCounts
	for _, p := range periods {
		if sc.of(p) > 0 || count(p.counts[addr]) > 0 {
			informative = append(informative, p)
		}
	}
	if n := float64(len(informative)); n >= 2 {
		var ss float64
		for _, p := range informative {
			r := float64(count(p.counts[addr])) - rate*sc.of(p)
			ss += r * r
		}
		mean := x / n
		v := fpc * ss / (n - 1) / (n * mean * mean)
		bound = math.Max(bound, studentT975(len(informative)-1)*math.Sqrt(v)*w)
	}
	if sc.counted {
		// The samples taken while detached are a count too.
		bound = math.Hypot(bound, 1.96*rate*math.Sqrt(w-x))
	}
	return rate * w, bound
}

// studentT975 is Student's t distribution's 97.5 % quantile for df
// degrees of freedom: the spread of a few periods says little about its
// own size. Exact for 1; else the Cornish–Fisher expansion around the
// normal's 1.96 (within 1 % from 2 on).
func studentT975(df int) float64 {
	if df <= 1 {
		return 12.706
	}
	z, v := 1.959964, float64(df)
	z3, z5, z7, z9 := z*z*z, math.Pow(z, 5), math.Pow(z, 7), math.Pow(z, 9)
	return z + (z3+z)/(4*v) + (5*z5+16*z3+3*z)/(96*v*v) + (3*z7+19*z5+17*z3-15*z)/(384*v*v*v) +
		(79*z9+776*z7+1482*z5-1920*z3-945*z)/(92160*v*v*v*v)
}

// poolSampling is what the evidence says of how the hooks ran.
func (g *poolGuard) sampling(window time.Duration) *evidence.GoPoolSampling {
	var on time.Duration
	for _, p := range g.periods {
		on += p.on
	}
	s := &evidence.GoPoolSampling{Mode: "exact", OnNs: int64(on), Periods: len(g.periods),
		BudgetShare: g.budget, CostShare: g.costShare(), CostPerCallNs: g.costPerCall()}
	if math.IsInf(s.CostShare, 0) {
		s.CostShare = 0
	}
	if window > 0 {
		s.OnFraction = math.Min(1, float64(on)/float64(window))
	}
	switch {
	case g.exact:
		s.Note = "--exact-pools: attached the whole window whatever they cost"
	case g.detached > 0:
		s.Mode = "sampled"
		s.ScaledBy = "time"
		if scaleOf(g.periods, window, g.ref).counted {
			s.ScaledBy = "allocation samples"
		}
		s.Note = fmt.Sprintf("the pool hooks cost %.1f %% of the program's CPU while attached (%d calls, %.0f ns each), over the %.1f %% budget: attached %.1f %% of the window in %d stretch(es), counts scaled to the window by %s with 95 %% bounds",
			100*s.CostShare, g.calls, s.CostPerCallNs, 100*g.budget, 100*s.OnFraction, len(g.periods), s.ScaledBy)
		if g.lateCalls > 0 {
			s.Note += fmt.Sprintf("; %d of the calls hit the hooks while they were being taken off: charged, not scaled", g.lateCalls)
		}
		if !g.hooks.PoolsOneLink() {
			s.Note += "; this kernel has no uprobe_multi links that filter by process (Linux 6.10), so the hooks were attached one by one: at each detach their breakpoints stayed in the program's text until the kernel released them (up to 244 ms on Linux 6.18), and the calls of that time took a trap no counter charges"
		}
	}
	if g.trapNote != "" {
		s.Note = strings.TrimPrefix(s.Note+"; "+g.trapNote, "; ")
	}
	if g.cpuErr != nil {
		s.Note = strings.TrimPrefix(s.Note+"; "+g.cpuErr.Error(), "; ")
	}
	return s
}

// threadCPU is the CPU time all of pid's threads have run, from their
// schedstat (nanoseconds; /proc/PID/stat's ticks are 10 ms).
func threadCPU(fs FS, pid int) (time.Duration, error) {
	dir := fs.path(pid, "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, t := range tasks {
		raw, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(raw))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(dir, t.Name(), "schedstat"), err)
		}
		sum += ns
	}
	return time.Duration(sum), nil
}

// setTrap sets the uprobe traps' cost per hit, measured on this machine
// once per process, else UprobeTrapNs: Get and Put pay an emulated trap
// when their hooks land on an instruction the kernel emulates (emulated),
// else a stepped one, as the call of New always does.
func (g *poolGuard) setTrap(emulated bool) {
	t, err := trapCosts()
	switch {
	case err != nil:
		g.trapNs, g.newTrapNs = UprobeTrapNs, UprobeTrapNs
		g.trapNote = fmt.Sprintf("the uprobe trap's cost could not be measured here (%v): %.1f µs assumed", err, UprobeTrapNs/1e3)
		return
	case t.stepped <= 0:
		g.trapNs, g.newTrapNs = UprobeTrapNs, UprobeTrapNs
		g.trapNote = fmt.Sprintf("the uprobe trap timed at nothing here: %.1f µs assumed", UprobeTrapNs/1e3)
		return
	}
	g.trapNs, g.newTrapNs = t.stepped, t.stepped
	kind := "stepped out of line"
	if emulated && t.emulated > 0 {
		g.trapNs, kind = t.emulated, "emulated"
	}
	g.trapNote = fmt.Sprintf("uprobe traps measured on this machine: %.1f µs stepped out of line, %.1f µs emulated; Get and Put's hooks are %s, New's stepped",
		t.stepped/1e3, max(t.emulated, 0)/1e3, kind)
}

// trapTarget is the function measureUprobeTraps hooks in perfscope itself
// where the kernel steps the probed instruction out of line (a leaf: its
// body starts with an XOR).
//
//go:noinline
func trapTarget(x int) int { return x ^ 1 }

// trapFramed is the function it hooks where the probed instruction is
// emulated: a function with a frame, whose body starts with PUSHQ BP after
// its stack check, as sync.Pool's Get and Put do.
//
//go:noinline
func trapFramed(x int) int { return trapTarget(x) + 2 }

var trapSink int

// trapTimes are the two kinds of uprobe trap, in nanoseconds a hit.
type trapTimes struct{ stepped, emulated float64 }

// trapCosts is measureUprobeTraps' result, measured once per process.
var trapCosts = sync.OnceValues(measureUprobeTraps)

// measureUprobeTraps times what a uprobe hit costs on this machine (a
// virtual machine's trap can cost several times a bare host's), for each
// kind: a uprobe on trapTarget (stepped) and on trapFramed (emulated where
// the kernel emulates a push; where it does not, the two times agree) in perfscope's own binary, found through its function table
// as any Go program's, 5,000 calls with and without it (best of 3). An
// emulated time that cannot be measured is -1: Get and Put are then
// charged the stepped one.
func measureUprobeTraps() (trapTimes, error) {
	t := trapTimes{emulated: -1}
	proc, err := OpenProcess(FS{}, os.Getpid())
	if err != nil {
		return t, err
	}
	defer proc.Close()
	probeAt := func(name string, call func(n int)) (float64, bool, error) {
		f, ok := proc.Binary.Func("github.com/perfscope/perfscope/golang." + name)
		if !ok {
			return 0, false, fmt.Errorf("golang.%s is not in perfscope's function table", name)
		}
		at, err := proc.Binary.BodyStart(f)
		if err != nil {
			return 0, false, err
		}
		emulated, err := proc.Binary.EmulatedProbe(f, at)
		if err != nil {
			return 0, false, err
		}
		off, err := proc.Binary.FileOffset(at)
		if err != nil {
			return 0, false, err
		}
		d, err := goalloc.MeasureTrap(proc.Exe, off, call, 5000, 3)
		return float64(d), emulated, err
	}
	stepped, _, err := probeAt("trapTarget", func(n int) {
		for i := 0; i < n; i++ {
			trapSink = trapTarget(trapSink)
		}
	})
	if err != nil {
		return t, err
	}
	t.stepped = stepped
	// The emulated kind is timed only where trapFramed's hook really lands
	// on a push; the call of trapTarget inside it is the same with and
	// without the hook.
	if emulated, push, err := probeAt("trapFramed", func(n int) {
		for i := 0; i < n; i++ {
			trapSink = trapFramed(trapSink)
		}
	}); err == nil && push && emulated > 0 {
		t.emulated = emulated
	}
	return t, nil
}
