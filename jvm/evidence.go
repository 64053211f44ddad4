package jvm

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
)

// evidence is what the window measured, as the report and the rules read
// it: GC and heap from hsperfdata, allocation from the profile, and the
// requests that divide it.
func (o *Options) evidence(t *attach.Target, w *hsperf.Window, window time.Duration, p *asprof.Profile, res *Result, cs *counters) evidence.JVM {
	secs := window.Seconds()
	e := evidence.JVM{
		PID:                t.Process.PID,
		NSPID:              t.Process.NSPID,
		Collector:          w.Last.Policy,
		WindowNs:           int64(window),
		AllocBytesEden:     w.EdenAllocated,
		YoungGCs:           w.YoungGCs(),
		OldGCs:             w.OldGCs(),
		LastGCCause:        w.Last.LastCause,
		EdenCapacity:       w.Last.EdenCapacity,
		SurvivorCapacity:   w.Last.Survivor0Capacity + w.Last.Survivor1Capacity,
		OldCapacity:        w.Last.OldCapacity,
		OldUsed:            w.Last.OldUsed,
		Promoted:           w.Promoted,
		TargetRPS:          o.TargetRPS,
		TargetGCIntervalNs: int64(o.TargetGCInterval),
		Sites:              []evidence.AllocSite{},
		Fixes:              []evidence.AllocFix{},
		Logging:            evidence.LoggingCost{ByFramework: map[string]int64{}},
	}
	if at, src, ok := w.EdenAtCollection(); ok {
		e.EdenAtCollection, e.EdenAtCollectionSource = at, src
	} else {
		e.EdenAtCollection, e.EdenAtCollectionSource = e.EdenCapacity, "capacity"
	}
	youngTime := w.Last.YoungGCTime - w.First.YoungGCTime
	e.GCTimeNs = int64(youngTime + w.Last.OldGCTime - w.First.OldGCTime)
	if secs > 0 {
		e.AllocRateEden = float64(e.AllocBytesEden) / secs
		e.YoungGCsPerMinute = float64(e.YoungGCs) * 60 / secs
		e.GCTimeShare = float64(e.GCTimeNs) / float64(window)
	}
	if e.YoungGCs > 0 {
		e.MeanYoungPauseNs = float64(youngTime) / float64(e.YoungGCs)
	}
	if w.PromotingGCs > 0 {
		e.PromotedPerYoungGC = float64(w.Promoted) / float64(w.PromotingGCs)
	}
	if p != nil {
		e.ProfileEvent = string(p.Event)
	}
	if p != nil && p.Event == asprof.Alloc && p.Samples > 0 {
		e.AllocSampling = allocSampling(p)
		e.AllocSampling.SettleNs = res.SettleNs
		e.AllocSampling.IntervalAuto, e.AllocSampling.IntervalNote = res.IntervalAuto, res.IntervalNote
		if res.RateBefore != nil {
			e.AllocSampling.RateBefore = res.RateBefore.BytesPerSecond
		}
		res.Warnings = append(res.Warnings, samplingWarnings(p)...)
	}
	if p != nil && p.Event == asprof.Alloc {
		e.AllocBytesProfiler = p.Total
		if secs > 0 {
			e.AllocRateProfiler = float64(p.Total) / secs
		}
		if e.AllocBytesEden > 0 {
			e.Disagreement = float64(p.Total-e.AllocBytesEden) / float64(e.AllocBytesEden)
		}
	}
	rc, why := o.requestCounts(window, res, cs)
	var requests int64
	if rc != nil {
		requests = rc.Total
		e.Requests = evidence.Int(rc.Total)
		e.RequestsSource = rc.Source
		e.RequestsUncertainty = rc.Uncertainty
		e.RequestsNote = rc.Note
		e.StatusClasses = rc.StatusClasses
		if secs > 0 {
			e.RequestRate = evidence.Float(float64(rc.Total) / secs)
		}
		if other := cs.passiveCount; other != nil && rc.Source != "passive-http" && rc.Source != "load" && rc.Total > 0 {
			e.RequestCrossCheck = &evidence.RequestCrossCheck{Source: other.Source, Requests: other.Total, Difference: float64(other.Total-rc.Total) / float64(rc.Total)}
		}
		e.RateIsSaturation = rc.Source == "load" && o.Load != nil && o.Load.Rate == 0
	} else {
		e.RequestsUnknown = why
	}
	switch {
	case requests > 0:
		e.BytesPerRequestEden = evidence.Float(float64(e.AllocBytesEden) / float64(requests))
		e.BytesPerRequest = e.BytesPerRequestEden
		if p != nil && p.Event == asprof.Alloc {
			e.BytesPerRequest = evidence.Float(float64(p.Total) / float64(requests))
			if p.Samples > 0 {
				e.BytesPerRequestError = evidence.Float(2 * math.Sqrt(p.Variance) / float64(requests))
			}
		}
	case rc != nil:
		e.BytesPerRequestUnknown = "no request was served in the window"
	default:
		e.BytesPerRequestUnknown = why
	}
	if p == nil {
		return e
	}
	b := Analyze(p, o.Attribution)
	e.Sites, e.Logging = b.PerRequest(requests, o.TopSites)
	e.Threads = b.Threads
	if e.Threads != nil && requests > 0 {
		e.Threads.Request.BytesPerRequest = evidence.Float(float64(e.Threads.Request.Bytes) / float64(requests))
		e.Threads.Background.BytesPerRequest = evidence.Float(float64(e.Threads.Background.Bytes) / float64(requests))
		if p.Samples > 0 {
			for _, g := range []*evidence.ThreadGroupAlloc{&e.Threads.Request, &e.Threads.Background} {
				g.BytesPerRequestError = evidence.Float(2 * math.Sqrt(g.Variance) / float64(requests))
			}
		}
	}
	e.FrameworkBytes = b.FrameworkBytes
	e.Fixes = b.Fixes(requests, 8)
	var endpoints []EndpointCount
	if rc != nil {
		endpoints = rc.Endpoints
	}
	e.Endpoints = joinEndpoints(b, cs.mapping, endpoints, requests, rc != nil && rc.Source == "load")
	return e
}

// allocSampling describes the samples of an allocation profile read from
// async-profiler's recording.
func allocSampling(p *asprof.Profile) *evidence.AllocSampling {
	a := &evidence.AllocSampling{
		IntervalBytes: p.Interval, Samples: p.Samples, ProfilerBytes: p.ReportedTotal, Weighting: "unbiased",
		TruncatedStacks: p.Truncated, NoStack: p.NoStack, TLABWeighted: p.OtherWeighting, SettleSamples: p.BeforeWindow, StopSamples: p.AfterWindow,
	}
	if p.OtherWeighting == p.Samples {
		a.Weighting = "tlab"
	} else if p.OtherWeighting > 0 {
		a.Weighting = "mixed"
	}
	if p.Total > 0 {
		a.RelativeError = 2 * math.Sqrt(p.Variance) / float64(p.Total)
	}
	return a
}

// samplingWarnings are what the report must say about samples perfscope
// could not read in full: their bytes are counted, but where they belong
// may be wrong.
func samplingWarnings(p *asprof.Profile) []string {
	var w []string
	if p.Truncated > 0 {
		w = append(w, fmt.Sprintf("%d of %d allocation samples have stacks deeper than async-profiler keeps (their root frames, with the thread's entry and the request dispatcher, are missing): their bytes count in the totals and their thread, but they may be charged to the framework instead of their handler", p.Truncated, p.Samples))
	}
	if p.NoStack > 0 {
		w = append(w, fmt.Sprintf("%d of %d allocation samples have no stack: their bytes count in the totals and their thread only", p.NoStack, p.Samples))
	}
	if p.OtherWeighting > 0 {
		w = append(w, fmt.Sprintf("%d of %d allocation samples come from TLAB-driven sampling (a JDK before 11) and keep async-profiler's weight, which under-counts objects of a size near the sampling interval", p.OtherWeighting, p.Samples))
	}
	return w
}

// joinEndpoints builds the per-endpoint table: each handler's weight, its
// endpoint through the mapping (or, under perfscope's single-URL load,
// the load's endpoint), and that endpoint's request count. Endpoints with
// requests but no profiled handler are listed with their counts.
func joinEndpoints(b Breakdown, mapping HandlerMapping, counts []EndpointCount, requests int64, singleLoad bool) []evidence.EndpointAlloc {
	frameworkPer := 0.0
	if requests > 0 {
		frameworkPer = float64(b.FrameworkBytes) / float64(requests)
	}
	type row struct {
		evidence.EndpointAlloc
		key      string
		variance float64
	}
	rows := map[string]*row{}
	used := map[int]bool{}
	// countFor finds the requests of a template among the source's
	// endpoints: exact for URI templates, by pattern for folded paths.
	countFor := func(ep EndpointCount) (int64, bool) {
		re := templateMatcher(ep.Endpoint)
		var n int64
		found := false
		for i, c := range counts {
			if ep.Method != "" && c.Method != "" && !strings.EqualFold(ep.Method, c.Method) {
				continue
			}
			if c.Endpoint == ep.Endpoint || re.MatchString(c.Endpoint) {
				n += c.Requests
				found = true
				used[i] = true
			}
		}
		return n, found
	}
	handlers := b.Handlers
	if mapping != nil && !singleLoad {
		// A mapped handler that took no allocation sample allocated less
		// than the sampling interval over the window: its row still
		// shows the endpoint's framework cost, with the handler at 0.
		handlers = map[string]*HandlerWeight{}
		short := map[string]bool{}
		for name, h := range b.Handlers {
			handlers[name] = h
			short[shortHandler(name)] = true
		}
		for name, ep := range mapping {
			if short[name] {
				continue
			}
			for _, c := range counts {
				if c.Endpoint == ep.Endpoint || templateMatcher(ep.Endpoint).MatchString(c.Endpoint) {
					handlers[name] = &HandlerWeight{sites: map[siteKey]int64{}}
					break
				}
			}
		}
	}
	for name, h := range handlers {
		var ep EndpointCount
		known := false
		switch {
		case singleLoad && len(counts) == 1:
			ep, known = counts[0], true
		case mapping != nil:
			ep, known = mapping[shortHandler(name)]
		}
		key := name
		if known {
			key = ep.Method + " " + ep.Endpoint
		}
		r := rows[key]
		if r == nil {
			r = &row{key: key}
			rows[key] = r
			if known {
				r.Endpoint, r.Method = ep.Endpoint, ep.Method
			}
		}
		if r.Handler == "" {
			r.Handler = name
		} else if !strings.Contains(r.Handler, name) {
			r.Handler += ", " + name
		}
		r.Bytes += h.Bytes
		r.variance += h.Variance
		r.LoggingBytes += h.LoggingBytes
		r.TopSites = append(r.TopSites, h.topSites(b.Total, 3)...)
		if known && r.Requests == nil {
			if singleLoad && len(counts) == 1 {
				used[0] = true
				r.Requests = evidence.Int(counts[0].Requests)
			} else if n, ok := countFor(ep); ok {
				r.Requests = evidence.Int(n)
			}
		}
	}
	var out []evidence.EndpointAlloc
	sampled := b.Samples > 0
	for _, r := range rows {
		e := r.EndpointAlloc
		if b.Total > 0 {
			e.Share = float64(e.Bytes) / float64(b.Total)
		}
		if e.Requests != nil && *e.Requests > 0 {
			n := float64(*e.Requests)
			e.HandlerBytesPerRequest = evidence.Float(float64(e.Bytes) / n)
			e.BytesPerRequest = evidence.Float(float64(e.Bytes)/n + frameworkPer)
			e.LoggingBytesPerRequest = evidence.Float(float64(e.LoggingBytes) / n)
			if sampled {
				e.BytesPerRequestError = evidence.Float(2 * math.Sqrt(r.variance/(n*n)+b.FrameworkVariance/float64(requests*requests)))
			}
		}
		out = append(out, e)
	}
	for i, c := range counts {
		if !used[i] {
			out = append(out, evidence.EndpointAlloc{Endpoint: c.Endpoint, Method: c.Method, Requests: evidence.Int(c.Requests)})
		}
	}
	sortEndpoints(out)
	return out
}

func sortEndpoints(e []evidence.EndpointAlloc) {
	reqs := func(a evidence.EndpointAlloc) int64 {
		if a.Requests == nil {
			return 0
		}
		return *a.Requests
	}
	for i := 1; i < len(e); i++ {
		for j := i; j > 0; j-- {
			a, b := e[j-1], e[j]
			if a.Bytes > b.Bytes || a.Bytes == b.Bytes && (reqs(a) > reqs(b) || reqs(a) == reqs(b) && a.Endpoint+a.Handler <= b.Endpoint+b.Handler) {
				break
			}
			e[j-1], e[j] = b, a
		}
	}
}

var (
	regionFlag  = regexp.MustCompile(`-XX:G1HeapRegionSize=(\d+)`)
	maxHeapFlag = regexp.MustCompile(`-XX:MaxHeapSize=(\d+)`)
)

// parseFlags reads G1's region size and the maximum heap from VM.flags:
// hsperfdata publishes neither, and the Eden recommendation is only as fine
// as a region.
func parseFlags(flags string) (region, maxHeap int64) {
	if m := regionFlag.FindStringSubmatch(flags); m != nil {
		region, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := maxHeapFlag.FindStringSubmatch(flags); m != nil {
		maxHeap, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return region, maxHeap
}
