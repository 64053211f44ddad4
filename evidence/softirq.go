package evidence

import (
	"math"
	"time"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/procfs"
)

// SoftirqCounts is one vector on one CPU as the probe measured it.
type SoftirqCounts struct {
	Count  uint64
	TimeNs uint64
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

// SoftirqVector is one vector on one CPU.
type SoftirqVector struct {
	Count  uint64 `json:"count"`
	TimeNs uint64 `json:"time_ns"`
	// Share is TimeNs over the window: the fraction of this CPU's time spent
	// in the vector.
	Share float64 `json:"share"`
	// ProcCount is the /proc/softirqs delta for the same CPU and vector.
	ProcCount uint64 `json:"proc_softirqs_count"`
}

// SoftirqCPU is one CPU's softirq load.
type SoftirqCPU struct {
	CPU     int                      `json:"cpu"`
	Vectors map[string]SoftirqVector `json:"vectors"`
	// Share is the time in every vector over the window.
	Share float64 `json:"share"`
	// ProcStatShare is /proc/stat's softirq time over the CPU's total time
	// (tick-sampled, so coarse; printed as a cross-check).
	ProcStatShare float64 `json:"proc_stat_softirq_share"`
}

// LatencyBucket is one histogram bucket: waits in [LowNs, HighNs).
type LatencyBucket struct {
	LowNs  uint64 `json:"low_ns"`
	HighNs uint64 `json:"high_ns"`
	Count  uint64 `json:"count"`
}

// LatencyHistogram is the raise→entry wait of one vector, over the chosen
// CPUs.
type LatencyHistogram struct {
	Vector  string          `json:"vector"`
	Count   uint64          `json:"count"`
	P50Ns   float64         `json:"p50_ns"`
	P99Ns   float64         `json:"p99_ns"`
	Buckets []LatencyBucket `json:"buckets"`
}

// VectorAgreement compares the probe's count with /proc/softirqs for one
// vector over the chosen CPUs.
type VectorAgreement struct {
	Vector    string `json:"vector"`
	Probe     uint64 `json:"probe_count"`
	ProcCount uint64 `json:"proc_softirqs_count"`
	TimeNs    uint64 `json:"time_ns"`
	// Diff is (probe − proc) / proc; NaN-free: 0 when both are 0.
	Diff float64 `json:"diff"`
}

// SoftirqEvidence is the result of a softirq run.
type SoftirqEvidence struct {
	DurationNs int64              `json:"duration_ns"`
	CPUs       []SoftirqCPU       `json:"cpus"`
	Latency    []LatencyHistogram `json:"latency"`
	Totals     []VectorAgreement  `json:"totals"`
	Intervals  []SoftirqInterval  `json:"intervals,omitempty"`
}

// SoftirqInterval is one --interval line.
type SoftirqInterval struct {
	End        time.Time `json:"end"`
	NetRXPerS  float64   `json:"net_rx_per_s"`
	NetTXPerS  float64   `json:"net_tx_per_s"`
	NetRXShare float64   `json:"net_rx_share"` // of all chosen CPUs' time
	NetTXShare float64   `json:"net_tx_share"`
	// BusiestCPU is the CPU with the highest softirq share and its share.
	BusiestCPU   int     `json:"busiest_cpu"`
	BusiestShare float64 `json:"busiest_share"`
}

// BuildSoftirq turns a run's deltas into evidence.
func BuildSoftirq(in SoftirqInput) SoftirqEvidence {
	ev := SoftirqEvidence{DurationNs: int64(in.Duration)}
	secs := in.Duration.Seconds()
	chosen := func(cpu int) bool { return in.CPUs.IsEmpty() || in.CPUs.Contains(cpu) }
	totals := make([]VectorAgreement, len(in.Vectors))
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
		row := SoftirqCPU{CPU: cpu, Vectors: map[string]SoftirqVector{}}
		var busy uint64
		for i, c := range vecs {
			if i >= len(in.Vectors) {
				break
			}
			name := in.Vectors[i]
			pc, _ := in.Proc.ByCPU(name, cpu)
			sv := SoftirqVector{Count: c.Count, TimeNs: c.TimeNs, ProcCount: pc}
			if secs > 0 {
				sv.Share = float64(c.TimeNs) / float64(in.Duration)
			}
			row.Vectors[name] = sv
			busy += c.TimeNs
			totals[i].Probe += c.Count
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
	ev.Latency = []LatencyHistogram{
		histogram("NET_RX", in.NetRXLatency, chosen),
		histogram("NET_TX", in.NetTXLatency, chosen),
	}
	return ev
}

func histogram(vector string, perCPU [][]uint64, chosen func(int) bool) LatencyHistogram {
	h := LatencyHistogram{Vector: vector}
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
		h.Buckets = append(h.Buckets, LatencyBucket{LowNs: low, HighNs: uint64(1) << uint(i+1), Count: n})
	}
	h.P50Ns = quantile(h.Buckets, h.Count, 0.50)
	h.P99Ns = quantile(h.Buckets, h.Count, 0.99)
	return h
}

// quantile interpolates linearly inside the log2 bucket that holds q, as
// bcc's and bpftrace's histogram readers do; the result is exact to within
// that bucket.
func quantile(b []LatencyBucket, total uint64, q float64) float64 {
	if total == 0 {
		return 0
	}
	target := q * float64(total)
	var seen float64
	for _, bk := range b {
		if bk.Count == 0 {
			continue
		}
		if seen+float64(bk.Count) >= target {
			frac := (target - seen) / float64(bk.Count)
			return float64(bk.LowNs) + frac*float64(bk.HighNs-bk.LowNs)
		}
		seen += float64(bk.Count)
	}
	return float64(b[len(b)-1].HighNs)
}

// Interval summarises a short window for an --interval line.
func SoftirqIntervalOf(in SoftirqInput, end time.Time) SoftirqInterval {
	ev := BuildSoftirq(in)
	iv := SoftirqInterval{End: end, BusiestCPU: -1}
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
