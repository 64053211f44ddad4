package gclog

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// --- safepoints ---

// spAgg aggregates the safepoints of one source.
type spAgg struct {
	SafepointStats
	ops map[string]*SafepointOp
}

// isGCOperation tells a collection's VM operation
// ("G1CollectForAllocation", "ParallelGCFailedAllocation", "ZMarkStart",
// "CMS_Final_Remark", "ShenandoahInitMark") from the others (bias
// revocation, class redefinition, thread dumps, "Cleanup").
func isGCOperation(name string) bool {
	if strings.Contains(name, "HeapInspection") || strings.Contains(name, "HeapDumper") {
		return false // jmap/jcmd, not the collector
	}
	for _, w := range []string{"GC", "Collect", "G1", "CMS", "Shenandoah", "ZMark", "ZRelocate", "ZVerify", "Z_", "CGC_"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func (a *Analyzer) safepoint(sp *Safepoint) {
	agg := &a.safepoints[sp.Source]
	s := &agg.SafepointStats
	s.Count++
	s.Stopped += sp.Stopped
	s.Max = max(s.Max, sp.Stopped)
	t, _ := a.clock.time(sp.Uptime, sp.Wall)
	if sp.TTSP >= 0 {
		s.TTSPCount++
		s.TTSP += sp.TTSP
		if sp.TTSP > s.TTSPMax {
			s.TTSPMax, s.TTSPMaxAt, s.TTSPMaxOp = sp.TTSP, t, sp.Name
		}
	}
	var gc bool
	switch {
	case sp.Name != "":
		s.Named++
		gc = isGCOperation(sp.Name)
		if agg.ops == nil {
			agg.ops = map[string]*SafepointOp{}
		}
		op := agg.ops[sp.Name]
		if op == nil && len(agg.ops) < 64 {
			op = &SafepointOp{Name: sp.Name, GC: gc}
			agg.ops[sp.Name] = op
		}
		if op != nil {
			op.Count++
			op.Stopped += sp.Stopped
			op.Max = max(op.Max, sp.Stopped)
			op.TTSPMax = max(op.TTSPMax, sp.TTSP)
		}
	case a.all.count > 0:
		// Unnamed: the stop that follows a logged collection is that
		// collection's safepoint.
		gc = a.gcSinceStop
	default:
		// No collection logged at all: nothing to tell the stops apart by.
		a.gcSinceStop = false
		return
	}
	a.gcSinceStop = false
	if gc {
		s.GCStopped += sp.Stopped
	} else {
		s.NonGC += sp.Stopped
		s.NonGCMax = max(s.NonGCMax, sp.Stopped)
	}
}

// safepointStats picks the source that counts stops: the stopped-time
// lines, else JDK 17's safepoint lines, else the statistics table; a log
// with several keeps the best time-to-safepoint it has.
func (a *Analyzer) safepointStats() SafepointStats {
	var best *spAgg
	for i := range a.safepoints {
		if a.safepoints[i].Count > 0 {
			best = &a.safepoints[i]
			break
		}
	}
	if best == nil {
		return SafepointStats{}
	}
	s := best.SafepointStats
	for i := range a.safepoints {
		o := &a.safepoints[i]
		if o == best || o.Count == 0 {
			continue
		}
		if s.TTSPCount == 0 && o.TTSPCount > 0 {
			s.TTSPCount, s.TTSP, s.TTSPMax, s.TTSPMaxAt, s.TTSPMaxOp = o.TTSPCount, o.TTSP, o.TTSPMax, o.TTSPMaxAt, o.TTSPMaxOp
		}
		if len(best.ops) == 0 && len(o.ops) > 0 {
			best = &spAgg{SafepointStats: best.SafepointStats, ops: o.ops}
		}
	}
	for _, op := range best.ops {
		s.Operations = append(s.Operations, *op)
	}
	slices.SortFunc(s.Operations, func(x, y SafepointOp) int {
		return cmp.Or(cmp.Compare(y.Stopped, x.Stopped), strings.Compare(x.Name, y.Name))
	})
	if len(s.Operations) > 16 {
		s.Operations = s.Operations[:16]
	}
	return s
}

// --- concurrent cycles ---

// cycles finds concurrent collection cycles. Unified logs give each cycle
// a GC id shared by its pauses and concurrent phases: a cycle is an id
// with a concurrent phase, from its first event to its last. JDK 6–8 logs
// have no ids: a cycle runs from the pause that starts marking (CMS
// initial mark, G1 initial-mark young pause, Shenandoah Init Mark) to the
// phase that ends it (CMS-concurrent-reset, G1 concurrent-cleanup-end).
type cycles struct {
	spans map[int64]cycleSpan
	// order holds the ids in spans, oldest first (from head): when too
	// many are open the oldest is over.
	order []int64
	head  int

	open                bool
	openStart, openLast float64

	count, unfinished int
	total, maxDur     time.Duration
	longestAt         float64
	concurrent        time.Duration
	// toSpace and humongous count those events since the last cycle
	// began; the maxima over cycles are reported.
	toSpace, humongous       int
	toSpaceMax, humongousMax int
}

type cycleSpan struct {
	start, end float64
	concurrent bool
}

// maxSpans bounds the ids kept open: G1 runs many young pauses (own ids)
// during one concurrent cycle.
const maxSpans = 512

var cycleEnds = []string{"CMS-concurrent-reset", "GC concurrent-cleanup-end", "GC concurrent-mark-abort", "Concurrent cleanup", "Concurrent reset"}

func (c *cycles) add(e *Event, t float64) {
	end := t + e.Pause.Seconds() + e.Duration.Seconds()
	if e.Kind == KindConcurrent {
		c.concurrent += e.Duration
	}
	if e.Unified && e.GCID >= 0 {
		sp, ok := c.spans[e.GCID]
		if !ok {
			if len(c.spans) >= maxSpans {
				c.finishOldest()
			}
			sp = cycleSpan{start: t, end: end}
			c.order = append(c.order, e.GCID)
		}
		sp.start, sp.end = min(sp.start, t), max(sp.end, end)
		if e.Kind == KindConcurrent && !sp.concurrent {
			sp.concurrent = true
			c.begin()
		}
		c.spans[e.GCID] = sp
		return
	}
	starts := e.Kind == KindInitialMark || e.Kind == KindYoung && e.InitialMark
	switch {
	case starts:
		if c.open {
			c.unfinished++
			c.record(c.openLast - c.openStart)
		}
		c.begin()
		c.open, c.openStart, c.openLast = true, t, end
	case c.open && (e.Kind == KindConcurrent || e.Kind == KindRemark || e.Kind == KindCleanup || e.Kind == KindPause):
		c.openLast = max(c.openLast, end)
		for _, n := range cycleEnds {
			if e.Kind == KindConcurrent && strings.HasPrefix(e.Name, n) {
				c.open = false
				c.record(c.openLast - c.openStart)
				break
			}
		}
	case c.open && e.Kind == KindFull && e.ConcurrentModeFailure:
		// CMS gave up on the cycle.
		c.open = false
		c.unfinished++
		c.record(end - c.openStart)
	}
}

// begin starts counting what happens during a new cycle.
func (c *cycles) begin() {
	c.toSpaceMax = max(c.toSpaceMax, c.toSpace)
	c.humongousMax = max(c.humongousMax, c.humongous)
	c.toSpace, c.humongous = 0, 0
}

func (c *cycles) record(secs float64) {
	if secs < 0 {
		return
	}
	d := time.Duration(secs * 1e9)
	c.count++
	c.total += d
	if d > c.maxDur {
		c.maxDur = d
	}
}

func (c *cycles) finish(s cycleSpan) {
	if s.concurrent {
		if s.end-s.start >= c.maxDur.Seconds() {
			c.longestAt = s.start
		}
		c.record(s.end - s.start)
	}
}

func (c *cycles) finishOldest() {
	for c.head < len(c.order) {
		id := c.order[c.head]
		c.head++
		if s, ok := c.spans[id]; ok {
			c.finish(s)
			delete(c.spans, id)
			break
		}
	}
	if c.head > maxSpans {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

// restart finishes what a JVM that stopped left open.
func (c *cycles) restart() {
	for _, s := range c.spans {
		c.finish(s)
	}
	clear(c.spans)
	c.order, c.head = c.order[:0], 0
	if c.open {
		c.open = false
		c.unfinished++
		c.record(c.openLast - c.openStart)
	}
}

func (c *cycles) stats() CycleStats {
	cp := *c
	for _, s := range c.spans {
		cp.finish(s)
	}
	if cp.open {
		cp.unfinished++
		cp.record(cp.openLast - cp.openStart)
	}
	cp.begin()
	s := CycleStats{Count: cp.count, Total: cp.total, Max: cp.maxDur, Unfinished: cp.unfinished,
		ToSpaceMax: cp.toSpaceMax, HumongousMax: cp.humongousMax, LongestAt: cp.longestAt, ConcurrentTotal: cp.concurrent}
	if cp.count > 0 {
		s.Mean = cp.total / time.Duration(cp.count)
	}
	return s
}

// --- live set ---

const maxFloors = 256

// minLiveSetSpan is the shortest stretch (seconds) a live-set trend is
// judged over.
const minLiveSetSpan = 600

// lowerFloor keeps the lower of two neighbouring floors.
func lowerFloor(into *FloorSample, p FloorSample) {
	if p.Bytes < into.Bytes {
		*into = p
	}
}

// liveSet fits a line through the heap floor: after each full GC when
// there are at least three, else the lowest occupancy after any
// collection in each tenth of the log.
func (a *Analyzer) liveSet(window float64) LiveSet {
	ls := LiveSet{Basis: "full GCs", Samples: a.fulls.s, Verdict: "unknown"}
	if len(ls.Samples) < 3 {
		ls.Basis = "collections"
		ls.Samples = bucketMinima(a.floors.s, 10)
	}
	if ls.Samples == nil {
		ls.Samples = []FloorSample{}
	}
	if len(ls.Samples) < 3 || window <= 0 {
		return ls
	}
	// The first fifth of the log is warm-up (caches filling, classes
	// loading): the floor is judged after it, over at least ten minutes.
	t0, t1 := ls.Samples[0].T, ls.Samples[len(ls.Samples)-1].T
	var fit []FloorSample
	for _, p := range ls.Samples {
		if p.T >= t0+(t1-t0)/5 {
			fit = append(fit, p)
		}
	}
	if len(fit) < 3 || fit[len(fit)-1].T-fit[0].T < minLiveSetSpan {
		return ls
	}
	var sx, sy, sxx, sxy, syy float64
	n := float64(len(fit))
	for _, p := range fit {
		x, y := p.T, float64(p.Bytes)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
		syy += y * y
	}
	vx, vy := sxx-sx*sx/n, syy-sy*sy/n
	if vx <= 0 {
		return ls
	}
	slope := (sxy - sx*sy/n) / vx
	ls.SlopeBytesPerHour = slope * 3600
	if vy > 0 {
		ls.R2 = (sxy - sx*sy/n) * (sxy - sx*sy/n) / (vx * vy)
	}
	first, last := fit[0], fit[len(fit)-1]
	rise := slope * (last.T - first.T)
	ls.Verdict = "flat"
	// Rising: a steady climb (a good fit) worth at least a tenth of the
	// heap, or of the first floor when the heap size is not logged.
	ref := a.heapCap
	if ref <= 0 {
		ref = float64(first.Bytes)
	}
	if slope > 0 && ls.R2 >= 0.6 && rise >= 0.1*ref {
		ls.Verdict = "rising"
	}
	return ls
}

// bucketMinima splits samples by time into n stretches and keeps each
// stretch's lowest.
func bucketMinima(s []FloorSample, n int) []FloorSample {
	if len(s) < n {
		return nil
	}
	t0, t1 := s[0].T, s[len(s)-1].T
	if t1 <= t0 {
		return nil
	}
	out := make([]FloorSample, 0, n)
	for _, p := range s {
		b := min(int(float64(n)*(p.T-t0)/(t1-t0)), n-1)
		if len(out) == 0 || b > bucketOf(out[len(out)-1].T, t0, t1, n) {
			out = append(out, p)
		} else if p.Bytes < out[len(out)-1].Bytes {
			out[len(out)-1] = p
		}
	}
	return out
}

func bucketOf(t, t0, t1 float64, n int) int {
	return min(int(float64(n)*(t-t0)/(t1-t0)), n-1)
}

// --- tenuring ---

type tenuring struct {
	tables, overflows      int
	thresholdMin, maxLimit int
	ageSum                 [16]float64
	ageN                   [16]int
}

func (t *tenuring) add(a *AgeTable) {
	t.tables++
	if a.DesiredSurvivor > 0 && a.Total > a.DesiredSurvivor {
		t.overflows++
	}
	if a.Threshold > 0 && (t.thresholdMin == 0 || a.Threshold < t.thresholdMin) {
		t.thresholdMin = a.Threshold
	}
	t.maxLimit = max(t.maxLimit, a.Max)
	for i := 0; i < a.Ages; i++ {
		t.ageSum[i] += float64(a.Bytes[i])
		t.ageN[i]++
	}
}

func (t *tenuring) stats() Tenuring {
	s := Tenuring{ThresholdMin: t.thresholdMin, ThresholdMax: t.maxLimit, Tables: t.tables, Overflows: t.overflows}
	for i := range t.ageN {
		if t.ageN[i] == 0 {
			break
		}
		s.AgeBytes = append(s.AgeBytes, t.ageSum[i]/float64(t.tables))
	}
	return s
}
