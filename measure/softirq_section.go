package measure

import (
	"math"
	"time"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
)

// SoftirqCounts is one vector on one CPU as the probe measured it.
type SoftirqCounts struct {
	Count  uint64
	TimeNs uint64
	// Estimate, when the probe was sampled and Count is /proc/softirqs'
	// exact count, is the probe's windows' count scaled to the window:
	// what the totals check against /proc/softirqs.
	Estimate *uint64
}

// SoftirqInput is what a softirq run gathered, as deltas over the window.
type SoftirqInput struct {
	Duration time.Duration
	// Vectors names the probe's vector indexes (kernel order).
	Vectors []string
	// Probe is [cpu][vector].
	Probe [][]SoftirqCounts
	// NetRXLatency and NetTXLatency are raise→entry log2 histograms,
	// [cpu][slot]; slot i counts waits in [2^i, 2^(i+1)) ns.
	NetRXLatency, NetTXLatency [][]uint64
	// Proc and Stat are /proc/softirqs and /proc/stat deltas over the same
	// window, read independently of the probe.
	Proc procfs.Softirqs
	Stat procfs.Stat
	// CPUs restricts the report (empty = every CPU).
	CPUs cpuset.Set
}

// BuildSoftirq turns a run's deltas into evidence.
func BuildSoftirq(in SoftirqInput) evidence.SoftirqEvidence {
	ev := evidence.SoftirqEvidence{DurationNs: int64(in.Duration)}
	secs := in.Duration.Seconds()
	chosen := func(cpu int) bool { return in.CPUs.IsEmpty() || in.CPUs.Contains(cpu) }
	totals := make([]evidence.VectorAgreement, len(in.Vectors))
	for i, v := range in.Vectors {
		totals[i].Vector = v
	}
	for cpu, vecs := range in.Probe {
		if !chosen(cpu) {
			continue
		}
		_, online := in.Proc.ByCPU("NET_RX", cpu)
		if !online && len(in.Proc.CPUs) > 0 {
			continue // possible but offline CPU: nothing to report
		}
		row := evidence.SoftirqCPU{CPU: cpu, Vectors: map[string]evidence.SoftirqVector{}}
		var busy uint64
		for i, c := range vecs {
			if i >= len(in.Vectors) {
				break
			}
			name := in.Vectors[i]
			pc, _ := in.Proc.ByCPU(name, cpu)
			sv := evidence.SoftirqVector{Count: c.Count, TimeNs: c.TimeNs, ProcCount: pc}
			if secs > 0 {
				sv.Share = float64(c.TimeNs) / float64(in.Duration)
			}
			row.Vectors[name] = sv
			busy += c.TimeNs
			if c.Estimate != nil {
				totals[i].Probe += *c.Estimate
			} else {
				totals[i].Probe += c.Count
			}
			totals[i].ProcCount += pc
			totals[i].TimeNs += c.TimeNs
		}
		if in.Duration > 0 {
			row.Share = float64(busy) / float64(in.Duration)
		}
		if t, ok := in.Stat.CPU(cpu); ok && t.Total() > 0 {
			row.ProcStatShare = float64(t.SoftIRQ) / float64(t.Total())
		}
		ev.CPUs = append(ev.CPUs, row)
	}
	for i := range totals {
		if p := totals[i].ProcCount; p > 0 {
			totals[i].Diff = (float64(totals[i].Probe) - float64(p)) / float64(p)
		}
	}
	ev.Totals = totals
	ev.Latency = []evidence.LatencyHistogram{
		histogram("NET_RX", in.NetRXLatency, chosen),
		histogram("NET_TX", in.NetTXLatency, chosen),
	}
	return ev
}

func histogram(vector string, perCPU [][]uint64, chosen func(int) bool) evidence.LatencyHistogram {
	h := evidence.LatencyHistogram{Vector: vector}
	var slots []uint64
	for cpu, s := range perCPU {
		if !chosen(cpu) {
			continue
		}
		if slots == nil {
			slots = make([]uint64, len(s))
		}
		for i, n := range s {
			slots[i] += n
			h.Count += n
		}
	}
	for i, n := range slots {
		low := uint64(1) << uint(i)
		if i == 0 {
			low = 0
		}
		h.Buckets = append(h.Buckets, evidence.LatencyBucket{LowNs: low, HighNs: uint64(1) << uint(i+1), Count: n})
	}
	h.P50Ns = evidence.Quantile(h.Buckets, h.Count, 0.50)
	h.P99Ns = evidence.Quantile(h.Buckets, h.Count, 0.99)
	return h
}

// Interval summarises a short window for an --interval line.
func SoftirqIntervalOf(in SoftirqInput, end time.Time) evidence.SoftirqInterval {
	ev := BuildSoftirq(in)
	iv := evidence.SoftirqInterval{End: end, BusiestCPU: -1}
	secs := in.Duration.Seconds()
	var rxTime, txTime float64
	for _, c := range ev.CPUs {
		rx, tx := c.Vectors["NET_RX"], c.Vectors["NET_TX"]
		if secs > 0 {
			iv.NetRXPerS += float64(rx.Count) / secs
			iv.NetTXPerS += float64(tx.Count) / secs
		}
		rxTime += float64(rx.TimeNs)
		txTime += float64(tx.TimeNs)
		if c.Share > iv.BusiestShare || iv.BusiestCPU < 0 {
			iv.BusiestCPU, iv.BusiestShare = c.CPU, c.Share
		}
	}
	if n := float64(len(ev.CPUs)) * float64(in.Duration); n > 0 {
		iv.NetRXShare = rxTime / n
		iv.NetTXShare = txTime / n
	}
	if math.IsNaN(iv.BusiestShare) {
		iv.BusiestShare = 0
	}
	return iv
}
