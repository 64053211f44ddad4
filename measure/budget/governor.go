package budget

import (
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

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

// Governor keeps a session's hook groups within a budget. It lives as
// long as the session, so costs measured in one window plan the next.
type Governor struct {
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
	// cpuTime is the process's CPU time so far (ProcessCPU; a fake in
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

// SetWindow readies the governor for a window under budget b planned to
// last length (0: unknown), which its periods are planned from.
func (g *Governor) SetWindow(b Budget, length time.Duration) { g.budget, g.length = b, length }

// Coverage is the window's coverage while it runs: what parts that keep
// a timeline scale each interval by. Use returns the final one.
func (g *Governor) Coverage() *Coverage { return &Coverage{live: g} }

// ProcessCPU is this process's user and system CPU time so far.
func ProcessCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// NewGovernor finds the hook groups of the probes; nil when none can be
// governed (fakes, perf-event-only runs).
func NewGovernor(b Budget, all []probes.Probe, entry time.Duration) *Governor {
	g := &Governor{budget: b, entry: entry, cpuTime: ProcessCPU, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15))}
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
func (g *Governor) AttachAll() error {
	for _, gg := range g.groups {
		if _, err := gg.hg.Attach(); err != nil {
			return err
		}
	}
	return nil
}

// prepare detaches the sampled groups before a window's first readings,
// so nothing they count falls outside a sampling window.
func (g *Governor) Prepare() error {
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
func (g *Governor) OpenRefs() {
	for _, r := range g.refs {
		r.start, r.failed = r.count(), false
	}
	g.opened = time.Now()
}

// closeRefs extends the window's last period to end, when the window's
// last readings were taken: the references' counts since the governor
// stopped join it, as its length does (its sampled groups detached).
func (g *Governor) CloseRefs(end time.Time) {
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
func (g *Governor) Start(begin time.Time) {
	g.began = begin
	if g.cpuTime != nil {
		g.procAt = g.cpuTime()
	}
	if g.opened.IsZero() {
		g.OpenRefs()
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
func (g *Governor) Finish() time.Time {
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
func (g *Governor) loop(begin time.Time) {
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
