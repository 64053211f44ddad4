package budget

import (
	"math"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// plan decides, from the costs measured so far, which batch groups stay
// exact and the duty cycle of the sampled ones; it returns the duty and
// the period (stretched when the window would be too short). g.mu held.
func (g *Governor) plan() (duty float64, period time.Duration) {
	period = g.budget.OpensEvery()
	budget := g.programBudget() // ns per second of each CPU
	exactCost := func() []float64 {
		c := make([]float64, g.cpus)
		copy(c, g.fixRate)
		for _, gg := range g.groups {
			if !gg.sampled() {
				addRate(c, gg.rate)
			}
		}
		return c
	}
	// Demote batch groups, lowest priority first, while the exact ones
	// take more than their share on some CPU. Rare groups are never
	// demoted: their cost is fixed, as the profiler's is.
	for {
		c := exactCost()
		if maxOf(c) <= exactShare*budget {
			break
		}
		var worst *governedGroup
		for _, gg := range g.groups {
			if gg.sampled() || gg.hg.Class == probes.Rare || maxOf(gg.rate) == 0 {
				continue
			}
			if worst == nil || gg.priority < worst.priority {
				worst = gg
			}
		}
		if worst == nil {
			break
		}
		worst.demoted = true
	}
	// Promote demoted ones that now fit, highest priority first.
	demoted := []*governedGroup{}
	for _, gg := range g.groups {
		if gg.demoted {
			demoted = append(demoted, gg)
		}
	}
	sort.Slice(demoted, func(i, j int) bool { return demoted[i].priority > demoted[j].priority })
	for _, gg := range demoted {
		c := exactCost()
		addRate(c, gg.rate)
		if gg.rate != nil && maxOf(c) <= promoteBelow*budget {
			gg.demoted = false
		}
	}
	// The sampled groups' duty: what is left on the tightest CPU.
	left := exactCost()
	sampled := make([]float64, g.cpus)
	for _, gg := range g.groups {
		if !gg.sampled() {
			continue
		}
		if gg.rate == nil {
			return firstDuty, period
		}
		addRate(sampled, gg.rate)
	}
	duty = 1
	for cpu := range sampled {
		if sampled[cpu] <= 0 {
			continue
		}
		duty = math.Min(duty, math.Max(0, budget-left[cpu])/sampled[cpu])
	}
	// Switching is perfscope's own cost too: every attach and detach
	// patches the tracepoints' call sites and waits on every CPU (a
	// quarter to a half of the process's CPU during a flood). The default
	// period stretches until the period's switches take at most
	// switchShare of the budget; the windows stretch with it, so the
	// coverage stays what the budget allows, in fewer, longer windows. A
	// period given (a timeline's interval) is kept.
	if g.budget.Period == 0 && duty < attachAllAbove {
		period = min(maxBudgetPeriod, max(period, g.switchingPeriod()))
		// A run of known length needs its windows more than the
		// switching needs its quarter of the budget: the period shortens
		// to give every sampled group boundWindows of them, as far as the
		// process, switching included, keeps within its share of the
		// budget; the programs' windows shrink by what it takes.
		if fit := g.fitPeriod(); fit > 0 && fit < period {
			period = max(fit, g.runSwitchingPeriod())
		}
	}
	if w := time.Duration(duty * float64(period)); w < minSampleWindow {
		period = maxBudgetPeriod
		if duty > 0 {
			period = min(maxBudgetPeriod, time.Duration(float64(minSampleWindow)/duty))
		}
		duty = float64(minSampleWindow) / float64(period)
	}
	if g.budget.Period == 0 {
		period = g.alignToEnd(period)
	}
	return duty, period
}

// fitPeriod is the longest period that gives every sampled group
// boundWindows windows in what is left of a run of known length (0: the
// length is unknown, or every group has its windows). g.mu held.
func (g *Governor) fitPeriod() time.Duration {
	if g.length <= 0 {
		return 0
	}
	left, done := g.length, boundWindows
	if !g.periodStart.IsZero() {
		left = g.began.Add(g.length).Sub(g.periodStart)
		for _, gg := range g.groups {
			if gg.sampled() {
				done = min(done, windowsOf(gg.periods))
			}
		}
	} else {
		done = 0
	}
	need := boundWindows - done
	if need <= 0 || left <= 0 {
		return 0
	}
	return left / time.Duration(need)
}

// windowsOf counts the periods whose window the estimate can use.
func windowsOf(periods []samplePeriod) int {
	n := 0
	for _, p := range periods {
		if p.on >= minRateWindow {
			n++
		}
	}
	return n
}

// runSwitchingPeriod is the shortest period at which the process's CPU,
// the switches of every sampled group included, stays within
// maxProcessShare of the budget on every CPU (spread over them, as the
// budget counts the process): what the rest of the process takes is its
// measured rate less the switching's; 0 until switching was timed, the
// longest period when the rest alone fills the share. g.mu held.
func (g *Governor) runSwitchingPeriod() time.Duration {
	var perPeriod float64
	for _, gg := range g.groups {
		if gg.sampled() {
			perPeriod += 2 * gg.switchNs
		}
	}
	if perPeriod == 0 || g.cpus == 0 {
		return 0
	}
	room := maxProcessShare*g.budget.CPUShare*1e9 - math.Max(0, g.procRate-g.switchRate)
	if room <= 0 {
		return maxBudgetPeriod
	}
	return min(maxBudgetPeriod, time.Duration(perPeriod/float64(g.cpus)/room*1e9))
}

// alignToEnd divides what is left of a run of known length into whole
// periods no shorter than period (shorter ones would switch more than
// planned), so that the last one ends with the run rather than being a
// sliver whose window may never open. g.mu held.
func (g *Governor) alignToEnd(period time.Duration) time.Duration {
	if g.length <= 0 || g.periodStart.IsZero() {
		return period
	}
	left := g.began.Add(g.length).Sub(g.periodStart)
	if left <= period/2 {
		return period
	}
	return left / max(1, left/period)
}

// midpoint is the middle of two readings of a counter and half their
// difference (0 when it went backwards: a failed read).
func midpoint(before, after uint64) (mid, half uint64) {
	if after < before {
		return after, 0
	}
	half = (after - before) / 2
	return before + half, half
}

// threadCPU is the calling thread's CPU time (0 when unreadable: the
// switches then count as free and the period is not stretched).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// switchingPeriod is the shortest period whose switches (an attach and a
// detach of every sampled group) take at most switchShare of the budget;
// 0 until they were timed (g.mu held).
func (g *Governor) switchingPeriod() time.Duration {
	var perPeriod float64
	for _, gg := range g.groups {
		if gg.sampled() {
			perPeriod += 2 * gg.switchNs
		}
	}
	if perPeriod == 0 || g.budget.CPUShare <= 0 {
		return 0
	}
	return time.Duration(perPeriod / (switchShare * g.budget.CPUShare))
}

func addRate(dst, r []float64) {
	for i := range r {
		if i < len(dst) {
			dst[i] += r[i]
		}
	}
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}
