package offcpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// ErrNoAnswer means the first level's requests were all refused or timed
// out: nothing listens at the URL, or not HTTP.
var ErrNoAnswer = errors.New("no request was answered")

// LoadOptions configure a stepped load (`perfscope load`).
type LoadOptions struct {
	// Spec is the request (URL, method, body, headers, timeout); each
	// level sets its concurrency and bounds.
	Spec httpload.Spec
	// Levels are the concurrency levels, rising.
	Levels []int
	// PerLevel and RequestsPerLevel bound each level (at least one).
	PerLevel         time.Duration
	RequestsPerLevel int
	// PIDs are the service's processes; PIDFrom says how they were found.
	PIDs    []int
	PIDFrom string
	// Probe configures the off-CPU probe (its PID is set from PIDs).
	Probe probe.Options
	// Proc and Symbols read below their roots ("/" when zero); Open opens
	// the probe (nil: probes/offcpu.Open) and KernelNamer names kernel
	// frames, as Options'.
	Proc        procfs.FS
	Symbols     symbols.FS
	Open        func(probe.Options) (Probe, error)
	KernelNamer func() (symbols.KernelNamer, error)
	// Started is called once the probe watches; Level after each level
	// (progress).
	Started func()
	Level   func(evidence.LoadLevel)
}

// maxLoadWaits bounds each level's waits list.
const maxLoadWaits = 10

// MeasureLoad attaches the off-CPU probe to the service once, then for
// each level drives the load and reads the probe, /proc/stat and the
// service's /proc/PID/stat at the level's edges. It stops early, keeping
// the levels that finished and saying why in the warnings, when ctx is
// done or a service process exits. Errors: the probe's (as Measure's),
// ErrNoProcess, ErrNoAnswer, and a load that cannot start.
func MeasureLoad(ctx context.Context, o LoadOptions) (*evidence.Load, error) {
	if len(o.Levels) == 0 || len(o.PIDs) == 0 {
		return nil, errors.New("load: no levels or no service process")
	}
	if o.Proc.Root == "" {
		o.Proc = procfs.Default
	}
	pid := 0
	if len(o.PIDs) == 1 {
		pid = o.PIDs[0] // filtered in the kernel
	}
	// One probe for every level: its wait and stack maps hold the whole
	// run's (a busy server's waits with their wakers filled the default
	// wait map in two levels).
	po := o.Probe
	po.WaitEntries = max(po.WaitEntries, 4*probe.DefaultWaitEntries)
	po.StackEntries = max(po.StackEntries, 2*probe.DefaultStackEntries)
	s, err := Open(Options{PID: pid, Probe: po, Proc: o.Proc, Symbols: o.Symbols, Open: o.Open, KernelNamer: o.KernelNamer})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ev := &evidence.Load{URL: o.Spec.URL, Method: o.Spec.Method, PIDs: o.PIDs, PIDFrom: o.PIDFrom,
		DurationPerLevelNs: int64(o.PerLevel), RequestsPerLevel: o.RequestsPerLevel, AttachMethod: s.in.AttachMethod}
	if c, err := o.Proc.ReadString(fmt.Sprintf("/proc/%d/comm", o.PIDs[0])); err == nil {
		ev.Comm = c
	}
	var keep []int
	if pid == 0 {
		keep = o.PIDs
	}
	mark, err := s.Mark(o.PIDs)
	if err != nil {
		return nil, err
	}
	marks := []Mark{mark}
	self := []int{os.Getpid()}
	cpuStart, cpuErr := serviceCPU(o.Proc, o.PIDs)
	selfStart, selfErr := serviceCPU(o.Proc, self)
	if o.Started != nil {
		o.Started()
	}
	var levels []evidence.LoadLevel
	for i, c := range o.Levels {
		spec := o.Spec
		spec.Concurrency, spec.Requests, spec.Duration = c, o.RequestsPerLevel, o.PerLevel
		res, runErr := httpload.Run(ctx, spec)
		if runErr != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("load at concurrency %d: %w", c, runErr)
		}
		if ctx.Err() != nil {
			ev.Warnings = append(ev.Warnings, fmt.Sprintf("interrupted during the level at concurrency %d: it is left out", c))
			break
		}
		m, err := s.Mark(o.PIDs)
		if err != nil {
			return nil, err
		}
		cpuEnd, err := serviceCPU(o.Proc, o.PIDs)
		selfEnd, selfEndErr := serviceCPU(o.Proc, self)
		lv := evidence.LoadLevel{Concurrency: c, DurationNs: int64(m.snap.Mono - marks[len(marks)-1].snap.Mono),
			Requests: res.Completed + res.Failures, Completed: res.Completed, Errors: res.Failures + res.Non2xx,
			FirstError: res.FirstError, RPS: res.RPS, P50Ns: res.P50Ns, P99Ns: res.P99Ns, MeanNs: res.MeanNs, ServiceCPU: -1, CPUBusy: -1,
			LoadGeneratorCPU: -1}
		if err == nil && cpuErr == nil && lv.DurationNs > 0 {
			lv.ServiceCPU = float64(cpuEnd-cpuStart) / float64(lv.DurationNs)
		}
		if selfEndErr == nil && selfErr == nil && lv.DurationNs > 0 {
			lv.LoadGeneratorCPU = float64(selfEnd-selfStart) / float64(lv.DurationNs)
		}
		cpuStart, cpuErr, selfStart, selfErr = cpuEnd, err, selfEnd, selfEndErr
		marks = append(marks, m)
		levels = append(levels, lv)
		if i == 0 && res.Completed == 0 {
			return nil, fmt.Errorf("%s at concurrency %d: %w (%d sent; first error: %s)", o.Spec.URL, c, ErrNoAnswer, lv.Requests, res.FirstError)
		}
		if o.Level != nil {
			o.Level(lv)
		}
		if why := exited(o.Proc, o.PIDs); why != "" {
			ev.Warnings = append(ev.Warnings, why+fmt.Sprintf(" after the level at concurrency %d: the levels after it did not run", c))
			break
		}
	}
	windows := s.Windows(marks, keep)
	for i := range levels {
		w := windows[i]
		levels[i].Threads = loadThreads(w, len(o.PIDs) > 1)
		levels[i].CPUBusy = meanBusy(w.CPUBusy)
		if i == 0 {
			ev.CPUs = w.CPUs
		}
		for _, warn := range w.Warnings {
			ev.Warnings = append(ev.Warnings, fmt.Sprintf("at concurrency %d: %s", levels[i].Concurrency, warn))
		}
	}
	ev.Levels = levels
	return ev, nil
}

// serviceCPU is the CPU time the processes have used, summed.
func serviceCPU(fs procfs.FS, pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		d, err := fs.ProcessCPU(pid)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// exited says which of the processes exited ("" when none did).
func exited(fs procfs.FS, pids []int) string {
	for _, pid := range pids {
		if why := Ended(Options{PID: pid, Proc: fs}); why != "" {
			return why
		}
	}
	return ""
}

func meanBusy(b []evidence.CPUBusy) float64 {
	if len(b) == 0 {
		return -1
	}
	sum := 0.0
	for _, c := range b {
		sum += c.BusyShare
	}
	return sum / float64(len(b))
}

// loadThreads sums where the service's threads spent one level.
// manyProcesses: the run-queue p99 is the worst process's.
func loadThreads(w evidence.OffCPU, manyProcesses bool) *evidence.LoadThreads {
	t := w.Totals
	seen := float64(t.OnCPUNs + t.RunnableNs + t.BlockedNs + t.UnknownNs)
	dur := float64(w.DurationNs)
	lt := &evidence.LoadThreads{Threads: t.Threads, RunQueueP99Ns: int64(w.RunQueue.All.P99Ns)}
	if seen > 0 {
		lt.OnCPUShare, lt.RunnableShare, lt.BlockedShare = float64(t.OnCPUNs)/seen, float64(t.RunnableNs)/seen, float64(t.BlockedNs)/seen
	}
	if dur > 0 {
		lt.OnCPUThreads, lt.RunnableThreads = float64(t.OnCPUNs)/dur, float64(t.RunnableNs)/dur
	}
	if active := t.OnCPUNs + t.RunnableNs; active > 0 {
		lt.CPUWaitShare = float64(t.RunnableNs) / float64(active)
	}
	if manyProcesses {
		lt.RunQueueP99Ns = 0
		for _, p := range w.RunQueue.PerProc {
			lt.RunQueueP99Ns = max(lt.RunQueueP99Ns, int64(p.All.P99Ns))
		}
	}
	for _, r := range w.ByReason {
		if r.Reason == string(Idle) {
			continue
		}
		for _, site := range r.Sites {
			lw := evidence.LoadWait{Reason: r.Reason, Site: site.Site, Ns: site.Ns}
			if dur > 0 {
				lw.Threads = float64(site.Ns) / dur
			}
			if t.BlockedNs > 0 {
				lw.Share = float64(site.Ns) / float64(t.BlockedNs)
			}
			lw.Waker = wakerAt(w.Waits, r.Reason, site.Site)
			lt.Waits = append(lt.Waits, lw)
		}
	}
	sort.SliceStable(lt.Waits, func(i, j int) bool { return lt.Waits[i].Ns > lt.Waits[j].Ns })
	if len(lt.Waits) > maxLoadWaits {
		lt.Waits = lt.Waits[:maxLoadWaits]
	}
	if len(lt.Waits) > 0 {
		top := lt.Waits[0]
		lt.TopWait = &top
	}
	for _, p := range w.Pools {
		if p.SeenNs > 0 && (lt.BusiestPool == nil || p.OnCPUShare > lt.BusiestPool.OnCPUShare) {
			lt.BusiestPool = &evidence.LoadPool{Name: p.Name, Threads: p.Threads, OnCPUShare: p.OnCPUShare}
		}
	}
	return lt
}

// wakerAt names who woke the longest of the listed waits at a reason and
// site ("" when none of them says).
func wakerAt(waits []evidence.OffCPUWait, reason, site string) string {
	for _, w := range waits { // largest first
		if w.Reason == reason && w.Site == site && w.Waker != nil {
			return wakerLabel(w.Waker)
		}
	}
	return ""
}

// The bounds of a stepped load: it is bounded in count and time, and so in
// what it sends.
const (
	MaxLevelDuration    = 10 * time.Minute
	MaxRequestsPerLevel = 10_000_000
)

// Check refuses a stepped load that is not bounded as `perfscope load`
// promises: each level's time and requests, a request's timeout, the
// probe's stack sampling. The sentences name the command's flags.
func (o LoadOptions) Check() error {
	if o.PerLevel < 100*time.Millisecond || o.PerLevel > MaxLevelDuration {
		return fmt.Errorf("--duration-per-level must be between 100ms and %v, got %v: every level is bounded in time", MaxLevelDuration, o.PerLevel)
	}
	if o.RequestsPerLevel < 0 || o.RequestsPerLevel > MaxRequestsPerLevel {
		return fmt.Errorf("--requests-per-level must be between 0 and %d, got %d", MaxRequestsPerLevel, o.RequestsPerLevel)
	}
	if o.Spec.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %v", o.Spec.Timeout)
	}
	if o.Probe.StackEvery < 1 || o.Probe.StackEvery > probe.MaxStackEvery {
		return fmt.Errorf("--stack-every must be between 1 and %d, got %d", probe.MaxStackEvery, o.Probe.StackEvery)
	}
	return nil
}

// MaxLevels bounds the levels of one stepped load.
const MaxLevels = 32

// ParseLevels reads --concurrency: rising levels, each from 1 to 10000,
// at most MaxLevels. The sentences name the flag.
func ParseLevels(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10000 {
			return nil, fmt.Errorf("--concurrency %q: each level is a number from 1 to 10000", v)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("--concurrency %q: the levels must rise (%d after %d)", v, n, out[len(out)-1])
		}
		out = append(out, n)
	}
	if len(out) > MaxLevels {
		return nil, fmt.Errorf("--concurrency %q: at most %d levels, got %d", v, MaxLevels, len(out))
	}
	return out, nil
}
