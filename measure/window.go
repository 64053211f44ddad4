package measure

import (
	"context"
	"errors"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/report"
)

// Part is one capability's share of a measurement: it opens its probes,
// takes a reading when a window begins and when it ends, and turns the two
// into its evidence (each part's own Evidence method, called after the
// window). Parts are composed: the udp runner measures the softirq, queue,
// lock, drop, socket, profile and network-counter parts in one window.
type Part interface {
	// Open attaches the part's probes. A part whose probes are optional
	// opens without them and says why in its evidence; an error means the
	// part cannot run at all.
	Open(src Sources) error
	// Probes are the probes the part holds open; the session closes them.
	Probes() []probes.Probe
	// Begin takes the first reading of a window, End the last.
	Begin(ctx context.Context) error
	End(ctx context.Context) error
}

// Ticker is a Part that also reads at every tick of a window with an
// Interval, for a timeline (evidence per interval).
type Ticker interface {
	Tick(ctx context.Context, now time.Time) error
}

// Tailer is a Ticker whose last interval ends with the window: after the
// last readings, Tail turns the counts since the last tick into a final
// interval ending at now, so a timeline covers the whole window and its
// rows add up to the window's counts.
type Tailer interface {
	Tail(now time.Time)
}

// Armer is a Part that samples through the whole window whatever the
// overhead budget (the CPU profile): Arm starts it just before the budget
// measures its fixed costs, so that they include it. Its span then begins
// that much (the budget's calibration, ~50 ms) before the window.
type Armer interface {
	Arm() error
}

// LossCounter is a Part whose probes can lose events; Lost is the number
// lost in the last window, added to the overhead's events_lost.
type LossCounter interface {
	Lost() uint64
}

// Stats says how bpf_stats measure perfscope's own cost.
type Stats int

const (
	// StatsContinuous keeps bpf_stats on for the whole window.
	StatsContinuous Stats = iota
	// StatsSampled turns them on for probes.StatsSampleOn of every
	// probes.StatsSamplePeriod and scales runs and totals to the window:
	// on per-packet tracepoints, statistics left on cost more than most
	// programs do.
	StatsSampled
)

// StatsOffUnderBudget says why a budgeted window leaves bpf_stats off.
const StatsOffUnderBudget = "off under the overhead budget: the programs count their runs and time 1 in 64 of them themselves, " +
	"while bpf_stats cost every BPF program run ~90 ns the budget does not see and each switch patches the kernel on every CPU (--exact samples them)"

// Window is one measurement window.
type Window struct {
	Duration time.Duration
	// Interval, when positive, ticks every Ticker part (a timeline) and
	// OnTick this often.
	Interval time.Duration
	Stats    Stats
	// Started is when the run began (the process start), from which the
	// overhead's attach time counts; zero counts from the session's open.
	Started time.Time
	// OnStart runs once every part has its first reading.
	OnStart func()
	// OnTick runs after each tick's readings with the time left, for
	// interval lines and progress.
	OnTick func(now time.Time, left time.Duration)
	// Budget bounds perfscope's own cost over the window (see budget.Budget);
	// the zero Budget counts every event (--exact). Commands and recipes
	// set budget.Default unless asked for exact counts.
	Budget budget.Budget
	// Begin, when set, holds the window's first readings until it is
	// closed; Until, when set, ends the window when closed instead of
	// after Duration. A recipe pairing probes with async-profiler runs
	// them over the JVM's own window (which a load perfscope drives
	// sets), so both views cover the same time.
	Begin, Until <-chan struct{}
}

// Run is what the window itself measured.
type Run struct {
	// Begin and End are when the first and last readings were taken.
	Begin, End time.Time
	// Overhead is perfscope's own cost over the window.
	Overhead *evidence.Overhead
}

// Duration is the window's length.
func (r Run) Duration() time.Duration { return r.End.Sub(r.Begin) }

// Session holds parts open across windows: a one-shot command measures
// one window (Measure), a continuous run (`perfscope serve`) measures
// window after window without reloading a probe, each window's evidence
// being the delta of its own two readings.
type Session struct {
	src    Sources
	parts  []Part
	began  time.Time
	opened time.Time
	// openedCPU is the process's CPU time when every part was open: from
	// exec, so start-up and attaching included.
	openedCPU time.Duration
	windows   int
	// gov keeps the hook groups within a window's budget; it outlives
	// windows so that costs measured in one plan the next.
	gov *budget.Governor
	// counters are the governor's references, open while the session is.
	counters []PacketCounter
}

// openCounter opens a reference counter for the session's life.
func (s *Session) openCounter(open func() (PacketCounter, error)) (PacketCounter, error) {
	if open == nil {
		return nil, errors.New("no counter")
	}
	c, err := open()
	if err != nil {
		return nil, err
	}
	s.counters = append(s.counters, c)
	return c, nil
}

// Open opens every part, in order; on error the parts opened so far are
// closed again.
func Open(src Sources, parts ...Part) (*Session, error) {
	if src.names == nil {
		src.names = symbols.New(src.Symbols)
		if src.Probes.KernelNamer != nil {
			src.names.UseKernelNamer(src.Probes.KernelNamer)
		}
	}
	s := &Session{src: src, began: time.Now()}
	for _, p := range parts {
		s.parts = append(s.parts, p)
		if err := p.Open(src); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.opened = time.Now()
	s.openedCPU = budget.ProcessCPU()
	return s, nil
}

// Close closes every probe of every part, last opened first. Safe to call
// more than once.
func (s *Session) Close() error {
	var errs []error
	for i := len(s.parts) - 1; i >= 0; i-- {
		ps := s.parts[i].Probes()
		for j := len(ps) - 1; j >= 0; j-- {
			errs = append(errs, ps[j].Close())
		}
	}
	for _, c := range s.counters {
		errs = append(errs, c.Close())
	}
	s.counters = nil
	return errors.Join(errs...)
}

// Measure opens the parts, measures one window and closes them.
func Measure(ctx context.Context, src Sources, w Window, parts ...Part) (Run, error) {
	s, err := Open(src, parts...)
	if err != nil {
		return Run{}, err
	}
	defer s.Close()
	return s.Measure(ctx, w)
}

// mandatory is a part that opens without its probe (its evidence then
// says why) but that a run of its own cannot do without.
type mandatory interface {
	Part
	OpenErr() error
}

// measureMandatory measures one window of a part whose probe must open.
func measureMandatory(ctx context.Context, src Sources, w Window, part mandatory) (Run, error) {
	s, err := Open(src, part)
	if err != nil {
		return Run{}, err
	}
	defer s.Close()
	if err := part.OpenErr(); err != nil {
		return Run{}, err
	}
	return s.Measure(ctx, w)
}

// envelope is a run's report envelope around its data.
func envelope(command, version string, run Run, durationNs int64, data any) *report.Report {
	r := report.New(command, version, run.Begin)
	r.Meta.DurationNs = durationNs
	r.Data = data
	r.Overhead = run.Overhead
	return r
}

// Measure runs one window: bpf_stats on, a first reading of every part,
// the wait (ticking Ticker parts every Interval), a last reading, and the
// cost of every probe over the window. Cancelling ctx ends the wait early;
// the last readings are still taken, so what was measured is reported.
func (s *Session) Measure(ctx context.Context, w Window) (Run, error) {
	c, err := s.prepareWindow(w)
	if err != nil {
		return Run{}, err
	}
	run, lastTick, err := s.runWindow(ctx, w, c)
	if err != nil {
		return run, err
	}
	if c.gov != nil {
		var cov *budget.Coverage
		c.ov.Budget, cov = c.gov.Use()
		s.setCoverage(cov)
	}
	if w.Interval > 0 && run.End.Sub(lastTick) >= w.Interval/10 {
		// The window's tail, from the last tick to the last readings,
		// is its last interval (unless a tick just took it).
		for _, p := range s.parts {
			if t, ok := p.(Tailer); ok {
				t.Tail(run.End)
			}
		}
	}
	run.Overhead = s.overhead(c, run.Duration())
	return run, nil
}

// windowCost is what a window's overhead is reckoned from: its programs,
// their entry cost, the governor and bpf_stats, and the readings taken
// before it opened.
type windowCost struct {
	ov         *evidence.Overhead
	all        []probes.Probe
	counted    []probes.SelfCounted
	entry      time.Duration
	entryErr   error
	gov        *budget.Governor
	stats      *statsWindow
	before     [][]probes.ProgramCost
	selfBefore []probes.SelfCosts
	cpuBefore  time.Duration
}

// prepareWindow readies a window: the time attaching took (the first
// window only), the entry cost, the parts armed, the budget's governor,
// bpf_stats, and the readings before.
func (s *Session) prepareWindow(w Window) (*windowCost, error) {
	started := w.Started
	if started.IsZero() {
		started = s.began
	}
	c := &windowCost{ov: &evidence.Overhead{AttachNs: int64(s.opened.Sub(started)), AttachCPUNs: int64(s.openedCPU)}}
	if s.windows > 0 {
		c.ov.AttachNs, c.ov.AttachCPUNs = 0, 0 // attached before an earlier window
	}
	s.windows++
	c.all = s.probes()
	if len(c.all) > 0 {
		c.ov.AttachMethod = string(c.all[0].Method())
	}
	c.counted = selfCounted(c.all)
	if len(c.counted) > 0 {
		// Before the window: it attaches an empty program for ~10 ms.
		c.entry, c.entryErr = s.src.Probes.entryCost()
	}
	for _, p := range s.parts {
		if a, ok := p.(Armer); ok {
			if err := a.Arm(); err != nil {
				return nil, err
			}
		}
	}
	var err error
	if c.gov, err = s.governor(w.Budget, w.Duration, c.all, c.entry); err != nil {
		return nil, err
	}
	if c.gov != nil {
		s.setCoverage(c.gov.Coverage())
	} else {
		s.setCoverage(nil)
	}
	if c.gov != nil && len(c.counted) == len(c.all) {
		// Every program counts and times itself: under a budget bpf_stats
		// would only add what the governor cannot see.
		c.stats, c.ov.StatsOff = &statsWindow{}, StatsOffUnderBudget
	} else if c.stats, err = s.startStats(w.Stats, c.all); err != nil {
		c.ov.StatsUnavailable = err.Error()
	}
	c.before = costsOf(c.all)
	c.selfBefore = readSelf(c.counted)
	c.cpuBefore = budget.ProcessCPU()
	return c, nil
}

// runWindow begins the parts, waits out the window (ticking its
// intervals) and ends them; on an error every part begun is aborted and
// bpf_stats stopped. It returns the time of the last tick.
func (s *Session) runWindow(ctx context.Context, w Window, c *windowCost) (Run, time.Time, error) {
	var run Run
	// Readings must be taken even when ctx is cancelled mid-window.
	read := context.WithoutCancel(ctx)
	if c.gov != nil {
		c.gov.OpenRefs()
	}
	if w.Begin != nil {
		select {
		case <-w.Begin:
		case <-ctx.Done():
		}
	}
	for i, p := range s.parts {
		if err := p.Begin(read); err != nil {
			s.abort(read, i)
			c.stats.stop()
			return run, time.Time{}, err
		}
	}
	run.Begin = time.Now()
	if c.gov != nil {
		c.gov.Start(run.Begin)
	}
	if w.OnStart != nil {
		w.OnStart()
	}
	lastTick, err := s.wait(ctx, read, w, run.Begin)
	if c.gov != nil {
		c.gov.Finish()
	}
	if err != nil {
		s.abort(read, len(s.parts))
		c.stats.stop()
		return run, lastTick, err
	}
	lastSampled := -1
	for i, p := range s.parts {
		if _, ok := p.(Sampled); ok {
			lastSampled = i
		}
	}
	for i, p := range s.parts {
		if err := p.End(read); err != nil {
			s.abort(read, len(s.parts))
			c.stats.stop()
			return run, lastTick, err
		}
		if c.gov != nil && i == lastSampled {
			// The estimates cover the sampling parts' window up to
			// their last readings (not the profile's, which take long).
			c.gov.CloseRefs(time.Now())
		}
	}
	run.End = time.Now()
	return run, lastTick, nil
}

// overhead is the window's cost: events lost, each program's runs and
// time (bpf_stats, or their own counting), the busiest CPU's share, and
// perfscope's process.
func (s *Session) overhead(c *windowCost, window time.Duration) *evidence.Overhead {
	ov := c.ov
	sample := c.stats.stop()
	for _, p := range s.parts {
		if l, ok := p.(LossCounter); ok {
			ov.EventsLost += l.Lost()
		}
	}
	ov.Programs = costDelta(costsOf(c.all), c.before)
	if sample != nil {
		scaleCosts(ov, *sample)
	}
	for _, p := range ov.Programs {
		ov.EventsLost += p.Missed
	}
	cpus := s.onlineCPUs()
	if len(c.counted) > 0 {
		runs := selfDelta(c.selfBefore, readSelf(c.counted))
		ownRuns(ov, runs)
		ov.CPUCost = cpuCostOf(runs, c.entry, c.entryErr, window, cpus)
	}
	ov.BPFTimeShare = bpfShare(ov.Programs, window, cpus)
	ov.ProcessCPUNs = int64(budget.ProcessCPU() - c.cpuBefore)
	if window > 0 && cpus > 0 {
		ov.ProcessCPUShare = float64(ov.ProcessCPUNs) / (float64(window) * float64(cpus))
	}
	if ov.Budget != nil {
		ov.Budget.TotalShare = ov.ProcessCPUShare
		if ov.CPUCost != nil {
			ov.Budget.TotalShare += ov.CPUCost.MaxShare
		}
	}
	return ov
}

// governor returns the session's governor for a window with budget b
// planned to last length (which the periods are planned from), its
// sampled groups detached for the window's first readings; nil when
// the window counts everything (then every group is attached, in case an
// earlier window left some detached) or nothing can be governed.
func (s *Session) governor(b budget.Budget, length time.Duration, all []probes.Probe, entry time.Duration) (*budget.Governor, error) {
	if !b.On() {
		if s.gov != nil {
			return nil, s.gov.AttachAll()
		}
		return nil, nil
	}
	if s.gov == nil {
		if s.gov = budget.NewGovernor(b, all, entry); s.gov == nil {
			return nil, nil
		}
		// Unopenable counters: the estimates scale by time, as without.
		var packets, udpReads, softirqs func() (uint64, error)
		if pc, err := s.openCounter(s.src.Packets); err == nil {
			packets = pc.Packets
		}
		if rc, err := s.openCounter(s.src.UDPReads); err == nil {
			udpReads = rc.Packets
		}
		if sc, err := s.openCounter(s.src.Softirqs); err == nil {
			softirqs = sc.Packets
		}
		s.gov.SetReferences(packets, udpReads, softirqs, referenceOf)
	}
	s.gov.SetWindow(b, length)
	return s.gov, s.gov.Prepare()
}

// setCoverage hands the window's coverage to the parts that sample.
func (s *Session) setCoverage(c *budget.Coverage) {
	for _, p := range s.parts {
		if sp, ok := p.(Sampled); ok {
			sp.SetCoverage(c)
		}
	}
}

// abort ends the window of the first begun parts after an error, so none
// keeps background work (the profile's mapping reader) running against
// probes the session is about to close. Their errors add nothing.
func (s *Session) abort(ctx context.Context, begun int) {
	for _, p := range s.parts[:begun] {
		_ = p.End(ctx)
	}
}

// wait waits out the window, ticking; it returns when the last tick was.
func (s *Session) wait(ctx, read context.Context, w Window, begin time.Time) (time.Time, error) {
	deadline := time.NewTimer(w.Duration)
	defer deadline.Stop()
	if w.Until != nil {
		deadline.Stop() // the window ends when Until closes
	}
	var ticks <-chan time.Time
	if w.Interval > 0 {
		t := time.NewTicker(w.Interval)
		defer t.Stop()
		ticks = t.C
	}
	last := begin
	for {
		select {
		case <-ctx.Done(): // Ctrl-C: report what was measured so far
			return last, nil
		case <-deadline.C:
			return last, nil
		case <-w.Until:
			return last, nil
		case now := <-ticks:
			last = now
			for _, p := range s.parts {
				if t, ok := p.(Ticker); ok {
					if err := t.Tick(read, now); err != nil {
						return last, err
					}
				}
			}
			if w.OnTick != nil {
				w.OnTick(now, begin.Add(w.Duration).Sub(now))
			}
		}
	}
}

func (s *Session) probes() []probes.Probe {
	var out []probes.Probe
	for _, p := range s.parts {
		out = append(out, p.Probes()...)
	}
	return out
}

// onlineCPUs is the denominator of the BPF time share.
func (s *Session) onlineCPUs() int { return OnlineCPUs(s.src) }

// statsWindow is bpf_stats switched on for one window.
type statsWindow struct {
	on      io.Closer
	sampler *probes.StatsSampler
}

func (s *Session) startStats(mode Stats, all []probes.Probe) (*statsWindow, error) {
	if len(all) == 0 {
		return &statsWindow{}, nil
	}
	if mode == StatsSampled {
		// The sampler reads the counters as each of its windows opens and
		// closes and keeps only what grew inside them: another process's
		// statistics windows must not count as this run's.
		sampler, err := probes.SampleStats(probes.StatsSampleOn, probes.StatsSamplePeriod, func() []probes.ProgramCost {
			var flat []probes.ProgramCost
			for _, c := range costsOf(all) {
				flat = append(flat, c...)
			}
			return flat
		})
		return &statsWindow{sampler: sampler}, err
	}
	on, err := probes.EnableStats()
	return &statsWindow{on: on}, err
}

// stop switches statistics off and returns the sample when they were
// sampled. Safe on a window whose statistics never started.
func (st *statsWindow) stop() *probes.StatsSample {
	switch {
	case st == nil:
	case st.sampler != nil:
		s := st.sampler.Stop()
		return &s
	case st.on != nil:
		st.on.Close()
		st.on = nil
	}
	return nil
}

// costsOf reads every probe's bpf_stats, per probe.
func costsOf(all []probes.Probe) [][]probes.ProgramCost {
	out := make([][]probes.ProgramCost, len(all))
	for i, p := range all {
		out[i] = p.Costs()
	}
	return out
}

// costDelta is each program's runs and run time between two readings:
// bpf_stats count from the program's load, and a session measures
// window after window.
func costDelta(after, before [][]probes.ProgramCost) []evidence.ProgramCost {
	var out []evidence.ProgramCost
	for i, progs := range after {
		prev := map[string]probes.ProgramCost{}
		if i < len(before) {
			for _, c := range before[i] {
				prev[c.Program] = c
			}
		}
		for _, c := range progs {
			b := prev[c.Program]
			runs, t := c.RunCount, c.RunTime
			if runs >= b.RunCount && t >= b.RunTime {
				runs, t = runs-b.RunCount, t-b.RunTime
			}
			pc := evidence.NewProgramCost(c.Program, runs, t)
			if pc.Missed = c.Missed; c.Missed >= b.Missed {
				pc.Missed -= b.Missed
			}
			out = append(out, pc)
		}
	}
	return out
}

// scaleCosts replaces each program's runs and run time over the window,
// which another process's statistics windows may have inflated, with what
// it ran inside the sampler's own windows, scaled to the whole window;
// per-run times are measured and stay as they are.
func scaleCosts(ov *evidence.Overhead, s probes.StatsSample) {
	k := s.Scale()
	ov.StatsSample = &evidence.StatsSample{OnNs: int64(s.On), TotalNs: int64(s.Total), Scale: k, Shared: s.Shared}
	sampled := map[string]probes.ProgramCost{}
	for _, c := range s.Costs {
		sampled[c.Program] = c
	}
	for i := range ov.Programs {
		p := &ov.Programs[i]
		c, missed := sampled[p.Program], p.Missed
		*p = evidence.NewProgramCost(p.Program, uint64(math.Round(float64(c.RunCount)*k)), time.Duration(math.Round(float64(c.RunTime)*k)))
		p.Missed = missed // counted over the whole window, not sampled
	}
}

// bpfShare is BPF run time over the window's CPU time.
func bpfShare(progs []evidence.ProgramCost, window time.Duration, cpus int) float64 {
	if window <= 0 || cpus <= 0 {
		return 0
	}
	var total uint64
	for _, p := range progs {
		total += p.RunTimeNs
	}
	return float64(total) / (float64(window) * float64(cpus))
}

// OnlineCPUs are the CPUs a window's time is counted over.
func OnlineCPUs(src Sources) int {
	if set, err := src.cpus().ReadList("/sys/devices/system/cpu/online"); err == nil && set.Len() > 0 {
		return set.Len()
	}
	return runtime.NumCPU()
}

// Sampled is a Part whose probes' hooks the budget may attach in sampling
// windows only. The session hands it the window's Coverage before the
// first reading (live, for ticks) and again, final, before the last.
type Sampled interface {
	SetCoverage(c *budget.Coverage)
}
