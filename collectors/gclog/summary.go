package gclog

import "time"

// Summary is what a GC log says, folded in constant memory: gclog's own
// result, which the command turns into evidence for the rules. Durations
// are time.Duration, sizes bytes (-1 or 0 when the log does not say, as
// each field documents).
type Summary struct {
	Files []string
	Parse Stats

	// Collector as the records show it (or the log declares it).
	Collector string
	Window    Window

	// Pauses per kind, in Kind order, kinds with no pause left out; All
	// aggregates every stop-the-world pause.
	Pauses []PauseStats
	All    PauseStats
	// PauseGoal is the goal OverGoal counts against.
	PauseGoal time.Duration
	// Escalated counts young collections that turned into full ones inside
	// the same stop (each is one pause of kind full).
	Escalated int

	YoungGCs      int
	YoungInterval time.Duration

	Allocation Allocation
	Sizes      Sizes

	FullGCCauses []CauseStats
	Failures     Failures

	Safepoints SafepointStats
	CPU        CPUStats
	Cycles     CycleStats
	// Phases are the logged per-phase times of pauses (G1's "Evacuate
	// Collection Set", a full GC's "Phase 1: Mark live objects"), most
	// time first.
	Phases  []PhaseTime
	RefProc RefProcStats
	LiveSet LiveSet
	Tenure  Tenuring

	// Concurrent phases ran alongside the application.
	Concurrent PhaseStats
	// Series is the heap and pause time series for charts, downsampled to
	// at most MaxPoints points (each keeps the longest pause it absorbed).
	Series []Point
}

// Window is the time the log covers.
type Window struct {
	// Seconds from the first stamped line to the end of the last event,
	// summed over the segments (JVM restarts do not add their gaps).
	Seconds float64
	// Segments is 1 plus the JVM restarts found (uptime going back after
	// a JVM's start-up lines).
	Segments int
	// Jumps are the times uptime went back with no JVM start-up line
	// before it: rotated files read out of order, or lines lost.
	Jumps     []TimeJump
	JumpCount int
}

// TimeJump is one place where uptime went back without a JVM restart.
type TimeJump struct {
	File     string  `json:"file,omitempty"`
	Line     int64   `json:"line"`
	FromSecs float64 `json:"from_seconds"`
	ToSecs   float64 `json:"to_seconds"`
}

// PauseStats summarises the pauses of one kind. Percentiles are exact up
// to a few thousand pauses and within 1% beyond.
type PauseStats struct {
	Kind             Kind
	Count            int
	Total, Mean, Max time.Duration
	P50, P95, P99    time.Duration
	OverGoal         int
}

// Allocation is the allocation and promotion the log shows.
type Allocation struct {
	// Rate is bytes per second: occupancy before GC n+1 minus after GC n,
	// summed, over the time between them, from the finest space both
	// logged: Source is "eden", "young" or "heap".
	Rate      float64
	Source    string
	Allocated float64
	// Promotion by young collections, when computable.
	PromotionKnown bool
	Promoted       float64
	PromotionRate  float64
}

// Sizes are the generation sizes the log shows; zero when not logged.
type Sizes struct {
	Eden, Heap, Region float64
	// LiveAfterFull is the largest heap occupancy right after a full GC.
	LiveAfterFull float64
	// Metaspace is the largest Metaspace (or PermGen) occupancy after a
	// collection; MetaspaceFirst and MetaspaceLast the first and last.
	Metaspace, MetaspaceFirst, MetaspaceLast float64
}

// CauseStats counts full collections with one cause.
type CauseStats struct {
	Cause string
	Count int
	Total time.Duration
}

// Failures counts the events that signal a heap in trouble.
type Failures struct {
	ConcurrentModeFailures int
	PromotionFailures      int
	ToSpaceExhausted       int
	HumongousGCs           int
	HumongousRegionsMax    int
	AllocationStalls       int
	AllocationStallTime    time.Duration
}

// SafepointStats is what the JVM logged about stopping its threads
// (-XX:+PrintGCApplicationStoppedTime, -XX:+PrintSafepointStatistics,
// -Xlog:safepoint): all stops, GC or not.
type SafepointStats struct {
	Count int
	// Stopped is the total time application threads were stopped; Max
	// the longest stop.
	Stopped, Max time.Duration
	// TimeToSafepoint ("Stopping threads took", "Reaching safepoint",
	// the statistics' "sync") over TTSPCount stops that logged it.
	TTSPCount int
	TTSP      time.Duration
	TTSPMax   time.Duration
	// TTSPMaxAt is the uptime (or seconds into the log) of the longest
	// one, TTSPMaxOp its operation when named.
	TTSPMaxAt float64
	TTSPMaxOp string
	// Named: stops whose operation the log names; GCStopped is the time
	// of those that are collections. NonGC is the stopped time that GC
	// pauses do not explain: the named non-GC operations' time, or (when
	// the log names none) stopped time minus GC pause time.
	Named     int
	GCStopped time.Duration
	NonGC     time.Duration
	NonGCMax  time.Duration
	// Operations are the named operations, most stopped time first (at
	// most 16).
	Operations []SafepointOp
}

// SafepointOp is one VM operation's stops.
type SafepointOp struct {
	Name    string
	GC      bool
	Count   int
	Stopped time.Duration
	Max     time.Duration
	TTSPMax time.Duration
}

// CPUStats is what "[Times: user=... sys=..., real=...]" / gc,cpu say
// about the pauses that logged them.
type CPUStats struct {
	Pauses          int
	User, Sys, Real time.Duration
	// SysHeavy pauses (at least 10 ms) spent more CPU in the kernel than
	// in the JVM: page faults, swapping, transparent huge pages.
	SysHeavy     int
	SysHeavyReal time.Duration
	// Starved pauses (at least 10 ms) took longer in wall time than the
	// GC threads used CPU: they waited for a CPU or for I/O.
	Starved     int
	StarvedReal time.Duration
	// Worst is the sys-heavy or starved pause with the longest real time.
	Worst PauseCPU
}

// PauseCPU is one pause's CPU times; At is its uptime.
type PauseCPU struct {
	At              float64
	Kind            Kind
	User, Sys, Real time.Duration
}

// CycleStats counts concurrent collection cycles (G1 concurrent marking,
// CMS, ZGC, Shenandoah): from the pause that starts one to the phase that
// ends it.
type CycleStats struct {
	Count           int
	Total, Max      time.Duration
	Mean            time.Duration
	Unfinished      int
	ToSpaceMax      int
	HumongousMax    int
	LongestAt       float64
	ConcurrentTotal time.Duration
}

// PhaseTime is one logged phase of pauses.
type PhaseTime struct {
	Name       string
	Count      int
	Total, Max time.Duration
}

// RefProcStats is reference processing inside pauses.
type RefProcStats struct {
	Pauses     int
	Total, Max time.Duration
	// PauseTotal is the total time of the pauses that logged it.
	PauseTotal time.Duration
}

// LiveSet is the heap occupancy after collection over time: its floor
// rising from one full GC to the next is the sign of a leak.
type LiveSet struct {
	// Basis is "full GCs" (heap after each full GC) or "collections"
	// (the lowest heap after any collection per stretch of the log).
	Basis   string
	Samples []FloorSample
	// SlopeBytesPerHour and R2 are the least-squares fit of the samples.
	SlopeBytesPerHour float64
	R2                float64
	// Verdict: "rising", "flat" or "unknown" (too few samples).
	Verdict string
}

// FloorSample is the heap floor at one time (seconds).
type FloorSample struct {
	T     float64 `json:"t"`
	Bytes int64   `json:"bytes"`
}

// Tenuring is the -XX:+PrintTenuringDistribution (gc+age) view.
type Tenuring struct {
	ThresholdMin, ThresholdMax int
	// Tables counts age tables; Overflows those whose total exceeded the
	// desired survivor size (survivors overflowed into the old
	// generation).
	Tables, Overflows int
	// AgeBytes is the mean bytes at each age 1..len over the tables.
	AgeBytes []float64
}

// PhaseStats counts events and their total duration.
type PhaseStats struct {
	Count   int   `json:"count"`
	TotalNs int64 `json:"total_ns"`
}

// Point is one sample of the time series: seconds since JVM start (or since
// the first date stamp), heap before/after/capacity in bytes (-1 unknown),
// Metaspace after (-1 unknown) and the pause in ns (0 for concurrent
// events).
type Point struct {
	T          float64 `json:"t"`
	HeapBefore int64   `json:"heap_before"`
	HeapAfter  int64   `json:"heap_after"`
	HeapCap    int64   `json:"heap_capacity"`
	MetaAfter  int64   `json:"metaspace_after"`
	PauseNs    int64   `json:"pause_ns"`
	Kind       Kind    `json:"kind"`
}
