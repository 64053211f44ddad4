package evidence

import "time"

// SoftirqVector is one vector on one CPU.
type SoftirqVector struct {
	// Count is the vector's runs: the probe's count, or when the probe was
	// sampled (the section's estimate), /proc/softirqs' exact one — the
	// windows then give the time per run (TimeNs is that times Count).
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
// vector over the chosen CPUs. When the probe was sampled, Probe is its
// windows' count scaled to the run: the check of that estimate (the
// per-CPU counts are then /proc/softirqs' own).
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
	// Estimate: the softirq probe was attached in sampling windows only
	// (on loopback a softirq runs per packet) and its counts and times
	// are scaled to the window; /proc/softirqs counts stay exact beside
	// them. Nil: exact.
	Estimate *Estimate `json:"estimate,omitempty"`
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
