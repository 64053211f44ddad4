package measure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

// JVMPauseOptions configure the JVM pauses part.
type JVMPauseOptions struct {
	PID int
	// Timeline keeps the pauses of every tick of the window.
	Timeline bool
}

// JVMPauses is the part that reads a JVM's GC and safepoint counters from
// its hsperfdata at both ends of the window (and at every tick): a JVM's
// pauses on the same timeline as the kernel's view of the port it serves.
// It attaches nothing to the JVM and needs no probe.
type JVMPauses struct {
	opts      JVMPauseOptions
	fs        hsperf.FS
	path      string
	first     jvmPauseReading
	prev      jvmPauseReading
	last      jvmPauseReading
	intervals []evidence.JVMPauseInterval
	// workload is what the JVM belongs to, read at Open.
	workload *evidence.Workload
}

type jvmPauseReading struct {
	heap                  hsperf.Heap
	safepoints, stoppedNs *int64
}

// NewJVMPauses returns the JVM pauses part.
func NewJVMPauses(opts JVMPauseOptions) *JVMPauses { return &JVMPauses{opts: opts} }

// Open implements Part: it finds the JVM's hsperfdata (ErrBadInput when
// the pid is no JVM that publishes it).
func (p *JVMPauses) Open(src Sources) error {
	p.fs = src.JVMs
	p.workload = src.workload(p.opts.PID)
	proc, err := p.fs.Process(p.opts.PID)
	if err != nil {
		return BadInput("pid %d: %v", p.opts.PID, err)
	}
	if p.path, err = p.fs.Locate(proc); err != nil {
		if errors.Is(err, hsperf.ErrNotFound) {
			return BadInput("pid %d publishes no hsperfdata: is it a HotSpot JVM started without -XX:-UsePerfData? (%v)", p.opts.PID, err)
		}
		return err
	}
	return nil
}

// Probes implements Part: none.
func (p *JVMPauses) Probes() []probes.Probe { return nil }

// Begin implements Part.
func (p *JVMPauses) Begin(context.Context) error {
	r, err := p.read()
	p.first, p.prev, p.intervals = r, r, nil
	return err
}

// Tick implements Ticker.
func (p *JVMPauses) Tick(_ context.Context, now time.Time) error {
	if !p.opts.Timeline {
		return nil
	}
	r, err := p.read()
	if err != nil {
		return err
	}
	p.interval(r, now)
	return nil
}

// Tail implements Tailer.
func (p *JVMPauses) Tail(now time.Time) {
	if p.opts.Timeline {
		p.interval(p.last, now)
	}
}

func (p *JVMPauses) interval(r jvmPauseReading, now time.Time) {
	d := pauseDelta(p.prev, r)
	p.intervals = append(p.intervals, evidence.JVMPauseInterval{End: now, YoungGCs: d.YoungGCs, OldGCs: d.OldGCs,
		GCTimeNs: d.GCTimeNs, Safepoints: d.Safepoints, SafepointTimeNs: d.SafepointTimeNs})
	p.prev = r
}

// End implements Part.
func (p *JVMPauses) End(context.Context) error {
	var err error
	p.last, err = p.read()
	return err
}

// Evidence is the window's pauses.
func (p *JVMPauses) Evidence() evidence.JVMPauses {
	ev := pauseDelta(p.first, p.last)
	ev.PID, ev.Intervals, ev.Workload = p.opts.PID, p.intervals, p.workload
	return ev
}

func (p *JVMPauses) read() (jvmPauseReading, error) {
	s, err := p.fs.Snapshot(p.path)
	if err != nil {
		return jvmPauseReading{}, fmt.Errorf("the JVM's hsperfdata went away (did pid %d exit?): %w", p.opts.PID, err)
	}
	r := jvmPauseReading{heap: s.Heap()}
	if n, ok := s.Long("sun.rt.safepoints"); ok {
		r.safepoints = &n
	}
	if ticks, ok := s.Long("sun.rt.safepointTime"); ok {
		ns := int64(s.TicksToDuration(ticks))
		r.stoppedNs = &ns
	}
	return r, nil
}

func pauseDelta(a, b jvmPauseReading) evidence.JVMPauses {
	d := evidence.JVMPauses{
		YoungGCs: b.heap.YoungGCs - a.heap.YoungGCs,
		OldGCs:   b.heap.OldGCs - a.heap.OldGCs,
		GCTimeNs: int64(b.heap.YoungGCTime + b.heap.OldGCTime - a.heap.YoungGCTime - a.heap.OldGCTime),
	}
	if a.safepoints != nil && b.safepoints != nil {
		n := *b.safepoints - *a.safepoints
		d.Safepoints = &n
	}
	if a.stoppedNs != nil && b.stoppedNs != nil {
		ns := *b.stoppedNs - *a.stoppedNs
		d.SafepointTimeNs = &ns
	}
	return d
}

func init() {
	registerBuilder(HSPerfSpec.Name, func(b Build, u PartUse, ps *Parts) {
		ps.Pauses = NewJVMPauses(JVMPauseOptions{PID: optInt(u, "pid"), Timeline: b.timeline()})
	})
}
