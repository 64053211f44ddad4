package offcpu

import (
	"testing"
	"time"

	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// A window between two snapshots holds each thread's time inside it only:
// a wait in flight at the first snapshot counts from there, a thread on
// CPU across the whole window is on CPU the window's length, and a thread
// first seen inside it is unknown only from the window's start.
func TestWindowCutsInFlightTimeAtItsStart(t *testing.T) {
	ms := time.Millisecond
	start, at1, at2 := 1000*ms, 2000*ms, 2100*ms // epoch start, the two snapshots
	blocked := func(d time.Duration) (b [probe.StateCount]time.Duration) { b[probe.Sleeping] = d; return }
	prev := probe.Snapshot{Mono: at1, WindowStart: start, Threads: []probe.Thread{
		// Asleep since 30 ms before the first snapshot.
		{TID: 101, PID: 100, Current: true, OffSince: at1 - 30*ms, OffState: probe.Sleeping,
			Totals: probe.ThreadTotals{OnCPU: 40 * ms, Blocked: blocked(100 * ms), Waits: 3}},
		// On CPU since 5 ms before it, and still at the second.
		{TID: 102, PID: 100, Current: true, OnSince: at1 - 5*ms, Totals: probe.ThreadTotals{OnCPU: 300 * ms, Waits: 1}},
		// Another process's thread.
		{TID: 201, PID: 200, Current: true, OnSince: at1 - ms},
	}}
	cur := probe.Snapshot{Mono: at2, WindowStart: start, Threads: []probe.Thread{
		// Woke 20 ms into the window, ran 10 ms, asleep again since.
		{TID: 101, PID: 100, Current: true, OffSince: at1 + 30*ms, OffState: probe.Sleeping,
			Totals: probe.ThreadTotals{OnCPU: 50 * ms, Blocked: blocked(150 * ms), Waits: 4}},
		{TID: 102, PID: 100, Current: true, OnSince: at1 - 5*ms, Totals: probe.ThreadTotals{OnCPU: 300 * ms, Waits: 1}},
		// First seen 40 ms into the window: off CPU since the epoch's start.
		{TID: 103, PID: 100, Current: true, OnSince: at1 + 40*ms, Totals: probe.ThreadTotals{Before: at1 + 40*ms - start}},
		{TID: 201, PID: 200, Current: true, OnSince: at1 - ms},
	}}
	// Thread 101's wait that spans the first snapshot is in its stack's
	// bucket whole at the second (50 ms, one more wait); 30 ms of it
	// were before the window.
	prev.Waits = []probe.Wait{{PID: 100, TID: 101, State: probe.Sleeping, Count: 3, Total: 100 * ms}}
	cur.Waits = []probe.Wait{{PID: 100, TID: 101, State: probe.Sleeping, Count: 4, Total: 150 * ms}}
	prev.MinBlock, cur.MinBlock = 10*time.Microsecond, 10*time.Microsecond
	d := keepProcesses(Window(prev, cur), []int{100})
	if len(d.Waits) != 1 || d.Waits[0].Total != 20*ms || d.Waits[0].Count != 1 {
		t.Errorf("waits %+v: want the spanning wait's 20 ms inside the window", d.Waits)
	}
	if len(d.Threads) != 3 {
		t.Fatalf("threads %+v: want the three of pid 100", d.Threads)
	}
	window := at2 - at1
	for _, th := range threadTimes(Input{Snapshot: d}) {
		if th.seen() != window {
			t.Errorf("thread %d: seen %v in a window of %v (on %v runnable %v blocked %v unknown %v)",
				th.tid, th.seen(), window, th.on, th.runnable, th.blockedTotal(), th.unknown)
		}
		switch th.tid {
		case 101:
			if th.on != 10*ms || th.blocked[probe.Sleeping] != 90*ms {
				t.Errorf("thread 101: on %v asleep %v, want 10ms and 90ms", th.on, th.blocked[probe.Sleeping])
			}
		case 102:
			if th.on != window {
				t.Errorf("thread 102: on %v, want the whole window", th.on)
			}
		case 103:
			if th.unknown != 40*ms || th.on != 60*ms {
				t.Errorf("thread 103: unknown %v on %v, want 40ms and 60ms", th.unknown, th.on)
			}
		}
	}
}
