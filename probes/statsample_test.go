package probes_test

import (
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
		{probes.StatsSample{On: 100 * time.Millisecond, Total: time.Second, Shared: true}, 1},
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
		s, err := probes.SampleStats(20*time.Millisecond, 100*time.Millisecond, func() uint64 {
			if growing {
				return n.Add(1)
			}
			return 7
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(450 * time.Millisecond)
		got := s.Stop()
		if again := s.Stop(); again != got {
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
