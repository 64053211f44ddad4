package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/asprof"
)

// JVMData is the JSON data section of `perfscope jvm`.
type JVMData struct {
	evidence.JVM
	Load *httpload.Result `json:"load,omitempty"`
	// Model is the allocation → young-GC prediction at the planning rate
	// (--target-rps, else the observed rate); Observed is the same model
	// at the window's own rate, to hold against the GCs it counted.
	// Model is null when no rate or no bytes per request is known.
	Model    *diagnose.YoungGCPrediction `json:"model"`
	Observed *diagnose.YoungGCPrediction `json:"model_observed,omitempty"`
	// Warnings are what the report must say beside the numbers.
	Warnings []string `json:"warnings"`
	// ProfileOptions are how async-profiler ran, for the text's overhead
	// line; not part of the JSON.
	ProfileOptions asprof.Options `json:"-"`
	// Wall is async-profiler's wall-clock view beside the off-CPU view,
	// per thread pool (--event wall --off-cpu); OffCPU is the off-CPU
	// view of the JVM over the same window (--off-cpu).
	Wall   *evidence.JVMWall `json:"wall,omitempty"`
	OffCPU *evidence.OffCPU  `json:"offcpu,omitempty"`
}

// NewJVMData is the data of a JVM measurement: its evidence, the load
// perfscope drove, the warnings, and the young-GC model at the planning
// and the observed rate.
func NewJVMData(e evidence.JVM, load *httpload.Result, warnings []string) JVMData {
	d := JVMData{JVM: e, Load: load, Warnings: warnings}
	if m := diagnose.PredictYoungGC(e); m.RPS > 0 {
		d.Model = &m
	}
	if d.Warnings == nil {
		d.Warnings = []string{}
	}
	if p, ok := diagnose.PredictYoungGCObserved(e); ok {
		d.Observed = &p
	}
	return d
}

// WriteText implements Texter.
func (d JVMData) WriteText(w io.Writer, r *Report) error {
	writeJVMText(w, r, d, d.ProfileOptions)
	if d.Wall != nil {
		writeJVMWallText(w, *d.Wall)
	}
	return nil
}

// PageSections are the JVM's sections of the HTML page: what it
// allocated and collected, and the warnings the text prints first.
func (d JVMData) PageSections() []PageSection {
	s := JVMSection(d.JVM)
	s.Notes = append(s.Notes, d.Warnings...)
	return []PageSection{s}
}

// writeJVMText prints the production report: the answer first (bytes per
// request, per endpoint and by thread; young GCs now and at the target
// rate; where the bytes come from and the fixes ranked by bytes saved per
// request; what the measurement cost), then the details.
func writeJVMText(w io.Writer, r *Report, d JVMData, prof asprof.Options) {
	e := d.JVM
	writeJVMHeader(w, d)
	writeRequestsLine(w, e)
	writeBytesPerRequest(w, e)
	writeEndpoints(w, e)
	writeYoungGCs(w, d)
	writeAllocatingSites(w, e)
	writeFixes(w, e.Fixes)
	writeOverheadLine(w, e, r, prof)

	WriteLoad(w, d.Load)
	writeAllocationAndGC(w, e)
	writeThreadPools(w, e.Threads)
	for _, a := range r.Artifacts {
		fmt.Fprintf(w, "wrote %s: %s\n", a.Kind, a.Path)
	}
	Heading(w, "Findings")
	WriteFindings(w, r.Findings)
}

// writeJVMHeader names the JVM and the window, then the warnings, before
// any number they qualify.
func writeJVMHeader(w io.Writer, d JVMData) {
	e := d.JVM
	event := e.ProfileEvent
	if event == "" {
		event = "none (the JVM exited)"
	}
	fmt.Fprintf(w, "JVM pid %d (%s), window %.1fs, async-profiler event %s\n", e.PID, e.Collector, float64(e.WindowNs)/1e9, event)
	if wl := e.Workload; wl != nil {
		fmt.Fprintf(w, "workload: %s\n", wl.Label())
	}
	for _, warn := range d.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

// writeBytesPerRequest is the answer: the whole process's bytes per
// request and the request threads' share of them, or why they are unknown.
func writeBytesPerRequest(w io.Writer, e evidence.JVM) {
	Heading(w, "Bytes per request")
	if perReq, ok := e.PerRequest(); ok {
		t := Table{Header: []string{"", "per request", ""}}
		t.Add("whole process (what the GC sees)", Bytes(perReq)+plusMinus(e.BytesPerRequestError), bytesSource(e))
		if th := e.Threads; th != nil && th.Request.BytesPerRequest != nil {
			t.Add("request threads (what code changes)", Bytes(*th.Request.BytesPerRequest)+plusMinus(th.Request.BytesPerRequestError), fmt.Sprintf("%s of the allocation, %d threads", Percent(th.Request.Share), th.Request.Threads))
			t.Add("background threads", Bytes(*th.Background.BytesPerRequest), fmt.Sprintf("%s: %s", Percent(th.Background.Share), topPools(th, false, 3)))
		}
		if e.Logging.BytesPerRequest > 0 {
			t.Add("of which logging", Bytes(e.Logging.BytesPerRequest), Percent(e.Logging.Share))
		}
		t.Write(w)
	} else {
		fmt.Fprintf(w, "unknown: %s\n", e.BytesPerRequestUnknown)
		if th := e.Threads; th != nil {
			fmt.Fprintf(w, "allocation by thread: request threads %s, background %s (%s)\n", Percent(th.Request.Share), Percent(th.Background.Share), topPools(th, false, 3))
		}
	}
}

// writeYoungGCs holds the young GCs counted against the model: at the
// window's own rate, then at the planning rate.
func writeYoungGCs(w io.Writer, d JVMData) {
	e := d.JVM
	Heading(w, "Young GCs")
	fmt.Fprintf(w, "now: %.1f per minute (%d in %.1fs, mean pause %s, GC time %s)", e.YoungGCsPerMinute, e.YoungGCs, float64(e.WindowNs)/1e9, Nanos(e.MeanYoungPauseNs), Percent(e.GCTimeShare))
	if o := d.Observed; o != nil {
		fmt.Fprintf(w, "; the model at the observed %.0f requests/s predicts %.1f", o.RPS, o.YoungGCsPerMinute)
	}
	fmt.Fprintln(w)
	if m := d.Model; m != nil {
		label := map[string]string{"target": "--target-rps", "observed": "the observed rate", "saturation": "the saturation rate of perfscope's load (a capacity, not your traffic: pass --target-rps to plan)"}[m.RPSSource]
		fmt.Fprintf(w, "at %.0f requests/s (%s): %.1f per minute, %s/s allocated into %s of Eden (%s); an Eden of %s gives one per %v\n",
			m.RPS, label, m.YoungGCsPerMinute, Bytes(m.AllocRate), Bytes(m.Eden), edenLabel(m.EdenSource), Bytes(m.EdenForTarget), time.Duration(e.TargetGCIntervalNs))
		fmt.Fprintln(w, "(the prediction uses the whole process's bytes per request: background threads fill Eden too)")
	} else if _, ok := e.PerRequest(); !ok {
		fmt.Fprintln(w, "no prediction: bytes per request are unknown")
	}
}

// writeAllocatingSites ranks the sites by bytes, or by weight when the
// profile was not of allocation and its samples are not bytes.
func writeAllocatingSites(w io.Writer, e evidence.JVM) {
	if len(e.Sites) == 0 {
		return
	}
	unit := "bytes"
	if e.ProfileEvent != string(asprof.Alloc) {
		unit = "weight"
	}
	Heading(w, "Top allocating sites by "+unit)
	st := Table{Header: []string{"share", unit, "per request", "frame"}}
	for _, s := range e.Sites {
		name := s.Frame
		if s.Type != "" {
			name += " → " + s.Type
		}
		per := "-"
		if s.BytesPerRequest > 0 {
			per = Bytes(s.BytesPerRequest)
		}
		val := Bytes(float64(s.Bytes))
		if unit != "bytes" {
			val = Count(float64(s.Bytes))
		}
		st.Add(Percent(s.Share), val, per, name)
	}
	st.Write(w)
}

func writeFixes(w io.Writer, fixes []evidence.AllocFix) {
	if len(fixes) == 0 {
		return
	}
	Heading(w, "Fixes, ranked by bytes saved per request")
	t := Table{Header: []string{"#", "saves", "share", "where", "allocates"}}
	for i, f := range fixes {
		per := "-"
		if f.BytesPerRequest != nil {
			per = Bytes(*f.BytesPerRequest)
		}
		where := f.Where
		switch f.Kind {
		case "logging":
			where = "logging (" + f.Where + "): parameterised messages, no eager formatting, guarded debug, garbage-free layouts"
		case "framework":
			where = "framework: " + f.Where
		}
		t.Add(strconv.Itoa(i+1), per, Percent(f.Share), where, strings.Join(f.Types, ", "))
	}
	t.Write(w)
}

// writeAllocationAndGC is the detail behind the answer: both allocation
// totals, their disagreement, and the GCs.
func writeAllocationAndGC(w io.Writer, e evidence.JVM) {
	Heading(w, "Allocation and GC")
	t := Table{Header: []string{"measure", "value"}}
	if e.ProfileEvent == string(asprof.Alloc) {
		t.Add("allocated (async-profiler)", Bytes(float64(e.AllocBytesProfiler)))
	}
	t.Add("allocated (hsperfdata Eden)", Bytes(float64(e.AllocBytesEden)))
	if a := e.AllocSampling; a != nil {
		t.Add("allocation samples", fmt.Sprintf("%d, one per %s on average: totals ±%s (2σ); async-profiler's own weighting said %s", a.Samples, Bytes(float64(a.IntervalBytes)), Percent(a.RelativeError), Bytes(float64(a.ProfilerBytes))))
		if a.IntervalNote != "" {
			t.Add("sampling interval", a.IntervalNote)
		}
	}
	if e.ProfileEvent == string(asprof.Alloc) {
		t.Add("disagreement", Percent(e.Disagreement))
		t.Add("allocation rate (async-profiler)", Bytes(e.AllocRateProfiler)+"/s")
	}
	t.Add("allocation rate (Eden)", Bytes(e.AllocRateEden)+"/s")
	if e.BytesPerRequestEden != nil {
		t.Add("bytes per request (Eden)", Bytes(*e.BytesPerRequestEden))
	}
	t.Add("young GCs", fmt.Sprintf("%d (%.1f/min, mean pause %s)", e.YoungGCs, e.YoungGCsPerMinute, Nanos(e.MeanYoungPauseNs)))
	t.Add("full/old GCs", strconv.FormatInt(e.OldGCs, 10))
	t.Add("GC time share", Percent(e.GCTimeShare))
	t.Add("Eden capacity", Bytes(float64(e.EdenCapacity)))
	t.Add("Eden at young GC", fmt.Sprintf("%s (%s)", Bytes(float64(e.EdenAtCollection)), edenLabel(e.EdenAtCollectionSource)))
	if e.RegionSize > 0 {
		t.Add("G1 region size", Bytes(float64(e.RegionSize)))
	}
	t.Write(w)
}

// writeThreadPools lists the ten pools that allocated most, each with
// why it counts as a request or a background pool.
func writeThreadPools(w io.Writer, th *evidence.ThreadSplit) {
	if th == nil || len(th.Pools) == 0 {
		return
	}
	Heading(w, "Threads")
	pt := Table{Header: []string{"pool", "kind", "threads", "share", "why"}}
	for i, p := range th.Pools {
		if i == 10 {
			break
		}
		kind := "background"
		if p.Request {
			kind = "request"
		}
		pt.Add(p.Pool, kind, strconv.Itoa(p.Threads), Percent(p.Share), p.Why)
	}
	pt.Write(w)
}

func writeRequestsLine(w io.Writer, e evidence.JVM) {
	n, ok := e.RequestCount()
	if !ok {
		fmt.Fprintf(w, "requests: unknown — %s\n", e.RequestsUnknown)
		return
	}
	src := map[string]string{"load": "perfscope's load", "user": "--requests", "metrics": "the metrics source", "passive-http": "the passive HTTP count"}[e.RequestsSource]
	rate := ""
	if e.RequestRate != nil {
		rate = fmt.Sprintf(" = %.1f/s", *e.RequestRate)
		if e.RateIsSaturation {
			rate += " (saturation: perfscope's load as fast as the service answered)"
		}
	}
	fmt.Fprintf(w, "requests: %d%s, counted by %s, ±%s", n, rate, src, Percent(e.RequestsUncertainty))
	if len(e.StatusClasses) > 0 {
		var parts []string
		for c, k := range e.StatusClasses {
			parts = append(parts, fmt.Sprintf("%s %d", c, k))
		}
		sort.Strings(parts)
		fmt.Fprintf(w, " [%s]", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if e.RequestsNote != "" {
		fmt.Fprintf(w, "  (%s)\n", e.RequestsNote)
	}
	if c := e.RequestCrossCheck; c != nil {
		fmt.Fprintf(w, "  cross-check: %s counted %d (%+.1f%%)\n", c.Source, c.Requests, c.Difference*100)
	}
}

func writeEndpoints(w io.Writer, e evidence.JVM) {
	if len(e.Endpoints) == 0 {
		return
	}
	fmt.Fprintln(w, "\nper endpoint (handler = outermost application frame under the framework's dispatcher):")
	t := Table{Header: []string{"endpoint", "requests", "per request", "in handler", "logging", "share", "handler"}}
	opt := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return Bytes(*v)
	}
	for i, ep := range e.Endpoints {
		if i == 12 {
			break
		}
		name := strings.TrimSpace(ep.Method + " " + ep.Endpoint)
		if name == "" {
			name = "(endpoint not known)"
		}
		reqs := "-"
		if ep.Requests != nil {
			reqs = strconv.FormatInt(*ep.Requests, 10)
		}
		logging := opt(ep.LoggingBytesPerRequest)
		if ep.LoggingBytesPerRequest != nil && *ep.LoggingBytesPerRequest > 0 {
			logging = "+" + logging
		}
		t.Add(name, reqs, opt(ep.BytesPerRequest), opt(ep.HandlerBytesPerRequest), logging, Percent(ep.Share), ep.Handler)
	}
	t.Write(w)
	if n, ok := e.RequestCount(); ok && n > 0 && e.FrameworkBytes > 0 {
		fmt.Fprintf(w, "framework work outside the handlers (dispatch, message conversion, serialisation): %s per request of every endpoint, included in \"per request\"\n", Bytes(float64(e.FrameworkBytes)/float64(n)))
	}
}

func topPools(th *evidence.ThreadSplit, request bool, n int) string {
	var parts []string
	for _, p := range th.Pools {
		if p.Request != request {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s", p.Pool, Percent(p.Share)))
		if len(parts) == n {
			break
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func bytesSource(e evidence.JVM) string {
	if e.ProfileEvent == string(asprof.Alloc) {
		s := "async-profiler's allocation total"
		if e.BytesPerRequestEden != nil {
			s += fmt.Sprintf("; hsperfdata Eden says %s (%+.1f%%)", Bytes(*e.BytesPerRequestEden), -e.Disagreement/(1+e.Disagreement)*100)
		}
		return s
	}
	return "hsperfdata Eden (no allocation profile)"
}

func edenLabel(source string) string {
	switch source {
	case "hsperfdata-cycle":
		return "allocated per GC cycle, as the JVM published at each young GC"
	case "hsperfdata-occupancy":
		return "occupancy before young GCs, from hsperfdata samples"
	}
	return "capacity: the window saw no young GC"
}

// Measured cost of one allocation sample (BENCHMARKS.md, "jvm: overhead on
// the sample app"): async-profiler takes the stack through JVMTI and names
// the class.
const (
	sampleCostLowNs  = 15e3
	sampleCostHighNs = 30e3
)

func writeOverheadLine(w io.Writer, e evidence.JVM, r *Report, prof asprof.Options) {
	Heading(w, "What the measurement cost")
	// The interval the session ran with: the one given, or the one chosen
	// from the allocation rate.
	interval := prof.AllocInterval
	if a := e.AllocSampling; a != nil && a.IntervalBytes > 0 {
		interval = a.IntervalBytes
	}
	if e.ProfileEvent == string(asprof.Alloc) && interval > 0 && e.WindowNs > 0 {
		samples := e.AllocRateProfiler / float64(interval)
		fmt.Fprintf(w, "async-profiler, one allocation sample per %s: %.0f samples/s × 15–30 µs = %.1f–%.1f ms of the JVM's CPU per second (%s–%s of a core) while the window ran; see BENCHMARKS.md for throughput and latency at 500–2000 req/s\n",
			Bytes(float64(interval)), samples, samples*sampleCostLowNs/1e6, samples*sampleCostHighNs/1e6, Percent(samples*sampleCostLowNs/1e9), Percent(samples*sampleCostHighNs/1e9))
	}
	if r.Overhead != nil && len(r.Overhead.Programs) > 0 {
		var runs, ns uint64
		var hooks []string
		for _, p := range r.Overhead.Programs {
			runs += p.RunCount
			ns += p.RunTimeNs
			hooks = append(hooks, p.Program)
		}
		fmt.Fprintf(w, "passive request count (eBPF on %s): %d program runs, %s in total (%s of one CPU over the window)\n", strings.Join(hooks, ", "), runs, Nanos(float64(ns)), Percent(float64(ns)/float64(max(e.WindowNs, 1))))
	}
	if r.Overhead != nil {
		WriteRunCost(w, r.Overhead)
	}
}

// plusMinus is a sampled figure's error (±2σ), when known.
func plusMinus(err *float64) string {
	if err == nil {
		return ""
	}
	return " ±" + Bytes(*err)
}
