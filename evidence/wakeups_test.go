package evidence

import (
	"slices"
	"testing"
)

func TestFeedingCPUs(t *testing.T) {
	s := UDPSocket{WakeupsByCPU: map[int]uint64{0: 550, 1: 400, 3: 50}}
	if got := s.FeedingCPUs(0.2); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("FeedingCPUs(0.2) = %v, want [0 1] (CPU 3 has 5%%)", got)
	}
	if got := s.WakeupShares()[1]; got != 0.4 {
		t.Errorf("share of CPU 1 = %v, want 0.4", got)
	}
	if got := (UDPSocket{}).FeedingCPUs(0.2); got != nil {
		t.Errorf("no wakeups: %v", got)
	}
}
