package cli

import (
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

// Sampled bpf_stats: runs and totals scale to the window, per-run times do
// not, and the BPF share is recomputed from the scaled totals.
func TestScaleCostsFromSampledStats(t *testing.T) {
	ov := &evidence.Overhead{Programs: []evidence.ProgramCost{evidence.NewProgramCost("net:netif_receive_skb", 1000, 60*time.Microsecond)}}
	scaleCosts(ov, probes.StatsSample{On: 100 * time.Millisecond, Total: time.Second}, time.Second, 2)
	p := ov.Programs[0]
	if p.RunCount != 10000 || p.RunTimeNs != 600000 || p.PerRunNs != 60 {
		t.Errorf("scaled program: %+v", p)
	}
	if ov.BPFTimeShare != 600e3/2e9 || ov.StatsSample == nil || ov.StatsSample.Scale != 10 {
		t.Errorf("overhead: share %v, sample %+v", ov.BPFTimeShare, ov.StatsSample)
	}
	shared := &evidence.Overhead{Programs: []evidence.ProgramCost{evidence.NewProgramCost("x", 5, 500)}}
	scaleCosts(shared, probes.StatsSample{On: time.Millisecond, Total: time.Second, Shared: true}, time.Second, 1)
	if shared.Programs[0].RunCount != 5 {
		t.Errorf("shared statistics were scaled: %+v", shared.Programs[0])
	}
}
