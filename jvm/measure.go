// Package jvm measures a running JVM without restarting it: allocation per
// request and GC pressure, from async-profiler (loaded through the attach
// protocol) and hsperfdata, over a window timed by a duration or by a load
// perfscope drives itself. `perfscope jvm` and `perfscope lab jvm` both
// run Measure.
package jvm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/httpload"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
)

// Options configure one measurement.
type Options struct {
	PID int
	FS  hsperf.FS
	// Duration is the window when perfscope does not drive the load.
	Duration time.Duration
	// Requests the user drove during Duration (--requests); 0 unknown.
	Requests int64
	// Load, when set, is driven by perfscope and times the window.
	Load     *httpload.Spec
	Locator  asprof.Locator
	Profile  asprof.Options
	TopSites int
	// SampleEvery is the hsperfdata sampling period (DefaultSampleEvery
	// when zero).
	SampleEvery      time.Duration
	TargetRPS        float64
	TargetGCInterval time.Duration
	// Started is called once the profiler runs (progress, tests).
	Started func()
}

// Result is one measurement.
type Result struct {
	Evidence evidence.JVM
	Load     *httpload.Result
	Profile  *asprof.Profile
	// AttachNs is the time from Measure's start until profiling ran.
	AttachNs int64
}

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
const DefaultSampleEvery = 100 * time.Millisecond

// Measure attaches, profiles over the window, and always stops the
// profiler before it returns, also when ctx is cancelled.
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
	flags, _ := target.Jcmd(ctx, "VM.flags")

	first, err := heapNow(o.FS, target.HsperfPath)
	if err != nil {
		return nil, err
	}
	sess, err := asprof.Start(ctx, target, lib, o.Profile)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	res := &Result{AttachNs: int64(time.Since(begin))}
	if o.Started != nil {
		o.Started()
	}

	var w hsperf.Window
	w.Add(first)
	windowStart := time.Now()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	var sampleErr error
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		t := time.NewTicker(o.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
			h, err := heapNow(o.FS, target.HsperfPath)
			if err != nil {
				sampleErr = err
				return
			}
			w.Add(h)
		}
	}()

	var runErr error
	if o.Load != nil {
		lr, err := httpload.Run(ctx, *o.Load)
		res.Load = &lr
		runErr = err
	} else {
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
		case <-time.After(o.Duration):
		}
	}
	stopSampling()
	sampling.Wait()
	window := time.Since(windowStart)
	if sampleErr == nil {
		last, err := heapNow(o.FS, target.HsperfPath)
		if err != nil {
			sampleErr = err
		} else {
			w.Add(last)
		}
	}
	prof, stopErr := sess.Stop(ctx)
	// Ctrl-C ends the window early: what was measured so far is reported,
	// like every other perfscope command.
	if errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	if runErr != nil {
		return nil, runErr
	}
	if stopErr != nil {
		return nil, stopErr
	}
	if sampleErr != nil {
		return nil, fmt.Errorf("the JVM's hsperfdata went away mid-run (did it exit?): %w", sampleErr)
	}
	res.Profile = prof

	requests, source := o.Requests, ""
	if requests > 0 {
		source = "user"
	}
	if res.Load != nil {
		requests, source = res.Load.Completed+res.Load.Non2xx, "load"
	}
	res.Evidence = buildEvidence(target, &w, window, prof, requests, o)
	res.Evidence.RequestsSource = source
	res.Evidence.RegionSize, res.Evidence.MaxHeap = parseFlags(flags)
	if res.Evidence.MaxHeap == 0 {
		res.Evidence.MaxHeap = w.Last.OldMaxCapacity
	}
	return res, nil
}

func heapNow(fs hsperf.FS, path string) (hsperf.Heap, error) {
	s, err := fs.Snapshot(path)
	if err != nil {
		return hsperf.Heap{}, err
	}
	return s.Heap(), nil
}

func buildEvidence(t *attach.Target, w *hsperf.Window, window time.Duration, p *asprof.Profile, requests int64, o Options) evidence.JVM {
	secs := window.Seconds()
	e := evidence.JVM{
		PID:                t.Process.PID,
		NSPID:              t.Process.NSPID,
		Collector:          w.Last.Policy,
		WindowNs:           int64(window),
		Requests:           requests,
		ProfileEvent:       string(p.Event),
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
	if p.Event == asprof.Alloc {
		e.AllocBytesProfiler = p.Total
		if secs > 0 {
			e.AllocRateProfiler = float64(p.Total) / secs
		}
		if e.AllocBytesEden > 0 {
			e.Disagreement = float64(p.Total-e.AllocBytesEden) / float64(e.AllocBytesEden)
		}
	}
	if requests > 0 {
		e.BytesPerRequestEden = float64(e.AllocBytesEden) / float64(requests)
		e.BytesPerRequest = e.BytesPerRequestEden
		if p.Event == asprof.Alloc {
			e.BytesPerRequest = float64(p.Total) / float64(requests)
		}
	}
	e.Sites, e.Logging = Sites(p, requests, o.TopSites)
	return e
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
