package probes

import (
	"io"
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
// Total, so run counts and times read afterwards cover On and are scaled by
// Scale to the whole run.
type StatsSample struct {
	On, Total time.Duration
	// Shared means bpf_stats stayed on while the sampler had switched it
	// off (another process holds it): the counts cover the whole run and
	// Scale is 1.
	Shared bool
}

// Scale is the factor from sampled to whole-run counts and times.
func (s StatsSample) Scale() float64 {
	if s.Shared || s.On <= 0 {
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
	runs    func() uint64
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
// until Stop. runs reports the total run count of the caller's programs; a
// count that grows while the sampler has statistics off means another
// process keeps them on (StatsSample.Shared).
func SampleStats(on, period time.Duration, runs func() uint64) (*StatsSampler, error) {
	c, err := EnableStats()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	s := &StatsSampler{runs: runs, stop: make(chan struct{}), done: make(chan struct{}), on: c, onSince: now, started: now}
	go s.loop(on, period)
	return s, nil
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
		if s.runs != nil && s.runs() != s.offRuns {
			s.sample.Shared = true
		}
		if c, err := EnableStats(); err == nil {
			s.on, s.onSince = c, time.Now()
		}
		s.mu.Unlock()
	}
}

// switchOff closes the statistics descriptor if open; s.mu is held.
func (s *StatsSampler) switchOff() {
	if s.on == nil {
		return
	}
	s.on.Close()
	s.on = nil
	s.sample.On += time.Since(s.onSince)
	if s.runs != nil {
		s.offRuns = s.runs()
	}
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
		s.mu.Unlock()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sample
}
