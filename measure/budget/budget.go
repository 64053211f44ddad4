// Package budget is perfscope's overhead budget: how much of any one
// CPU a run may take (Budget), the governor that keeps a session's hook
// groups within it by attaching the per-packet ones in sampling windows
// (governor.go; guard.go ends a window over its allowance, plan.go plans
// the windows, cost.go measures what the hooks and the process cost,
// reference.go reads the kernel counters the estimates scale by), the
// estimates and their bounds (estimate.go) and the coverage the parts
// scale their counts by (coverage.go). It knows probes, not parts:
// measure's session drives it.
package budget

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
)

// Budget is an overhead budget for a window: how much of any one CPU's
// time perfscope may take — its BPF programs on that CPU plus its own
// process's CPU spread over every CPU. Within it, a governor keeps the
// hooks that fire per batch of packets (softirq runs, NAPI polls, lock
// contention) attached and exact while they fit, and attaches the hooks
// that fire per packet in sampling windows, detached in between, scaling
// what the windows saw to the whole window (each such number carries an
// evidence.Estimate). It measures the programs' cost per CPU at every
// window (their own run counters, no bpf_stats needed) and the process's
// CPU every period, and shortens the windows when together they would
// cost more than the budget.
type Budget struct {
	// CPUShare is the most of any one CPU's time perfscope may take: the
	// programs, the tracepoints' entry included, plus the process spread
	// over every CPU (0.02: 2 %). Zero means no budget:
	// every hook attached throughout, every event counted (--exact).
	CPUShare float64
	// Period is how often a sampling window opens (DefaultPeriod
	// when zero); the governor stretches it when a window would be
	// shorter than minSampleWindow.
	Period time.Duration
}

// Default is the budget of perfscope's commands: 1.5 % of any one
// CPU. A CPU saturated by packet work loses about the share of its time
// perfscope takes — its programs there and its process — plus what the
// cost model does not see: the interrupts that patch kernel text on every
// CPU when hooks attach and detach, the profile's timer interrupts, cache
// misses around the programs. At 2 % the governed total read 1.8–1.9 %
// and the veth rig lost 1.8 % ± 1.0 (115 rounds): nothing left for the
// unseen part under the 2 % a flood may lose. 1.5 % leaves it room.
const Default = 0.015

const (
	// DefaultPeriod: a window opens every second, so a 10 s run has
	// 10 windows to estimate from; each window costs perfscope's process
	// ~0.2–0.5 ms per hook to attach and detach, and when that would take
	// more than switchShare of the budget the period stretches.
	DefaultPeriod = time.Second
	// Windows are never shorter than this: attaching a group of hooks
	// takes ~0.2 ms per hook, and a window must dwarf it.
	minSampleWindow = 5 * time.Millisecond
	// A period whose window was cut shorter than this (the run ended, a
	// timer fired very late) is estimated at the other periods' mean
	// rate: a sliver's own rate is mostly noise.
	minRateWindow = minSampleWindow / 5
	// ... and when they would be, the period stretches up to this.
	maxBudgetPeriod = 2 * time.Second
	// Above this duty, the sampled hooks stay attached the whole period:
	// detaching for less is not worth the error it adds.
	attachAllAbove = 0.9
	// The first window's duty when a group's cost is unknown.
	firstDuty = 0.02
	// Before the first window every group is attached this long to
	// measure what each costs.
	calibration = 50 * time.Millisecond
	// Batch groups stay exact while together with the fixed costs they
	// take at most this share of the budget on every CPU; a demoted one
	// comes back when it fits in promoteBelow.
	exactShare   = 0.5
	promoteBelow = 0.4
	// Windows are planned at most this much shorter for late timers.
	maxOverrun = 3.0
	// The default period stretches (up to maxBudgetPeriod) until the
	// period's attaches and detaches take at most this share of the
	// budget: at 12 hooks switched the flood's periods take ~8 ms of
	// switching, and a 1 s period spent 0.8 % of a CPU on it.
	switchShare = 0.25
	// The process's own CPU comes off the programs' budget, up to this
	// share of it.
	maxProcessShare = 0.5
	// Per-run cost assumed for a program not timed yet.
	untimedPerRun = 100 * time.Nanosecond
	// A run of known length plans at least this many windows for every
	// sampled group, shortening the period below what switching alone
	// would choose: a bound from the windows' spread needs several
	// (Student's t for 4 degrees of freedom is 2.78, for 1 it is 12.7),
	// and a 4–5 s run at the stretched 2 s period had 2–3.
	boundWindows = 5
)

// Want is what window.budget (and --overhead-budget) takes.
const Want = "a percentage of one CPU above 0 and at most 100 (1.5%), or exact"

// Of is a budget of pct percent of any one CPU's time; pct must be
// above 0 and at most 100.
func Of(pct float64) (Budget, error) {
	if !(pct > 0 && pct <= 100) {
		return Budget{}, fmt.Errorf("want %s, got %g", Want, pct)
	}
	return Budget{CPUShare: pct / 100}, nil
}

// Parse reads a budget as a recipe writes it: "2%", "2" or "exact"
// (the zero Budget: every event counted).
func Parse(s string) (Budget, error) {
	t := strings.TrimSpace(s)
	if t == "exact" {
		return Budget{}, nil
	}
	pct, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err != nil {
		return Budget{}, fmt.Errorf("want %s, got %q", Want, s)
	}
	return Of(pct)
}

// String is the budget as Parse reads it.
func (b Budget) String() string {
	if !b.On() {
		return "exact"
	}
	return strconv.FormatFloat(100*b.CPUShare, 'g', -1, 64) + "%"
}

// On reports whether the budget governs (false: --exact).
func (b Budget) On() bool { return b.CPUShare > 0 }

// OpensEvery is how often a sampling window opens: Period, or
// DefaultPeriod when zero.
func (b Budget) OpensEvery() time.Duration {
	if b.Period > 0 {
		return b.Period
	}
	return DefaultPeriod
}

// exactPriority orders batch groups for staying exact: the cheapest, most
// batched first. A group not listed comes last.
var exactPriority = []string{netqueue.GroupNAPI, softirq.Group, lockstat.Group}

func priorityOf(name string) int {
	for i, n := range exactPriority {
		if n == name {
			return len(exactPriority) - i
		}
	}
	return 0
}
