package measure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/report"
)

// CPUProfileProbe is what the profile part needs of the CPU profiler.
type CPUProfileProbe interface {
	probes.Snapshotter[cpuprofile.Profile]
	Start() error
	Stop() error
	// Pause and Resume stop and restart sampling without detaching:
	// the profile part pauses from its Open to its window's Begin.
	Pause() error
	Resume() error
	// EventChoice is the event Start sampled with and why.
	EventChoice() cpuprofile.EventChoice
	// PIDs lists the processes sampled since the previous call
	// (cheap: one small map, read and emptied).
	PIDs() ([]int, error)
	// Drain returns the samples since the last Drain and empties
	// them out of the kernel (a profiler opened Continuous).
	Drain() (cpuprofile.Profile, error)
	CPUs() int
	Frequency() int
}

// ProfileOptions configure the on-CPU profile part.
type ProfileOptions struct {
	// PID samples one process (0: every process).
	PID       int
	Frequency int
	// Event is the perf event that samples (EventAuto: cycles where it
	// opens, cpu-clock elsewhere).
	Event       cpuprofile.Event
	Stacks      cpuprofile.Stacks
	IncludeIdle bool
	// KeepIdleInterrupts keeps the idle task's samples taken in interrupt
	// or softirq context (NET_RX on an idle CPU) and leaves out only the
	// idle loop's, counting both per CPU (Idle).
	KeepIdleInterrupts bool
	StackEntries       int
	// Root is the synthetic frame under each stack; RootContainer puts
	// the process's workload (evidence.Workload.Label) there.
	Root cpuprofile.RootFrame
	// Select, from --cgroup, --container or --pod, keeps the samples of
	// its processes (and of processes started since in their cgroups);
	// nil keeps every sample. The kernel still samples every process:
	// what is left out is counted (evidence.Profile.FilteredOut).
	Select *cgroup.Selection
	// JVM, when set (by CheckJITMap), is asked for its perf map when the
	// window ends, so JIT-compiled Java frames are named.
	JVM *attach.Target
	// Continuous is a profile read window after window on one session
	// (perfscope serve): each window drains the kernel's maps
	// (cpuprofile.Profiler.Drain) instead of subtracting a cumulative
	// snapshot, and the symbol cache drops the processes that exited, so
	// memory follows one window, not the life of the session.
	Continuous bool
}

// Profile is the on-CPU profile part: a perf event (cycles or cpu-clock)
// on every CPU sampling kernel and user stacks, counted in the kernel and
// named when the window ends.
//
// The overhead budget does not window it: its perf events sample through
// the whole window (the governor counts their program's cost as a fixed
// cost), so a CPU's expected samples are the frequency × the whole time
// its event was enabled. Sampling is paused from Open until the first
// window is about to begin (Arm, just before the budget's calibration,
// which must see the profiler's cost), so that the other probes loading
// is neither in the profile nor in that time.
type Profile struct {
	opts     ProfileOptions
	src      Sources
	sym      *symbols.Symbolizer
	probe    CPUProfileProbe
	openErr  error
	started  bool
	windows  int
	baseline *cpuprofile.Profile
	profile  cpuprofile.Profile
	idle     cpuprofile.IdleSplit
	// choice is the event the profiler samples with.
	choice cpuprofile.EventChoice
	// statBegin is /proc/stat at the window's first reading, for each
	// CPU's busy time with cycles (statErr: why it was not read); busy is
	// the window's busy time per CPU, nil when not read.
	statBegin procfs.Stat
	statErr   error
	busy      map[int]int64
	// sampling: the profiler was resumed after Open's pause.
	sampling bool
	stop     chan struct{}
	prefetch sync.WaitGroup
	// prefetchErr is a panic of the prefetching goroutine (reading a
	// process's mappings and ELF files), returned by End.
	prefetchErr error
	// filteredOut counts the samples Select left out; workloads are the
	// samples per workload of a RootContainer profile (both set by
	// Samples).
	filteredOut uint64
	workloads   []evidence.WorkloadSamples
}

// NewProfile returns the profile part.
func NewProfile(opts ProfileOptions) *Profile { return &Profile{opts: opts} }

// Open implements Part: it loads the sampling program and opens a perf
// event on every online CPU. A kernel that refuses leaves the part open
// without a profile (OpenErr says why).
func (p *Profile) Open(src Sources) error {
	p.src = src
	p.sym = src.symbolizer()
	probe, err := OpenProbe[CPUProfileProbe](src.Probes, &cpuprofile.Spec, cpuprofile.Options{PID: p.opts.PID, Frequency: p.opts.Frequency, Event: p.opts.Event, Stacks: p.opts.Stacks,
		IncludeIdle: p.opts.IncludeIdle, KeepIdleInterrupts: p.opts.KeepIdleInterrupts, StackEntries: p.opts.StackEntries,
		Continuous: p.opts.Continuous})
	if err != nil {
		p.openErr = err
		return nil
	}
	p.probe = probe
	if err := probe.Start(); err != nil {
		p.openErr = err
		return nil
	}
	p.choice = probe.EventChoice()
	// Started to learn now whether the event opens; the window starts
	// sampling (Begin).
	if err := probe.Pause(); err != nil {
		p.openErr = err
		return nil
	}
	p.started = true
	return nil
}

// Options are the options the part was built with.
func (p *Profile) Options() ProfileOptions { return p.opts }

// OpenErr is why the profiler could not run, nil when it does.
func (p *Profile) OpenErr() error { return p.openErr }

// Probes implements Part.
func (p *Profile) Probes() []probes.Probe { return probesOf(p.probe) }

// Begin implements Part. It reads, four times a second while the window
// lasts, the mappings of every process sampled so far: stacks are named
// at the end, and a process that has exited by then could no longer be
// resolved.
func (p *Profile) Begin(context.Context) error {
	if !p.started {
		return nil
	}
	p.baseline = nil
	p.busy = nil
	if p.windows > 0 && p.choice.Event == cpuprofile.EventCycles {
		// The first window's busy time counts from Arm, as its samples.
		p.statBegin, p.statErr = p.src.Root.Stat()
	}
	if err := p.Arm(); err != nil {
		return err
	}
	if p.opts.Continuous {
		// The last window's frames are named (Samples ran after its
		// End): what has exited since is no longer needed. What was
		// sampled between the windows is not this window's.
		p.sym.Prune()
		if _, err := p.probe.Drain(); err != nil {
			return err
		}
	} else if p.windows > 0 {
		// Counts are cumulative since Start: a later window subtracts
		// what the earlier ones counted.
		b, err := p.probe.Snapshot()
		if err != nil {
			return err
		}
		p.baseline = &b
	}
	p.windows++
	p.stop = make(chan struct{})
	p.prefetch.Add(1)
	go p.prefetchMappings()
	return nil
}

// Arm implements Armer: it resumes the sampling Open paused, once.
func (p *Profile) Arm() error {
	if !p.started || p.sampling {
		return nil
	}
	if p.choice.Event == cpuprofile.EventCycles {
		p.statBegin, p.statErr = p.src.Root.Stat()
	}
	if err := p.probe.Resume(); err != nil {
		return err
	}
	p.sampling = true
	return nil
}

func (p *Profile) prefetchMappings() {
	defer p.prefetch.Done()
	defer gosafe.Recover(&p.prefetchErr)
	// Often enough to catch most short-lived commands (a shell pipeline's
	// grep, a compiler run), cheap because PIDs reads only the processes
	// sampled since the last tick, not the profile.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	seen := map[int]bool{}
	poll := func() {
		pids, _ := p.probe.PIDs() // best effort: a failed read only costs names
		for _, pid := range pids {
			if !seen[pid] && pid != 0 {
				seen[pid] = true
				p.sym.Prefetch(pid)
			}
		}
	}
	for {
		select {
		case <-p.stop:
			// PIDs names what was sampled since its last call, whatever
			// the window: taking the tail now, before End names this
			// window, keeps the next window's first poll from prefetching
			// this window's processes again after they have exited (and
			// after the symbol cache has pruned them).
			poll()
			return
		case <-tick.C:
			poll()
		}
	}
}

// End implements Part.
func (p *Profile) End(context.Context) error {
	if !p.started || p.stop == nil {
		return nil
	}
	close(p.stop)
	p.prefetch.Wait()
	p.stop = nil
	if err := p.prefetchErr; err != nil {
		p.prefetchErr = nil
		return err
	}
	var prof cpuprofile.Profile
	var err error
	if p.opts.Continuous {
		prof, err = p.probe.Drain()
	} else {
		prof, err = p.probe.Snapshot()
	}
	if err != nil {
		return err
	}
	if p.baseline != nil {
		prof = prof.Sub(*p.baseline)
	}
	if p.choice.Event == cpuprofile.EventCycles && p.statErr == nil {
		if end, err := p.src.Root.Stat(); err == nil {
			p.busy = busyByCPU(end.Sub(p.statBegin))
		}
	}
	p.idle = cpuprofile.IdleSplit{}
	if p.opts.KeepIdleInterrupts {
		p.sym.KernelNames(prof.KernelAddrs()) // in one batch, not stack by stack
		prof, p.idle = prof.SplitIdle(p.sym)
	}
	p.profile = prof
	return nil
}

// busyByCPU is each CPU's non-idle time, ns: what cycles, which counts
// work, samples in proportion to. Steal is left out (another guest ran),
// and so is iowait (the CPU idled).
func busyByCPU(d procfs.Stat) map[int]int64 {
	out := make(map[int]int64, len(d.PerCPU))
	for _, t := range d.PerCPU {
		out[t.CPU] = int64(t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ)
	}
	return out
}

// PerCPU is the window's profile per CPU — samples kept, the idle task's
// split, NET_RX samples — with each CPU's samples taken and expected, and
// the sampling header: the event, and the CPUs the profile did not see.
func (p *Profile) PerCPU(samples []evidence.ProfileSample) ([]evidence.ProfileCPU, evidence.ProfileSampling) {
	rows := evidence.ProfileCPUs(samples, p.idle.InterruptByCPU, p.idle.LoopByCPU)
	var s evidence.ProfileSampling
	if c := p.choice; c.Event != cpuprofile.EventAuto { // auto: a recording from before the choice was kept
		s.Event, s.EventRequested, s.EventReason, s.PMU = c.Event.String(), c.Requested.String(), c.Reason, c.PMU.String()
	}
	var counts []evidence.CPUSampling
	for _, c := range p.profile.CPUs {
		cs := evidence.CPUSampling{CPU: c.CPU, Taken: c.Taken, EnabledNs: c.EnabledNs, RunningNs: c.RunningNs}
		if b, ok := p.busy[c.CPU]; ok {
			cs.BusyNs = &b
		}
		counts = append(counts, cs)
	}
	rows = evidence.ExpectSamples(rows, counts, p.Frequency(), &s)
	if s.ExpectedFrom == evidence.ExpectedFromBusy && p.busy == nil && p.statErr != nil {
		s.ExpectedUnavailable = fmt.Sprintf("the CPUs' busy time could not be read: %v", p.statErr)
	}
	return rows, s
}

// Idle is the window's idle-task samples per CPU with KeepIdleInterrupts:
// those in interrupt or softirq context (kept in the profile) and the idle
// loop's (left out). Empty without the option.
func (p *Profile) Idle() cpuprofile.IdleSplit { return p.idle }

// Lost implements LossCounter.
func (p *Profile) Lost() uint64 { return p.profile.Lost.Total() }

// Raw is the window's profile as counted, stacks not yet named.
func (p *Profile) Raw() cpuprofile.Profile { return p.profile }

// Frequency is the sampling frequency in Hz.
func (p *Profile) Frequency() int {
	if p.probe == nil {
		return p.opts.Frequency
	}
	return p.probe.Frequency()
}

// Samples names every sample's frames, root first, under the part's root
// frame. Call it after the window (and after the JIT map is written).
func (p *Profile) Samples() []evidence.ProfileSample {
	out := make([]evidence.ProfileSample, 0, len(p.profile.Samples))
	// In one batch, not stack by stack: the kernel's addresses, and each
	// binary read for the addresses sampled in it.
	p.sym.KernelNames(p.profile.KernelAddrs())
	p.sym.PrepareUser(p.profile.UserAddrs())
	p.filteredOut, p.workloads = 0, nil
	byLabel := map[string]*evidence.WorkloadSamples{}
	for _, s := range p.profile.Samples {
		if p.opts.Select != nil && !p.src.covers(p.opts.Select, s.PID) {
			p.filteredOut += s.Count
			continue
		}
		frames := cpuprofile.Frames(p.sym, s, p.opts.Root)
		if p.opts.Root == cpuprofile.RootContainer {
			w := p.sampleWorkload(s.PID)
			label := w.Label()
			frames = append([]string{label}, frames...)
			ws := byLabel[label]
			if ws == nil {
				ws = &evidence.WorkloadSamples{Label: label, Workload: w}
				byLabel[label] = ws
			}
			ws.Samples += s.Count
		}
		out = append(out, evidence.ProfileSample{CPU: s.CPU, Frames: frames, Count: s.Count})
	}
	for _, ws := range byLabel {
		p.workloads = append(p.workloads, *ws)
	}
	sort.Slice(p.workloads, func(i, j int) bool {
		if p.workloads[i].Samples != p.workloads[j].Samples {
			return p.workloads[i].Samples > p.workloads[j].Samples
		}
		return p.workloads[i].Label < p.workloads[j].Label
	})
	return out
}

// sampleWorkload is what a sampled process belongs to: the idle task
// (pid 0) and processes gone before the window ended are the host's, with
// no cgroup known.
func (p *Profile) sampleWorkload(pid int) evidence.Workload {
	if w := p.src.workload(pid); w != nil {
		return *w
	}
	return evidence.Workload{}
}

// CheckProcess is the one check of a --pid flag (named by flag in the
// sentences), shared by every command that takes one: the process must
// exist, be alive (a zombie has exited and only waits for its parent to
// reap it: nothing to measure), and be a process, not one of its threads
// (/proc/TID exists for threads too, but probes and attach work on the
// thread group). Each failure is bad input with the way out.
func CheckProcess(proc procfs.FS, flag string, pid int) error {
	if pid <= 0 {
		return BadInput("%s must be a positive process id, got %d", flag, pid)
	}
	st, err := proc.Status(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return BadInput("%s %d: no such process (not running)", flag, pid)
	}
	if err != nil {
		return fmt.Errorf("read status of process %d: %w", pid, err)
	}
	if st.State == "Z" || st.State == "X" {
		return BadInput("%s %d: the process has exited (a zombie waiting for its parent to reap it)", flag, pid)
	}
	if len(st.NStgid) > 0 && st.NStgid[0] != pid {
		return BadInput("%s %d is a thread of process %d: pass %s %d", flag, pid, st.NStgid[0], flag, st.NStgid[0])
	}
	return nil
}

// CheckJITMap decides, before anything is loaded, where the names of a
// process's JIT-compiled code come from: a HotSpot JVM that can be
// attached to writes its perf map when the window ends (the returned
// target); any other process must already have one (nil target).
func CheckJITMap(src Sources, pid int) (*attach.Target, error) {
	path := src.symbolizer().PerfMapPath(pid)
	_, statErr := os.Stat(path)
	hasMap := !errors.Is(statErr, fs.ErrNotExist)
	t, err := attach.Preflight(src.JVMs, pid)
	switch {
	case err == nil:
		return t, nil
	case hasMap:
		// Not a JVM (node --perf-basic-prof, a .NET runtime), or a JVM
		// perfscope must not signal: use the map as it is.
		return nil, nil
	case errors.Is(err, attach.ErrNotJVM):
		return nil, BadInput("process %d has no JIT perf map (%s) and is not a HotSpot JVM perfscope could ask for one: start its runtime so that it writes /tmp/perf-<pid>.map (e.g. node --perf-basic-prof)", pid, path)
	}
	return nil, Unavailable("process %d is a JVM perfscope cannot ask for its perf map (%v) and has none at %s: drop --jit-map, or restart it without -Xrs / -XX:+DisableAttachMechanism", pid, err, path)
}

// writeJITMap asks the JVM, through the attach protocol, to write its perf
// map (Compiler.perfmap, JDK 17+) now that sampling is over, so that code
// compiled during the window is named too, and makes the symbolizer read
// it afresh. A map perfscope caused to exist is removed by the returned
// func once the frames are named; one the user had is left (updated). A
// JVM that cannot write it costs the names, not the profile.
func (p *Profile) writeJITMap(ctx context.Context) (warning string, remove func()) {
	remove = func() {}
	if p.opts.JVM == nil {
		return "", remove
	}
	path := p.sym.PerfMapPath(p.opts.PID)
	_, statErr := os.Stat(path)
	existed := statErr == nil
	// Ctrl-C ended the window; the map is still wanted for the report.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := p.opts.JVM.Jcmd(jctx, "Compiler.perfmap"); err != nil {
		return fmt.Sprintf("compiled Java frames are unnamed: the JVM did not write its perf map (%v; Compiler.perfmap needs JDK 17 or later)", err), remove
	}
	p.sym.Forget(p.opts.PID)
	if !existed {
		remove = func() { os.Remove(path) }
	}
	return "", remove
}

// ProfileResult is one profile run.
type ProfileResult struct {
	Evidence evidence.Profile
	// Flame is the profile as a stack trie, for the graph formats.
	Flame *flame.Profile
	Run   Run
}

// RunProfile samples on-CPU stacks over one window.
func RunProfile(ctx context.Context, src Sources, opts ProfileOptions, w Window) (ProfileResult, error) {
	part := NewProfile(opts)
	// The session closes (sampling stops) before frames are named: the
	// names take a while, and the report is of the window.
	run, err := measureMandatory(ctx, src, w, part)
	if err != nil {
		return ProfileResult{}, part.explain(err)
	}
	return part.result(ctx, run), nil
}

// explain turns the kernel's refusal into the sentence that says what
// privilege is missing.
func (p *Profile) explain(err error) error {
	switch {
	case errors.Is(err, probes.ErrPermission) && p.probe == nil:
		return Unavailable("the kernel refused to load the sampling program: run perfscope profile as root, or with CAP_BPF and CAP_PERFMON")
	case errors.Is(err, probes.ErrPermission) && !p.started:
		return Unavailable("the kernel refused a %s perf event: run perfscope profile as root, or with CAP_PERFMON (kernel.perf_event_paranoid is in the way)", p.refusedEvent())
	}
	return err
}

// refusedEvent names the event the kernel refused: cycles when asked
// for, else cpu-clock (auto tries it last).
func (p *Profile) refusedEvent() string {
	if p.opts.Event == cpuprofile.EventCycles {
		return "cycles"
	}
	return "cpu-clock"
}

// result names the window's samples (asking a JVM for its perf map
// first) and summarizes them. Call it once the session has closed.
func (p *Profile) result(ctx context.Context, run Run) ProfileResult {
	jitWarning, removeJITMap := p.writeJITMap(ctx)
	defer removeJITMap()

	samples := p.Samples()
	fp, ev := summarizeProfile(p.opts, p.Raw(), samples)
	ev.Workloads = p.workloads
	if sel := p.opts.Select; sel != nil {
		ev.Filter, ev.FilteredOut = sel.Filter.String(), p.filteredOut
	}
	ev.PerCPU, ev.ProfileSampling = p.PerCPU(samples)
	ev.Warnings = p.sym.Warnings()
	if jitWarning != "" {
		ev.Warnings = append(ev.Warnings, jitWarning)
	}
	ev.FrequencyHz, ev.CPUs, ev.DurationNs = p.Frequency(), p.probe.CPUs(), int64(run.Duration())
	if run.Overhead.StatsUnavailable != "" {
		ev.Warnings = append(ev.Warnings, "BPF run time not measured: "+run.Overhead.StatsUnavailable)
	}
	return ProfileResult{Evidence: ev, Flame: fp, Run: run}
}

// summarizeProfile derives the flame graph, the folded stacks and the top
// functions from the same named samples.
func summarizeProfile(o ProfileOptions, prof cpuprofile.Profile, samples []evidence.ProfileSample) (*flame.Profile, evidence.Profile) {
	d := evidence.Profile{Target: "all", PID: o.PID, FrequencyHz: o.Frequency, Stacks: stacksName(o.Stacks), RootFrames: rootFrameName(o.Root),
		Samples: prof.Total(), Lost: prof.Lost.Total(), LostBy: evidence.ProfileLost(prof.Lost),
		TopFunctions: []evidence.FunctionSamples{}, Folded: []evidence.FoldedStack{}}
	if o.PID != 0 {
		d.Target = "pid"
	}
	if o.Select != nil {
		// Shares are of the selected processes' samples.
		d.Target, d.Samples = "workload", 0
		for _, s := range samples {
			d.Samples += s.Count
		}
	}
	fp := flame.New(flame.Samples)
	for _, s := range samples {
		fp.Add(s.Frames, int64(s.Count))
	}
	_ = fp.Walk(func(frames []string, n int64) error {
		d.Folded = append(d.Folded, evidence.FoldedStack{Stack: strings.Join(frames, ";"), Count: uint64(n)})
		return nil
	})
	sort.Slice(d.Folded, func(i, j int) bool {
		if d.Folded[i].Count != d.Folded[j].Count {
			return d.Folded[i].Count > d.Folded[j].Count
		}
		return d.Folded[i].Stack < d.Folded[j].Stack
	})
	fns := fp.FunctionsUnderRoot(0)
	if o.Root == cpuprofile.RootNone {
		fns = fp.Functions(0)
	}
	for _, f := range fns {
		d.TopFunctions = append(d.TopFunctions, evidence.FunctionSamples{Function: f.Name, Kind: f.Kind, Self: uint64(f.Self), Total: uint64(f.Total),
			SelfShare: share(uint64(f.Self), d.Samples), TotalShare: share(uint64(f.Total), d.Samples)})
	}
	return fp, d
}

func stacksName(s cpuprofile.Stacks) string {
	return [...]string{"kernel+user", "kernel", "user"}[s]
}

func rootFrameName(r cpuprofile.RootFrame) string {
	return [...]string{"comm", "none", "process", "thread", "cpu", "container"}[r]
}

func share(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// Report is the run's report envelope, carrying the stack trie for the
// graph formats.
func (r ProfileResult) Report(version string) *report.Report {
	rep := envelope("profile", version, r.Run, int64(r.Run.Duration()), r.Evidence)
	rep.Flame = r.Flame
	return rep
}

func init() {
	registerBuilder(cpuprofile.Spec.Name, func(b Build, u PartUse, ps *Parts) {
		o := ProfileOptions{PID: optInt(u, "pid"), Frequency: optInt(u, "frequency"),
			IncludeIdle: u.Opts["include_idle"].(bool), StackEntries: optInt(u, "stack_entries"), JVM: b.JVM}
		// The option's domain is cpuprofile.EventNames: the name parses.
		o.Event, _ = cpuprofile.ParseEvent(u.Opts["event"].(string))
		switch u.Opts["stacks"].(string) {
		case "kernel":
			o.Stacks = cpuprofile.KernelOnly
		case "user":
			o.Stacks = cpuprofile.UserOnly
		}
		for i, name := range cpuprofile.RootFrameNames {
			if name == u.Opts["root"].(string) {
				o.Root = cpuprofile.RootFrame(i)
			}
		}
		o.Continuous = b.Continuous
		if ps.Net != nil {
			// NET_RX on a real NIC runs mostly from irq_exit on idle CPUs:
			// a network run's profile keeps those samples of the idle task
			// and drops only its loop, as perfscope udp always has. It
			// is rooted at CPUs and holds the softirqs' work, done in
			// whatever task was interrupted: it stays host-wide.
			o.KeepIdleInterrupts = !o.IncludeIdle
		} else {
			// A profile of its own keeps the selection's samples.
			o.Select = b.Select
		}
		ps.Profile = NewProfile(o)
	})
}
