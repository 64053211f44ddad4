package probes

import (
	"io"
	"sort"
	"sync"
	"time"
)

// Default duty cycle of SampleStats: bpf_stats on for StatsSampleOn of every
// StatsSamplePeriod (10 %). Short, frequent samples follow bursty traffic
// better than one long one; each switch patches the kernel's static key,
// so not too many per second.
const (
	StatsSampleOn     = 50 * time.Millisecond
	StatsSamplePeriod = 500 * time.Millisecond
)

// StatsSample is what a StatsSampler measured: bpf_stats was on for On of
// Total; Costs are the programs' runs and run time counted inside those
// windows only, and Scale turns them into whole-run estimates.
type StatsSample struct {
	On, Total time.Duration
	// Costs are the run counts and times accumulated during the sampler's
	// own on-windows, by program. Counting only there is what keeps two
	// concurrent runs honest: bpf_stats is machine-wide, so while one run
	// has it off another may have it on, and a cumulative counter read at
	// the end would mix windows of unknown length.
	Costs []ProgramCost
	// Shared means the programs' counters grew while this sampler had
	// statistics off: another process had them on. Informational: Costs
	// exclude those runs.
	Shared bool
}

// Scale is the factor from sampled to whole-run counts and times.
func (s StatsSample) Scale() float64 {
	if s.On <= 0 {
		return 1
	}
	return float64(s.Total) / float64(s.On)
}

// StatsSampler keeps the kernel's BPF statistics on for part of a run.
// bpf_stats costs every BPF program run two sched_clock() reads and a
// per-CPU counter update: on our VM ~90 ns of wall time per run, more than
// most of perfscope's programs themselves, and a measured 11 points of a
// loopback flood's throughput (BENCHMARKS.md). Sampled, the cost falls with
// the duty cycle while run counts and per-run times stay measured.
type StatsSampler struct {
	costs   func() []ProgramCost
	atOn    map[string]ProgramCost // counters when the current window began
	acc     map[string]ProgramCost // counted inside windows so far
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	on      io.Closer
	onSince time.Time
	started time.Time
	sample  StatsSample
	offRuns uint64
}

// SampleStats turns bpf_stats on now and then for on out of every period
// until Stop. costs reads the caller's programs' cumulative bpf_stats; the
// sampler reads them as each window opens and closes and keeps only what
// grew inside its own windows.
func SampleStats(on, period time.Duration, costs func() []ProgramCost) (*StatsSampler, error) {
	c, err := EnableStats()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	s := &StatsSampler{costs: costs, acc: map[string]ProgramCost{}, stop: make(chan struct{}), done: make(chan struct{}), on: c, onSince: now, started: now}
	s.atOn = s.read()
	go s.loop(on, period)
	return s, nil
}

// read returns the programs' counters by name.
func (s *StatsSampler) read() map[string]ProgramCost {
	m := map[string]ProgramCost{}
	if s.costs == nil {
		return m
	}
	for _, c := range s.costs() {
		m[c.Program] = c
	}
	return m
}

func runsOf(m map[string]ProgramCost) uint64 {
	var n uint64
	for _, c := range m {
		n += c.RunCount
	}
	return n
}

func (s *StatsSampler) loop(on, period time.Duration) {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(on):
		}
		s.mu.Lock()
		s.switchOff()
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-time.After(period - on):
		}
		s.mu.Lock()
		if c, err := EnableStats(); err == nil {
			s.on, s.onSince = c, time.Now()
			s.atOn = s.read()
			if runsOf(s.atOn) != s.offRuns {
				s.sample.Shared = true
			}
		}
		s.mu.Unlock()
	}
}

// switchOff closes the statistics descriptor if open, first adding what
// the programs ran during the window; s.mu is held.
func (s *StatsSampler) switchOff() {
	if s.on == nil {
		return
	}
	atOff := s.read()
	s.on.Close()
	s.on = nil
	s.sample.On += time.Since(s.onSince)
	for name, end := range atOff {
		start := s.atOn[name]
		if end.RunCount < start.RunCount || end.RunTime < start.RunTime {
			continue // a program replaced mid-run: no honest delta
		}
		a := s.acc[name]
		a.Program = name
		a.RunCount += end.RunCount - start.RunCount
		a.RunTime += end.RunTime - start.RunTime
		s.acc[name] = a
	}
	s.offRuns = runsOf(atOff)
}

// Stop switches statistics off for good and returns the sample. Safe to
// call more than once.
func (s *StatsSampler) Stop() StatsSample {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.mu.Lock()
		s.switchOff()
		s.sample.Total = time.Since(s.started)
		s.sample.Costs = make([]ProgramCost, 0, len(s.acc))
		for _, c := range s.acc {
			s.sample.Costs = append(s.sample.Costs, c)
		}
		sort.Slice(s.sample.Costs, func(i, j int) bool { return s.sample.Costs[i].Program < s.sample.Costs[j].Program })
		s.mu.Unlock()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sample
}
