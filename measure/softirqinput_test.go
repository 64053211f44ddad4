package measure

import (
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/probes/softirq"
)

// Under a budget the per-CPU counts are /proc/softirqs' exact ones and the
// times the windows' time per run times them; the totals keep the probe's
// scaled count, the check of the estimate. Exact (k = 1), the probe's
// counts stand.
func TestSoftirqInputUnderABudgetCountsWhatTheKernelCounted(t *testing.T) {
	netRX := -1
	for i, v := range softirq.Vectors {
		if v == "NET_RX" {
			netRX = i
		}
	}
	if netRX < 0 {
		t.Fatal("no NET_RX among the probe's vectors")
	}
	t0 := time.Now()
	snap := func(at time.Time, runs uint64, d time.Duration) softirq.Snapshot {
		row := make([]softirq.VecCounts, len(softirq.Vectors))
		row[netRX] = softirq.VecCounts{Count: runs, Time: d}
		return softirq.Snapshot{Taken: at, PerCPU: [][]softirq.VecCounts{row}}
	}
	proc := func(n uint64) procfs.Softirqs {
		return procfs.Softirqs{CPUs: []int{0}, Vectors: []string{"NET_RX"}, Counts: map[string][]uint64{"NET_RX": {n}}}
	}
	a := softirqReading{probe: snap(t0, 0, 0), proc: proc(1000)}
	// The windows saw 300 runs of 2 µs; scaled by 3 that is 900, while the
	// kernel counted 1000 (the hooks slowed the softirqs inside them).
	b := softirqReading{probe: snap(t0.Add(time.Second), 300, 600*time.Microsecond), proc: proc(2000)}
	p := &Softirq{}

	ev := BuildSoftirq(p.input(a, b, 3))
	v := ev.CPUs[0].Vectors["NET_RX"]
	if v.Count != 1000 || v.TimeNs != 2_000_000 || v.ProcCount != 1000 {
		t.Errorf("sampled: count %d time %d ns (/proc %d), want the kernel's 1000 runs of the windows' 2 µs", v.Count, v.TimeNs, v.ProcCount)
	}
	tot := ev.Totals[netRX]
	if tot.Probe != 900 || tot.ProcCount != 1000 || tot.Diff > -0.0999 || tot.Diff < -0.1001 {
		t.Errorf("sampled totals: probe %d vs /proc %d (%+.3f), want the scaled 900 checked against 1000", tot.Probe, tot.ProcCount, tot.Diff)
	}

	ev = BuildSoftirq(p.input(a, b, 1))
	if v := ev.CPUs[0].Vectors["NET_RX"]; v.Count != 300 || v.TimeNs != 600_000 {
		t.Errorf("exact: count %d time %d ns, want the probe's 300 and 600 µs", v.Count, v.TimeNs)
	}
}

// A vector the sampling windows never saw still counts what the kernel
// counted; with no run timed its time stays 0.
func TestSoftirqInputUnseenInTheWindows(t *testing.T) {
	t0 := time.Now()
	empty := func(at time.Time) softirq.Snapshot {
		return softirq.Snapshot{Taken: at, PerCPU: [][]softirq.VecCounts{make([]softirq.VecCounts, len(softirq.Vectors))}}
	}
	proc := func(n uint64) procfs.Softirqs {
		return procfs.Softirqs{CPUs: []int{0}, Vectors: []string{"TIMER", "NET_RX"}, Counts: map[string][]uint64{"TIMER": {n}, "NET_RX": {0}}}
	}
	p := &Softirq{}
	ev := BuildSoftirq(p.input(softirqReading{probe: empty(t0), proc: proc(10)}, softirqReading{probe: empty(t0.Add(time.Second)), proc: proc(260)}, 4))
	if v := ev.CPUs[0].Vectors["TIMER"]; v.Count != 250 || v.TimeNs != 0 {
		t.Errorf("TIMER: count %d time %d, want the kernel's 250 and no time", v.Count, v.TimeNs)
	}
}
