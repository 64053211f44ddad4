package cli

import (
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

// Sampled bpf_stats: the counts of the sampler's own windows replace the
// cumulative ones and scale to the window, per-run times do not, and the
// BPF share is recomputed from the scaled totals.
func TestScaleCostsFromSampledStats(t *testing.T) {
	// The cumulative counters (3000 runs) include another run's windows;
	// the sampler counted 1000 inside its own.
	ov := &evidence.Overhead{Programs: []evidence.ProgramCost{evidence.NewProgramCost("net:netif_receive_skb", 3000, 200*time.Microsecond)}}
	sample := probes.StatsSample{On: 100 * time.Millisecond, Total: time.Second, Shared: true,
		Costs: []probes.ProgramCost{{Program: "net:netif_receive_skb", RunCount: 1000, RunTime: 60 * time.Microsecond}}}
	scaleCosts(ov, sample, time.Second, 2)
	p := ov.Programs[0]
	if p.RunCount != 10000 || p.RunTimeNs != 600000 || p.PerRunNs != 60 {
		t.Errorf("scaled program: %+v", p)
	}
	if ov.BPFTimeShare != 600e3/2e9 || ov.StatsSample == nil || ov.StatsSample.Scale != 10 || !ov.StatsSample.Shared {
		t.Errorf("overhead: share %v, sample %+v", ov.BPFTimeShare, ov.StatsSample)
	}
}
