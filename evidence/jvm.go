package evidence

// JVM is what `perfscope jvm` measured in one window: allocation from two
// independent sources, GC activity from hsperfdata, where the bytes were
// allocated, and the request count that turns totals into per-request
// costs. Byte counts are bytes, rates bytes per second, times nanoseconds.
type JVM struct {
	PID int `json:"pid"`
	// NSPID is the pid inside the JVM's own pid namespace.
	NSPID     int    `json:"nspid"`
	Collector string `json:"collector"`
	WindowNs  int64  `json:"window_ns"`
	// Requests handled in the window; 0 when unknown. RequestsSource is
	// "load" (perfscope drove them) or "user" (--requests).
	Requests       int64  `json:"requests"`
	RequestsSource string `json:"requests_source,omitempty"`
	// ProfileEvent is async-profiler's event ("alloc", "cpu", ...).
	ProfileEvent string `json:"profile_event"`

	// Allocation from async-profiler's alloc totals (sampled, weighted)
	// and, independently, from Eden occupancy across GCs (hsperfdata).
	// AllocBytesProfiler is 0 when the event is not alloc.
	AllocBytesProfiler int64   `json:"alloc_bytes_profiler"`
	AllocBytesEden     int64   `json:"alloc_bytes_eden"`
	AllocRateProfiler  float64 `json:"alloc_rate_profiler"`
	AllocRateEden      float64 `json:"alloc_rate_eden"`
	// Disagreement is (profiler − eden) / eden.
	Disagreement float64 `json:"disagreement"`
	// BytesPerRequest uses the profiler's total when there is one (it is
	// what the sites below add up to), else Eden's; 0 without a request
	// count.
	BytesPerRequest     float64 `json:"bytes_per_request"`
	BytesPerRequestEden float64 `json:"bytes_per_request_eden"`

	YoungGCs          int64   `json:"young_gcs"`
	OldGCs            int64   `json:"old_gcs"`
	YoungGCsPerMinute float64 `json:"young_gcs_per_minute"`
	MeanYoungPauseNs  float64 `json:"mean_young_pause_ns"`
	GCTimeNs          int64   `json:"gc_time_ns"`
	// GCTimeShare is GC pause time over the window.
	GCTimeShare float64 `json:"gc_time_share"`
	LastGCCause string  `json:"last_gc_cause,omitempty"`

	EdenCapacity     int64 `json:"eden_capacity"`
	SurvivorCapacity int64 `json:"survivor_capacity"`
	OldCapacity      int64 `json:"old_capacity"`
	OldUsed          int64 `json:"old_used"`
	MaxHeap          int64 `json:"max_heap"`
	// RegionSize is G1's heap region size (0 for other collectors).
	RegionSize int64 `json:"region_size"`
	// Promoted is old-generation growth across young GCs in the window.
	Promoted           int64   `json:"promoted"`
	PromotedPerYoungGC float64 `json:"promoted_per_young_gc"`

	// Sites are the allocating frames by bytes (or by the profiled
	// event's weight), largest first.
	Sites []AllocSite `json:"sites"`
	// Logging is the share of the profiled weight under a logging
	// framework's frames.
	Logging LoggingCost `json:"logging"`

	// TargetRPS and TargetGCIntervalNs are the user's planning inputs
	// (--target-rps, --target-gc-interval); 0 when not given.
	TargetRPS          float64 `json:"target_rps"`
	TargetGCIntervalNs int64   `json:"target_gc_interval_ns"`
}

// AllocSite is one allocating frame.
type AllocSite struct {
	// Frame is the method that allocated, Type what it allocated.
	Frame           string  `json:"frame"`
	Type            string  `json:"type,omitempty"`
	Bytes           int64   `json:"bytes"`
	Share           float64 `json:"share"`
	BytesPerRequest float64 `json:"bytes_per_request,omitempty"`
	// Logging names the framework when the stack runs through one.
	Logging string `json:"logging,omitempty"`
}

// LoggingCost is what logging frameworks allocated (or cost).
type LoggingCost struct {
	Bytes           int64            `json:"bytes"`
	Share           float64          `json:"share"`
	BytesPerRequest float64          `json:"bytes_per_request,omitempty"`
	ByFramework     map[string]int64 `json:"by_framework"`
}
