// Package jvm measures a running JVM without restarting it: allocation per
// request and GC pressure, from async-profiler (loaded through the attach
// protocol) and hsperfdata, over a window timed by a duration or by a load
// perfscope drives itself. Requests are counted by the load, by the user,
// from a metrics endpoint the service exposes, or passively from the JVM's
// own socket writes. `perfscope jvm` and `perfscope lab jvm` both run
// Measure.
package jvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/probes"
)

// PassiveMode says whether requests are counted from the JVM's socket
// writes when perfscope does not drive the load.
type PassiveMode int

const (
	// PassiveAuto counts passively when the kernel allows it, and says
	// why not otherwise.
	PassiveAuto PassiveMode = iota
	// PassiveOff never loads the probe.
	PassiveOff
	// PassiveRequired fails when the probe cannot run.
	PassiveRequired
)

// Options configure one measurement.
type Options struct {
	PID int
	FS  hsperf.FS
	// Duration is the window when perfscope does not drive the load.
	Duration time.Duration
	// Requests the user drove during Duration (--requests); 0 unknown.
	// When the window is cut short the count is scaled to it.
	Requests int64
	// Load, when set, is driven by perfscope and times the window.
	Load *httpload.Spec
	// RequestsFrom counts requests from a metrics endpoint.
	RequestsFrom *MetricsSource
	// MappingsURL is Spring Boot Actuator's mappings endpoint, which
	// joins request handlers to endpoints; empty derives it from an
	// Actuator RequestsFrom URL.
	MappingsURL string
	// Passive and HTTPPorts: the passive count and the listening ports
	// it watches (all of the JVM's when empty). PassiveAuto runs it only
	// when no other source counts the requests.
	Passive   PassiveMode
	HTTPPorts []uint16
	// OpenPassive opens the passive counter (tests replace it).
	OpenPassive func(pid int, ports []uint16) (RequestCounter, error)
	// Attribution splits the profile by thread and request handler.
	Attribution Attribution
	Locator     asprof.Locator
	Profile     asprof.Options
	TopSites    int
	// SampleEvery is the hsperfdata sampling period (DefaultSampleEvery
	// when zero).
	SampleEvery      time.Duration
	TargetRPS        float64
	TargetGCInterval time.Duration
	// Started is called once the profiler runs (progress, tests).
	Started func()
	// Settle is how long allocation sampling runs before the window
	// begins (DefaultSamplerSettle when zero, none when negative).
	Settle time.Duration
}

// DefaultSamplerSettle is how long the allocation sampler runs before the
// window begins. The JVM places sample points only in thread-local
// allocation buffers (TLABs) handed out after sampling was enabled: what a
// thread allocates in the TLAB it already had is never sampled. TLABs are
// sized for about 50 refills between young GCs, up to megabytes for a
// busy thread, so this blind start is a fixed loss per thread: 8 threads
// allocating 1 MB/s each were counted 9 % short over 9 s, the Spring Boot
// service's request threads 8 % (their first samples came 0.1-1.5 s after
// the start instead of within 30 ms). Samples taken while the sampler
// settles are dropped, and requests are counted from the window's start.
const DefaultSamplerSettle = 2 * time.Second

// AutoAllocSamples is how many allocation samples an interval chosen
// from the JVM's allocation rate gives a window at that rate: the whole
// process's bytes to ±2/√n = ±4 % (two standard deviations), and the
// request threads' to ±5 % while they hold two thirds of them or more.
// Each sample costs the allocating thread 15-30 µs, so the JVM pays
// 2500 ÷ window samples a second whatever it allocates: 250 a second,
// 0.4-0.8 % of a core, over the default 10 s.
const AutoAllocSamples = 2500

// MinAutoAllocInterval is the least interval the rate may choose. A JVM
// quiet before the window that a flood hits during it pays its rate ÷
// interval in samples: at 16 KiB, 100 MB/s costs 6400 samples a second,
// 10-19 % of a core, for the window's length (--alloc-interval sets the
// interval instead).
const MinAutoAllocInterval = 16 << 10

// Before the profiler starts, perfscope reads hsperfdata for up to
// rateWaitMax, until Eden grew by freshGrowth: G1 publishes Eden's use one
// region at a time, and a smaller growth is mostly that step.
const (
	rateWaitMax = 2 * time.Second
	freshGrowth = 16 << 20
	rateSpanMin = time.Second
)

// AllocRate is the JVM's allocation rate before the window, from
// hsperfdata, and how it was read.
type AllocRate struct {
	BytesPerSecond float64
	// Over is the span it was measured over; How says from what.
	Over time.Duration
	How  string
}

// AutoAllocInterval is the sampling interval that gives a window of
// length window at rate bytes/s AutoAllocSamples samples, in whole KiB,
// at least MinAutoAllocInterval.
func AutoAllocInterval(rate float64, window time.Duration) int64 {
	n := int64(rate*window.Seconds()/AutoAllocSamples) >> 10 << 10
	return max(n, MinAutoAllocInterval)
}

// allocRateBefore measures the allocation rate from hsperfdata before the
// profiler starts: Eden's growth (across young GCs, as the window counts
// it) while perfscope reads every DefaultSampleEvery, as soon as it grew
// by freshGrowth, at most for rateWaitMax. A JVM that allocated less in
// that time is quiet: its rate is Eden's use since its last young GC ended
// (Eden fills from empty after each; since it started when it never
// collected), a longer span, when that is at least rateSpanMin. Only the
// fresh reading follows a change of traffic: the span since the last GC
// may hold a burst (a warm-up) that is over. ok is false when hsperfdata
// says nothing usable (JDK 25's Serial and Parallel publish Eden's use
// only at a GC): the interval then stays the default.
func allocRateBefore(ctx context.Context, fs hsperf.FS, path string, first hsperf.Heap) (AllocRate, bool) {
	var w edenGrowth
	w.add(first)
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return AllocRate{}, false
		case <-time.After(DefaultSampleEvery):
		}
		h, err := heapNow(fs, path)
		if err != nil {
			return AllocRate{}, false
		}
		w.add(h)
		waited := time.Since(start)
		if w.bytes >= freshGrowth {
			return AllocRate{BytesPerSecond: float64(w.bytes) / waited.Seconds(), Over: waited, How: "Eden's growth"}, true
		}
		if waited < rateWaitMax {
			continue
		}
		clock := h.Clock
		if clock == 0 {
			clock = time.Since(h.VMStarted) // JDK 25 publishes no clock
		}
		if since := clock - h.YoungGCEnded; since >= rateSpanMin && h.EdenUsed > 0 {
			how := "Eden's use since the last young GC"
			if h.YoungGCs == 0 {
				how = "Eden's use since the JVM started"
			}
			return AllocRate{BytesPerSecond: float64(h.EdenUsed) / since.Seconds(), Over: since, How: how}, true
		}
		if w.bytes > 0 {
			return AllocRate{BytesPerSecond: float64(w.bytes) / waited.Seconds(), Over: waited, How: "Eden's growth"}, true
		}
		return AllocRate{}, false
	}
}

// edenGrowth adds up what was allocated between heap readings: Eden's
// growth, and across one young GC the cycle's allocation the JVM
// published at it less what Eden held at the reading before, plus what it
// holds now. hsperf.Window's reconstruction across a GC (the Eden left to
// fill before it) takes G1's Eden capacity for where the GC came, and G1
// collects before its capacity is full: once, a GC inside a 2 s reading
// made the rate 60 % high and the interval gave 1500 samples, not 2500.
type edenGrowth struct {
	last  hsperf.Heap
	seen  bool
	bytes int64
}

func (g *edenGrowth) add(h hsperf.Heap) {
	if !g.seen {
		g.last, g.seen = h, true
		return
	}
	prev := g.last
	g.last = h
	switch young, old := h.YoungGCs-prev.YoungGCs, h.OldGCs-prev.OldGCs; {
	case young == 0 && old == 0:
		g.bytes += max(0, h.EdenUsed-prev.EdenUsed)
	case young == 1 && old == 0 && h.HasCycle && h.CycleAllocated > 0:
		g.bytes += max(0, h.CycleAllocated-prev.EdenUsed) + h.EdenUsed
	default:
		// Several GCs: the window's reconstruction of that step alone.
		var w hsperf.Window
		w.Add(prev)
		w.Add(h)
		g.bytes += w.EdenAllocated
	}
}

// Result is one measurement.
type Result struct {
	Evidence evidence.JVM
	Load     *httpload.Result
	// Profile is nil when the JVM exited before it could be read.
	Profile *asprof.Profile
	// AttachNs is the time from Measure's start until profiling ran.
	AttachNs int64
	// SettleNs is how long the allocation sampler ran before the window.
	SettleNs int64
	// IntervalAuto: the allocation interval was chosen from RateBefore
	// (none was given); RateBefore is zero when it was given, or could not
	// be measured (then IntervalNote says why the default was kept).
	IntervalAuto bool
	RateBefore   *AllocRate
	IntervalNote string
	// Warnings are things the report must say (a count scaled to a
	// window cut short, a source that could not be used).
	Warnings []string
	// Interrupted: Ctrl-C ended the window early.
	Interrupted bool
	// BPF is the passive counter's own cost (bpf_stats).
	BPF []evidence.ProgramCost
}

// ErrTargetExited: the JVM exited mid-run. Measure still returns what was
// measured until then.
var ErrTargetExited = errors.New("the JVM exited during the measurement")

// DefaultSampleEvery is how often hsperfdata is read during the window.
// Faster buys no accuracy: across a young GC the Eden-based allocation
// counts the Eden left to fill (capacity - used at the last sample), which
// does not depend on how recent that sample is, and the JVM itself
// refreshes its sampled counters only every 50 ms
// (PerfDataSamplingInterval). Each read costs perfscope about 0.3 ms of
// CPU (open through /proc/PID/root, 32 KiB, every counter decoded), so the
// first default of 20 ms took 1.5 % of a core next to the JVM; 100 ms
// takes 0.4 %. Only more than one young GC between two samples (more than
// 10 a second) makes the estimate assume the Eden size did not change.
// The same tick notices the JVM exiting.
const DefaultSampleEvery = 100 * time.Millisecond

// counters are the request sources of one window.
type counters struct {
	metrics      RequestCounter
	passive      RequestCounter
	passiveWhy   string // why there is no passive count
	mapping      HandlerMapping
	statsCloser  io.Closer
	metricsCount *RequestCounts
	passiveCount *RequestCounts
}

func (c *counters) close() {
	if c.passive != nil {
		c.passive.Close()
	}
	if c.statsCloser != nil {
		c.statsCloser.Close()
	}
}

// ErrBadSource marks a request source the user named that cannot be used
// (an unreachable metrics URL, a metric it does not publish).
var ErrBadSource = errors.New("request source unusable")

func (o *Options) openCounters(ctx context.Context, res *Result) (*counters, error) {
	c := &counters{}
	if o.Load != nil {
		return c, nil
	}
	if o.RequestsFrom != nil {
		m := NewMetricsCounter(*o.RequestsFrom)
		// A first reading proves the source before anything runs in
		// the JVM; the window's own reading comes later.
		if err := m.Begin(ctx); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSource, err)
		}
		c.metrics = m
	}
	mappings := o.MappingsURL
	if mappings == "" && o.RequestsFrom != nil {
		mappings = actuatorSibling(o.RequestsFrom.URL, "mappings")
	}
	if mappings != "" {
		client := &http.Client{Timeout: 10 * time.Second}
		if o.RequestsFrom != nil && o.RequestsFrom.Client != nil {
			client = o.RequestsFrom.Client
		}
		m, err := SpringMappings(ctx, client, mappings)
		if err != nil {
			if o.MappingsURL != "" {
				return nil, fmt.Errorf("%w: --mappings: %v", ErrBadSource, err)
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("no handler → endpoint mapping from %s (%v): per-endpoint bytes are per handler only", mappings, err))
		} else {
			c.mapping = m
		}
	}
	switch {
	case o.Passive == PassiveOff:
		c.passiveWhy = "the passive count is off (--count off)"
		return c, nil
	case o.Passive == PassiveAuto && (o.RequestsFrom != nil || o.Requests > 0):
		// Another source counts; the passive count would only check it,
		// and it costs every process on the machine about 0.1 µs per
		// syscall while it runs (BENCHMARKS.md): --count on asks for it.
		c.passiveWhy = "the passive count was not needed (--count on adds it as a cross-check)"
		return c, nil
	}
	open := o.OpenPassive
	if open == nil {
		open = func(pid int, ports []uint16) (RequestCounter, error) {
			return OpenPassiveCounter(o.FS.Root, pid, ports)
		}
	}
	p, err := open(o.PID, o.HTTPPorts)
	if err != nil {
		if o.Passive == PassiveRequired {
			return nil, fmt.Errorf("passive request count: %w", err)
		}
		c.passiveWhy = "the passive HTTP count could not run: " + err.Error()
		return c, nil
	}
	c.passive = p
	if closer, err := probes.EnableStats(); err == nil {
		c.statsCloser = closer
	}
	return c, nil
}

// actuatorSibling turns .../actuator/prometheus into .../actuator/NAME;
// "" when the URL is not an Actuator endpoint.
func actuatorSibling(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	dir, last, ok := strings.Cut(strings.TrimSuffix(u.Path, "/"), "/actuator/")
	if !ok || strings.Contains(last, "/") {
		return ""
	}
	u.Path = dir + "/actuator/" + name
	u.RawQuery = ""
	return u.String()
}

// Measure attaches, profiles over the window, and always stops the
// profiler before it returns, also when ctx is cancelled. When the JVM
// exits mid-run it returns at once with what was measured and an error
// wrapping ErrTargetExited.
func Measure(ctx context.Context, o Options) (*Result, error) {
	begin := time.Now()
	if o.SampleEvery <= 0 {
		o.SampleEvery = DefaultSampleEvery
	}
	target, err := attach.Preflight(o.FS, o.PID)
	if err != nil {
		return nil, err
	}
	if target.HsperfPath == "" {
		return nil, fmt.Errorf("pid %d: %w (the JVM runs with -XX:-UsePerfData; GC counters are needed)", o.PID, hsperf.ErrNotFound)
	}
	lib, err := o.Locator.Library(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	cs, err := o.openCounters(ctx, res)
	if err != nil {
		return nil, err
	}
	defer cs.close()
	flags, _ := target.Jcmd(ctx, "VM.flags")

	first, err := heapNow(o.FS, target.HsperfPath)
	if err != nil {
		return nil, err
	}
	if o.Profile.Event == asprof.Alloc && o.Profile.AllocInterval == 0 {
		o.Profile.AllocInterval = o.chooseAllocInterval(ctx, target, first, res)
		if first, err = heapNow(o.FS, target.HsperfPath); err != nil {
			return nil, err
		}
	}
	sess, err := asprof.Start(ctx, target, lib, o.Profile)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	res.Warnings = append(res.Warnings, sess.Notes()...)
	res.AttachNs = int64(time.Since(begin))
	if o.Started != nil {
		o.Started()
	}

	if o.Profile.Event == asprof.Alloc {
		settle := o.Settle
		if settle == 0 {
			settle = DefaultSamplerSettle
		}
		if settle > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(settle):
			}
		}
		res.SettleNs = int64(settle)
	}
	// The window's context ends with the duration, the load, Ctrl-C or
	// the JVM's exit, whichever comes first.
	winCtx, endWindow := context.WithCancel(ctx)
	defer endWindow()
	counting := time.Now()
	if cs.metrics != nil {
		if err := cs.metrics.Begin(winCtx); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSource, err)
		}
	}
	if cs.passive != nil {
		if err := cs.passive.Begin(winCtx); err != nil {
			return nil, fmt.Errorf("passive request count: %w", err)
		}
	}
	// Samples count from the middle of the request counters' first
	// readings (a metrics scrape takes milliseconds), so that bytes and
	// requests cover the same window.
	sess.SetWindowStart(counting.Add(time.Since(counting) / 2))
	var w hsperf.Window
	w.Add(first)
	windowStart := time.Now()
	var sampling sync.WaitGroup
	var sampleErr error
	var exited bool
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		defer gosafe.Recover(&sampleErr)
		t := time.NewTicker(o.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-winCtx.Done():
				return
			case <-t.C:
			}
			// kill -9 leaves hsperfdata behind, still readable: the
			// process itself says whether the JVM is alive.
			if !alive(o.FS, target) {
				exited = true
				endWindow()
				return
			}
			h, err := heapNow(o.FS, target.HsperfPath)
			if err != nil {
				// A JVM exiting between the two reads looks like
				// unreadable counters.
				if !alive(o.FS, target) {
					exited = true
				} else {
					sampleErr = err
				}
				endWindow()
				return
			}
			w.Add(h)
		}
	}()

	var runErr error
	if o.Load != nil {
		lr, err := httpload.Run(winCtx, *o.Load)
		res.Load = &lr
		runErr = err
	} else {
		select {
		case <-winCtx.Done():
			runErr = ctx.Err()
		case <-time.After(o.Duration):
		}
	}
	endWindow()
	sampling.Wait()
	window := time.Since(windowStart)
	if !exited && sampleErr == nil {
		if !alive(o.FS, target) {
			exited = true
		} else if last, err := heapNow(o.FS, target.HsperfPath); err != nil {
			if !alive(o.FS, target) {
				exited = true
			} else {
				sampleErr = err
			}
		} else {
			w.Add(last)
		}
	}
	// The counters' end readings are taken before the profiler stops, so
	// both cover the same window: samples count up to the middle of those
	// readings, not while the stop command makes its way into the JVM
	// (140 ms here, 1.4 % of a 10 s window).
	endCtx := context.WithoutCancel(ctx)
	ending := time.Now()
	if cs.passive != nil {
		if c, err := cs.passive.End(endCtx); err != nil {
			cs.passiveWhy = "the passive HTTP count could not be read: " + err.Error()
		} else {
			cs.passiveCount = &c
		}
		if pc, ok := cs.passive.(*passiveCounter); ok {
			for _, c := range pc.probe.Costs() {
				res.BPF = append(res.BPF, evidence.NewProgramCost(c.Program, c.RunCount, c.RunTime))
			}
		}
	}
	if cs.metrics != nil && !exited {
		if c, err := cs.metrics.End(endCtx); err != nil {
			res.Warnings = append(res.Warnings, "the metrics source could not be read at the window's end: "+err.Error())
		} else {
			cs.metricsCount = &c
		}
	}
	sess.SetWindowEnd(ending.Add(time.Since(ending) / 2))
	if exited {
		// Nothing can be asked of a dead JVM; Close only removes
		// perfscope's files (through the descriptor it kept).
		sess.Close()
		res.Warnings = append(res.Warnings, fmt.Sprintf("pid %d exited %.1fs into the window; the report covers what was measured until then (no allocation profile: async-profiler's data died with the JVM)", o.PID, window.Seconds()))
		res.Evidence = o.evidence(target, &w, window, nil, res, cs)
		return res, fmt.Errorf("pid %d: %w", o.PID, ErrTargetExited)
	}
	prof, stopErr := sess.Stop(ctx)
	if errors.Is(runErr, context.Canceled) && ctx.Err() != nil {
		// Ctrl-C ends the window early: what was measured so far is
		// reported, like every other perfscope command.
		runErr = nil
		res.Interrupted = true
	}
	if sampleErr != nil {
		return nil, fmt.Errorf("the JVM's hsperfdata could not be read mid-run: %w", sampleErr)
	}
	if runErr != nil {
		return nil, runErr
	}
	if stopErr != nil {
		return nil, stopErr
	}
	res.Profile = prof
	res.Evidence = o.evidence(target, &w, window, prof, res, cs)
	res.Evidence.RegionSize, res.Evidence.MaxHeap = parseFlags(flags)
	if res.Evidence.MaxHeap == 0 {
		res.Evidence.MaxHeap = w.Last.OldMaxCapacity
	}
	return res, nil
}

// alive says whether the JVM still runs: the pid exists, is the same
// process (its namespaced pid), and is not a zombie. kill -9 leaves
// hsperfdata behind, still readable, so the counters cannot say it.
// chooseAllocInterval picks the allocation sampling interval when none
// was given: from the allocation rate before the window, so that the
// window has AutoAllocSamples samples — a ±5 % bound — whatever the
// JVM allocates (at async-profiler's 512 KiB a service allocating 5 MB/s
// had about 120 samples in 10 s: ±18 %). Under perfscope's own load the
// rate before it says nothing of the rate during it: the default stays.
func (o *Options) chooseAllocInterval(ctx context.Context, t *attach.Target, first hsperf.Heap, res *Result) int64 {
	if o.Load != nil {
		res.IntervalNote = fmt.Sprintf("--load: the allocation rate before the load says nothing of the rate during it; async-profiler's %s kept", sizeText(asprof.DefaultAllocInterval))
		return asprof.DefaultAllocInterval
	}
	rate, ok := allocRateBefore(ctx, o.FS, t.HsperfPath, first)
	if !ok {
		res.IntervalNote = fmt.Sprintf("the allocation rate before the window could not be read from hsperfdata; async-profiler's %s kept", sizeText(asprof.DefaultAllocInterval))
		return asprof.DefaultAllocInterval
	}
	res.IntervalAuto, res.RateBefore = true, &rate
	interval := AutoAllocInterval(rate.BytesPerSecond, o.Duration)
	res.IntervalNote = fmt.Sprintf("%s, chosen from the %.1f MB/s the JVM allocated before the window (%s over %.1fs) for %d samples over %v",
		sizeText(interval), rate.BytesPerSecond/1e6, rate.How, rate.Over.Seconds(), AutoAllocSamples, o.Duration)
	if interval == MinAutoAllocInterval {
		res.IntervalNote += " (its floor: a JVM allocating less gets fewer samples)"
	}
	return interval
}

// sizeText is a byte count as the flags take it: 512k, 1.5m, 900.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "m"
	case n >= 1<<10:
		return strconv.FormatInt(n>>10, 10) + "k"
	}
	return strconv.FormatInt(n, 10)
}

func alive(fs hsperf.FS, t *attach.Target) bool {
	p, err := fs.Process(t.Process.PID)
	return err == nil && !p.Exited && p.NSPID == t.Process.NSPID
}

func heapNow(fs hsperf.FS, path string) (hsperf.Heap, error) {
	s, err := fs.Snapshot(path)
	if err != nil {
		return hsperf.Heap{}, err
	}
	return s.Heap(), nil
}

// requestCounts picks the window's request count: perfscope's load, then
// the user's count, then the metrics source, then the passive count. It
// returns nil with the reason when none is known.
func (o *Options) requestCounts(window time.Duration, res *Result, cs *counters) (*RequestCounts, string) {
	switch {
	case res.Load != nil:
		l := res.Load
		c := &RequestCounts{Total: l.Completed, Source: "load", StatusClasses: l.StatusClasses}
		c.Note = fmt.Sprintf("%d requests sent by perfscope, %d answered (%d outside 2xx), %d without an answer", l.Completed+l.Failures, l.Completed, l.Non2xx, l.Failures)
		if u, err := url.Parse(o.Load.URL); err == nil {
			c.Endpoints = []EndpointCount{{Method: o.Load.Method, Endpoint: u.Path, Requests: l.Completed}}
		}
		return c, ""
	case o.Requests > 0:
		c := &RequestCounts{Total: o.Requests, Source: "user", Note: "--requests, as given"}
		if window < o.Duration*99/100 {
			// The user counted requests over --duration; only part of
			// it was measured. Spread evenly, the measured part saw
			// this share.
			scaled := int64(math.Round(float64(o.Requests) * window.Seconds() / o.Duration.Seconds()))
			c.Total = scaled
			c.Note = fmt.Sprintf("--requests %d was for %v but only %.1fs were measured: scaled to %d, assuming an even rate", o.Requests, o.Duration, window.Seconds(), scaled)
			c.Uncertainty = 0.1
			res.Warnings = append(res.Warnings, c.Note)
		}
		return c, ""
	case cs.metricsCount != nil:
		return cs.metricsCount, ""
	case cs.passiveCount != nil && cs.passiveCount.Total > 0:
		return cs.passiveCount, ""
	}
	why := "no request count: no --load, --requests or --requests-from"
	switch {
	case cs.passiveCount != nil:
		why += "; the passive HTTP count saw no HTTP/1.x response from the JVM (" + cs.passiveCount.Note + "); TLS and HTTP/2 are not visible to it: pass --requests-from URL"
	case cs.passiveWhy != "":
		why += "; " + cs.passiveWhy
	}
	return nil, why
}

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

// IsInterrupted says whether err is the window being cut short.
func IsInterrupted(err error) bool {
	return errors.Is(err, context.Canceled)
}
