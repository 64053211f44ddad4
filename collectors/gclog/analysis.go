package gclog

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// Summary is `perfscope gclog`'s data section.
type Summary struct {
	Files []string    `json:"files"`
	Parse Stats       `json:"parse"`
	GC    evidence.GC `json:"gc"`
	// Safepoints are "application threads were stopped" records
	// (-XX:+PrintGCApplicationStoppedTime, -Xlog:safepoint): all pauses,
	// GC or not.
	Safepoints PhaseStats `json:"safepoints"`
	// Concurrent phases ran alongside the application.
	Concurrent PhaseStats `json:"concurrent"`
	// Series is the heap and pause time series for charts, downsampled to
	// at most MaxPoints points (each keeps the longest pause it absorbed).
	Series []Point `json:"series"`
}

// PhaseStats counts events and their total duration.
type PhaseStats struct {
	Count   int   `json:"count"`
	TotalNs int64 `json:"total_ns"`
}

// Point is one sample of the time series: seconds since JVM start (or since
// the first date stamp), heap before/after/capacity in bytes (-1 unknown),
// and the pause in ns (0 for concurrent events).
type Point struct {
	T          float64 `json:"t"`
	HeapBefore int64   `json:"heap_before"`
	HeapAfter  int64   `json:"heap_after"`
	HeapCap    int64   `json:"heap_capacity"`
	PauseNs    int64   `json:"pause_ns"`
	Kind       Kind    `json:"kind"`
}

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

func (a *pauseAgg) stats(kind string) evidence.PauseStats {
	s := evidence.PauseStats{Kind: kind, Count: a.count, TotalNs: a.total, MaxNs: a.max, OverGoal: a.overGoal}
	if a.count > 0 {
		s.MeanNs = float64(a.total) / float64(a.count)
		s.P50Ns = a.percentile(0.50)
		s.P95Ns = a.percentile(0.95)
		s.P99Ns = a.percentile(0.99)
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

	haveT    bool
	prevT    float64
	window   float64
	wallBase time.Time

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

	causes                  map[string]*evidence.CauseStats
	cmf, pf, toSpace, humon int
	humMax                  int64
	stalls                  int
	stallNs                 int64
	tenMin, tenMax          int
	safepoints, concurrent  PhaseStats

	youngNames map[string]bool

	series []Point
	stride int
	fill   int
}

// NewAnalyzer counts pauses over pauseGoal (0: none) as it goes.
func NewAnalyzer(pauseGoal time.Duration) *Analyzer {
	return &Analyzer{pauseGoal: int64(pauseGoal), stride: 1, causes: map[string]*evidence.CauseStats{}, youngNames: map[string]bool{}}
}

// Attach points p's callbacks at a.
func (a *Analyzer) Attach(p *Parser) {
	p.OnEvent = a.Add
	p.OnSafepoint = func(d time.Duration) {
		a.safepoints.Count++
		a.safepoints.TotalNs += int64(d)
	}
	p.OnTenuring = func(t, m int) {
		if a.tenMin == 0 || t < a.tenMin {
			a.tenMin = t
		}
		if m > a.tenMax {
			a.tenMax = m
		}
	}
	p.OnStall = func(d time.Duration) {
		a.stalls++
		a.stallNs += int64(d)
	}
}

func (a *Analyzer) eventTime(e *Event) (float64, bool) {
	if !math.IsNaN(e.Uptime) {
		return e.Uptime, true
	}
	if !e.Wall.IsZero() {
		if a.wallBase.IsZero() {
			a.wallBase = e.Wall
		}
		return e.Wall.Sub(a.wallBase).Seconds(), true
	}
	return 0, false
}

// Add folds one event in.
func (a *Analyzer) Add(e *Event) {
	t, timed := a.eventTime(e)
	restart := false
	if timed {
		if a.haveT {
			switch {
			case t > a.prevT:
				a.window += t - a.prevT
				a.prevT = t
			case a.prevT-t > 1 && t < a.prevT/2:
				// Uptime went back: a JVM restart inside the file set.
				restart = true
				a.prevT = t
			}
		} else {
			a.haveT, a.prevT = true, t
		}
	}
	if restart {
		a.lastEden, a.lastYoung, a.lastHeap = spaceMark{}, spaceMark{}, spaceMark{}
		a.haveYoungT = false
	}

	if e.Kind == KindConcurrent {
		a.concurrent.Count++
		a.concurrent.TotalNs += int64(e.Duration)
	} else {
		ns := int64(e.Pause)
		a.kinds[e.Kind].add(ns, a.pauseGoal)
		a.all.add(ns, a.pauseGoal)
	}
	if e.Young.Known() && (e.Kind == KindYoung || e.Kind == KindMixed) && e.Name != "" {
		if len(a.youngNames) < 8 {
			a.youngNames[e.Name] = true
		}
	}

	if timed {
		a.allocation(e, t)
	}
	switch e.Kind {
	case KindYoung, KindMixed:
		a.youngGCs++
		if timed {
			if a.haveYoungT && t > a.lastYoungT {
				a.intervalSum += t - a.lastYoungT
				a.intervalCount++
			}
			a.lastYoungT, a.haveYoungT = t, true
		}
		a.promotion(e)
	case KindFull:
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
				c = &evidence.CauseStats{Cause: cause}
				a.causes[cause] = c
			}
		}
		c.Count++
		c.TotalNs += int64(e.Pause)
	}
	if e.ConcurrentModeFailure {
		a.cmf++
	}
	if e.PromotionFailed {
		a.pf++
	}
	if e.ToSpaceExhausted {
		a.toSpace++
	}
	if strings.Contains(e.Cause, "Humongous") {
		a.humon++
	}
	if e.HumongousAfter > a.humMax {
		a.humMax = e.HumongousAfter
	}
	if e.HumongousBefore > a.humMax {
		a.humMax = e.HumongousBefore
	}
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
	}
	if e.Meta.Known() {
		a.meta = max(a.meta, float64(e.Meta.After))
	}
	if timed && (e.IsPause() || e.Heap.Known()) {
		a.addPoint(Point{T: t, HeapBefore: e.Heap.Before, HeapAfter: e.Heap.After, HeapCap: e.Heap.Capacity, PauseNs: int64(e.Pause), Kind: e.Kind})
	}
}

// allocation adds what the application allocated since the previous
// collection: the finest space both events logged (Eden, then the young
// generation, then the heap) before this one minus after that one.
func (a *Analyzer) allocation(e *Event, t float64) {
	collects := e.Kind == KindYoung || e.Kind == KindMixed || e.Kind == KindFull
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

func (a *Analyzer) addPoint(p Point) {
	if a.fill > 0 && len(a.series) > 0 {
		last := &a.series[len(a.series)-1]
		mergePoint(last, p)
		a.fill++
		if a.fill >= a.stride {
			a.fill = 0
		}
		return
	}
	if len(a.series) >= MaxPoints {
		// Halve the resolution: merge neighbours, double the stride.
		n := 0
		for i := 0; i < len(a.series); i += 2 {
			q := a.series[i]
			if i+1 < len(a.series) {
				mergePoint(&q, a.series[i+1])
			}
			a.series[n] = q
			n++
		}
		a.series = a.series[:n]
		a.stride *= 2
	}
	a.series = append(a.series, p)
	a.fill = 1
	if a.fill >= a.stride {
		a.fill = 0
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
}

var allocSources = [3]string{"eden", "young", "heap"}

// Summary returns what was seen so far. collector is the parser's
// declared collector (Stats.Collector); events refine it.
func (a *Analyzer) Summary(stats Stats) Summary {
	s := Summary{Parse: stats, Safepoints: a.safepoints, Concurrent: a.concurrent, Series: a.series}
	if s.Series == nil {
		s.Series = []Point{}
	}
	g := &s.GC
	g.Collector = a.collector(stats.Collector)
	g.WindowSeconds = a.window
	g.Pauses = []evidence.PauseStats{}
	for k := Kind(0); k < KindConcurrent; k++ {
		if a.kinds[k].count > 0 {
			g.Pauses = append(g.Pauses, a.kinds[k].stats(k.String()))
		}
	}
	g.AllPauses = a.all.stats("all")
	if a.window > 0 {
		g.Throughput = max(0, 1-float64(a.all.total)/1e9/a.window)
	}
	g.YoungGCs = a.youngGCs
	if a.intervalCount > 0 {
		g.YoungIntervalSeconds = a.intervalSum / float64(a.intervalCount)
	}
	var alloc float64
	best := -1
	for i, v := range a.allocBySource {
		alloc += v
		if v > 0 && (best < 0 || v > a.allocBySource[best]) {
			best = i
		}
	}
	g.AllocatedBytes = alloc
	if best >= 0 {
		g.AllocSource = allocSources[best]
	}
	if a.allocDT > 0 {
		g.AllocRate = alloc / a.allocDT
	}
	g.PromotionKnown = a.promoKnown
	g.PromotedBytes = a.promoted
	if a.window > 0 {
		g.PromotionRate = a.promoted / a.window
	}
	g.EdenBytes = a.eden
	g.HeapBytes = a.heapCap
	g.RegionBytes = float64(stats.RegionBytes)
	g.LiveAfterFullBytes = a.liveAfterFull
	g.MetaspaceBytes = a.meta
	g.TenuringThresholdMin, g.TenuringThresholdMax = a.tenMin, a.tenMax
	g.FullGCCauses = []evidence.CauseStats{}
	for _, c := range a.causes {
		g.FullGCCauses = append(g.FullGCCauses, *c)
	}
	sort.Slice(g.FullGCCauses, func(i, j int) bool {
		if g.FullGCCauses[i].Count != g.FullGCCauses[j].Count {
			return g.FullGCCauses[i].Count > g.FullGCCauses[j].Count
		}
		return g.FullGCCauses[i].Cause < g.FullGCCauses[j].Cause
	})
	g.ConcurrentModeFailures = a.cmf
	g.PromotionFailures = a.pf
	g.ToSpaceExhausted = a.toSpace
	g.HumongousGCs = a.humon
	g.HumongousRegionsMax = int(a.humMax)
	g.AllocationStalls = a.stalls
	g.AllocationStallsNs = a.stallNs
	g.Goals.PauseGoalNs = a.pauseGoal
	return s
}

// collector names the collector from the young generation the events
// name when the log does not say (or says wrongly: a JDK 8 command line
// can list flags the JVM overrode).
func (a *Analyzer) collector(declared string) string {
	switch {
	case a.youngNames["PSYoungGen"]:
		return "Parallel"
	case a.youngNames["ParNew"]:
		return "CMS"
	case a.youngNames["DefNew"]:
		return "Serial"
	case a.youngNames["GC pause (young)"] || a.youngNames["GC pause (mixed)"]:
		return "G1"
	}
	return declared
}
