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
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
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

// Sample is one aggregation bucket: Count ticks of thread TID of process PID
// on CPU with the same stacks. Stacks are instruction addresses, leaf first;
// nil when not collected.
type Sample struct {
	PID, TID, CPU int
	Comm          string
	KernelStack   []uint64
	UserStack     []uint64
	Count         uint64
}

// Lost counts samples that were dropped, by reason.
type Lost struct {
	// KernelStacksFull and UserStacksFull: the stack map had no room for
	// a stack it had not seen; a bigger StackEntries helps.
	KernelStacksFull uint64 `json:"kernel_stacks_full"`
	UserStacksFull   uint64 `json:"user_stacks_full"`
	// KernelStackFaults and UserStackFaults: the stack walk failed
	// (-EFAULT), e.g. a user stack paged out.
	KernelStackFaults uint64 `json:"kernel_stack_faults"`
	UserStackFaults   uint64 `json:"user_stack_faults"`
	// CountsFull: the count hash had no room for a new tuple.
	CountsFull uint64 `json:"counts_full"`
}

// Total is the number of samples lost for any reason.
func (l Lost) Total() uint64 {
	return l.KernelStacksFull + l.UserStacksFull + l.KernelStackFaults + l.UserStackFaults + l.CountsFull
}

// Profile is what a profiler has counted since Start.
type Profile struct {
	Taken   time.Time
	Samples []Sample
	Lost    Lost
	// CPUs is, per CPU sampled, how many samples its event delivered and
	// how long the event was enabled and counting, over the same span as
	// Samples; nil when not read (a profile recorded before it was kept).
	CPUs []CPUCount
}

// CPUCount is one CPU's sampling over a span: what to compare the
// samples with to see whether the CPU's event fired as often as it
// should have.
type CPUCount struct {
	CPU int
	// Taken is the samples the event delivered on the CPU: every run of
	// the sampling program, counted before it filters anything (the idle
	// task, other processes than Options.PID) and before a stack can be
	// lost, so Taken covers every sample the profile keeps, leaves out or
	// loses. A sample the kernel skipped because another BPF program was
	// running on the CPU is not taken.
	Taken uint64
	// EnabledNs is how long the CPU's event was enabled (perf's
	// time_enabled: the span, less any time the CPU was offline or
	// sampling was paused); RunningNs how long it was counting on the PMU
	// (time_running: less than EnabledNs when a hardware counter was
	// shared with other perf users and multiplexed; equal for cpu-clock).
	EnabledNs, RunningNs uint64
}

// Total is the number of samples in the profile.
func (p Profile) Total() uint64 {
	var n uint64
	for _, s := range p.Samples {
		n += s.Count
	}
	return n
}

// Sub returns p − prev: the samples counted between the two snapshots,
// for a profiler read window after window without a restart. Tuples whose
// count did not grow are left out.
func (p Profile) Sub(prev Profile) Profile {
	key := func(s Sample) string {
		return fmt.Sprint(s.PID, s.TID, s.CPU, s.Comm, s.KernelStack, s.UserStack)
	}
	before := make(map[string]uint64, len(prev.Samples))
	for _, s := range prev.Samples {
		before[key(s)] += s.Count
	}
	out := Profile{Taken: p.Taken, Lost: p.Lost.sub(prev.Lost), CPUs: subCounts(p.CPUs, prev.CPUs)}
	for _, s := range p.Samples {
		if n := before[key(s)]; s.Count > n {
			s.Count -= n
			out.Samples = append(out.Samples, s)
		}
	}
	return out
}

// subCounts is cur − prev per CPU; nil when cur is (not read). A CPU
// missing from prev counts from zero; a count that went back (a profiler
// restarted in between) is zero.
func subCounts(cur, prev []CPUCount) []CPUCount {
	if cur == nil {
		return nil
	}
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	before := make(map[int]CPUCount, len(prev))
	for _, c := range prev {
		before[c.CPU] = c
	}
	out := make([]CPUCount, 0, len(cur))
	for _, c := range cur {
		b := before[c.CPU]
		out = append(out, CPUCount{CPU: c.CPU, Taken: d(c.Taken, b.Taken), EnabledNs: d(c.EnabledNs, b.EnabledNs), RunningNs: d(c.RunningNs, b.RunningNs)})
	}
	return out
}

func (l Lost) sub(prev Lost) Lost {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return Lost{d(l.KernelStacksFull, prev.KernelStacksFull), d(l.UserStacksFull, prev.UserStacksFull),
		d(l.KernelStackFaults, prev.KernelStackFaults), d(l.UserStackFaults, prev.UserStackFaults), d(l.CountsFull, prev.CountsFull)}
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

// Snapshot reads every counted tuple and its stacks. Counts are cumulative
// since Start (with Continuous, since the last Drain).
func (p *Profiler) Snapshot() (Profile, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil {
		return Profile{Taken: time.Now()}, errors.New("cpuprofile: snapshot after Close")
	}
	counts, stacks := p.generation(p.gen)
	prof, _, err := p.read(counts, stacks)
	return prof, err
}

// generation is generation g's count hash and stack map.
func (p *Profiler) generation(g uint32) (counts, stacks *ebpf.Map) {
	if g == 0 {
		return p.objs.SampleCounts, p.objs.StackTraces
	}
	return p.objs.SampleCounts1, p.objs.StackTraces1
}

// read reads one generation: every counted tuple with its stacks, and the
// keys it read them under. Lost is cumulative since Start.
func (p *Profiler) read(counts, stacks *ebpf.Map) (Profile, []cpuprofileSampleKey, error) {
	prof := Profile{Taken: time.Now()}
	var err error
	if prof.Lost, err = p.readLost(); err != nil {
		return prof, nil, err
	}
	if prof.CPUs, err = p.readCounts(); err != nil {
		return prof, nil, err
	}
	// Both tables in batches: a few system calls where looking up each
	// count and stack took two or more each.
	read, err := probes.ReadHash[uint64, cpuprofileStackFrames](stacks)
	if err != nil {
		return prof, nil, fmt.Errorf("read stacks: %w", err)
	}
	cache := map[uint64][]uint64{}
	stack := func(hash uint64, present bool) ([]uint64, error) {
		if !present {
			return nil, nil
		}
		if s, ok := cache[hash]; ok {
			return s, nil
		}
		f, ok := read[hash]
		if !ok {
			// Stored after the batch read, with its count (stacks are
			// stored before the count that names them).
			if err := stacks.Lookup(hash, &f); err != nil {
				return nil, fmt.Errorf("read stack %#x: %w", hash, err)
			}
		}
		s := trimStack(f.Ips[:])
		cache[hash] = s
		return s, nil
	}

	counted, err := probes.ReadHash[cpuprofileSampleKey, uint64](counts)
	if err != nil {
		return prof, nil, fmt.Errorf("read sample counts: %w", err)
	}
	keys := make([]cpuprofileSampleKey, 0, len(counted))
	for key := range counted {
		keys = append(keys, key)
	}
	// In a stable order (the keys' fields), not the hash's.
	slices.SortFunc(keys, compareSampleKeys)
	for _, key := range keys {
		s := Sample{PID: int(key.Tgid), TID: int(key.Pid), CPU: int(key.Cpu), Comm: probes.CommString(key.Comm), Count: counted[key]}
		if s.KernelStack, err = stack(key.KernelStack, key.Halves&halfKernel != 0); err != nil {
			return prof, keys, err
		}
		if s.UserStack, err = stack(key.UserStack, key.Halves&halfUser != 0); err != nil {
			return prof, keys, err
		}
		prof.Samples = append(prof.Samples, s)
	}
	return prof, keys, nil
}

// compareSampleKeys orders sample keys by process, thread, CPU and stacks.
func compareSampleKeys(a, b cpuprofileSampleKey) int {
	return cmp.Or(cmp.Compare(a.Tgid, b.Tgid), cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.Cpu, b.Cpu),
		cmp.Compare(a.KernelStack, b.KernelStack), cmp.Compare(a.UserStack, b.UserStack), cmp.Compare(a.Halves, b.Halves),
		slices.Compare(a.Comm[:], b.Comm[:]))
}

// drainWait bounds the wait for programs still writing to the generation
// being left. Each runs for microseconds, at Frequency per CPU: the
// counter is almost always zero at the first look.
const drainWait = time.Second

// Drain returns what was counted since the last Drain (since Start for the
// first) and empties it out of the kernel, so that a profiler read window
// after window keeps its maps — and perfscope's memory — bounded by one
// window's distinct stacks, not by every stack ever seen. It switches the
// program to the other generation of maps first, waits until no program
// is still writing to the one left, then reads and empties that one:
// samples taken meanwhile go to the new generation and are the next
// Drain's, none lost or counted twice. Needs Options.Continuous.
func (p *Profiler) Drain() (Profile, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil {
		return Profile{Taken: time.Now()}, errors.New("cpuprofile: drain after Close")
	}
	if !p.opts.Continuous {
		return Profile{Taken: time.Now()}, errors.New("cpuprofile: drain of a profiler opened without Continuous")
	}
	if !p.leaving {
		next := p.gen ^ 1
		if err := p.objs.Generation.Update(uint32(0), next, ebpf.UpdateExist); err != nil {
			return Profile{Taken: time.Now()}, fmt.Errorf("switch sample generation: %w", err)
		}
		p.gen, p.leaving = next, true
	}
	if err := p.waitIdle(); err != nil {
		return Profile{Taken: time.Now()}, err
	}
	counts, stacks := p.generation(p.gen ^ 1)
	prof, keys, err := p.read(counts, stacks)
	if err != nil {
		return prof, err
	}
	if err := clearGeneration(counts, stacks, keys); err != nil {
		return prof, err
	}
	p.leaving = false
	lost, taken := prof.Lost, prof.CPUs
	prof.Lost, prof.CPUs = lost.sub(p.drainedLost), subCounts(taken, p.drainedCounts)
	p.drainedLost, p.drainedCounts = lost, taken
	return prof, nil
}

// waitIdle waits until no program runs (in_flight[0] is zero): those that
// started before the generation switched have finished.
func (p *Profiler) waitIdle() error {
	deadline := time.Now().Add(drainWait)
	for {
		var running uint64
		if err := p.objs.InFlight.Lookup(uint32(0), &running); err != nil {
			return fmt.Errorf("read in-flight samples: %w", err)
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cpuprofile: %d sampling programs still running after %v", running, drainWait)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// clearGeneration empties a generation nothing writes to: the count keys
// just read, then every stack id left, including those of samples that were
// lost after their first half was stored (a count-hash miss, a user stack
// fault), which would otherwise hold stack map buckets forever.
func clearGeneration(counts, stacks *ebpf.Map, keys []cpuprofileSampleKey) error {
	if len(keys) > 0 {
		if _, err := counts.BatchDelete(keys, nil); err != nil {
			if !errors.Is(err, ebpf.ErrNotSupported) {
				return fmt.Errorf("empty sample counts: %w", err)
			}
			// Kernels before 5.6 have no batch operations.
			for i := range keys {
				if err := counts.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					return fmt.Errorf("empty sample counts: %w", err)
				}
			}
		}
	}
	_, err := emptyMap[uint64](stacks, "stack map")
	return err
}

// emptyMap lists a map's keys, then deletes each, and returns those it
// deleted: for maps without batch operations (a stack map) or kernels
// without them (before 5.6). A key added in between stays.
func emptyMap[K uint32 | uint64](m *ebpf.Map, name string) ([]K, error) {
	var keys []K
	var key K
	var prev any // nil: the first key
	for {
		if err := m.NextKey(prev, &key); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			return nil, fmt.Errorf("list %s: %w", name, err)
		}
		keys = append(keys, key)
		cur := key
		prev = &cur
	}
	for i, key := range keys {
		if err := m.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return keys[:i], fmt.Errorf("empty %s: %w", name, err)
		}
	}
	return keys, nil
}

// PIDs lists the processes (tgids) sampled since the previous call (since
// Start for the first), without reading stacks, so that a caller polling
// it can read the mappings of short-lived processes before they exit. The
// program notes each sampled process in sampled_tgids; PIDs reads and
// empties that map, so a call costs syscalls in proportion to the
// processes new since the last one rather than to every stack counted:
// reading all of sample_counts' keys four times a second for the same
// answer was about a tenth of perfscope's own CPU while a UDP flood ran.
// A process sampled again after a call is named again; one noted while the
// map was full is not named at all (its samples still count: its mappings
// are read at symbolization instead).
func (p *Profiler) PIDs() ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil {
		return nil, errors.New("cpuprofile: PIDs after Close")
	}
	m := p.objs.SampledTgids
	var out []int
	tgids := make([]uint32, pidBatch)
	noted := make([]uint8, pidBatch)
	var cursor ebpf.MapBatchCursor
	for {
		// Each batch reads and deletes whole hash buckets at once: a
		// process noted after its bucket was read stays for the next call.
		n, err := m.BatchLookupAndDelete(&cursor, tgids, noted, nil)
		for _, tgid := range tgids[:n] {
			out = append(out, int(tgid))
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) && len(out) == 0 {
			// Kernels before 5.6 have no batch operations.
			tgids, err := emptyMap[uint32](m, "sampled_tgids")
			for _, tgid := range tgids {
				out = append(out, int(tgid))
			}
			return out, err
		}
		if err != nil {
			// What was read is already deleted: return it with the error.
			return out, fmt.Errorf("read sampled_tgids: %w", err)
		}
	}
}

// pidBatch is how many tgids PIDs reads per syscall: far more than a hash
// bucket holds (a batch must take a whole bucket). A variable so the test
// can make a read span batches.
var pidBatch = 256

func (p *Profiler) readLost() (Lost, error) {
	m := p.objs.LostSamples
	sum := func(r cpuprofileLostReason) (uint64, error) {
		var perCPU []uint64
		if err := m.Lookup(r, &perCPU); err != nil {
			return 0, fmt.Errorf("read lost_samples[%d]: %w", r, err)
		}
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		return n, nil
	}
	var l Lost
	for r, dst := range map[cpuprofileLostReason]*uint64{
		cpuprofileLostReasonLOST_KERNEL_STACKS_FULL: &l.KernelStacksFull,
		cpuprofileLostReasonLOST_KERNEL_STACK_FAULT: &l.KernelStackFaults,
		cpuprofileLostReasonLOST_USER_STACKS_FULL:   &l.UserStacksFull,
		cpuprofileLostReasonLOST_USER_STACK_FAULT:   &l.UserStackFaults,
		cpuprofileLostReasonLOST_COUNTS_FULL:        &l.CountsFull,
	} {
		n, err := sum(r)
		if err != nil {
			return l, err
		}
		*dst = n
	}
	return l, nil
}

// readCounts reads, per CPU, the samples taken (the program's own run
// counter, selfcost.h) and the event's enabled and running times, both
// cumulative since Start; after Stop, the reading Stop took.
func (p *Profiler) readCounts() ([]CPUCount, error) {
	if p.events == nil {
		return p.stopped, nil
	}
	costs, err := p.SelfCosts()
	if err != nil {
		return nil, fmt.Errorf("read samples taken per CPU: %w", err)
	}
	runs := costs[cpuprofileProgOnCpuClock]
	out := make([]CPUCount, 0, len(p.events))
	for _, ev := range p.events {
		c, err := ev.read()
		if err != nil {
			return nil, err
		}
		if ev.cpu < len(runs) {
			c.Taken = runs[ev.cpu].Runs
		}
		out = append(out, c)
	}
	return out, nil
}

// The bits of sample_key.halves (enum stack_half in bpf/types.h, which
// bpf2go cannot see: no map or variable has that type).
const (
	halfKernel = 1
	halfUser   = 2
)

// trimStack cuts the zero padding after the last frame.
func trimStack(ips []uint64) []uint64 {
	n := 0
	for n < len(ips) && ips[n] != 0 {
		n++
	}
	return append([]uint64(nil), ips[:n]...)
}

// perfEvent is one CPU's sampling event and the attachment of the
// program to it.
type perfEvent struct {
	cpu  int
	fd   int
	link link.Link // nil when attached with the ioctl
}

func (e *perfEvent) close() error {
	var errs []error
	if e.link != nil {
		errs = append(errs, e.link.Close())
		e.link = nil
	}
	if e.fd >= 0 {
		// With the ioctl attachment, closing the event is what detaches.
		errs = append(errs, unix.Close(e.fd))
		e.fd = -1
	}
	return errors.Join(errs...)
}

// read is the event's enabled and running times since it was opened
// (the read format openEvent asks for: count, time_enabled,
// time_running).
func (e *perfEvent) read() (CPUCount, error) {
	var buf [3]uint64
	b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), unsafe.Sizeof(buf))
	n, err := unix.Read(e.fd, b)
	if err != nil {
		return CPUCount{}, fmt.Errorf("read the sampling event of CPU %d: %w", e.cpu, err)
	}
	if n != len(b) {
		return CPUCount{}, fmt.Errorf("read the sampling event of CPU %d: %d bytes, want %d", e.cpu, n, len(b))
	}
	return CPUCount{CPU: e.cpu, EnabledNs: buf[1], RunningNs: buf[2]}, nil
}

// openError is perf_event_open refusing an event, as opposed to the
// program failing to attach to one that opened.
type openError struct {
	cpu int
	ev  Event
	err error
}

func (e *openError) Error() string {
	return fmt.Sprintf("open %s perf event on CPU %d: %v", e.ev, e.cpu, e.err)
}
func (e *openError) Unwrap() error { return e.err }

func isOpenError(err error) bool {
	var oe *openError
	return errors.As(err, &oe)
}

// eventAttr is ev sampling at freq Hz (frequency mode: the kernel adjusts
// the period to hit freq samples per second of the event's own time: of
// wall time for cpu-clock, of busy time for cycles), for every process,
// with the times openEvent's readers need.
func eventAttr(ev Event, freq int) unix.PerfEventAttr {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_CPU_CLOCK,
		Sample:      uint64(freq),
		Bits:        unix.PerfBitFreq,
		Read_format: unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING,
	}
	if ev == EventCycles {
		attr.Type, attr.Config = unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	return attr
}

// probeEvent asks whether ev opens on cpu, and closes it again.
func probeEvent(cpu, freq int, ev Event) error {
	attr := eventAttr(ev, freq)
	attr.Bits |= unix.PerfBitDisabled
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return &openError{cpu: cpu, ev: ev, err: err}
	}
	return unix.Close(fd)
}

// openEvent opens ev on cpu sampling at freq Hz and attaches prog.
// cpu-clock is an hrtimer, so it works in VMs without a PMU; cycles
// needs one. A refusal to open is an *openError.
func openEvent(cpu, freq int, ev Event, prog *ebpf.Program) (*perfEvent, error) {
	attr := eventAttr(ev, freq)
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		if ev == EventCPUClock && errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("open cpu-clock perf event on CPU %d at %d Hz (above kernel.perf_event_max_sample_rate?): %w", cpu, freq, &openError{cpu: cpu, ev: ev, err: err})
		}
		return nil, probes.Classify(fmt.Sprintf("open %s perf event on CPU %d", ev, cpu), &openError{cpu: cpu, ev: ev, err: err})
	}
	pe := &perfEvent{cpu: cpu, fd: fd}
	l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
	if err == nil {
		pe.link = l
		return pe, nil
	}
	// Kernels before 5.15 have no perf links: attach the old way. The
	// attachment then lives exactly as long as the event's fd.
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, prog.FD()); err != nil {
		pe.close()
		return nil, probes.Classify(fmt.Sprintf("attach BPF to perf event on CPU %d", cpu), err)
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		pe.close()
		return nil, probes.Classify(fmt.Sprintf("enable perf event on CPU %d", cpu), err)
	}
	return pe, nil
}

// onlineCPUs lists the CPUs perf can open events on: offline CPUs refuse
// perf_event_open.
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("list online CPUs: %w", err)
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

// parseCPUList parses the kernel's CPU list format ("0-3,8,10-11").
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if last < first {
			return nil, fmt.Errorf("cpu list %q: range %s is reversed", s, part)
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("cpu list %q is empty", s)
	}
	return cpus, nil
}
