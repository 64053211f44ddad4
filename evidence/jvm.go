package evidence

// JVM is what `perfscope jvm` measured in one window: allocation from two
// independent sources, GC activity from hsperfdata, where the bytes were
// allocated (by site, thread and request handler), and the request count
// that turns totals into per-request costs. Byte counts are bytes, rates
// bytes per second, times nanoseconds. A figure that could not be known
// is null in JSON (a nil pointer here), with the reason beside it — never
// a zero.
type JVM struct {
	PID int `json:"pid"`
	// NSPID is the pid inside the JVM's own pid namespace.
	NSPID int `json:"nspid"`
	// Workload is what the JVM belongs to (cgroup, container, pod);
	// absent when it could not be read.
	Workload  *Workload `json:"workload,omitempty"`
	Collector string    `json:"collector"`
	WindowNs  int64     `json:"window_ns"`
	// Requests handled in the window; nil when unknown, with the reason in
	// RequestsUnknown. RequestsSource says who counted them: "load"
	// (perfscope drove them), "user" (--requests), "metrics"
	// (--requests-from), "passive-http" (the JVM's own socket writes).
	Requests        *int64 `json:"requests"`
	RequestsSource  string `json:"requests_source,omitempty"`
	RequestsUnknown string `json:"requests_unknown,omitempty"`
	// RequestsUncertainty is the count's relative uncertainty (±).
	RequestsUncertainty float64 `json:"requests_uncertainty"`
	// RequestsNote says how the count was obtained or adjusted (a user
	// count scaled to a window cut short, what a metrics source summed).
	RequestsNote string `json:"requests_note,omitempty"`
	// RequestRate is Requests over the window (requests/s); nil when the
	// count is unknown.
	RequestRate *float64 `json:"requests_per_second"`
	// StatusClasses counts responses by status class ("2xx", "4xx", …)
	// when the source tells them apart.
	StatusClasses map[string]int64 `json:"status_classes,omitempty"`
	// RequestCrossCheck is a second, independent count of the same
	// window (the passive count beside a metrics source), for the
	// report to show how far they agree.
	RequestCrossCheck *RequestCrossCheck `json:"requests_cross_check,omitempty"`
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
	// BytesPerRequest is the whole process's allocation per request — what
	// the GC sees — from the profiler's total when there is one (it is
	// what the sites below add up to), else Eden's. Nil without a request
	// count; BytesPerRequestUnknown says why.
	BytesPerRequest        *float64 `json:"bytes_per_request"`
	BytesPerRequestEden    *float64 `json:"bytes_per_request_eden"`
	BytesPerRequestUnknown string   `json:"bytes_per_request_unknown,omitempty"`
	// BytesPerRequestError is the sampling error of BytesPerRequest when
	// it comes from the profiler: ± two standard deviations (about 95 %),
	// from the samples themselves. Nil when not known.
	BytesPerRequestError *float64 `json:"bytes_per_request_error"`
	// AllocSampling says how the profiler's allocation figures were
	// sampled and weighted; nil for other events.
	AllocSampling *AllocSampling `json:"alloc_sampling,omitempty"`

	YoungGCs          int64   `json:"young_gcs"`
	OldGCs            int64   `json:"old_gcs"`
	YoungGCsPerMinute float64 `json:"young_gcs_per_minute"`
	MeanYoungPauseNs  float64 `json:"mean_young_pause_ns"`
	GCTimeNs          int64   `json:"gc_time_ns"`
	// GCTimeShare is GC pause time over the window.
	GCTimeShare float64 `json:"gc_time_share"`
	LastGCCause string  `json:"last_gc_cause,omitempty"`

	EdenCapacity int64 `json:"eden_capacity"`
	// EdenAtCollection is what the application allocated between two
	// young GCs (G1 starts one before the Eden capacity hsperfdata shows
	// is reached), which is what the young-GC prediction divides by;
	// EdenAtCollectionSource says how it was obtained:
	// "hsperfdata-cycle" (the per-cycle allocation the JVM publishes at
	// each young GC, sun.gc.tlab.alloc), "hsperfdata-occupancy" (Eden
	// seen just before each GC), or "capacity" (no young GC in the
	// window).
	EdenAtCollection       int64  `json:"eden_at_collection"`
	EdenAtCollectionSource string `json:"eden_at_collection_source"`
	SurvivorCapacity       int64  `json:"survivor_capacity"`
	OldCapacity            int64  `json:"old_capacity"`
	OldUsed                int64  `json:"old_used"`
	MaxHeap                int64  `json:"max_heap"`
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
	// Threads splits the profiled weight between request-serving threads
	// and the rest; nil when the profile has no thread frames.
	Threads *ThreadSplit `json:"threads,omitempty"`
	// Endpoints is the profiled weight by request handler, joined to the
	// request counts per endpoint when a mapping is known.
	Endpoints []EndpointAlloc `json:"endpoints,omitempty"`
	// Fixes rank where allocation can be cut, by bytes per request: the
	// innermost application frame of each stack (the code a developer
	// changes), logging grouped per framework, framework-only stacks by
	// their site.
	Fixes []AllocFix `json:"fixes"`
	// FrameworkBytes is what request threads allocated under a
	// request dispatcher but outside every handler (routing, message
	// conversion, serialisation): a per-request cost of every endpoint.
	FrameworkBytes int64 `json:"framework_bytes"`

	// TargetRPS and TargetGCIntervalNs are the user's planning inputs
	// (--target-rps, --target-gc-interval); 0 when not given.
	TargetRPS          float64 `json:"target_rps"`
	TargetGCIntervalNs int64   `json:"target_gc_interval_ns"`
	// RateIsSaturation marks a request rate that perfscope's own load
	// reached as fast as the service answered: a capacity, not the
	// production rate, so GC predictions are not made at it.
	RateIsSaturation bool `json:"rate_is_saturation,omitempty"`
}

// PerRequest returns the process-wide bytes per request and whether it is
// known.
func (e JVM) PerRequest() (float64, bool) {
	if e.BytesPerRequest == nil {
		return 0, false
	}
	return *e.BytesPerRequest, true
}

// RequestCount returns the request count and whether it is known.
func (e JVM) RequestCount() (int64, bool) {
	if e.Requests == nil {
		return 0, false
	}
	return *e.Requests, true
}

// AllocFix is one place to cut allocation.
type AllocFix struct {
	// Kind is "logging", "code" (an application frame) or "framework".
	Kind  string  `json:"kind"`
	Where string  `json:"where"`
	Bytes int64   `json:"bytes"`
	Share float64 `json:"share"`
	// BytesPerRequest is what removing it saves per request (nil without
	// a request count).
	BytesPerRequest *float64 `json:"bytes_per_request"`
	// Types are the largest allocated types under it.
	Types []string `json:"types,omitempty"`
}

// RequestCrossCheck is a second count of the window's requests.
type RequestCrossCheck struct {
	Source   string `json:"source"`
	Requests int64  `json:"requests"`
	// Difference is (this − the primary count) / the primary count.
	Difference float64 `json:"difference"`
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

// AllocSampling describes an allocation profile's samples.
type AllocSampling struct {
	// IntervalBytes is the mean gap between samples.
	IntervalBytes int64 `json:"interval_bytes"`
	Samples       int64 `json:"samples"`
	// ProfilerBytes is the total as async-profiler weighs samples
	// (max(object size, interval)), which under-counts objects of a size
	// near the interval; AllocBytesProfiler weighs each sample by its
	// object's sampling probability instead ("weighting": "unbiased").
	ProfilerBytes int64  `json:"profiler_bytes"`
	Weighting     string `json:"weighting"`
	// RelativeError is AllocBytesProfiler's sampling error, ± two
	// standard deviations over the total.
	RelativeError float64 `json:"relative_error"`
	// TruncatedStacks lost their root frames (deeper than the
	// profiler keeps), NoStack had none; TLABWeighted samples came from
	// TLAB-driven sampling (JDK 8-10) and keep async-profiler's weight.
	TruncatedStacks int64 `json:"truncated_stacks"`
	NoStack         int64 `json:"no_stack"`
	TLABWeighted    int64 `json:"tlab_weighted"`
	// SettleNs is how long the sampler ran before the window began
	// (the JVM cannot sample the TLAB a thread already had);
	// SettleSamples were taken then and are not counted.
	SettleNs      int64 `json:"settle_ns"`
	SettleSamples int64 `json:"settle_samples"`
	// StopSamples were taken after the window's requests were counted,
	// while the stop command reached the JVM, and are not counted.
	StopSamples int64 `json:"stop_samples"`
	// IntervalAuto: no interval was given, and it was chosen from
	// RateBefore, the allocation rate (bytes/s) hsperfdata showed before
	// the window, for about 2500 samples over it (±4 %); IntervalNote
	// says how the interval was chosen (or why the default was kept).
	IntervalAuto bool    `json:"interval_auto"`
	RateBefore   float64 `json:"rate_before,omitempty"`
	IntervalNote string  `json:"interval_note,omitempty"`
}

// ThreadSplit is the profiled weight of request-serving threads against
// everything else (schedulers, metrics, GC-log writers, async appenders).
type ThreadSplit struct {
	Request    ThreadGroupAlloc `json:"request"`
	Background ThreadGroupAlloc `json:"background"`
	// Pools are threads grouped by name with numbers folded
	// ("http-nio-8080-exec-#"), largest first.
	Pools []ThreadPoolAlloc `json:"pools"`
}

// ThreadGroupAlloc is one side of the split.
type ThreadGroupAlloc struct {
	Bytes int64   `json:"bytes"`
	Share float64 `json:"share"`
	// BytesPerRequest is nil without a request count;
	// BytesPerRequestError is its sampling error (± 2 standard
	// deviations), nil when not known.
	BytesPerRequest      *float64 `json:"bytes_per_request"`
	BytesPerRequestError *float64 `json:"bytes_per_request_error"`
	Threads              int      `json:"threads"`
	// Variance is the sampling variance of Bytes (bytes²).
	Variance float64 `json:"-"`
}

// ThreadPoolAlloc is one thread pool's weight.
type ThreadPoolAlloc struct {
	Pool    string  `json:"pool"`
	Request bool    `json:"request"`
	Threads int     `json:"threads"`
	Bytes   int64   `json:"bytes"`
	Share   float64 `json:"share"`
	// Why says what made it a request pool (a known pool name, the
	// --request-threads pattern, or stacks through a request dispatcher).
	Why string `json:"why,omitempty"`
}

// EndpointAlloc is what one request handler allocated, joined to its
// endpoint's request count when the handler → endpoint mapping is known.
type EndpointAlloc struct {
	// Endpoint is the URI template ("/api/orders/{id}") or folded path;
	// empty when the handler's endpoint is not known.
	Endpoint string `json:"endpoint,omitempty"`
	Method   string `json:"method,omitempty"`
	// Handler is the outermost application frame under the framework's
	// dispatcher ("com.example.OrderController.get").
	Handler      string `json:"handler,omitempty"`
	Bytes        int64  `json:"bytes"`
	LoggingBytes int64  `json:"logging_bytes"`
	// Share is of the whole profile.
	Share float64 `json:"share"`
	// Requests is nil when the endpoint's count is unknown.
	Requests *int64 `json:"requests"`
	// HandlerBytesPerRequest is the handler's own allocation per request
	// of its endpoint; BytesPerRequest adds the framework's per-request
	// share (FrameworkBytes over all requests). Nil when unknown.
	HandlerBytesPerRequest *float64 `json:"handler_bytes_per_request"`
	BytesPerRequest        *float64 `json:"bytes_per_request"`
	LoggingBytesPerRequest *float64 `json:"logging_bytes_per_request"`
	// BytesPerRequestError is BytesPerRequest's sampling error (± 2
	// standard deviations, the handler's and the framework share's),
	// nil when not known.
	BytesPerRequestError *float64 `json:"bytes_per_request_error"`
	// TopSites are the handler's largest allocating frames.
	TopSites []AllocSite `json:"top_sites,omitempty"`
}

// Float returns a pointer to v, for the optional figures above.
func Float(v float64) *float64 { return &v }

// Int returns a pointer to v.
func Int(v int64) *int64 { return &v }
