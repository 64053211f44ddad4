package diagnose

import (
	"fmt"
	"math"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// GoThresholds are the Go rules' thresholds a recipe may override.
var GoThresholds = struct {
	AllocPerRequest, PoolSiteObjects, PoolSiteShare, PoolMinSize, PoolHitRate, PoolGetsPerPut, GCPerMinute Threshold
}{
	AllocPerRequest: Threshold{Name: "alloc_per_request_bytes", Default: 100 << 10, Min: 0, Max: 1e12,
		Doc: "bytes allocated per request that make a finding"},
	PoolSiteObjects: Threshold{Name: "pool_site_objects_per_request", Default: 1, Min: 0, Max: 1e6,
		Doc: "objects of one size a site allocates per request to be a sync.Pool candidate"},
	PoolSiteShare: Threshold{Name: "pool_site_share", Default: 0.10, Min: 0, Max: 1,
		Doc: "the site's share of all bytes allocated to be a sync.Pool candidate"},
	PoolMinSize: Threshold{Name: "pool_min_object_bytes", Default: 256, Min: 0, Max: 1e9,
		Doc: "smallest object worth pooling (smaller ones cost less to allocate than to pool)"},
	PoolHitRate: Threshold{Name: "pool_hit_rate", Default: 0.5, Min: 0, Max: 1,
		Doc: "a measured pool's hit rate below which it is said not to help"},
	PoolGetsPerPut: Threshold{Name: "pool_gets_per_put", Default: 2, Min: 1, Max: 1e6,
		Doc: "Gets per Put above which a pool is said to lose its objects"},
	GCPerMinute: Threshold{Name: "gc_cycles_per_minute", Default: 60, Min: 0, Max: 1e6,
		Doc: "GC cycles per minute that make a finding"},
}

// GoRules are the rules of `perfscope go`.
var GoRules = []Rule[evidence.Go]{
	{ID: "go.sampling-off", Check: checkGoSamplingOff},
	{ID: "go.alloc-per-request", Tunables: []Threshold{GoThresholds.AllocPerRequest}, CheckTuned: checkGoAllocPerRequest},
	{ID: "go.gc-frequency", Tunables: []Threshold{GoThresholds.GCPerMinute}, CheckTuned: checkGoGCFrequency},
	{ID: "go.sync-pool-candidate", Tunables: []Threshold{GoThresholds.PoolSiteObjects, GoThresholds.PoolSiteShare, GoThresholds.PoolMinSize}, CheckTuned: checkGoPoolCandidate},
	{ID: "go.sync-pool-ineffective", Tunables: []Threshold{GoThresholds.PoolHitRate, GoThresholds.PoolGetsPerPut}, CheckTuned: checkGoPoolIneffective},
}

// goPoolReference is what the sync.Pool benchmark the advice rests on
// measured.
const goPoolReference = "A Go benchmark of 1 KB buffers allocated 100,000 times (a write-up on whether sync.Pool really helps): 100,000 allocations and 23 GC cycles without a pool, 12,450 allocations and 3 GC cycles with sync.Pool, 18,760 allocations and 5 GC cycles when many goroutines contend for the pool"

func goSiteName(s evidence.GoAllocSite) string {
	name := s.Function
	if s.File != "" {
		name += fmt.Sprintf(" (%s:%d)", shortPath(s.File), s.Line)
	}
	return name
}

func shortPath(p string) string {
	parts := strings.Split(p, "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/")
}

func checkGoSamplingOff(e evidence.Go) *Finding {
	if e.Sampling.MemProfileRate != 0 || e.AllocBytes != nil {
		return nil
	}
	return &Finding{
		Severity: Info,
		Title:    "the program samples no allocation: bytes per request cannot be measured",
		Evidence: []string{
			fmt.Sprintf("runtime.MemProfileRate is 0 (%s)", e.Sampling.RateNote),
			fmt.Sprintf("%d GC cycles in the window were still counted", e.GCCycles),
		},
		Impact: 0.01,
		Recommendation: Recommendation{
			Kind:     KindCode,
			Why:      "The Go linker turns allocation sampling off in a program that never reads a memory profile; linking the profiler back in costs one sample per 512 KiB allocated.",
			Code:     []CodeSketch{{Lang: "go", Code: "import _ \"net/http/pprof\" // or: import \"runtime/pprof\", which keeps runtime.MemProfile\n\n// or set the rate early in main:\nfunc init() { runtime.MemProfileRate = 512 * 1024 }"}},
			Expected: "perfscope go then measures bytes per request and allocation sites; the runtime's cost is one stack walk per 512 KiB allocated",
		},
	}
}

func checkGoAllocPerRequest(e evidence.Go, t Thresholds) *Finding {
	if e.BytesPerRequest == nil || *e.BytesPerRequest < t.Get(GoThresholds.AllocPerRequest) {
		return nil
	}
	per := *e.BytesPerRequest
	ev := []string{fmt.Sprintf("%s ± %s allocated per request over %d requests counted by %s (threshold %s)", kib(per), kib(deref(e.BytesPerRequestError)), derefInt(e.Requests), e.RequestsSource, kib(t.Get(GoThresholds.AllocPerRequest)))}
	for i, s := range e.Sites {
		if i == 3 || s.BytesPerRequest == nil {
			break
		}
		ev = append(ev, fmt.Sprintf("%s: %s per request in %.1f objects of %d B, %.0f%%", goSiteName(s), kib(*s.BytesPerRequest), *s.ObjectsPerRequest, s.Size, 100*s.Share))
	}
	return &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%s allocated per request", kib(per)),
		Evidence: ev,
		Impact:   math.Min(1, per/(4*t.Get(GoThresholds.AllocPerRequest))),
		Recommendation: Recommendation{
			Kind:     KindCode,
			Why:      "Every byte allocated per request brings the next GC cycle closer: at a steady live heap, GC cycles per minute grow in proportion to the bytes allocated per minute.",
			Code:     []CodeSketch{{Lang: "go", Code: "// size buffers once, reuse them across iterations\nbuf := make([]byte, 0, 64<<10)\nfor ... { buf = buf[:0]; buf = append(buf, ...) }"}},
			Expected: "GC cycles fall in proportion to the bytes removed per request",
		},
	}
}

func checkGoGCFrequency(e evidence.Go, t Thresholds) *Finding {
	limit := t.Get(GoThresholds.GCPerMinute)
	if e.GCCyclesPerMinute <= limit || e.GCCycles < 3 {
		return nil
	}
	ev := []string{fmt.Sprintf("%d GC cycles in %.1fs: %.0f per minute (threshold %.0f)", e.GCCycles, float64(e.WindowNs)/1e9, e.GCCyclesPerMinute, limit)}
	if e.BytesPerGCCycle != nil {
		ev = append(ev, fmt.Sprintf("%s allocated between cycles", mib(*e.BytesPerGCCycle)))
	}
	gogc := "GOGC=100 (default)"
	if e.GC.GOGC != nil && e.GC.GOGCSource == "environment" {
		gogc = fmt.Sprintf("GOGC=%d", *e.GC.GOGC)
	} else if e.GC.GOGC == nil && e.GC.GOGCSource == "environment" {
		gogc = "GOGC=off"
	}
	if e.GC.MemoryLimit != nil {
		gogc += fmt.Sprintf(", GOMEMLIMIT=%s", mib(float64(*e.GC.MemoryLimit)))
	}
	ev = append(ev, "the program runs with "+gogc+" ("+e.GC.Note+")")
	sev := Warn
	if e.GCCyclesPerMinute > 10*limit {
		sev = Crit
	}
	return &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("%.0f GC cycles per minute", e.GCCyclesPerMinute),
		Evidence: ev,
		Impact:   math.Min(1, 1-limit/e.GCCyclesPerMinute),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "The Go GC starts a cycle when the heap has grown by GOGC percent of the live heap; a program that allocates much and keeps little collects often. Allocate less per request (the sites above), or let the heap grow further between cycles.",
			Apply:    []string{"restart the program with a larger GOGC (e.g. GOGC=200 halves the cycles, at up to twice the heap growth), or set GOMEMLIMIT to the memory it may use with GOGC=off"},
			Revert:   []string{"restart the program with its previous GOGC and GOMEMLIMIT"},
			Expected: "GC cycles per minute fall in proportion to the heap growth allowed between cycles",
			Caveats:  []string{"GOMEMLIMIT with GOGC=off collects only near the limit: a live heap that reaches it makes the GC run continuously"},
		},
	}
}

func checkGoPoolCandidate(e evidence.Go, t Thresholds) *Finding {
	var best *evidence.GoAllocSite
	for i := range e.Sites {
		s := &e.Sites[i]
		if s.InPoolNew || s.ObjectsPerRequest == nil || *s.ObjectsPerRequest < t.Get(GoThresholds.PoolSiteObjects) ||
			float64(s.Size) < t.Get(GoThresholds.PoolMinSize) || s.Share < t.Get(GoThresholds.PoolSiteShare) {
			continue
		}
		if best == nil || s.Bytes > best.Bytes {
			best = s
		}
	}
	if best == nil {
		return nil
	}
	gcShare := best.Share * e.GCCyclesPerMinute
	return &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("%s allocates %.1f objects of %d B per request: a sync.Pool candidate", best.Function, *best.ObjectsPerRequest, best.Size),
		Evidence: []string{
			fmt.Sprintf("%s: %.1f objects, %s per request, %.0f%% of everything the program allocates", goSiteName(*best), *best.ObjectsPerRequest, kib(*best.BytesPerRequest), 100*best.Share),
			fmt.Sprintf("at %.0f GC cycles per minute, this site's share drives about %.1f of them", e.GCCyclesPerMinute, gcShare),
		},
		Impact: best.Share,
		Recommendation: Recommendation{
			Kind:      KindCode,
			Why:       "Objects of one size allocated and dropped on every request are what sync.Pool is for: a pooled object is reused across requests instead of becoming garbage. It does not help objects that live past the request, small objects the compiler can keep on the stack, or a pool contended by many goroutines.",
			Code:      []CodeSketch{{Lang: "go", Code: fmt.Sprintf("var bufPool = sync.Pool{New: func() any { b := make([]byte, %d); return &b }}\n\nb := bufPool.Get().(*[]byte)\ndefer bufPool.Put(b) // only once nothing refers to *b any more\nbuf := (*b)[:0]", best.Size)}},
			Expected:  fmt.Sprintf("up to %.0f%% fewer bytes allocated and about %.1f fewer GC cycles per minute; perfscope go then shows the pool's hit rate", 100*best.Share, gcShare),
			Reference: goPoolReference,
			Caveats:   []string{"put back only objects nothing else refers to, reset before reuse, and do not pool objects that live past the request"},
		},
	}
}

func checkGoPoolIneffective(e evidence.Go, t Thresholds) *Finding {
	var ev []string
	worst := 0.0
	for _, p := range e.Pools {
		if p.Gets < 100 {
			continue
		}
		name := p.Name
		if name == "" {
			name = "the pool at " + p.Address
		}
		ratio := float64(p.Gets) / math.Max(1, float64(p.Puts))
		switch {
		case ratio > t.Get(GoThresholds.PoolGetsPerPut):
			ev = append(ev, fmt.Sprintf("%s: %d Gets, %d Puts — objects taken are not put back, so the pool keeps missing", name, p.Gets, p.Puts))
			worst = math.Max(worst, 1-1/ratio)
		case p.HitRate != nil && *p.HitRate < t.Get(GoThresholds.PoolHitRate):
			ev = append(ev, fmt.Sprintf("%s: %.0f%% of %d Gets hit (%d misses called New)", name, 100**p.HitRate, p.Gets, p.News))
			worst = math.Max(worst, 1-*p.HitRate)
		}
	}
	if len(ev) == 0 {
		return nil
	}
	return &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d sync.Pool(s) do not save allocations", len(ev)),
		Evidence: ev,
		Impact:   worst * 0.5,
		Recommendation: Recommendation{
			Kind:      KindCode,
			Why:       "A pool only saves an allocation when a Get finds an object an earlier Put returned. Gets without Puts leak every object to the GC; a pool emptied by every GC cycle (objects survive one cycle in its victim cache) misses when it is used less often than the GC runs.",
			Code:      []CodeSketch{{Lang: "go", Code: "b := pool.Get().(*T)\ndefer pool.Put(b) // on every path, once the object is no longer used"}},
			Expected:  "hit rate near 100 % and the New site gone from the allocation sites",
			Reference: goPoolReference,
		},
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
