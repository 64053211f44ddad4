package evidence

import "time"

// JVMPauses is what stopped a JVM's threads over a window, from its
// hsperfdata: GCs and their accumulated pause time, and safepoints with
// the time threads were stopped for them (GC pauses included).
type JVMPauses struct {
	PID int `json:"pid"`
	// Workload is what the JVM belongs to; absent when unread.
	Workload *Workload `json:"workload,omitempty"`
	YoungGCs int64     `json:"young_gcs"`
	OldGCs   int64     `json:"old_gcs"`
	// GCTimeNs is the young and old collectors' accumulated time.
	GCTimeNs int64 `json:"gc_time_ns"`
	// Safepoints and SafepointTimeNs are nil when the JVM does not
	// publish them (sun.rt.safepoints, sun.rt.safepointTime).
	Safepoints      *int64 `json:"safepoints"`
	SafepointTimeNs *int64 `json:"safepoint_time_ns"`
	// Intervals are the same per tick of a timeline.
	Intervals []JVMPauseInterval `json:"intervals,omitempty"`
}

// JVMPauseInterval is one tick of a JVM pause timeline.
type JVMPauseInterval struct {
	End             time.Time `json:"end"`
	YoungGCs        int64     `json:"young_gcs"`
	OldGCs          int64     `json:"old_gcs"`
	GCTimeNs        int64     `json:"gc_time_ns"`
	Safepoints      *int64    `json:"safepoints"`
	SafepointTimeNs *int64    `json:"safepoint_time_ns"`
}
