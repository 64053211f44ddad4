package recipes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpsock"
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
	// Period is how often a sampling window opens (DefaultBudgetPeriod
	// when zero); the governor stretches it when a window would be
	// shorter than minSampleWindow.
	Period time.Duration
}

// DefaultBudget is the budget of perfscope's commands: 1.5 % of any one
// CPU. A CPU saturated by packet work loses about the share of its time
// perfscope takes — its programs there and its process — plus what the
// cost model does not see: the interrupts that patch kernel text on every
// CPU when hooks attach and detach, the profile's timer interrupts, cache
// misses around the programs. At 2 % the governed total read 1.8–1.9 %
// and the veth rig lost 1.8 % ± 1.0 (115 rounds): nothing left for the
// unseen part under the 2 % a flood may lose. 1.5 % leaves it room.
const DefaultBudget = 0.015

const (
	// DefaultBudgetPeriod: a window opens every second, so a 10 s run has
	// 10 windows to estimate from; each window costs perfscope's process
	// ~0.2–0.5 ms per hook to attach and detach, and when that would take
	// more than switchShare of the budget the period stretches.
	DefaultBudgetPeriod = time.Second
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

// budgetWant is what window.budget takes.
const budgetWant = "a percentage of one CPU above 0 and at most 100 (1.5%), or exact"

// BudgetOf is a budget of pct percent of any one CPU's time; pct must be
// above 0 and at most 100.
func BudgetOf(pct float64) (Budget, error) {
	if !(pct > 0 && pct <= 100) {
		return Budget{}, fmt.Errorf("want %s, got %g", budgetWant, pct)
	}
	return Budget{CPUShare: pct / 100}, nil
}

// ParseBudget reads a budget as a recipe writes it: "2%", "2" or "exact"
// (the zero Budget: every event counted).
func ParseBudget(s string) (Budget, error) {
	t := strings.TrimSpace(s)
	if t == "exact" {
		return Budget{}, nil
	}
	pct, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err != nil {
		return Budget{}, fmt.Errorf("want %s, got %q", budgetWant, s)
	}
	return BudgetOf(pct)
}

// String is the budget as ParseBudget reads it.
func (b Budget) String() string {
	if !b.On() {
		return "exact"
	}
	return strconv.FormatFloat(100*b.CPUShare, 'g', -1, 64) + "%"
}

// On reports whether the budget governs (false: --exact).
func (b Budget) On() bool { return b.CPUShare > 0 }

func (b Budget) period() time.Duration {
	if b.Period > 0 {
		return b.Period
	}
	return DefaultBudgetPeriod
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

// governedGroup is one hook group under the budget.
type governedGroup struct {
	hg       *probes.HookGroup
	counter  probes.SelfCounted
	priority int
	// demoted: a batch group sampled because it cost too much.
	demoted bool
	// rate is the group's measured cost per CPU, ns of CPU per second
	// attached (nil until measured).
	rate []float64
	// surge is the rate over the guard's last tick when it ended a
	// window, a floor for the next plan (nil when it did not).
	surge []float64
	// tailRate: runs per second over that tick, kept for the period's
	// estimate when the window opened with the period (else 0).
	tailRate float64
	// switchNs is the CPU time one attach or detach of the group takes
	// perfscope's process, smoothed (0 until it switched).
	switchNs float64

	// This window's record.
	onSince time.Time // when attached, zero when detached
	// ref is what the group's events follow (nil: none), refSince its
	// count when the group attached, refOn what it counted while the
	// group was attached in the current period.
	ref             *reference
	refSince, refOn uint64
	// refSlack is the reference's uncertainty at the window edges of the
	// current period (see switchGroup).
	refSlack uint64
	// counts is what the group's programs had counted at the last period
	// boundary (probes.HookGroup.Counts), countsOK that it was read.
	counts   probes.GroupCounts
	countsOK bool
	// ownRef: the programs count the reference's events themselves
	// (GroupCounts.InReference), so each window's share of the reference
	// is measured exactly, not from readings on either side of a switch.
	ownRef bool
	// follows: a batch group whose events follow its reference anyway
	// (NAPI polls come with the packets), so it scales by it.
	follows  bool
	periods  []samplePeriod
	spans    []span
	detached bool // detached at least once in the window
	curOn    time.Duration
}

func (g *governedGroup) sampled() bool { return g.hg.Class == probes.PerPacket || g.demoted }

// edgeRef is the reference read on either side of the group's switches:
// none when its programs count the reference's events themselves
// (ownRef), which makes those readings needless.
func (g *governedGroup) edgeRef() *reference {
	if g.ownRef {
		return nil
	}
	return g.ref
}

// samplePeriod is one period of a window: how long the group was attached
// in it and how many times its programs ran then.
type samplePeriod struct {
	length, on time.Duration
	runs       uint64
	// ref is the reference counter's count over the period, refOn while
	// the group was attached; both 0 without a usable reference.
	ref, refOn uint64
	// refSlack is how far refOn may be off at the windows' edges.
	refSlack uint64
	// events are what the group's programs counted in the period, the
	// events the numbers built on it are made of (counted: they were
	// read; probes.HookGroup.Counts), and inRef the reference's events
	// they saw themselves (ownRef: read, and the group's reference is the
	// one they count).
	events, inRef   uint64
	counted, ownRef bool
	// refOK: the reference was read throughout the period (its count
	// may be 0: a quiet period, before a flood, holds nothing).
	refOK bool
	// tailRate is the group's runs per second over the guard's last tick
	// when the guard ended a window that opened with the period: the
	// rest of that period, after the window, ran at about that rate (a
	// flood began in it), not at the window's mean, which the quiet part
	// before the flood pulled down. 0 otherwise.
	tailRate float64
}

type span struct{ from, to time.Time }

// governor keeps a session's hook groups within a budget. It lives as
// long as the session, so costs measured in one window plan the next.
type governor struct {
	budget Budget
	groups []*governedGroup
	// counters are every self-counted probe, with the hooks of each that
	// a group holds: the others are fixed costs (the CPU profiler).
	counters []probes.SelfCounted
	grouped  []map[string]bool
	entry    time.Duration
	cpus     int
	rng      *rand.Rand

	// refs are the references the groups follow (see reference).
	refs []*reference
	// switched is the CPU time spent switching sampled groups this
	// window, periodSwitched in the current period; switchRate is the
	// switching's CPU per CPU, ns per second, smoothed as procRate.
	switched, periodSwitched time.Duration
	switchRate               float64
	// length is the window's planned length (0: unknown), periodStart
	// when the period being planned starts (zero before the first).
	length      time.Duration
	periodStart time.Time
	// opened is when the references were read before the window's first
	// readings (openRefs), lead how long before the first period began.
	opened time.Time
	lead   time.Duration
	// cpuTime is the process's CPU time so far (processCPU; a fake in
	// tests); procAt its reading at the last period boundary, procRate
	// the process's CPU per CPU, ns per second, smoothed like the
	// groups' rates, and procSpent what it took over this window's
	// periods.
	cpuTime   func() time.Duration
	procAt    time.Duration
	procRate  float64
	procSpent time.Duration
	// overrun is how much longer than planned the sampling windows have
	// been attached (1: on time), smoothed.
	overrun float64

	mu      sync.Mutex
	last    []probes.SelfCosts // counters at the last period boundary
	fixRate []float64          // fixed cost per CPU, ns per second
	stop    chan struct{}
	done    chan struct{}
	began   time.Time
	ended   time.Time
}

// newGovernor finds the hook groups of the probes; nil when none can be
// governed (fakes, perf-event-only runs).
func newGovernor(b Budget, all []probes.Probe, entry time.Duration) *governor {
	g := &governor{budget: b, entry: entry, cpuTime: processCPU, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15))}
	for _, p := range all {
		c, ok := p.(probes.SelfCounted)
		if !ok {
			continue
		}
		inGroup := map[string]bool{}
		if sw, ok := p.(probes.Switchable); ok {
			for _, hg := range sw.HookGroups() {
				g.groups = append(g.groups, &governedGroup{hg: hg, counter: c, priority: priorityOf(hg.Name)})
				for _, h := range hg.Hooks {
					inGroup[h] = true
				}
			}
		}
		g.counters = append(g.counters, c)
		g.grouped = append(g.grouped, inGroup)
	}
	if len(g.groups) == 0 {
		return nil
	}
	// Per-CPU counters have a slot per possible CPU.
	for _, c := range g.readCounters() {
		for _, perCPU := range c {
			g.cpus = max(g.cpus, len(perCPU))
		}
	}
	if g.cpus == 0 {
		g.cpus = runtime.NumCPU()
	}
	return g
}

// attachAll attaches every group (an exact window after budgeted ones).
func (g *governor) attachAll() error {
	for _, gg := range g.groups {
		if _, err := gg.hg.Attach(); err != nil {
			return err
		}
	}
	return nil
}

// prepare detaches the sampled groups before a window's first readings,
// so nothing they count falls outside a sampling window.
func (g *governor) prepare() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gg := range g.groups {
		gg.periods, gg.spans, gg.detached, gg.onSince, gg.curOn, gg.refOn = nil, nil, false, time.Time{}, 0, 0
	}
	g.switched, g.periodSwitched, g.procSpent, g.periodStart = 0, 0, 0, time.Time{}
	if g.fixRate == nil {
		if err := g.calibrate(); err != nil {
			return err
		}
	}
	g.plan()
	for _, gg := range g.groups {
		if gg.sampled() {
			if _, err := gg.hg.Detach(); err != nil {
				return err
			}
			gg.detached = true
		} else if _, err := gg.hg.Attach(); err != nil {
			return err
		}
	}
	g.last = g.readCounters()
	return nil
}

// openRefs reads the references just before the window's first
// readings, so that the estimates cover the span the parts' own exact
// counters do: the time those readings take belongs to the first period,
// its sampled groups detached.
func (g *governor) openRefs() {
	for _, r := range g.refs {
		r.start, r.failed = r.count(), false
	}
	g.opened = time.Now()
}

// closeRefs extends the window's last period to end, when the window's
// last readings were taken: the references' counts since the governor
// stopped join it, as its length does (its sampled groups detached).
func (g *governor) closeRefs(end time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tail := end.Sub(g.ended)
	if g.ended.IsZero() || tail <= 0 {
		return
	}
	more := map[*reference]uint64{}
	for _, r := range g.refs {
		n := r.count()
		r.mu.Lock()
		ok := !r.failed && n >= r.start
		r.failed = false
		r.mu.Unlock()
		if ok {
			more[r] = n - r.start
		}
		r.start = n
	}
	for _, gg := range g.groups {
		if len(gg.periods) == 0 {
			continue
		}
		p := &gg.periods[len(gg.periods)-1]
		p.length += tail
		if n, ok := more[gg.ref]; ok {
			p.ref += n
		} else if gg.ref != nil {
			p.refOK = false
		}
	}
}

// start runs the periods from begin (the window's first reading) until
// finish.
func (g *governor) start(begin time.Time) {
	g.began = begin
	if g.cpuTime != nil {
		g.procAt = g.cpuTime()
	}
	if g.opened.IsZero() {
		g.openRefs()
	}
	g.lead = max(0, begin.Sub(g.opened))
	g.opened = time.Time{}
	for _, gg := range g.groups {
		if gg.hg.IsAttached() {
			gg.onSince = begin
			if edge := gg.edgeRef(); edge != nil {
				gg.refSince = edge.start
			}
		}
		gg.countsOK = false
		if gg.hg.Counts != nil {
			c, err := gg.hg.Counts()
			gg.counts, gg.countsOK = c, err == nil
		}
	}
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go g.loop(begin)
}

// finish ends the current period now, leaving the sampled groups
// detached, and returns when the loop has.
func (g *governor) finish() time.Time {
	close(g.stop)
	<-g.done
	return g.ended
}

// switchEvent is one attach or detach of a sampled group in a period.
type switchEvent struct {
	at     time.Time
	group  *governedGroup
	attach bool
}

// loop runs period after period: plan, open each sampled group's window
// at its own random offset in the period (windows of different groups
// overlap only by chance, so the traffic a window sees is slowed by its
// own hooks rather than by all of them at once), close it, and measure.
func (g *governor) loop(begin time.Time) {
	defer close(g.done)
	// On one thread, so that the thread's CPU clock times the switches
	// (switchGroup runs only here).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := begin
	for {
		g.mu.Lock()
		g.periodStart = start
		duty, period := g.plan()
		// A period whose windows the budget did not shorten was planned
		// from quiet history: a flood starting in it is what the guard is
		// for, and it stops the window at the plain allowance. Windows the
		// budget did shorten keep guardSlack, so steady ones run whole.
		whole := duty >= attachAllAbove
		g.applyModes(start, whole)
		slack := guardSlack
		if whole {
			slack = 1
		}
		allow := g.allowances(period, slack)
		// Timers fire late on a busy machine and windows run long: the
		// planned window shrinks by how much longer they have been.
		window := time.Duration(duty * float64(period) / max(1, g.overrun))
		var events []switchEvent
		for _, gg := range g.groups {
			if !gg.sampled() {
				continue
			}
			if duty >= attachAllAbove {
				events = append(events, switchEvent{start, gg, true})
				continue
			}
			at := start.Add(time.Duration(g.rng.Int64N(int64(period-window) + 1)))
			events = append(events, switchEvent{at, gg, true}, switchEvent{at.Add(window), gg, false})
		}
		g.mu.Unlock()
		byTime := func() {
			sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
		}
		byTime()
		stopped := false
		for len(events) > 0 {
			ev := events[0]
			events = events[1:]
			if stopped = g.guardedSleep(ev.at, allow, whole); stopped {
				break
			}
			at := g.switchGroup(ev.group, ev.attach)
			if ev.attach && !at.IsZero() {
				// A window lasts its length from when it really opened (on
				// a busy machine the timer fires late, and a window cut
				// short by its planned end is a sliver whose rate says
				// little), within its period.
				for i := range events {
					if events[i].group == ev.group && !events[i].attach {
						events[i].at = minTime(at.Add(window), start.Add(period))
					}
				}
				byTime()
			}
		}
		end := start.Add(period)
		if !stopped {
			stopped = g.guardedSleep(end, allow, whole)
			// A loaded machine wakes the loop late: the period ends when
			// its counters are read, not when it was planned to.
			end = maxTime(end, time.Now())
		}
		if stopped {
			end = time.Now()
			for _, gg := range g.groups {
				if gg.sampled() {
					g.switchGroup(gg, false)
				}
			}
		}
		g.mu.Lock()
		if !stopped && duty < attachAllAbove {
			g.noteOverrun(window)
		}
		g.closePeriod(start, end)
		g.mu.Unlock()
		if stopped {
			g.ended = end
			return
		}
		start = end
	}
}

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
func (g *governor) allowances(period time.Duration, slack float64) map[*governedGroup][]float64 {
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
func (g *governor) guardedSleep(t time.Time, allow map[*governedGroup][]float64, whole bool) bool {
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
		for _, gg := range attached {
			cost, runs, ok := g.costInPeriod(gg)
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

// costInPeriod is what gg's runs since the period began cost each CPU,
// in ns, and how many they were; false when its counters cannot be read.
func (g *governor) costInPeriod(gg *governedGroup) ([]float64, uint64, bool) {
	cur, err := gg.counter.SelfCosts()
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
func (g *governor) sleepUntil(t time.Time) bool {
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
func (g *governor) switchGroup(gg *governedGroup, on bool) time.Time {
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
func (g *governor) noteSwitch(gg *governedGroup, d time.Duration) {
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

// reference is an exact, always-counting kernel counter that a sampled
// group's events follow: a ratio estimate scales what a window counted by
// what the reference counted over the period against inside the window.
type reference struct {
	name string
	read func() (uint64, error)
	// start is the count at the last period boundary; failed says a read
	// failed since, which makes the period's reference unusable.
	start  uint64
	mu     sync.Mutex
	failed bool
}

// count reads the reference; 0 for none (nil) or a failed read, which
// marks the period's reference unusable.
func (r *reference) count() uint64 {
	if r == nil {
		return 0
	}
	n, err := r.read()
	if err != nil {
		r.mu.Lock()
		r.failed = true
		r.mu.Unlock()
	}
	return n
}

// The references a session offers the governor.
const (
	// PacketsReference: every per-packet group follows the packets
	// through the namespace's interfaces...
	PacketsReference = "packets through the namespace's interfaces (/proc/net/dev)"
	// UDPReadsReference: ... except the socket reads, which follow the
	// datagrams the namespace's sockets read. Scaled by packets, the
	// reads' ratio moved with whatever the windows' hooks slowed more,
	// the sender or the reader (loopback and veth floods: 5–22 % off);
	// the reads of one port against every UDP read hardly moves.
	UDPReadsReference = "UDP datagrams read in the namespace (Udp and Udp6 InDatagrams, /proc/net/snmp)"
	// SoftirqsReference: a sampled softirq probe's times are its
	// windows' time per run times the softirqs the kernel ran. Scaled by
	// time, the runs' rate moved from window to window with the traffic
	// (on a DNS server's veth rig, bounds of ±33–211 % from 3–5 windows).
	SoftirqsReference = "softirqs the kernel ran (/proc/softirqs)"
)

// setReferences gives every group the reference its events follow: the
// socket group the UDP reads when there is such a counter, the softirq
// group the softirqs when it counts them itself, every group the packets
// otherwise (any may be nil: scaled by time then).
func (g *governor) setReferences(packets, udpReads, softirqs func() (uint64, error)) {
	var pk, ur, sr *reference
	if packets != nil {
		pk = &reference{name: PacketsReference, read: packets}
		g.refs = append(g.refs, pk)
	}
	if udpReads != nil {
		ur = &reference{name: UDPReadsReference, read: udpReads}
		g.refs = append(g.refs, ur)
	}
	if softirqs != nil {
		sr = &reference{name: SoftirqsReference, read: softirqs}
		g.refs = append(g.refs, sr)
	}
	for _, gg := range g.groups {
		gg.ref, gg.ownRef, gg.follows = pk, false, gg.hg.Name == netqueue.GroupNAPI
		switch {
		case gg.hg.Name == udpsock.Group && ur != nil:
			// The socket probe counts every UDP read of the namespace
			// itself: the windows' share of this reference is exact.
			gg.ref, gg.ownRef = ur, gg.hg.Counts != nil
		case gg.hg.Name == softirq.Group && sr != nil && gg.hg.Counts != nil:
			// It counts the softirqs it timed: its time per run, times
			// the kernel's count.
			gg.ref, gg.ownRef = sr, true
		}
	}
}

// applyModes attaches the groups that are to stay attached this period
// and detaches demoted ones (g.mu held). whole says the period's sampling
// windows last all of it: a sampled group attached across the boundary
// then stays attached (closePeriod split its span there) instead of being
// detached and attached again at once. Each switch patches the
// tracepoints' call sites on every CPU: on an idle machine, where every
// window is whole, those pairs were a tenth of a 4 s run's CPU.
func (g *governor) applyModes(now time.Time, whole bool) {
	for _, gg := range g.groups {
		if gg.sampled() {
			if gg.hg.IsAttached() && !whole {
				t, _ := gg.hg.Detach()
				gg.closeSpan(t, gg.edgeRef().count())
				gg.detached = true
			}
			continue
		}
		if !gg.hg.IsAttached() {
			if t, err := gg.hg.Attach(); err == nil {
				gg.onSince, gg.refSince = t, gg.edgeRef().count()
			}
		}
	}
}

// noteOverrun compares the sampled groups' attached time in the period
// just ended with the window planned, and keeps how much longer windows
// run than planned (g.mu held).
func (g *governor) noteOverrun(window time.Duration) {
	if window <= 0 {
		return
	}
	for _, gg := range g.groups {
		if !gg.sampled() {
			continue
		}
		on := gg.curOn
		if !gg.onSince.IsZero() {
			continue // still attached: not a finished window
		}
		ratio := math.Min(maxOverrun, math.Max(1, float64(on)/float64(window)))
		if g.overrun == 0 {
			g.overrun = ratio
		} else {
			g.overrun = (3*g.overrun + ratio) / 4
		}
	}
}

// closePeriod records the period [start, end) of every group and updates
// the measured costs (g.mu held).
func (g *governor) closePeriod(start, end time.Time) {
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
func (g *governor) measure(cur []probes.SelfCosts, length time.Duration, onOf func(*governedGroup) time.Duration) map[*governedGroup]uint64 {
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
func (g *governor) measureProcess(length time.Duration) {
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
func (g *governor) programBudget() float64 {
	budget := g.budget.CPUShare * 1e9
	return budget - math.Min(g.procRate, maxProcessShare*budget)
}

// calibrate measures every group's cost with all of them attached for a
// moment before the first window (g.mu held), so that the first period is
// planned from costs rather than guessed: a batch group that costs too
// much is sampled from the start and its counts are not half exact.
func (g *governor) calibrate() error {
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
func (g *governor) perRun(perCPU []probes.SelfRuns) float64 {
	t := probes.Total(perCPU)
	body := untimedPerRun
	if t.TimedRuns > 0 {
		body = t.PerRun()
	}
	return float64(body + g.entry)
}

func (g *governor) readCounters() []probes.SelfCosts {
	out := make([]probes.SelfCosts, len(g.counters))
	for i, c := range g.counters {
		out[i], _ = c.SelfCosts() // unreadable: counted as no runs
	}
	return out
}

// plan decides, from the costs measured so far, which batch groups stay
// exact and the duty cycle of the sampled ones; it returns the duty and
// the period (stretched when the window would be too short). g.mu held.
func (g *governor) plan() (duty float64, period time.Duration) {
	period = g.budget.period()
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
	// take more than their share on some CPU.
	for {
		c := exactCost()
		if maxOf(c) <= exactShare*budget {
			break
		}
		var worst *governedGroup
		for _, gg := range g.groups {
			if gg.sampled() || maxOf(gg.rate) == 0 {
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
func (g *governor) fitPeriod() time.Duration {
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
func (g *governor) runSwitchingPeriod() time.Duration {
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
func (g *governor) alignToEnd(period time.Duration) time.Duration {
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
func (g *governor) switchingPeriod() time.Duration {
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

// use is the window's record for the report and the parts' estimates.
func (g *governor) use() (*evidence.BudgetUse, *Coverage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := &evidence.BudgetUse{CPUShare: g.budget.CPUShare, PeriodNs: int64(g.budget.period()), SwitchNs: int64(g.switched)}
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

// Coverage is how the budget attached each hook group over a window: the
// parts read it to scale what their probes counted and to say how each
// number was obtained. A nil Coverage (no budget) is exact throughout.
type Coverage struct {
	groups map[string]groupCoverage
	// live, during a window: the governor, for timelines.
	live *governor
}

type groupCoverage struct {
	exact    bool
	estimate *evidence.Estimate
	spans    []span
}

// Estimate is how group's counts were obtained over the window; nil when
// exact (or the group is unknown: not governed).
func (c *Coverage) Estimate(group string) *evidence.Estimate {
	if c == nil {
		return nil
	}
	gc, ok := c.groups[group]
	if !ok || gc.exact {
		return nil
	}
	e := *gc.estimate
	return &e
}

// Scale is the factor from what group's windows counted to the window.
func (c *Coverage) Scale(group string) float64 {
	if e := c.Estimate(group); e != nil {
		return e.Scale
	}
	return 1
}

// ScaleBetween is the factor for counts between a and b (a tick of a
// timeline): the span over the group's attached time in it; 0 when it
// was never attached then (the interval's counts are unknown, not zero),
// 1 when always.
func (c *Coverage) ScaleBetween(group string, a, b time.Time) float64 {
	if c == nil || !b.After(a) {
		return 1
	}
	var spans []span
	if c.live != nil {
		spans = c.live.spansOf(group, b)
	} else if gc, ok := c.groups[group]; ok && !gc.exact {
		spans = gc.spans
	}
	if spans == nil { // never detached: exact
		return 1
	}
	var on time.Duration
	for _, s := range spans {
		from, to := maxTime(s.from, a), minTime(s.to, b)
		if to.After(from) {
			on += to.Sub(from)
		}
	}
	if on <= 0 {
		return 0
	}
	return float64(b.Sub(a)) / float64(on)
}

// spansOf is a group's attached spans so far, the open one up to now;
// nil when the group is not governed.
func (g *governor) spansOf(group string, now time.Time) []span {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gg := range g.groups {
		if gg.hg.Name != group {
			continue
		}
		if !gg.detached {
			return nil
		}
		out := append([]span{}, gg.spans...)
		if !gg.onSince.IsZero() {
			out = append(out, span{gg.onSince, now})
		}
		return out
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// scaled is n sampled events scaled by k to the whole window.
func scaled(n uint64, k float64) uint64 {
	if k == 1 {
		return n
	}
	return uint64(math.Round(float64(n) * k))
}

// scaledRows scales every count of a [cpu][slot] table.
func scaledRows(rows [][]uint64, k float64) [][]uint64 {
	if k == 1 {
		return rows
	}
	out := make([][]uint64, len(rows))
	for i, r := range rows {
		out[i] = make([]uint64, len(r))
		for j, n := range r {
			out[i][j] = scaled(n, k)
		}
	}
	return out
}

// Sampled is a Part whose probes' hooks the budget may attach in sampling
// windows only. The session hands it the window's Coverage before the
// first reading (live, for ticks) and again, final, before the last.
type Sampled interface {
	SetCoverage(c *Coverage)
}
