package offcpu

import (
	"fmt"
	"slices"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// A session split into windows: `perfscope load` keeps one probe attached
// across its concurrency levels and reads it at each level's edges
// (Mark), rather than attaching it again per level (each attach is a new
// epoch that loses the waits in flight, and costs a BPF load). Windows
// then builds one evidence per level from the differences.

// Mark is one reading of a session at a window's edge: the probe's maps
// and /proc's CPU time and threads.
type Mark struct {
	snap    probe.Snapshot
	stat    procfs.Stat
	statErr error
	tasks   map[int][]procfs.Task
}

// Mark reads the probe and /proc now; the probe stays attached. pids are
// the processes whose threads /proc is read for (those that never switch
// in a window are counted from there).
func (s *Session) Mark(pids []int) (Mark, error) {
	snap, err := s.p.Snapshot()
	if err != nil {
		return Mark{}, fmt.Errorf("read the offcpu probe: %w", err)
	}
	m := Mark{snap: snap, tasks: map[int][]procfs.Task{}}
	m.stat, m.statErr = s.o.Proc.Stat()
	for _, pid := range pids {
		if tasks, err := s.o.Proc.Tasks(pid); err == nil {
			m.tasks[pid] = tasks
		}
	}
	return m, nil
}

// Windows closes the probe, names the stacks and builds the evidence of
// each window between two consecutive marks, keeping the threads of pids
// (every process's when pids is nil). Each thread's time is cut at the
// marks; a wait by stack is counted whole in the window it ended in.
func (s *Session) Windows(marks []Mark, pids []int) []evidence.OffCPU {
	var closeWarning []string
	if err := s.Close(); err != nil {
		closeWarning = []string{"closing the probe: " + err.Error()}
	}
	var out []evidence.OffCPU
	for i := 1; i < len(marks); i++ {
		prev, cur := marks[i-1], marks[i]
		d := keepProcesses(Window(prev.snap, cur.snap), pids)
		nameAll(s.sym, d)
		in := s.in
		in.Warnings = slices.Clone(closeWarning)
		in.Snapshot = d
		in.Symbols = s.sym
		in.Duration = max(0, cur.snap.Mono-prev.snap.Mono)
		in.TasksStart, in.TasksEnd = prev.tasks, cur.tasks
		in.Busy, in.CPUs = nil, 0
		if prev.statErr == nil && cur.statErr == nil {
			in.Busy, in.CPUs = busy(cur.stat.Sub(prev.stat))
		}
		if in.CPUs == 0 {
			in.CPUs = len(d.RunqCPU)
		}
		in.Comms = map[int]string{}
		for pid, c := range s.in.Comms {
			in.Comms[pid] = c
		}
		for _, th := range d.Threads {
			if _, ok := in.Comms[th.PID]; !ok {
				if c, err := s.o.Proc.ReadString(fmt.Sprintf("/proc/%d/comm", th.PID)); err == nil {
					in.Comms[th.PID] = c
				}
			}
		}
		ev := Build(in)
		ev.Warnings = append(ev.Warnings, s.sym.Warnings()...)
		out = append(out, ev)
	}
	return out
}

// Window is what the probe counted between two snapshots of one epoch
// (prev taken first): cur.Sub(prev), with each thread's time in flight at
// prev (on CPU, runnable or blocked since before it) taken out — it
// belongs to the window before, and Build adds cur's in-flight time — and
// a newly seen thread's time before it was seen cut at prev.
func Window(prev, cur probe.Snapshot) probe.Snapshot {
	d := cur.Sub(prev)
	d.WindowStart = prev.Mono
	before := make(map[int]probe.Thread, len(prev.Threads))
	for _, t := range prev.Threads {
		before[t.TID] = t
	}
	for i := range d.Threads {
		t := &d.Threads[i]
		p, ok := before[t.TID]
		if !ok || p.PID != t.PID {
			t.Totals.Before = max(0, t.Totals.Before-max(0, prev.Mono-cur.WindowStart))
			continue
		}
		if !p.Current || !t.Current {
			continue
		}
		// As Build's threadTimes closes cur's in-flight time, for prev's.
		switch {
		case p.OnSince > 0 && prev.Mono > p.OnSince:
			t.Totals.OnCPU -= prev.Mono - p.OnSince
		case p.OffSince > 0 && prev.Mono > p.OffSince:
			off := prev.Mono - p.OffSince
			var runq time.Duration
			kind := probe.AfterWakeup
			if p.RunnableSince > 0 && prev.Mono > p.RunnableSince {
				runq = min(off, prev.Mono-p.RunnableSince)
			}
			if p.OffState == probe.Runnable {
				runq, kind = off, probe.AfterPreemption
			}
			t.Totals.Runnable[kind] -= runq
			if p.OffState < probe.StateCount {
				t.Totals.Blocked[p.OffState] -= off - runq
			}
		case p.RunnableSince > 0 && prev.Mono > p.RunnableSince:
			t.Totals.Runnable[probe.AfterWakeup] -= prev.Mono - p.RunnableSince
		}
		if p.OnSince == 0 && p.OffSince > 0 && prev.Mono > p.OffSince && t.Totals.Waits > 0 {
			cutCarriedWait(&d, p, prev.Mono-p.OffSince, cur.StackEvery)
		}
	}
	return d
}

// cutCarriedWait takes out of the window's waits by stack the part
// before the window of the wait thread p was in at its start, which ended
// inside it: the probe adds a wait to its stack's bucket whole when it
// ends. The bucket is the thread's with the wait's state and the largest
// time in the window: the wait is at least carried long. With stacks
// taken at 1 in N switches (N > 1) the wait may be in no bucket, and a
// wait shorter than the minimum block time is in none: both are left.
func cutCarriedWait(d *probe.Snapshot, p probe.Thread, carried time.Duration, stackEvery int) {
	if stackEvery > 1 || carried < d.MinBlock {
		return
	}
	best := -1
	for i, w := range d.Waits {
		if w.TID == p.TID && w.State == p.OffState && (best < 0 || w.Total > d.Waits[best].Total) {
			best = i
		}
	}
	if best < 0 {
		return
	}
	w := &d.Waits[best]
	runq := time.Duration(0)
	if p.RunnableSince > 0 && p.RunnableSince < p.OffSince+carried {
		runq = p.OffSince + carried - p.RunnableSince
	}
	if p.OffState == probe.Runnable {
		runq = carried
	}
	w.Total -= min(w.Total, carried)
	w.Runnable -= min(w.Runnable, runq)
}

// keepProcesses keeps the threads, waits and run-queue histograms of pids
// (all of s when pids is nil); per-CPU histograms stay whole: a CPU's
// queue is every process's.
func keepProcesses(s probe.Snapshot, pids []int) probe.Snapshot {
	if pids == nil {
		return s
	}
	keep := map[int]bool{}
	for _, p := range pids {
		keep[p] = true
	}
	var threads []probe.Thread
	for _, t := range s.Threads {
		if keep[t.PID] {
			threads = append(threads, t)
		}
	}
	var waits []probe.Wait
	for _, w := range s.Waits {
		if keep[w.PID] {
			waits = append(waits, w)
		}
	}
	procs := map[int][probe.RunqKinds]probe.Hist{}
	for pid, h := range s.RunqProcess {
		if keep[pid] {
			procs[pid] = h
		}
	}
	s.Threads, s.Waits, s.RunqProcess = threads, waits, procs
	return s
}
