package hsperf

import (
	"strings"
	"time"
)

// Heap is the GC view of a snapshot: the counters jstat -gc prints. Absent
// counters stay zero and are listed in Missing, so a caller can tell "no
// old-generation GCs" from "this collector does not publish them".
type Heap struct {
	Policy string
	// Young collector (collector.0) and the full/old collector
	// (collector.1): invocations and accumulated pause time.
	YoungGCs, OldGCs       int64
	YoungGCTime, OldGCTime time.Duration
	YoungCollector         string
	OldCollector           string
	EdenCapacity, EdenUsed int64
	Survivor0Capacity      int64
	Survivor0Used          int64
	Survivor1Capacity      int64
	Survivor1Used          int64
	OldCapacity, OldUsed   int64
	OldMaxCapacity         int64
	// CycleAllocated is what all threads allocated between the last two
	// young GCs (sun.gc.tlab.alloc, in heap words, published at every GC:
	// per-thread allocated bytes, TLAB or not), in bytes; HasCycle says
	// whether the JVM publishes it (not with -XX:-UseTLAB).
	CycleAllocated int64
	HasCycle       bool
	// Cause is the GC in progress ("No GC" between collections), LastCause
	// the one before.
	Cause, LastCause string
	// VMStarted is when the JVM was created (sun.rt.createVmBeginTime).
	VMStarted time.Time
	// Clock is the JVM's own clock when it last sampled its counters
	// (sun.os.hrt.ticks, every 50 ms; 0 from JDK 25, which no longer
	// publishes it: the time since VMStarted stands in), and YoungGCEnded
	// when its last young GC ended (sun.gc.collector.0.lastExitTime; 0
	// before the first), both from the JVM's start: Eden filled since.
	Clock, YoungGCEnded time.Duration
	// InitDone says whether the VM finished initialising
	// (sun.rt.vmInitDoneTime is set): attaching earlier can crash it.
	InitDone bool
	// Attachable is the first flag of sun.rt.jvmCapabilities; a JVM run
	// with -XX:+DisableAttachMechanism clears it.
	Attachable bool
	Missing    []string
}

// heapWordSize is HotSpot's HeapWord on the 64-bit JVMs perfscope attaches
// to (compressed oops shrink references, not heap words).
const heapWordSize = 8

// Heap extracts the GC counters.
func (s *Snapshot) Heap() Heap {
	var h Heap
	long := func(name string, dst *int64) {
		v, ok := s.Long(name)
		if !ok {
			h.Missing = append(h.Missing, name)
		}
		*dst = v
	}
	var yt, ot, created, initDone int64
	long("sun.gc.collector.0.invocations", &h.YoungGCs)
	long("sun.gc.collector.0.time", &yt)
	long("sun.gc.collector.1.invocations", &h.OldGCs)
	long("sun.gc.collector.1.time", &ot)
	long("sun.gc.generation.0.space.0.capacity", &h.EdenCapacity)
	long("sun.gc.generation.0.space.0.used", &h.EdenUsed)
	long("sun.gc.generation.0.space.1.capacity", &h.Survivor0Capacity)
	long("sun.gc.generation.0.space.1.used", &h.Survivor0Used)
	long("sun.gc.generation.0.space.2.capacity", &h.Survivor1Capacity)
	long("sun.gc.generation.0.space.2.used", &h.Survivor1Used)
	long("sun.gc.generation.1.space.0.capacity", &h.OldCapacity)
	long("sun.gc.generation.1.space.0.used", &h.OldUsed)
	long("sun.gc.generation.1.space.0.maxCapacity", &h.OldMaxCapacity)
	long("sun.rt.createVmBeginTime", &created)
	long("sun.rt.vmInitDoneTime", &initDone)
	if words, ok := s.Long("sun.gc.tlab.alloc"); ok {
		h.CycleAllocated, h.HasCycle = words*heapWordSize, true
	}
	if v, ok := s.Long("sun.os.hrt.ticks"); ok {
		h.Clock = s.TicksToDuration(v)
	}
	if v, ok := s.Long("sun.gc.collector.0.lastExitTime"); ok {
		h.YoungGCEnded = s.TicksToDuration(v)
	}
	h.YoungGCTime = s.TicksToDuration(yt)
	h.OldGCTime = s.TicksToDuration(ot)
	h.VMStarted = time.UnixMilli(created)
	h.InitDone = initDone != 0
	h.Policy, _ = s.String("sun.gc.policy.name")
	h.YoungCollector, _ = s.String("sun.gc.collector.0.name")
	h.OldCollector, _ = s.String("sun.gc.collector.1.name")
	h.Cause, _ = s.String("sun.gc.cause")
	h.LastCause, _ = s.String("sun.gc.lastCause")
	caps, _ := s.String("sun.rt.jvmCapabilities")
	h.Attachable = strings.HasPrefix(caps, "1")
	return h
}

// SurvivorUsed is both survivor spaces' occupancy.
func (h Heap) SurvivorUsed() int64 { return h.Survivor0Used + h.Survivor1Used }
