// Package gclog reads HotSpot garbage-collection logs — JDK 6–8
// -XX:+PrintGCDetails and JDK 9+ unified logging (-Xlog:gc*) for Serial,
// Parallel, CMS, G1, ZGC and Shenandoah — as a stream of events, and
// analyses them in constant memory: pause statistics, throughput,
// allocation and promotion rates, full-GC causes and the signals the GC
// rules in diagnose act on.
//
// The parser never holds more than one event's text: a 10 GB log costs the
// same memory as a 10 KB one. Lines it cannot place are counted, never
// fatal.
package gclog

import (
	"math"
	"time"
)

// Kind is what a GC event was.
type Kind uint8

const (
	// KindYoung collects the young generation only (G1 "young", ParNew,
	// PSYoungGen, DefNew; G1's concurrent-start pauses too).
	KindYoung Kind = iota
	// KindMixed is a G1 pause that also evacuates old regions.
	KindMixed
	// KindFull collects the whole heap while the application is stopped
	// (including CMS concurrent mode failures and Shenandoah degenerated
	// cycles).
	KindFull
	// KindInitialMark starts a concurrent marking cycle (CMS initial mark,
	// Shenandoah Init Mark, ZGC Mark Start).
	KindInitialMark
	// KindRemark ends concurrent marking (CMS/G1 remark, Shenandoah Final
	// Mark, ZGC Mark End).
	KindRemark
	// KindCleanup is G1's cleanup pause.
	KindCleanup
	// KindPause is any other stop-the-world phase of a concurrent collector
	// (ZGC Relocate Start, Shenandoah Update Refs pauses).
	KindPause
	// KindConcurrent is a phase that runs alongside the application; its
	// Duration is wall time, not a pause.
	KindConcurrent
	numKinds
)

var kindNames = [numKinds]string{"young", "mixed", "full", "initial-mark", "remark", "cleanup", "pause", "concurrent"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// MarshalText writes kinds as their names in JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Space is one memory area's occupancy before and after an event and its
// capacity after, in bytes; -1 when the log did not say.
type Space struct {
	Before, After, Capacity int64
}

// Known reports whether before and after were logged.
func (s Space) Known() bool { return s.Before >= 0 && s.After >= 0 }

var unknownSpace = Space{-1, -1, -1}

// Event is one GC event. The parser reuses the Event it passes to the
// callback: copy what must outlive the call.
type Event struct {
	// Uptime is seconds since JVM start (NaN when the log has no uptime
	// stamps); Wall is the date stamp (zero when absent).
	Uptime float64
	Wall   time.Time
	// File and Line say where the event's record starts (for reports of
	// stamps going back).
	File string
	Line int64
	// GCID is the log's GC id (-1 when not logged).
	GCID int64
	Kind Kind
	// Name is the log's name for the event ("Pause Young", "ParNew",
	// "CMS-concurrent-mark", "Concurrent Mark Cycle").
	Name string
	// Cause is why it ran ("Allocation Failure", "System.gc()",
	// "G1 Humongous Allocation"); empty when not logged.
	Cause string
	// Pause is the stop-the-world time (zero for concurrent phases);
	// Duration the wall time of a concurrent phase.
	Pause    time.Duration
	Duration time.Duration

	Heap, Young, Eden, Survivor, Old, Meta Space
	// HumongousRegions before/after (G1 unified gc+heap), -1 when unknown.
	HumongousBefore, HumongousAfter int64

	InitialMark           bool
	ToSpaceExhausted      bool
	ConcurrentModeFailure bool
	PromotionFailed       bool
	// Escalated marks a young collection that turned into a full one
	// inside the same stop (ParNew "promotion failed" → CMS, a Serial or
	// CMS young GC that logs a nested "Pause Full"): one pause of kind
	// full, YoungPart of it spent in the failed young collection (zero
	// when not logged).
	Escalated bool
	YoungPart time.Duration
	// Scavenge marks a pause that also collected the young generation
	// (CMS's scavenge before remark, logged inside the remark): YoungPart
	// of it, and the young sizes are that collection's.
	Scavenge bool
	// CycleSummary marks ZGC's "Garbage Collection (...) A->B" line: a
	// whole cycle's heap change, not a phase.
	CycleSummary bool

	// User, Sys and Real are the CPU times the JVM logged for the pause
	// ("[Times: user=... sys=..., real=... secs]", unified gc,cpu
	// "User=...s Sys=...s Real=...s"); -1 when not logged.
	User, Sys, Real time.Duration
	// Unified: the event came from a JDK 9+ unified log (or JDK 8
	// Shenandoah's lines of the same shape), whose GC ids tie a concurrent
	// cycle's pauses and phases together.
	Unified bool

	// RefProc is the reference-processing time inside the pause
	// (-XX:+PrintReferenceGC, unified gc,phases,ref); zero when not logged.
	RefProc time.Duration
}

func (e *Event) reset() {
	*e = Event{
		Uptime: math.NaN(), GCID: -1,
		Heap: unknownSpace, Young: unknownSpace, Eden: unknownSpace,
		Survivor: unknownSpace, Old: unknownSpace, Meta: unknownSpace,
		HumongousBefore: -1, HumongousAfter: -1,
		User: -1, Sys: -1, Real: -1,
	}
}

// IsPause reports whether the event stopped the application.
func (e *Event) IsPause() bool { return e.Kind != KindConcurrent }
