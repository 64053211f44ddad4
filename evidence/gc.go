package evidence

// GC is what a JVM's garbage collection did over a window: pause
// statistics, allocation and promotion rates, and the events that signal a
// misconfigured heap. `perfscope gclog` fills it from GC logs; the GC rules
// in diagnose read it. Byte values are bytes, rates are bytes per second,
// durations are nanoseconds. A zero rate or size means "not measurable from
// this log" (the Known flags say which).
type GC struct {
	// Collector as the log names it ("G1", "Parallel", "CMS", "ZGC",
	// "Shenandoah", "Serial"); empty when the log never says.
	Collector string `json:"collector"`
	// WindowSeconds is the time the log covers (from the first to the last
	// event; JVM restarts inside a file set do not add the gap).
	WindowSeconds float64 `json:"window_seconds"`

	// Pauses holds stop-the-world statistics per event kind (young, mixed,
	// full, initial-mark, remark, cleanup, pause), in that order, kinds with
	// no events left out.
	Pauses []PauseStats `json:"pauses"`
	// AllPauses aggregates every stop-the-world pause.
	AllPauses PauseStats `json:"all_pauses"`
	// Throughput is the share of the window the application ran (1 - pause
	// time / window), in [0,1]; ThroughputKnown is false when the log holds
	// little besides its pauses (a fragment), so that no share can be given.
	Throughput      float64 `json:"throughput"`
	ThroughputKnown bool    `json:"throughput_known"`
	// Segments is the number of JVM lifetimes in the log (restarts + 1);
	// TimeJumps counts places where uptime went back with no JVM start-up
	// lines before it (rotated files out of order, or lines lost).
	Segments  int `json:"segments"`
	TimeJumps int `json:"time_jumps"`
	// UnreadableRecords counts what looked like GC records but could not be
	// read (parse.unrecognised_records): the numbers here miss their pauses.
	// UnreadableAt names the first few ("gc.log:1234").
	UnreadableRecords int64    `json:"unreadable_records"`
	UnreadableAt      []string `json:"unreadable_at,omitempty"`
	// EscalatedFullGCs counts young collections that turned into full ones
	// inside the same stop; each is one pause of kind full.
	EscalatedFullGCs int `json:"escalated_full_gcs"`

	// YoungGCs counts young and mixed collections; YoungIntervalSeconds is
	// the mean time between two of them.
	YoungGCs             int     `json:"young_gcs"`
	YoungIntervalSeconds float64 `json:"young_interval_seconds"`

	// AllocRate is bytes allocated per second: the young generation (Eden
	// when logged) before GC n+1 minus after GC n, summed, over the time
	// between them. AllocSource says which space it came from: "eden",
	// "young" or "heap" (least precise: old-generation changes leak in).
	AllocRate   float64 `json:"alloc_rate_bytes_per_second"`
	AllocSource string  `json:"alloc_source,omitempty"`
	// AllocatedBytes is the total the rate is computed from.
	AllocatedBytes float64 `json:"allocated_bytes"`
	// PromotionRate is bytes promoted to the old generation per second by
	// young collections; PromotedBytes the total.
	PromotionRate float64 `json:"promotion_rate_bytes_per_second"`
	PromotedBytes float64 `json:"promoted_bytes"`
	// PromotionKnown is false when no young collection logged both its young
	// generation and its heap (then promotion cannot be computed).
	PromotionKnown bool `json:"promotion_known"`

	// EdenBytes is the Eden capacity last logged (for non-G1 collectors
	// without Eden details, the young generation capacity). Zero when unknown.
	EdenBytes float64 `json:"eden_bytes"`
	// HeapBytes is the heap capacity last logged.
	HeapBytes float64 `json:"heap_bytes"`
	// RegionBytes is the G1 (or Shenandoah) region size when logged.
	RegionBytes float64 `json:"region_bytes,omitempty"`
	// LiveAfterFullBytes is the largest heap occupancy right after a full
	// collection: the live set the heap must hold. Zero without full GCs.
	LiveAfterFullBytes float64 `json:"live_after_full_bytes,omitempty"`
	// MetaspaceBytes is the largest Metaspace (or PermGen) occupancy after
	// a collection, zero when not logged; MetaspaceFirstBytes and
	// MetaspaceLastBytes the first and last logged.
	MetaspaceBytes      float64 `json:"metaspace_bytes,omitempty"`
	MetaspaceFirstBytes float64 `json:"metaspace_first_bytes,omitempty"`
	MetaspaceLastBytes  float64 `json:"metaspace_last_bytes,omitempty"`
	// LiveSet is the heap floor over time and whether it rises.
	LiveSet LiveSetTrend `json:"live_set"`

	// TenuringThresholdMin/Max are the lowest "new threshold" the JVM chose
	// and the configured maximum (-XX:+PrintTenuringDistribution or
	// gc+age); zero when not logged.
	TenuringThresholdMin int `json:"tenuring_threshold_min,omitempty"`
	TenuringThresholdMax int `json:"tenuring_threshold_max,omitempty"`
	// Tenuring is the age tables' summary, nil when not logged.
	Tenuring *TenuringStats `json:"tenuring,omitempty"`

	// FullGCCauses lists full collections by cause, most frequent first.
	FullGCCauses []CauseStats `json:"full_gc_causes"`
	// ConcurrentModeFailures (CMS), PromotionFailures (ParNew/CMS) and
	// ToSpaceExhausted (G1 evacuation failures) count the pauses that
	// reported them.
	ConcurrentModeFailures int `json:"concurrent_mode_failures"`
	PromotionFailures      int `json:"promotion_failures"`
	ToSpaceExhausted       int `json:"to_space_exhausted"`
	// HumongousGCs counts pauses caused by a humongous allocation;
	// HumongousRegionsMax is the most humongous regions seen live (G1
	// gc+heap), zero when not logged.
	HumongousGCs        int `json:"humongous_gcs"`
	HumongousRegionsMax int `json:"humongous_regions_max,omitempty"`
	// AllocationStalls (ZGC) count threads stalled waiting for memory.
	AllocationStalls   int   `json:"allocation_stalls"`
	AllocationStallsNs int64 `json:"allocation_stalls_ns"`

	// Safepoints are every stop of the application the log records, GC or
	// not; nil when the log has none.
	Safepoints *SafepointStats `json:"safepoints,omitempty"`
	// PauseCPU is the user/sys/real CPU the pauses logged; nil when none did.
	PauseCPU *PauseCPUStats `json:"pause_cpu,omitempty"`
	// Cycles are the concurrent collection cycles; nil when there are none.
	Cycles *CycleStats `json:"cycles,omitempty"`
	// Phases are the pauses' logged phase times, most time first.
	Phases []PhaseTime `json:"phases,omitempty"`
	// RefProc is reference processing inside pauses; nil when not logged.
	RefProc *RefProcStats `json:"reference_processing,omitempty"`

	// Goals are what the user asked for; rules compare against them.
	Goals GCGoals `json:"goals"`
	// Model is the Spring Boot allocation study's request → allocation → young GC model, present
	// when a request rate was given.
	Model *GCModel `json:"model,omitempty"`
}

// PauseStats summarises stop-the-world pauses of one kind. Percentiles are
// exact up to a few thousand pauses and within 1% beyond (a log-scale
// histogram keeps memory constant).
type PauseStats struct {
	Kind    string  `json:"kind"`
	Count   int     `json:"count"`
	TotalNs int64   `json:"total_ns"`
	MeanNs  float64 `json:"mean_ns"`
	P50Ns   int64   `json:"p50_ns"`
	P95Ns   int64   `json:"p95_ns"`
	P99Ns   int64   `json:"p99_ns"`
	MaxNs   int64   `json:"max_ns"`
	// OverGoal counts pauses longer than Goals.PauseGoalNs.
	OverGoal int `json:"over_goal"`
}

// SafepointStats summarises the stops of the application's threads
// (-XX:+PrintGCApplicationStoppedTime, -XX:+PrintSafepointStatistics,
// -Xlog:safepoint).
type SafepointStats struct {
	Count     int   `json:"count"`
	StoppedNs int64 `json:"stopped_ns"`
	MaxNs     int64 `json:"max_ns"`
	// StoppedShare is the stopped time over the window, in [0,1].
	StoppedShare float64 `json:"stopped_share"`
	// Time to safepoint: how long stopping all threads took, over the stops
	// that logged it; the longest, when (seconds into the log) and in which
	// operation.
	TTSPCount int     `json:"ttsp_count"`
	TTSPNs    int64   `json:"ttsp_total_ns"`
	TTSPMaxNs int64   `json:"ttsp_max_ns"`
	TTSPMaxAt float64 `json:"ttsp_max_at_seconds"`
	TTSPMaxOp string  `json:"ttsp_max_operation,omitempty"`
	// NonGCNs is the stopped time GC pauses do not explain (named non-GC
	// operations, or unnamed stops with no collection before them);
	// NonGCMaxNs the longest such stop.
	NonGCNs    int64 `json:"non_gc_ns"`
	NonGCMaxNs int64 `json:"non_gc_max_ns"`
	// Operations are the named VM operations, most stopped time first.
	Operations []SafepointOperation `json:"operations,omitempty"`
}

// SafepointOperation is one VM operation's stops.
type SafepointOperation struct {
	Name      string `json:"name"`
	GC        bool   `json:"gc"`
	Count     int    `json:"count"`
	StoppedNs int64  `json:"stopped_ns"`
	MaxNs     int64  `json:"max_ns"`
	TTSPMaxNs int64  `json:"ttsp_max_ns"`
}

// PauseCPUStats is the CPU the pauses used ("[Times: user sys real]",
// gc,cpu): sys-heavy pauses (kernel time above the JVM's: page faults,
// swapping, transparent huge pages) and starved ones (wall time above the
// CPU time: waiting for a CPU or for I/O), each at least 10 ms.
type PauseCPUStats struct {
	Pauses         int   `json:"pauses"`
	UserNs         int64 `json:"user_ns"`
	SysNs          int64 `json:"sys_ns"`
	RealNs         int64 `json:"real_ns"`
	SysHeavy       int   `json:"sys_heavy"`
	SysHeavyRealNs int64 `json:"sys_heavy_real_ns"`
	Starved        int   `json:"starved"`
	StarvedRealNs  int64 `json:"starved_real_ns"`
	// Worst is the sys-heavy or starved pause with the longest real time.
	WorstAtSeconds float64 `json:"worst_at_seconds"`
	WorstKind      string  `json:"worst_kind,omitempty"`
	WorstUserNs    int64   `json:"worst_user_ns"`
	WorstSysNs     int64   `json:"worst_sys_ns"`
	WorstRealNs    int64   `json:"worst_real_ns"`
}

// CycleStats counts concurrent collection cycles (G1 marking, CMS, ZGC,
// Shenandoah) and what happened during them.
type CycleStats struct {
	Count   int   `json:"count"`
	TotalNs int64 `json:"total_ns"`
	MeanNs  int64 `json:"mean_ns"`
	MaxNs   int64 `json:"max_ns"`
	// Unfinished cycles were cut short (CMS concurrent mode failure, a
	// new cycle before the end, the log's end).
	Unfinished int `json:"unfinished"`
	// ToSpaceExhaustedMax and HumongousMax are the most to-space
	// exhausted and humongous-allocation pauses between two cycle starts.
	ToSpaceExhaustedMax int `json:"to_space_exhausted_max_per_cycle"`
	HumongousMax        int `json:"humongous_max_per_cycle"`
}

// PhaseTime is one logged phase of pauses.
type PhaseTime struct {
	Name    string `json:"name"`
	Count   int    `json:"count"`
	TotalNs int64  `json:"total_ns"`
	MaxNs   int64  `json:"max_ns"`
}

// RefProcStats is reference processing (Soft/Weak/Final/Phantom
// references) inside pauses.
type RefProcStats struct {
	Pauses       int   `json:"pauses"`
	TotalNs      int64 `json:"total_ns"`
	MaxNs        int64 `json:"max_ns"`
	PauseTotalNs int64 `json:"pause_total_ns"`
}

// LiveSetTrend is the heap occupancy after collection over time: a floor
// that keeps rising is the sign of a leak.
type LiveSetTrend struct {
	// Basis: "full GCs" (heap after each) or "collections" (the lowest
	// heap after any collection per tenth of the log).
	Basis             string       `json:"basis"`
	Samples           []HeapSample `json:"samples"`
	SlopeBytesPerHour float64      `json:"slope_bytes_per_hour"`
	R2                float64      `json:"r2"`
	Verdict           string       `json:"verdict"`
}

// HeapSample is the heap floor at T seconds.
type HeapSample struct {
	T     float64 `json:"t"`
	Bytes int64   `json:"bytes"`
}

// TenuringStats summarises the tenuring distributions (age tables).
type TenuringStats struct {
	Tables int `json:"tables"`
	// Overflows are tables whose survivors exceeded the desired survivor
	// size: the rest went to the old generation early.
	Overflows int `json:"overflows"`
	// AgeBytes is the mean bytes surviving at each age 1, 2, ...
	AgeBytes []float64 `json:"age_bytes"`
}

// CauseStats counts collections with one cause.
type CauseStats struct {
	Cause   string `json:"cause"`
	Count   int    `json:"count"`
	TotalNs int64  `json:"total_ns"`
}

// GCGoals are the targets the GC rules judge against.
type GCGoals struct {
	// PauseGoalNs: a pause longer than this is a problem.
	PauseGoalNs int64 `json:"pause_goal_ns"`
	// YoungIntervalNs: young collections more frequent than one per this
	// interval are too frequent.
	YoungIntervalNs int64 `json:"young_interval_ns"`
}

// GCModel applies the Spring Boot allocation study's arithmetic to the log: bytes per request from
// the allocation rate and the request rate during the log, and the young
// collections per minute that follow at a target request rate.
type GCModel struct {
	RPS             float64 `json:"rps"`
	BytesPerRequest float64 `json:"bytes_per_request"`
	// TargetRPS defaults to RPS.
	TargetRPS float64 `json:"target_rps"`
	// EdenBytes is the Eden the prediction assumes (GC.EdenBytes, or the
	// mean allocation between young collections when Eden is not logged).
	EdenBytes float64 `json:"eden_bytes"`
	// PredictedYoungGCsPerMinute at TargetRPS with EdenBytes.
	PredictedYoungGCsPerMinute float64 `json:"predicted_young_gcs_per_minute"`
	// ObservedYoungGCsPerMinute during the log.
	ObservedYoungGCsPerMinute float64 `json:"observed_young_gcs_per_minute"`
}

// PauseKind returns the stats for kind, or nil.
func (g *GC) PauseKind(kind string) *PauseStats {
	for i := range g.Pauses {
		if g.Pauses[i].Kind == kind {
			return &g.Pauses[i]
		}
	}
	return nil
}
