package probes_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
)

func TestStatsSampleScale(t *testing.T) {
	for _, c := range []struct {
		s    probes.StatsSample
		want float64
	}{
		{probes.StatsSample{On: 100 * time.Millisecond, Total: time.Second}, 10},
		// Shared changes nothing: only the sampler's own windows count.
		{probes.StatsSample{On: 100 * time.Millisecond, Total: time.Second, Shared: true}, 10},
		{probes.StatsSample{Total: time.Second}, 1},
	} {
		if got := c.s.Scale(); got != c.want {
			t.Errorf("%+v: scale %v, want %v", c.s, got, c.want)
		}
	}
}

// The sampler's on-time follows its duty cycle, and a run count that grows
// while it has statistics off marks the sample shared.
func TestStatsSamplerDutyCycle(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t) // bpf_stats is machine-wide
	for _, growing := range []bool{false, true} {
		var n atomic.Uint64
		s, err := probes.SampleStats(20*time.Millisecond, 100*time.Millisecond, func() []probes.ProgramCost {
			if growing {
				return []probes.ProgramCost{{Program: "p", RunCount: n.Add(1)}}
			}
			return []probes.ProgramCost{{Program: "p", RunCount: 7}}
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(450 * time.Millisecond)
		got := s.Stop()
		if again := s.Stop(); again.On != got.On || again.Total != got.Total {
			t.Errorf("second Stop: %+v, first %+v", again, got)
		}
		// Statistics were on for part of the window, never all of it.
		// How much depends on timer latency on a loaded machine, which a
		// unit test does not assert (timers fire late, never early, so the
		// window itself is at least the sleep).
		if got.On <= 0 || got.On >= got.Total || got.Total < 450*time.Millisecond {
			t.Errorf("on %v of %v: want some but not all of at least 450 ms", got.On, got.Total)
		}
		if got.Shared != growing {
			t.Errorf("shared = %v with a run count that grows: %v", got.Shared, growing)
		}
	}
}

// Only growth inside the sampler's own windows counts: two concurrent runs
// (bpf_stats is machine-wide) must not take each other's windows as
// their own. The fake counters are read once as each window opens and
// once as it closes: the first grows only between windows (another run's
// statistics), the second by 500 at every read (half inside windows).
func TestStatsSamplerCountsOnlyItsOwnWindows(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	var mu sync.Mutex
	reads := 0
	s, err := probes.SampleStats(10*time.Millisecond, 40*time.Millisecond, func() []probes.ProgramCost {
		mu.Lock()
		defer mu.Unlock()
		k := uint64(reads)
		reads++
		return []probes.ProgramCost{
			{Program: "others-windows", RunCount: 1000 * (k / 2), RunTime: time.Duration(1000 * (k / 2))},
			{Program: "steady", RunCount: 500 * k, RunTime: time.Duration(500 * k)},
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	got := s.Stop()
	mu.Lock()
	last := uint64(reads - 1)
	mu.Unlock()
	if reads%2 != 0 || len(got.Costs) != 2 {
		t.Fatalf("%d reads (want open/close pairs), costs %+v", reads, got.Costs)
	}
	if c := got.Costs[0]; c.Program != "others-windows" || c.RunCount != 0 || c.RunTime != 0 {
		t.Errorf("growth outside the sampler's windows was counted: %+v", c)
	}
	if c := got.Costs[1]; c.RunCount*2 != 500*last+500 {
		t.Errorf("steady: counted %d of %d, want half (+1 read)", c.RunCount, 500*last)
	}
	if !got.Shared {
		t.Error("growth between windows not reported as shared")
	}
}
