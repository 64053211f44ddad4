package gclog

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
)

// MaxPoints bounds the series.
const MaxPoints = 2000

// exactPauses is how many pauses per kind are kept verbatim for exact
// percentiles before falling back to the histogram.
const exactPauses = 4096

// Histogram buckets grow by 2% from 1µs: percentiles beyond exactPauses
// are within 1% of the truth, in constant memory.
const (
	histBase    = 1000.0
	histGrowth  = 1.02
	histBuckets = 1200
)

var histLogGrowth = math.Log(histGrowth)

type pauseAgg struct {
	count    int
	total    int64
	max      int64
	overGoal int
	exact    []int64
	hist     []uint32
}

func (a *pauseAgg) add(ns int64, goal int64) {
	a.count++
	a.total += ns
	if ns > a.max {
		a.max = ns
	}
	if goal > 0 && ns > goal {
		a.overGoal++
	}
	if a.hist == nil && len(a.exact) < exactPauses {
		a.exact = append(a.exact, ns)
		return
	}
	if a.hist == nil {
		a.hist = make([]uint32, histBuckets)
		for _, v := range a.exact {
			a.hist[bucket(v)]++
		}
		a.exact = nil
	}
	a.hist[bucket(ns)]++
}

func bucket(ns int64) int {
	if float64(ns) < histBase {
		return 0
	}
	b := 1 + int(math.Log(float64(ns)/histBase)/histLogGrowth)
	return min(b, histBuckets-1)
}

// percentile is the nearest-rank q-quantile.
func (a *pauseAgg) percentile(q float64) int64 {
	if a.count == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(a.count)))
	rank = max(rank, 1)
	if a.hist == nil {
		s := slices.Clone(a.exact)
		slices.Sort(s)
		return s[rank-1]
	}
	seen := 0
	for b, c := range a.hist {
		seen += int(c)
		if seen >= rank {
			if b == 0 {
				return min(int64(histBase), a.max)
			}
			mid := histBase * math.Pow(histGrowth, float64(b-1)+0.5)
			return min(int64(mid), a.max)
		}
	}
	return a.max
}

func (a *pauseAgg) stats(kind Kind) PauseStats {
	s := PauseStats{Kind: kind, Count: a.count, Total: time.Duration(a.total), Max: time.Duration(a.max), OverGoal: a.overGoal}
	if a.count > 0 {
		s.Mean = time.Duration(a.total / int64(a.count))
		s.P50 = time.Duration(a.percentile(0.50))
		s.P95 = time.Duration(a.percentile(0.95))
		s.P99 = time.Duration(a.percentile(0.99))
	}
	return s
}

type spaceMark struct {
	t     float64
	after int64
	ok    bool
}

// Analyzer folds events into a Summary in constant memory.
type Analyzer struct {
	pauseGoal int64
	kinds     [numKinds]pauseAgg
	all       pauseAgg
	escalated int
	p         *Parser

	clock clock

	lastEden, lastYoung, lastHeap spaceMark
	allocBySource                 [3]float64
	allocDT                       float64
	promoted                      float64
	promoKnown                    bool

	youngGCs      int
	lastYoungT    float64
	haveYoungT    bool
	intervalSum   float64
	intervalCount int

	eden, heapCap float64
	liveAfterFull float64
	meta          float64
	metaFirst     float64
	metaLast      float64

	causes                  map[string]*CauseStats
	cmf, pf, toSpace, humon int
	humMax                  int64
	stalls                  int
	stallNs                 int64
	concurrent              PhaseStats

	safepoints [3]spAgg
	// gcSinceStop: a GC pause was logged since the last safepoint, so an
	// unnamed stop that follows is that collection's.
	gcSinceStop bool

	cpu     CPUStats
	cycles  cycles
	phases  map[string]*PhaseTime
	refProc RefProcStats
	floors  halving[FloorSample]
	fulls   halving[FloorSample]
	tenure  tenuring

	youngNames map[string]bool

	series halving[Point]
}

// NewAnalyzer counts pauses over pauseGoal (0: none) as it goes.
func NewAnalyzer(pauseGoal time.Duration) *Analyzer {
	return &Analyzer{
		pauseGoal: int64(pauseGoal), causes: map[string]*CauseStats{}, youngNames: map[string]bool{},
		series: halving[Point]{limit: MaxPoints, merge: mergePoint},
		floors: halving[FloorSample]{limit: maxFloors, merge: lowerFloor},
		fulls:  halving[FloorSample]{limit: maxFloors, merge: lowerFloor},
		phases: map[string]*PhaseTime{}, cycles: cycles{spans: map[int64]cycleSpan{}},
		metaFirst: -1,
	}
}

// Attach points p's callbacks at a.
func (a *Analyzer) Attach(p *Parser) {
	a.p = p
	p.OnEvent = a.Add
	p.OnSafepoint = a.safepoint
	p.OnAgeTable = a.tenure.add
	p.OnPhase = a.phase
	p.OnStall = func(d time.Duration) {
		a.stalls++
		a.stallNs += int64(d)
	}
	p.OnTime = func(up float64, wall time.Time) {
		if t, ok := a.clock.time(up, wall); ok {
			a.observe(t, t, "", 0)
		}
	}
	p.OnJVMStart = func() { a.clock.header = true }
}

// observe places [t, end] on the clock; after a restart the per-segment
// state starts afresh. file and line say where (empty: the parser's
// current line).
func (a *Analyzer) observe(t, end float64, file string, line int64) {
	if line == 0 && a.p != nil {
		file, line = a.p.Position()
	}
	if a.clock.observe(t, end, file, line) {
		a.lastEden, a.lastYoung, a.lastHeap = spaceMark{}, spaceMark{}, spaceMark{}
		a.haveYoungT = false
		a.cycles.restart()
	}
}

// Add folds one event in.
func (a *Analyzer) Add(e *Event) {
	t, timed := a.clock.time(e.Uptime, e.Wall)
	if timed {
		a.observe(t, t+e.Pause.Seconds()+e.Duration.Seconds(), e.File, e.Line)
	}

	if e.Kind == KindConcurrent {
		if !e.CycleSummary {
			a.concurrent.Count++
			a.concurrent.TotalNs += int64(e.Duration)
		}
	} else {
		ns := int64(e.Pause)
		a.kinds[e.Kind].add(ns, a.pauseGoal)
		a.all.add(ns, a.pauseGoal)
		a.gcSinceStop = true
		if e.Escalated {
			a.escalated++
		}
		a.pauseCPU(e, t)
		if e.RefProc > 0 {
			a.refProc.Pauses++
			a.refProc.Total += e.RefProc
			a.refProc.Max = max(a.refProc.Max, e.RefProc)
			a.refProc.PauseTotal += e.Pause
		}
	}
	if e.Young.Known() && (e.Kind == KindYoung || e.Kind == KindMixed) && e.Name != "" || e.IsPause() && e.Kind != KindYoung && e.Kind != KindMixed {
		if len(a.youngNames) < 16 {
			a.youngNames[e.Name] = true
		}
	}
	if timed {
		a.allocation(e, t)
		a.cycles.add(e, t)
	}
	switch {
	case e.Kind == KindYoung, e.Kind == KindMixed, e.Scavenge:
		a.youngGCs++
		if timed {
			if a.haveYoungT && t > a.lastYoungT {
				a.intervalSum += t - a.lastYoungT
				a.intervalCount++
			}
			a.lastYoungT, a.haveYoungT = t, true
		}
		a.promotion(e)
	case e.Kind == KindFull:
		a.fullCause(e)
	}
	if e.ConcurrentModeFailure {
		a.cmf++
	}
	if e.PromotionFailed {
		a.pf++
	}
	if e.ToSpaceExhausted {
		a.toSpace++
		a.cycles.toSpace++
	}
	if strings.Contains(e.Cause, "Humongous") {
		a.humon++
		a.cycles.humongous++
	}
	a.humMax = max(a.humMax, e.HumongousAfter, e.HumongousBefore)
	if e.Eden.Capacity > 0 {
		a.eden = float64(e.Eden.Capacity)
	} else if e.Young.Capacity > 0 && e.Eden.Capacity < 0 {
		a.eden = float64(e.Young.Capacity)
	}
	if e.Heap.Capacity > 0 {
		a.heapCap = float64(e.Heap.Capacity)
	}
	if e.Kind == KindFull && e.Heap.Known() {
		a.liveAfterFull = max(a.liveAfterFull, float64(e.Heap.After))
		if timed {
			a.fulls.add(FloorSample{T: t, Bytes: e.Heap.After})
		}
	}
	if timed && e.IsPause() && e.Heap.Known() {
		a.floors.add(FloorSample{T: t, Bytes: e.Heap.After})
	}
	if e.Meta.Known() {
		m := float64(e.Meta.After)
		a.meta = max(a.meta, m)
		if a.metaFirst < 0 {
			a.metaFirst = m
		}
		a.metaLast = m
	}
	if timed && (e.IsPause() || e.Heap.Known()) {
		meta := int64(-1)
		if e.Meta.Known() {
			meta = e.Meta.After
		}
		a.series.add(Point{T: t, HeapBefore: e.Heap.Before, HeapAfter: e.Heap.After, HeapCap: e.Heap.Capacity, MetaAfter: meta, PauseNs: int64(e.Pause), Kind: e.Kind})
	}
}

func (a *Analyzer) fullCause(e *Event) {
	cause := e.Cause
	switch {
	case e.ConcurrentModeFailure:
		cause = "concurrent mode failure"
	case e.PromotionFailed:
		cause = "promotion failed"
	case cause == "":
		cause = "unknown"
	}
	c := a.causes[cause]
	if c == nil {
		if len(a.causes) >= 64 {
			cause = "other"
			c = a.causes[cause]
		}
		if c == nil {
			c = &CauseStats{Cause: cause}
			a.causes[cause] = c
		}
	}
	c.Count++
	c.Total += e.Pause
}

// pauseCPU folds in a pause's user/sys/real times. A pause is sys-heavy
// when the kernel took more CPU than the JVM (page faults, swapping,
// transparent huge page compaction), starved when its wall time exceeds
// the CPU the GC threads got (they waited for a CPU or for I/O).
func (a *Analyzer) pauseCPU(e *Event, t float64) {
	if e.User < 0 || e.Sys < 0 || e.Real < 0 {
		return
	}
	c := &a.cpu
	c.Pauses++
	c.User += e.User
	c.Sys += e.Sys
	c.Real += e.Real
	// The JVM prints these times in 10 ms ticks: only pauses of 50 ms or
	// more, and differences of two ticks or more, say anything.
	if e.Real < 50*time.Millisecond {
		return
	}
	odd := false
	if e.Sys > e.User && e.Sys-e.User >= 20*time.Millisecond {
		c.SysHeavy++
		c.SysHeavyReal += e.Real
		odd = true
	}
	if float64(e.Real) > 1.2*float64(e.User+e.Sys)+float64(20*time.Millisecond) {
		c.Starved++
		c.StarvedReal += e.Real
		odd = true
	}
	if odd && e.Real > c.Worst.Real {
		c.Worst = PauseCPU{At: t, Kind: e.Kind, User: e.User, Sys: e.Sys, Real: e.Real}
	}
}

func (a *Analyzer) phase(name string, d time.Duration) {
	ph := a.phases[name]
	if ph == nil {
		if len(a.phases) >= 48 {
			return
		}
		ph = &PhaseTime{Name: name}
		a.phases[name] = ph
	}
	ph.Count++
	ph.Total += d
	ph.Max = max(ph.Max, d)
}

// allocation adds what the application allocated since the previous
// collection: the finest space both events logged (Eden, then the young
// generation, then the heap) before this one minus after that one.
func (a *Analyzer) allocation(e *Event, t float64) {
	collects := e.Kind == KindYoung || e.Kind == KindMixed || e.Kind == KindFull || e.Scavenge
	if !collects && !e.Heap.Known() {
		return
	}
	marks := [3]*spaceMark{&a.lastEden, &a.lastYoung, &a.lastHeap}
	spaces := [3]Space{e.Eden, e.Young, e.Heap}
	// A remark or cleanup between two young GCs logs only the heap; when
	// the young GCs log Eden, counting the heap growth up to the remark
	// too would count that allocation twice.
	counts := collects || (!a.lastEden.ok && !a.lastYoung.ok)
	for src := range marks {
		if !counts {
			break
		}
		m, s := marks[src], spaces[src]
		if !s.Known() || !m.ok {
			continue
		}
		inc := float64(s.Before - m.after)
		dt := t - m.t
		if inc >= 0 && dt >= 0 {
			a.allocBySource[src] += inc
			a.allocDT += dt
		}
		break
	}
	for src := range marks {
		s := spaces[src]
		switch {
		case s.Known():
			*marks[src] = spaceMark{t: t, after: s.After, ok: true}
		case collects:
			// A collection that emptied a space without logging it: the
			// old mark no longer says what is there.
			marks[src].ok = false
		}
	}
}

func (a *Analyzer) promotion(e *Event) {
	var p float64
	switch {
	case e.Old.Known():
		p = float64(e.Old.After - e.Old.Before)
	case e.Young.Known() && e.Heap.Known():
		p = float64((e.Young.Before - e.Young.After) - (e.Heap.Before - e.Heap.After))
	default:
		return
	}
	a.promoKnown = true
	if p > 0 {
		a.promoted += p
	}
}

// halving keeps at most limit samples of a stream in constant memory: when
// full it merges neighbours and from then on merges stride samples into
// each, so the samples stay spread over the whole log.
type halving[T any] struct {
	s      []T
	limit  int
	stride int
	fill   int
	merge  func(into *T, p T)
}

func (h *halving[T]) add(p T) {
	if h.stride == 0 {
		h.stride = 1
	}
	if h.fill > 0 && len(h.s) > 0 {
		h.merge(&h.s[len(h.s)-1], p)
		if h.fill++; h.fill >= h.stride {
			h.fill = 0
		}
		return
	}
	if len(h.s) >= h.limit {
		n := 0
		for i := 0; i < len(h.s); i += 2 {
			q := h.s[i]
			if i+1 < len(h.s) {
				h.merge(&q, h.s[i+1])
			}
			h.s[n] = q
			n++
		}
		h.s = h.s[:n]
		h.stride *= 2
	}
	h.s = append(h.s, p)
	if h.fill = 1; h.fill >= h.stride {
		h.fill = 0
	}
}

// mergePoint keeps the longer pause (the one a chart must show) and the
// heap extremes of two neighbouring points.
func mergePoint(into *Point, p Point) {
	if p.PauseNs > into.PauseNs {
		into.T, into.PauseNs, into.Kind = p.T, p.PauseNs, p.Kind
	}
	if p.HeapBefore > into.HeapBefore {
		into.HeapBefore = p.HeapBefore
	}
	if p.HeapAfter >= 0 && (into.HeapAfter < 0 || p.HeapAfter < into.HeapAfter) {
		into.HeapAfter = p.HeapAfter
	}
	if p.HeapCap > into.HeapCap {
		into.HeapCap = p.HeapCap
	}
	if p.MetaAfter > into.MetaAfter {
		into.MetaAfter = p.MetaAfter
	}
}

var allocSources = [3]string{"eden", "young", "heap"}

// Summary returns what was seen so far; stats are the parser's.
func (a *Analyzer) Summary(stats Stats) Summary {
	s := Summary{Parse: stats, Concurrent: a.concurrent, Series: a.series.s, Escalated: a.escalated}
	if s.Series == nil {
		s.Series = []Point{}
	}
	s.Collector = a.collector(stats.Collector)
	s.Window = a.clock.window()
	for k := Kind(0); k < KindConcurrent; k++ {
		if a.kinds[k].count > 0 {
			s.Pauses = append(s.Pauses, a.kinds[k].stats(k))
		}
	}
	s.All = a.all.stats(numKinds)
	s.PauseGoal = time.Duration(a.pauseGoal)
	s.YoungGCs = a.youngGCs
	if a.intervalCount > 0 {
		s.YoungInterval = time.Duration(a.intervalSum / float64(a.intervalCount) * 1e9)
	}
	al := &s.Allocation
	best := -1
	for i, v := range a.allocBySource {
		al.Allocated += v
		if v > 0 && (best < 0 || v > a.allocBySource[best]) {
			best = i
		}
	}
	if best >= 0 {
		al.Source = allocSources[best]
	}
	if a.allocDT > 0 {
		al.Rate = al.Allocated / a.allocDT
	}
	al.PromotionKnown = a.promoKnown
	al.Promoted = a.promoted
	if s.Window.Seconds > 0 {
		al.PromotionRate = a.promoted / s.Window.Seconds
	}
	s.Sizes = Sizes{Eden: a.eden, Heap: a.heapCap, Region: float64(stats.RegionBytes), LiveAfterFull: a.liveAfterFull,
		Metaspace: a.meta, MetaspaceFirst: max(a.metaFirst, 0), MetaspaceLast: a.metaLast}
	for _, c := range a.causes {
		s.FullGCCauses = append(s.FullGCCauses, *c)
	}
	slices.SortFunc(s.FullGCCauses, func(x, y CauseStats) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), strings.Compare(x.Cause, y.Cause))
	})
	s.Failures = Failures{
		ConcurrentModeFailures: a.cmf, PromotionFailures: a.pf, ToSpaceExhausted: a.toSpace,
		HumongousGCs: a.humon, HumongousRegionsMax: int(a.humMax),
		AllocationStalls: a.stalls, AllocationStallTime: time.Duration(a.stallNs),
	}
	s.Safepoints = a.safepointStats()
	s.CPU = a.cpu
	s.Cycles = a.cycles.stats()
	for _, ph := range a.phases {
		s.Phases = append(s.Phases, *ph)
	}
	slices.SortFunc(s.Phases, func(x, y PhaseTime) int {
		return cmp.Or(cmp.Compare(y.Total, x.Total), strings.Compare(x.Name, y.Name))
	})
	s.RefProc = a.refProc
	s.LiveSet = a.liveSet(s.Window.Seconds)
	s.Tenure = a.tenure.stats()
	return s
}

// collector names the collector from the young generation the events
// name when the log does not say (or says wrongly: a JDK 8 command line
// can list flags the JVM overrode).
func (a *Analyzer) collector(declared string) string {
	switch {
	case a.youngNames["PSYoungGen"]:
		return "Parallel"
	case a.youngNames["ParNew"], a.youngNames["CMS-remark"], a.youngNames["CMS-initial-mark"]:
		return "CMS"
	case a.youngNames["DefNew"]:
		return "Serial"
	case a.youngNames["GC pause (young)"] || a.youngNames["GC pause (mixed)"]:
		return "G1"
	}
	if declared != "" {
		return declared
	}
	// Logs that never name their collector (fragments, -Xlog without the
	// start-up lines) still name its pauses.
	switch {
	case a.youngNames["Pause Mark Start"] || a.youngNames["Pause Relocate Start"]:
		return "ZGC"
	case a.youngNames["Pause Init Mark"] || a.youngNames["Pause Final Mark"] || a.youngNames["Pause Init Update Refs"]:
		return "Shenandoah"
	}
	return declared
}
