package golang

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/base/procwatch"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/goalloc"
)

// Options configure one measurement of a Go program.
type Options struct {
	PID int
	FS  FS
	// Duration is the window when perfscope does not drive the load.
	Duration time.Duration
	// Requests the user drove during Duration (--requests); 0 unknown.
	Requests int64
	// Load, when set, is driven by perfscope and times the window.
	Load *httpload.Spec
	// RequestsFrom counts requests from a metrics endpoint.
	RequestsFrom *jvm.MetricsSource
	// Passive counts the program's HTTP/1.x responses in the kernel when
	// no other source counts (PassiveAuto), always (PassiveRequired) or
	// never (PassiveOff); HTTPPorts limits it to those listening ports.
	Passive   jvm.PassiveMode
	HTTPPorts []uint16
	// NoPools leaves sync.Pool's methods unprobed.
	NoPools bool
	// PoolBudget is the share of the program's CPU time the pool hooks
	// may take (0: DefaultPoolBudget): over it they are attached for part
	// of the window only and the counts are estimated (poolguard.go).
	// ExactPools keeps them attached whatever they cost.
	PoolBudget float64
	ExactPools bool
	// TopSites limits the allocation sites (0: DefaultTopSites).
	TopSites int
	// PollEvery is how often the program is checked to be alive
	// (DefaultPollEvery when zero).
	PollEvery time.Duration
	// Started is called once the probe is attached and its first
	// reading taken, just before the window opens (progress, tests).
	Started func()
}

// DefaultTopSites is how many allocation sites the evidence keeps.
const DefaultTopSites = 20

// DefaultPollEvery is how often Measure checks that the program lives.
const DefaultPollEvery = 100 * time.Millisecond

// Result is one measurement.
type Result struct {
	Evidence evidence.Go
	Load     *httpload.Result
	// Interrupted: ctx was cancelled (Ctrl-C) before the window's end;
	// the evidence covers what was measured until then.
	Interrupted bool
	// AttachNs is the time from Measure's start until the probe ran.
	AttachNs int64
	// Costs are the probe's own runs and time per hook, from its
	// programs' counters (PerRunFrom "self-timed").
	Costs []evidence.ProgramCost
}

// ErrTargetExited: the program exited mid-run; Measure still returns what
// was measured until then.
var ErrTargetExited = errors.New("the Go program exited during the measurement")

// Targets are the probe's attach points in one binary, as file offsets.
type Targets struct {
	Layout  Layout
	Options goalloc.Options
	// PoolsMissing says why the pool hooks are left out ("" when all
	// three were found).
	PoolsMissing string
	// PoolEmulated says whether the Get and Put hooks land on an
	// instruction the kernel emulates (Binary.EmulatedProbe): their trap
	// costs what an emulated one does, else what a stepped one does.
	PoolEmulated bool
}

// FindTargets resolves the functions the probe attaches to in b. The
// runtime's are required (an error wrapping ErrUnsupportedGo when one is
// missing); sync.Pool's are optional.
func FindTargets(b *Binary) (Targets, error) {
	l, err := LayoutFor(b.Version, b.Arch)
	if err != nil {
		return Targets{}, err
	}
	t := Targets{Layout: l, Options: goalloc.Options{SizeArg: goalloc.ArgRegs[l.MallocSizeArg]}}
	// Each hook goes after its function's stack check, where it fires
	// once per call.
	emulated := map[string]bool{}
	offset := func(name string) (uint64, error) {
		f, ok := b.Func(name)
		if !ok {
			return 0, fmt.Errorf("%s is not in the function table", name)
		}
		at, err := b.BodyStart(f)
		if err != nil {
			return 0, err
		}
		if e, err := b.EmulatedProbe(f, at); err == nil && e {
			emulated[name] = true
		}
		return b.FileOffset(at)
	}
	for _, r := range []struct {
		name string
		dst  *uint64
	}{{"runtime.mProf_Malloc", &t.Options.Malloc}, {"runtime.gcMarkTermination", &t.Options.GC}} {
		off, err := offset(r.name)
		if err != nil {
			return Targets{}, fmt.Errorf("%w: %s: %v", ErrUnsupportedGo, b.GoVersion, err)
		}
		*r.dst = off
	}
	var missing []string
	if off, err := offset("sync.(*Pool).Get"); err == nil {
		t.Options.PoolGet = off
	} else {
		missing = append(missing, err.Error())
	}
	if off, err := offset("sync.(*Pool).Put"); err == nil {
		t.Options.PoolPut = off
	} else {
		missing = append(missing, err.Error())
	}
	t.PoolEmulated = t.Options.PoolGet != 0 && t.Options.PoolPut != 0 && emulated["sync.(*Pool).Get"] && emulated["sync.(*Pool).Put"]
	if t.Options.PoolGet != 0 {
		if at, err := b.PoolNewCall(); err != nil {
			missing = append(missing, "the call of New in sync.(*Pool).Get: "+err.Error())
		} else if off, err := b.FileOffset(at); err == nil {
			t.Options.PoolNew = off
		} else {
			missing = append(missing, err.Error())
		}
	}
	if len(missing) > 0 {
		t.PoolsMissing = fmt.Sprint(missing)
	}
	return t, nil
}

// Measure attaches the goalloc probe to the program, measures over the
// window (the duration, the load perfscope drives, or until ctx ends),
// and always detaches before it returns. When the program exits mid-run
// it returns what was measured with an error wrapping ErrTargetExited.
func Measure(ctx context.Context, o Options) (*Result, error) {
	begin := time.Now()
	if o.PollEvery <= 0 {
		o.PollEvery = DefaultPollEvery
	}
	if o.TopSites <= 0 {
		o.TopSites = DefaultTopSites
	}
	if o.Load == nil && o.Duration <= 0 {
		return nil, errors.New("no window: give a duration or a load")
	}
	proc, err := OpenProcess(o.FS, o.PID)
	if err != nil {
		return nil, err
	}
	defer proc.Close()
	targets, err := FindTargets(proc.Binary)
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", o.PID, err)
	}
	popts := targets.Options
	popts.PID, popts.Executable = o.PID, proc.Exe
	if o.NoPools {
		popts.PoolGet, popts.PoolPut, popts.PoolNew = 0, 0, 0
	}
	res := &Result{}
	var warnings []string
	counters, err := o.openCounters(ctx, &warnings)
	if err != nil {
		return nil, err
	}
	defer counters.close()

	rate := proc.MemProfileRate()
	probe, err := goalloc.Open(popts)
	if err != nil {
		if !proc.Alive() {
			return nil, fmt.Errorf("pid %d: %w", o.PID, ErrTargetExited)
		}
		return nil, err
	}
	defer probe.Close()
	res.AttachNs = int64(time.Since(begin))
	if !o.NoPools {
		// Measured once, before the window: the guard's cost model, and
		// with --exact-pools what the report says the hooks cost.
		trapCosts()
	}
	w, err := o.window(ctx, proc, targets, probe, counters, res)
	if err != nil {
		return nil, err
	}
	passiveCosts := counters.costs(&warnings)
	reqs, reqWhy := o.requestCounts(context.WithoutCancel(ctx), w.length, res, counters, &warnings)
	exited := w.exited || !proc.Alive()
	if !exited {
		if after := proc.MemProfileRate(); after.Source == "memory" && after.Rate != rate.Rate {
			warnings = append(warnings, fmt.Sprintf("runtime.MemProfileRate changed from %d to %d during the window: samples are weighted at the rate at its end", rate.Rate, after.Rate))
			rate = after
		}
	}
	if errors.Is(w.runErr, context.Canceled) && ctx.Err() != nil {
		w.runErr = nil
		res.Interrupted = true
	}
	if w.runErr != nil && !exited {
		return nil, w.runErr
	}
	d := w.last.Sub(w.first)
	res.Costs = append(jvm.SelfProgramCosts(w.selfLast, w.selfFirst), passiveCosts...)
	res.Evidence = buildEvidence(proc, targets, probe, d, rate, w.length, reqs, reqWhy, o.TopSites, exited || proc.Alive(), w.guard)
	if o.NoPools {
		res.Evidence.PoolsUnknown = "sync.Pool was not probed (--no-pools)"
	}
	res.Evidence.Warnings = append(warnings, res.Evidence.Warnings...)
	if exited {
		res.Evidence.Warnings = append(res.Evidence.Warnings, fmt.Sprintf("pid %d exited %.1fs into the window; the report covers what was measured until then", o.PID, w.length.Seconds()))
		return res, fmt.Errorf("pid %d: %w", o.PID, ErrTargetExited)
	}
	return res, nil
}

// measuredWindow is what one window read: the probe's snapshots and self
// costs at its ends, its length, the pool guard that ran in it, whether
// the program exited in it, and the load's or the wait's error.
type measuredWindow struct {
	first, last         goalloc.Snapshot
	selfFirst, selfLast probes.SelfCosts
	length              time.Duration
	guard               *poolGuard
	exited              bool
	runErr              error
}

// window opens the window — the requests' count, the first readings, the
// pool guard, a watch on the program — runs the load or waits out the
// duration, and closes it with the last readings. An error is returned
// only when the window could not be read; the load's is in runErr.
func (o Options) window(ctx context.Context, proc *Process, targets Targets, probe *goalloc.Probe, counters *counters, res *Result) (*measuredWindow, error) {
	w := &measuredWindow{}
	winCtx, endWindow := context.WithCancel(ctx)
	defer endWindow()
	if err := counters.begin(winCtx); err != nil {
		return nil, err
	}
	// The window's first reading, after the traps were timed and the
	// requests' count began: the allocations and GC cycles counted are
	// those of the window the requests and its duration are, so a program
	// under load is not charged what it allocated while perfscope set up.
	var err error
	if w.first, err = probe.Snapshot(); err != nil {
		return nil, err
	}
	w.selfFirst, _ = probe.SelfCosts()
	if o.Started != nil {
		o.Started()
	}
	windowStart := time.Now()
	var guardErr error
	var guardDone sync.WaitGroup
	if probe.Attached(goalloc.HookPoolGet) || probe.Attached(goalloc.HookPoolPut) {
		w.guard = newPoolGuard(probe, func() (time.Duration, error) { return threadCPU(o.FS, o.PID) },
			o.PoolBudget, o.ExactPools, targets.PoolEmulated)
		guardDone.Add(1)
		go func() {
			defer guardDone.Done()
			defer gosafe.Recover(&guardErr)
			guardErr = w.guard.run(winCtx)
		}()
	}
	watch := procwatch.Start(winCtx, o.PollEvery, proc.Alive, nil, endWindow)
	if o.Load != nil {
		lr, err := httpload.Run(winCtx, *o.Load)
		res.Load = &lr
		w.runErr = err
	} else {
		select {
		case <-winCtx.Done():
			w.runErr = ctx.Err()
		case <-time.After(o.Duration):
		}
	}
	endWindow()
	exited, watchErr := watch.Wait()
	guardDone.Wait()
	if watchErr != nil {
		return nil, watchErr
	}
	if guardErr != nil && !exited && proc.Alive() {
		return nil, fmt.Errorf("sync.Pool hooks: %w", guardErr)
	}
	w.exited = exited
	w.length = time.Since(windowStart)
	if w.last, err = probe.Snapshot(); err != nil {
		return nil, err
	}
	w.selfLast, _ = probe.SelfCosts()
	return w, nil
}

// buildEvidence turns the window's counts into evidence. alive says
// whether the program's memory can still be read (pool fields).
func buildEvidence(proc *Process, t Targets, probe *goalloc.Probe, d goalloc.Snapshot, rate RateReading, window time.Duration, reqs *jvm.RequestCounts, reqWhy string, top int, alive bool, guard *poolGuard) evidence.Go {
	b := proc.Binary
	e := evidence.Go{
		PID: proc.PID, Executable: proc.ExeName, WindowNs: int64(window),
		Binary: evidence.GoBinary{GoVersion: b.GoVersion, Module: b.Module, PIE: b.PIE, Cgo: b.Cgo(), Stripped: !b.Symbols,
			FunctionTable: b.PclntabFrom, PGO: b.Settings["-pgo"] != "" && b.Settings["-pgo"] != "off"},
		Sites: []evidence.GoAllocSite{}, Pools: []evidence.GoPool{},
		GC: GCSettings(proc.Env, proc.EnvUnreadable),
	}
	secs := window.Seconds()
	var requests int64
	if reqs != nil {
		requests = reqs.Total
		e.Requests = evidence.Int(reqs.Total)
		e.RequestsSource, e.RequestsUncertainty, e.RequestsNote = reqs.Source, reqs.Uncertainty, reqs.Note
		if secs > 0 {
			e.RequestRate = evidence.Float(float64(reqs.Total) / secs)
		}
	} else {
		e.RequestsUnknown = reqWhy
	}
	e.Sampling = evidence.GoSampling{MemProfileRate: rate.Rate, RateSource: rate.Source, RateNote: rate.Note,
		Samples: int64(d.SampleCount), SampledBytes: int64(d.SampleBytes), Weighting: "unbiased"}
	if rate.Rate == 1 {
		e.Sampling.Weighting = "exact"
	}
	e.Lost = evidence.GoLost{SamplesNoSite: int64(d.Lost.StackFaults + d.Lost.StacksFull), SamplesUncounted: int64(d.Lost.CountsFull),
		PoolsFull: int64(d.Lost.PoolsFull), PoolNewUnjoined: int64(d.Lost.PoolNewUnjoined)}

	e.GCCycles = int64(d.GCCycles)
	if secs > 0 {
		e.GCCyclesPerMinute = float64(d.GCCycles) * 60 / secs
	}
	if requests > 0 {
		e.GCCyclesPerKReq = evidence.Float(float64(d.GCCycles) * 1000 / float64(requests))
	}
	allocEvidence(&e, proc, d, rate, secs, reqs, reqWhy, top)
	poolEvidence(&e, proc, t, probe, d, window, requests, alive, guard)
	if e.Binary.PGO {
		e.Warnings = append(e.Warnings, "the program was built with profile-guided optimisation, which can inline sync.Pool's Get and Put into hot callers: those calls are not counted")
	}
	return e
}

// allocSamples are the snapshot's allocation samples with their stacks
// named (a return address names its call, the instruction before).
func allocSamples(proc *Process, d goalloc.Snapshot) []AllocSample {
	cache := map[uint64]Frame{}
	sym := func(pc uint64, leaf bool) Frame {
		if !leaf {
			pc-- // a return address: the call is the instruction before
		}
		if f, ok := cache[pc]; ok {
			return f
		}
		f, _ := proc.Symbolize(pc)
		cache[pc] = f
		return f
	}
	samples := make([]AllocSample, 0, len(d.Samples))
	for _, s := range d.Samples {
		a := AllocSample{Size: s.Size, Count: s.Count}
		for i, pc := range s.Stack {
			a.Frames = append(a.Frames, sym(pc, i == 0))
		}
		samples = append(samples, a)
	}
	return samples
}

// allocEvidence weighs the window's allocation samples into e: the bytes
// and objects allocated with their bound, per second, per GC cycle and
// per request, and the sites; or why bytes per request are unknown.
func allocEvidence(e *evidence.Go, proc *Process, d goalloc.Snapshot, rate RateReading, secs float64, reqs *jvm.RequestCounts, reqWhy string, top int) {
	switch {
	case rate.Rate <= 0 && d.SampleCount == 0:
		e.BytesPerRequestUnknown = "the runtime samples no allocation: runtime.MemProfileRate is 0 (" + rate.Note + ")"
		return
	case rate.Rate <= 0:
		e.BytesPerRequestUnknown = fmt.Sprintf("%d allocation samples arrived but the sampling rate is unknown (%s)", d.SampleCount, rate.Note)
		return
	}
	var requests int64
	if reqs != nil {
		requests = reqs.Total
	}
	a := AnalyzeAllocations(allocSamples(proc, d), rate.Rate, requests, top)
	total := a.Total
	if d.Lost.CountsFull > 0 && d.SampleCount > d.Lost.CountsFull {
		// Samples the count hash could not hold have no size:
		// they are assumed to weigh what the others did.
		scale := float64(d.SampleCount) / float64(d.SampleCount-d.Lost.CountsFull)
		total.Bytes *= scale
		total.Objects *= scale
		total.BytesVar *= scale * scale
		e.Warnings = append(e.Warnings, fmt.Sprintf("%d of %d allocation samples could not be counted by size (the probe's map was full): the totals are scaled up by %.3f", d.Lost.CountsFull, d.SampleCount, scale))
	}
	e.AllocBytes = evidence.Float(total.Bytes)
	e.AllocBytesError = evidence.Float(total.BytesBound())
	e.AllocObjects = evidence.Float(total.Objects)
	if total.Bytes > 0 {
		e.Sampling.RelativeError = total.BytesBound() / total.Bytes
	}
	if secs > 0 {
		e.AllocRate = evidence.Float(total.Bytes / secs)
	}
	if d.GCCycles > 0 {
		e.BytesPerGCCycle = evidence.Float(total.Bytes / float64(d.GCCycles))
	}
	e.Sites, e.Stacks = a.Sites, a.Stacks
	if e.Sites == nil {
		e.Sites = []evidence.GoAllocSite{}
	}
	switch {
	case reqs == nil:
		e.BytesPerRequestUnknown = reqWhy
	case requests == 0:
		e.BytesPerRequestUnknown = "no request was served in the window"
	default:
		n := float64(requests)
		e.BytesPerRequest = evidence.Float(total.Bytes / n)
		e.ObjectsPerRequest = evidence.Float(total.Objects / n)
		e.BytesPerRequestError = evidence.Float(PerRequestBound(total.Bytes, total.BytesBound(), requests, reqs.Uncertainty))
	}
	if d.SampleCount == 0 {
		e.Warnings = append(e.Warnings, "no allocation was sampled in the window: the program allocated less than the sampling rate, or sampling is off")
	}
	if rate.Source == "default" {
		e.Warnings = append(e.Warnings, "the sampling rate was assumed, not read: "+rate.Note)
	}
}

// poolEvidence puts the sync.Pools into e: why they are measured in part,
// how the hooks were sampled, each pool's Gets, Puts and News (estimated
// with bounds when sampled), its name and whether it has a New.
func poolEvidence(e *evidence.Go, proc *Process, t Targets, probe *goalloc.Probe, d goalloc.Snapshot, window time.Duration, requests int64, alive bool, guard *poolGuard) {
	if t.PoolsMissing != "" {
		e.PoolsUnknown = "sync.Pool is measured in part or not at all: " + t.PoolsMissing
	}
	if probe != nil {
		for hook, err := range probe.Missing() {
			if t.PoolsMissing == "" && err != nil {
				e.PoolsUnknown += fmt.Sprintf("%s not attached: %v; ", hook, err)
			}
		}
	}
	newSeen := probe != nil && probe.Attached(goalloc.HookPoolNew)
	var pools []PoolUse
	var estimates map[uint64]PoolEstimate
	if guard != nil {
		e.PoolSampling = guard.sampling(window)
		if e.PoolSampling.Mode == "sampled" {
			estimates = estimatePools(guard.periods, window, guard.ref, true)
			e.Warnings = append(e.Warnings, "sync.Pool counts are estimates: "+e.PoolSampling.Note)
		}
	}
	for addr, c := range d.Pools {
		u := PoolUse{Address: addr, Gets: c.Gets, Puts: c.Puts, News: c.News, NewSeen: newSeen}
		if est, ok := estimates[addr]; ok {
			u.Gets, u.Puts, u.News = uint64(math.Round(est.Gets)), uint64(math.Round(est.Puts)), uint64(math.Round(est.News))
			u.Bounds = &[3]float64{est.GetsErr, est.PutsErr, est.NewsErr}
		}
		if addr >= proc.Bias {
			u.Name = proc.Binary.DataSymbolAt(addr - proc.Bias)
		}
		if alive {
			if w, err := proc.readWord(addr + PoolNewOffset); err == nil {
				has := w != 0
				u.HasNew = &has
			}
		}
		pools = append(pools, u)
	}
	e.Pools = AnalyzePools(pools, requests)
}

// counters are the request sources of one window.
type counters struct {
	metrics, passive jvm.RequestCounter
	passiveWhy       string
	// passiveSelf is the passive count's programs' own run counters at
	// the window's start (nil: it keeps none).
	passiveSelf probes.SelfCosts
}

// costs is what the passive count's programs cost since the window
// began (jvm.PassiveCosts): the report's own-cost table lists them beside
// the uprobes.
func (c *counters) costs(warnings *[]string) []evidence.ProgramCost {
	if c.passive == nil {
		return nil
	}
	return jvm.PassiveCosts(c.passive, c.passiveSelf, warnings)
}

func (c *counters) close() {
	if c.passive != nil {
		c.passive.Close()
	}
}

func (c *counters) begin(ctx context.Context) error {
	if c.metrics != nil {
		if err := c.metrics.Begin(ctx); err != nil {
			return fmt.Errorf("%w: %v", jvm.ErrBadSource, err)
		}
	}
	if c.passive != nil {
		if err := c.passive.Begin(ctx); err != nil {
			return fmt.Errorf("passive request count: %w", err)
		}
		c.passiveSelf = jvm.PassiveSelf(c.passive)
	}
	return nil
}

func (o *Options) openCounters(ctx context.Context, warnings *[]string) (*counters, error) {
	c := &counters{}
	if o.Load != nil {
		return c, nil
	}
	if o.RequestsFrom != nil {
		m := jvm.NewMetricsCounter(*o.RequestsFrom)
		if err := m.Begin(ctx); err != nil {
			return nil, fmt.Errorf("%w: %v", jvm.ErrBadSource, err)
		}
		c.metrics = m
	}
	switch {
	case o.Passive == jvm.PassiveOff:
		c.passiveWhy = "the passive count is off"
		return c, nil
	case o.Passive == jvm.PassiveAuto && (o.RequestsFrom != nil || o.Requests > 0):
		c.passiveWhy = "the passive count was not needed"
		return c, nil
	}
	// The request lines' per-endpoint split is jvm's (its Spring
	// mappings); without it the count runs on sends only.
	p, err := jvm.OpenPassiveCounter(o.FS.Root, o.PID, o.HTTPPorts, true)
	if err != nil {
		if o.Passive == jvm.PassiveRequired {
			return nil, fmt.Errorf("passive request count: %w", err)
		}
		c.passiveWhy = "the passive HTTP count could not run: " + err.Error()
		*warnings = append(*warnings, c.passiveWhy)
		return c, nil
	}
	c.passive = p
	return c, nil
}

// requestCounts picks the window's count: perfscope's load, the user's
// count, the metrics source, then the passive count.
func (o *Options) requestCounts(ctx context.Context, window time.Duration, res *Result, c *counters, warnings *[]string) (*jvm.RequestCounts, string) {
	if res.Load != nil {
		l := res.Load
		return &jvm.RequestCounts{Total: l.Completed, Source: "load", StatusClasses: l.StatusClasses,
			Note: fmt.Sprintf("%d requests sent by perfscope, %d answered, %d without an answer", l.Completed+l.Failures, l.Completed, l.Failures)}, ""
	}
	if o.Requests > 0 {
		rc := &jvm.RequestCounts{Total: o.Requests, Source: "user", Note: "--requests, as given"}
		if window < o.Duration*99/100 {
			rc.Total = int64(math.Round(float64(o.Requests) * window.Seconds() / o.Duration.Seconds()))
			rc.Uncertainty = 0.1
			rc.Note = fmt.Sprintf("--requests %d was for %v but only %.1fs were measured: scaled to %d, assuming an even rate", o.Requests, o.Duration, window.Seconds(), rc.Total)
			*warnings = append(*warnings, rc.Note)
		}
		return rc, ""
	}
	if c.metrics != nil {
		rc, err := c.metrics.End(ctx)
		if err == nil {
			return &rc, ""
		}
		*warnings = append(*warnings, "the metrics source could not be read at the window's end: "+err.Error())
	}
	why := "no request count: no load, --requests or --requests-from"
	if c.passive != nil {
		rc, err := c.passive.End(ctx)
		if err == nil && rc.Total > 0 {
			return &rc, ""
		}
		if err != nil {
			why += "; the passive HTTP count could not be read: " + err.Error()
		} else {
			why += "; the passive HTTP count saw no HTTP/1.x or h2c response (" + rc.Note + "); TLS (HTTP/2 over TLS included) is not visible to it: pass --requests-from URL"
		}
	} else if c.passiveWhy != "" {
		why += "; " + c.passiveWhy
	}
	return nil, why
}
