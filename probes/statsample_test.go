package probes

import (
	"os"
	"sync/atomic"
	"testing"
	"time"
)

func TestStatsSampleScale(t *testing.T) {
	for _, c := range []struct {
		s    StatsSample
		want float64
	}{
		{StatsSample{On: 100 * time.Millisecond, Total: time.Second}, 10},
		{StatsSample{On: 100 * time.Millisecond, Total: time.Second, Shared: true}, 1},
		{StatsSample{Total: time.Second}, 1},
	} {
		if got := c.s.Scale(); got != c.want {
			t.Errorf("%+v: scale %v, want %v", c.s, got, c.want)
		}
	}
}

// The sampler's on-time follows its duty cycle, and a run count that grows
// while it has statistics off marks the sample shared.
func TestStatsSamplerDutyCycle(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("PERFSCOPE_REQUIRE_ROOT_TESTS") == "1" {
			t.Fatal("root test cannot run: not root")
		}
		t.Skip("needs root")
	}
	for _, growing := range []bool{false, true} {
		var n atomic.Uint64
		s, err := SampleStats(20*time.Millisecond, 100*time.Millisecond, func() uint64 {
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
		// Five on-phases of 20 ms in 450 ms (timers fire late, never early).
		if got.On < 80*time.Millisecond || got.On > 180*time.Millisecond || got.Total < 450*time.Millisecond {
			t.Errorf("on %v of %v, want about 100 ms of 450 ms", got.On, got.Total)
		}
		if got.Shared != growing {
			t.Errorf("shared = %v with a run count that grows: %v", got.Shared, growing)
		}
	}
}
