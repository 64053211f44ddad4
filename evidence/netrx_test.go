package evidence

import (
	"slices"
	"testing"
)

func softirqWith(shares map[int]float64) SoftirqEvidence {
	var s SoftirqEvidence
	for cpu := 0; cpu < 4; cpu++ {
		s.CPUs = append(s.CPUs, SoftirqCPU{CPU: cpu, Vectors: map[string]SoftirqVector{"NET_RX": {Share: shares[cpu]}}})
	}
	return s
}

// One definition: CPUs at or above NetRXBusyShare; else the busiest CPU
// that ran NET_RX; else none.
func TestNetRXCPUs(t *testing.T) {
	for _, c := range []struct {
		shares map[int]float64
		want   []int
	}{
		{map[int]float64{0: 0.30, 1: 0.02, 3: NetRXBusyShare}, []int{0, 3}},
		{map[int]float64{1: 0.02, 2: 0.04}, []int{2}},
		{map[int]float64{}, nil},
	} {
		if got := softirqWith(c.shares).NetRXCPUs(); !slices.Equal(got, c.want) {
			t.Errorf("shares %v: NetRXCPUs = %v, want %v", c.shares, got, c.want)
		}
	}
}
