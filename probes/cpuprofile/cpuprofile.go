// Package cpuprofile samples on-CPU stacks with a perf event on every
// online CPU — the hardware cycles event where it opens, else the software
// cpu-clock, as perf record chooses (ChooseEvent) — and a BPF program that
// counts (thread, CPU, kernel stack, user stack) tuples in the kernel. User
// space reads only the distinct stacks and their counts, and per CPU how
// many samples the event delivered and how long it was enabled, so that a
// CPU whose event did not fire (a halted virtual CPU's cpu-clock) is seen
// as such. Symbolization is separate (collectors/symbols) so that callers
// can split or filter samples — by CPU, by process — before paying for it.
package cpuprofile

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// Stacks says which halves of each stack to record.
type Stacks int

const (
	// KernelAndUser records both (the default).
	KernelAndUser Stacks = iota
	// KernelOnly skips user stacks: cheaper, and enough for softirq and
	// network-stack work.
	KernelOnly
	// UserOnly skips kernel stacks and samples of kernel threads.
	UserOnly
)

// DefaultFrequency is 99 Hz, off the 100 Hz timer tick so that sampling does
// not run in lockstep with periodic work (the FlameGraph convention).
const DefaultFrequency = 99

// DefaultStackEntries is the stack map's size when Options.StackEntries is
// 0: what the BPF object declares.
const DefaultStackEntries = 16384

// Options configure a profiler.
type Options struct {
	// PID limits sampling to one process (its tgid, as the host's pid
	// namespace sees it); 0 samples every process.
	PID int
	// Frequency is samples per second per CPU; 0 means DefaultFrequency.
	Frequency int
	Stacks    Stacks
	// IncludeIdle keeps samples of the idle task (pid 0), which otherwise
	// dominate the profile of any machine that is not saturated.
	IncludeIdle bool
	// KeepIdleInterrupts keeps the idle task's samples taken while the CPU
	// served an interrupt or a softirq — on a real NIC most NET_RX work
	// runs that way, on CPUs that were idle — and drops only the idle loop
	// itself. The kernel side keeps every idle sample with its kernel
	// stack; call Profile.SplitIdle to classify them.
	KeepIdleInterrupts bool
	// StackEntries and CountEntries size the stack map (distinct stacks,
	// kernel and user halves counted apart) and the count hash, of each
	// generation with Continuous (0: DefaultStackEntries and 40960). Too
	// small a stack map shows up as KernelStacksFull and UserStacksFull in
	// Lost.
	StackEntries int
	CountEntries int
	// Event is the perf event that samples: EventAuto (the zero value)
	// takes cycles where it opens and cpu-clock elsewhere.
	Event Event
	// Continuous sizes the second generation of the stack map and the
	// count hash like the first, so that Drain can read window after
	// window out of a profiler that is never restarted (perfscope serve).
	// Without it the second generation has one entry and Drain refuses:
	// a one-shot profile costs no more kernel memory than one generation.
	Continuous bool
}

// Profiler is a loaded cpuprofile BPF object and, once started, its perf
// events.
type Profiler struct {
	opts Options
	// objs holds the program and maps only. Loading them through
	// LoadAndAssign rather than NewCollection matters: a Collection also
	// memory-maps .rodata for its Variables, and that mapping keeps the map
	// alive after Close until the garbage collector runs.
	objs   *profilerObjects
	events []*perfEvent
	cpus   int
	// mode is how Start attached the program ("perf_link" or "ioctl"),
	// kept after Stop for the report.
	mode string
	// choice is the event Start sampled with and why.
	choice EventChoice
	// stopped is the events' last reading, taken by Stop before it closed
	// them, for the snapshots read after it.
	stopped []CPUCount

	// mu serializes Drain against Snapshot and PIDs: they read the
	// generation gen names, which Drain switches.
	mu  sync.Mutex
	gen uint32
	// leaving is true while a Drain that switched generations has not yet
	// read and emptied the one it left (it gave up waiting): the next
	// Drain finishes that one instead of switching back onto it.
	leaving bool
	// drainedLost is the lost counters at the last Drain (they are
	// cumulative in the kernel: one per-CPU array, never switched), and
	// drainedCounts the CPUs' counts then.
	drainedLost   Lost
	drainedCounts []CPUCount
}

var (
	_ probes.Snapshotter[Profile] = (*Profiler)(nil)
	_ probes.SelfCounted          = (*Profiler)(nil)
)

type profilerObjects struct {
	cpuprofilePrograms
	cpuprofileMaps
}

// Open validates opts and loads the BPF object; nothing samples until Start.
func Open(opts Options) (*Profiler, error) {
	if opts.Frequency == 0 {
		opts.Frequency = DefaultFrequency
	}
	if opts.Frequency < 0 {
		return nil, fmt.Errorf("sampling frequency %d Hz: must be positive", opts.Frequency)
	}
	if opts.PID < 0 {
		return nil, fmt.Errorf("pid %d: must be positive", opts.PID)
	}
	if opts.Event < EventAuto || opts.Event > EventCPUClock {
		return nil, fmt.Errorf("unknown sampling event %v", opts.Event)
	}
	spec, err := loadCpuprofile()
	if err != nil {
		return nil, fmt.Errorf("load cpuprofile BPF spec: %w", err)
	}
	for _, gen := range [][2]string{{cpuprofileMapStackTraces, cpuprofileMapSampleCounts}, {cpuprofileMapStackTraces1, cpuprofileMapSampleCounts1}} {
		if opts.StackEntries > 0 {
			spec.Maps[gen[0]].MaxEntries = uint32(opts.StackEntries)
		}
		if opts.CountEntries > 0 {
			spec.Maps[gen[1]].MaxEntries = uint32(opts.CountEntries)
		}
	}
	if !opts.Continuous {
		// Never written: generation 0 stays current.
		spec.Maps[cpuprofileMapStackTraces1].MaxEntries = 1
		spec.Maps[cpuprofileMapSampleCounts1].MaxEntries = 1
	}
	vars := map[string]any{
		cpuprofileVarTargetTgid:         uint32(opts.PID),
		cpuprofileVarCollectKernel:      opts.Stacks != UserOnly,
		cpuprofileVarCollectUser:        opts.Stacks != KernelOnly,
		cpuprofileVarIncludeIdle:        opts.IncludeIdle,
		cpuprofileVarKeepIdleInterrupts: opts.KeepIdleInterrupts,
	}
	for name, v := range vars {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	probes.Prepare()
	objs := &profilerObjects{}
	if err := spec.LoadAndAssign(objs, probes.LoadOptions()); err != nil {
		return nil, probes.Classify("load cpuprofile BPF program", err)
	}
	return &Profiler{opts: opts, objs: objs}, nil
}

// Start opens the sampling event on every online CPU and attaches the
// program to each: with EventAuto, cycles where it opens on every CPU and
// cpu-clock otherwise (ChooseEvent; EventChoice says which and why). On
// error nothing stays open.
func (p *Profiler) Start() error {
	if p.events != nil {
		return errors.New("cpuprofile: already started")
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return err
	}
	var cyclesErr error
	if p.opts.Event == EventCPUClock {
		// Not sampled with, only asked: the answer says whether the
		// machine has a PMU, which explains a cpu-clock profile's gaps.
		cyclesErr = probeEvent(cpus[0], p.opts.Frequency, EventCycles)
	} else if cyclesErr = p.attachAll(cpus, EventCycles); !isOpenError(cyclesErr) {
		if cyclesErr != nil {
			return cyclesErr // cycles opened, the program did not attach
		}
	}
	choice, err := ChooseEvent(p.opts.Event, cyclesErr)
	if err != nil {
		return err
	}
	if choice.Event == EventCPUClock {
		if err := p.attachAll(cpus, EventCPUClock); err != nil {
			return err
		}
	}
	p.choice, p.stopped = choice, nil
	p.cpus = len(cpus)
	p.mode = "ioctl"
	if p.events[0].link != nil {
		p.mode = "perf_link"
	}
	return nil
}

// attachAll opens ev on every CPU and attaches the program to each; on
// error it closes what it opened. An *openError is perf_event_open's
// refusal, any other error the attachment's.
func (p *Profiler) attachAll(cpus []int, ev Event) error {
	for _, cpu := range cpus {
		pe, err := openEvent(cpu, p.opts.Frequency, ev, p.objs.OnCpuClock)
		if err != nil {
			p.Stop()
			return err
		}
		p.events = append(p.events, pe)
	}
	return nil
}

// EventChoice is the event Start sampled with and why (zero before Start).
func (p *Profiler) EventChoice() EventChoice { return p.choice }

// Pause stops sampling on every CPU (PERF_EVENT_IOC_DISABLE) without
// detaching: the events' enabled time stops too, so a paused span is
// neither sampled nor expected to be. A recipe pauses between opening its
// probes and its window, keeping what happens in between (other probes
// loading, the overhead budget's calibration) out of the profile.
func (p *Profiler) Pause() error { return p.ioctlAll(unix.PERF_EVENT_IOC_DISABLE, "pause") }

// Resume samples again after Pause.
func (p *Profiler) Resume() error { return p.ioctlAll(unix.PERF_EVENT_IOC_ENABLE, "resume") }

func (p *Profiler) ioctlAll(req uint, what string) error {
	if p.events == nil {
		return fmt.Errorf("cpuprofile: %s before Start", what)
	}
	for _, ev := range p.events {
		if err := unix.IoctlSetInt(ev.fd, req, 0); err != nil {
			return fmt.Errorf("%s sampling on CPU %d: %w", what, ev.cpu, err)
		}
	}
	return nil
}

// AttachMode says how Start attached the program: "perf_link" (a BPF
// link, kernel ≥ 5.15) or "ioctl" (PERF_EVENT_IOC_SET_BPF on older
// kernels); "" before Start. It stays known after Stop.
func (p *Profiler) AttachMode() string { return p.mode }

// Method is the probes.Probe attach method: "perf_event/" and AttachMode.
func (p *Profiler) Method() probes.AttachMethod {
	return probes.AttachMethod("perf_event/" + p.mode)
}

// Missing is empty: the profiler attaches to a perf event on every online
// CPU or fails.
func (p *Profiler) Missing() map[string]error { return nil }

// CPUs is the number of CPUs sampled since Start (still known after Stop).
func (p *Profiler) CPUs() int { return p.cpus }

// Frequency is the sampling frequency in Hz.
func (p *Profiler) Frequency() int { return p.opts.Frequency }

// Stop detaches from every CPU and closes the perf events; the counts stay
// readable with Snapshot until Close. Safe to call more than once.
func (p *Profiler) Stop() error {
	if len(p.events) > 0 && p.objs != nil {
		// The events' times go with their fds: keep the last reading.
		// A failed read leaves the CPUs' counts unread, not zero.
		p.stopped, _ = p.readCounts()
	}
	var errs []error
	for _, ev := range p.events {
		errs = append(errs, ev.close())
	}
	p.events = nil
	return errors.Join(errs...)
}

// Close stops sampling and frees the BPF object. Safe to call more than once.
func (p *Profiler) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.Stop()
	if p.objs != nil {
		err = errors.Join(err, p.objs.cpuprofilePrograms.Close(), p.objs.cpuprofileMaps.Close())
		p.objs = nil
	}
	return err
}

// Costs is the program's bpf_stats run count and time (zero unless
// probes.EnableStats is active).
func (p *Profiler) Costs() []probes.ProgramCost {
	if p.objs == nil {
		return nil
	}
	return probes.Costs(map[string]*ebpf.Program{cpuprofileProgOnCpuClock: p.objs.OnCpuClock})
}

// SelfCosts implements probes.SelfCounted: the program's own run count
// per CPU (one run per sample taken, on the sampled CPU).
func (p *Profiler) SelfCosts() (probes.SelfCosts, error) {
	if p.objs == nil {
		return nil, errors.New("cpuprofile: self costs after Close")
	}
	return probes.SelfCostReader(p.objs.SelfCosts, map[string]uint32{cpuprofileProgOnCpuClock: uint32(cpuprofileCpuprofileHookCPUPROFILE_HOOK_CPU_CLOCK)},
		func(v cpuprofileSelfCost) probes.SelfRuns {
			return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
		})()
}
