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
	// time / window), in [0,1].
	Throughput float64 `json:"throughput"`

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
	// a collection, zero when not logged.
	MetaspaceBytes float64 `json:"metaspace_bytes,omitempty"`

	// TenuringThresholdMin/Max are the lowest "new threshold" the JVM chose
	// and the configured maximum (-XX:+PrintTenuringDistribution or
	// gc+age); zero when not logged.
	TenuringThresholdMin int `json:"tenuring_threshold_min,omitempty"`
	TenuringThresholdMax int `json:"tenuring_threshold_max,omitempty"`

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
