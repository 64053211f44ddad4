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
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/base/procwatch"
	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
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
	// WindowStarts and WindowEnds are called when the measured window
	// (after the sampler settled; the load perfscope drives) begins and
	// ends, for probes measuring the same window beside it.
	WindowStarts, WindowEnds func()
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

// Measure attaches, profiles over the window, and always stops the
// profiler before it returns, also when ctx is cancelled. When the JVM
// exits mid-run it returns at once with what was measured and an error
// wrapping ErrTargetExited.
func Measure(ctx context.Context, o Options) (*Result, error) {
	begin := time.Now()
	if o.SampleEvery <= 0 {
		o.SampleEvery = DefaultSampleEvery
	}
	target, lib, err := o.preflight(ctx)
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

	first, err := o.heapBeforeProfiling(ctx, target, res)
	if err != nil {
		return nil, err
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
	o.settle(ctx, res)

	if o.WindowStarts != nil {
		o.WindowStarts()
	}
	win, err := o.runWindow(ctx, target, sess, cs, first, res)
	if o.WindowEnds != nil {
		o.WindowEnds()
	}
	if err != nil {
		return nil, err
	}
	o.readCountersAtEnd(ctx, sess, cs, win.exited, res)
	if win.exited {
		// Nothing can be asked of a dead JVM; Close only removes
		// perfscope's files (through the descriptor it kept).
		sess.Close()
		res.Warnings = append(res.Warnings, fmt.Sprintf("pid %d exited %.1fs into the window; the report covers what was measured until then (no allocation profile: async-profiler's data died with the JVM)", o.PID, win.length.Seconds()))
		res.Evidence = o.evidence(target, &win.heap, win.length, nil, res, cs)
		return res, fmt.Errorf("pid %d: %w", o.PID, ErrTargetExited)
	}
	prof, stopErr := sess.Stop(ctx)
	if errors.Is(win.runErr, context.Canceled) && ctx.Err() != nil {
		// Ctrl-C ends the window early: what was measured so far is
		// reported, like every other perfscope command.
		win.runErr = nil
		res.Interrupted = true
	}
	if win.sampleErr != nil {
		return nil, fmt.Errorf("the JVM's hsperfdata could not be read mid-run: %w", win.sampleErr)
	}
	if win.runErr != nil {
		return nil, win.runErr
	}
	if stopErr != nil {
		return nil, stopErr
	}
	res.Profile = prof
	res.Evidence = o.evidence(target, &win.heap, win.length, prof, res, cs)
	res.Evidence.RegionSize, res.Evidence.MaxHeap = parseFlags(flags)
	if res.Evidence.MaxHeap == 0 {
		res.Evidence.MaxHeap = win.heap.Last.OldMaxCapacity
	}
	return res, nil
}

// preflight checks the target is a JVM perfscope can measure and finds
// async-profiler's library.
func (o *Options) preflight(ctx context.Context) (*attach.Target, string, error) {
	target, err := attach.Preflight(o.FS, o.PID)
	if err != nil {
		return nil, "", err
	}
	if target.HsperfPath == "" {
		return nil, "", fmt.Errorf("pid %d: %w (the JVM runs with -XX:-UsePerfData; GC counters are needed)", o.PID, hsperf.ErrNotFound)
	}
	lib, err := o.Locator.Library(ctx)
	if err != nil {
		return nil, "", err
	}
	return target, lib, nil
}

// heapBeforeProfiling reads the heap counters the window starts from,
// choosing the allocation sampling interval first when none was given
// (that reads the rate over up to rateWaitMax, so the heap is read again).
func (o *Options) heapBeforeProfiling(ctx context.Context, target *attach.Target, res *Result) (hsperf.Heap, error) {
	first, err := heapNow(o.FS, target.HsperfPath)
	if err != nil {
		return hsperf.Heap{}, err
	}
	if o.Profile.Event == asprof.Alloc && o.Profile.AllocInterval == 0 {
		o.Profile.AllocInterval = o.chooseAllocInterval(ctx, target, first, res)
		if first, err = heapNow(o.FS, target.HsperfPath); err != nil {
			return hsperf.Heap{}, err
		}
	}
	return first, nil
}

// settle lets the allocation sampler run before the window begins
// (DefaultSamplerSettle).
func (o *Options) settle(ctx context.Context, res *Result) {
	if o.Profile.Event != asprof.Alloc {
		return
	}
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

// measuredWindow is what the measurement window saw: the heap counters sampled
// over it, its length, and how it ended.
type measuredWindow struct {
	heap   hsperf.Window
	length time.Duration
	// exited: the JVM exited during the window.
	exited bool
	// sampleErr: hsperfdata became unreadable while the JVM ran.
	sampleErr error
	// runErr: the load's error, or ctx's when it ended the window.
	runErr error
}

// runWindow opens the window: it begins the request counters, samples the
// heap every SampleEvery while watching the JVM, and drives the load or
// waits out the duration. The window ends with the duration, the load,
// Ctrl-C or the JVM's exit, whichever comes first; it returns an error
// only when a request counter cannot begin.
func (o *Options) runWindow(ctx context.Context, target *attach.Target, sess *asprof.Session, cs *counters, first hsperf.Heap, res *Result) (*measuredWindow, error) {
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
		cs.passiveSelf = PassiveSelf(cs.passive)
	}
	// Samples count from the middle of the request counters' first
	// readings (a metrics scrape takes milliseconds), so that bytes and
	// requests cover the same window.
	sess.SetWindowStart(counting.Add(time.Since(counting) / 2))
	win := &measuredWindow{}
	win.heap.Add(first)
	windowStart := time.Now()
	// kill -9 leaves hsperfdata behind, still readable: the process
	// itself says whether the JVM is alive.
	watch := procwatch.Start(winCtx, o.SampleEvery, func() bool { return alive(o.FS, target) }, func() error {
		h, err := heapNow(o.FS, target.HsperfPath)
		if err == nil {
			win.heap.Add(h)
		}
		return err
	}, endWindow)

	if o.Load != nil {
		lr, err := httpload.Run(winCtx, *o.Load)
		res.Load = &lr
		win.runErr = err
	} else {
		select {
		case <-winCtx.Done():
			win.runErr = ctx.Err()
		case <-time.After(o.Duration):
		}
	}
	endWindow()
	win.exited, win.sampleErr = watch.Wait()
	win.length = time.Since(windowStart)
	if !win.exited && win.sampleErr == nil {
		if !alive(o.FS, target) {
			win.exited = true
		} else if last, err := heapNow(o.FS, target.HsperfPath); err != nil {
			if !alive(o.FS, target) {
				win.exited = true
			} else {
				win.sampleErr = err
			}
		} else {
			win.heap.Add(last)
		}
	}
	return win, nil
}

// readCountersAtEnd takes the request counters' end readings and ends the
// profile's window in the middle of them. They are taken before the
// profiler stops, so both cover the same window: samples count up to the
// middle of those readings, not while the stop command makes its way into
// the JVM (140 ms here, 1.4 % of a 10 s window).
func (o *Options) readCountersAtEnd(ctx context.Context, sess *asprof.Session, cs *counters, exited bool, res *Result) {
	endCtx := context.WithoutCancel(ctx)
	ending := time.Now()
	if cs.passive != nil {
		if c, err := cs.passive.End(endCtx); err != nil {
			cs.passiveWhy = "the passive HTTP count could not be read: " + err.Error()
		} else {
			cs.passiveCount = &c
		}
		res.BPF = append(res.BPF, PassiveCosts(cs.passive, cs.passiveSelf, &res.Warnings)...)
	}
	if cs.metrics != nil && !exited {
		if c, err := cs.metrics.End(endCtx); err != nil {
			res.Warnings = append(res.Warnings, "the metrics source could not be read at the window's end: "+err.Error())
		} else {
			cs.metricsCount = &c
		}
	}
	sess.SetWindowEnd(ending.Add(time.Since(ending) / 2))
}

// alive says whether the JVM still runs: the pid exists, is the same
// process (its namespaced pid), and is not a zombie. kill -9 leaves
// hsperfdata behind, still readable, so the counters cannot say it.
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

// IsInterrupted says whether err is the window being cut short.
func IsInterrupted(err error) bool {
	return errors.Is(err, context.Canceled)
}
