// Package offcpu measures where threads wait: off-CPU time by kernel and
// user stack, split by the state each thread left the CPU in and by who
// woke it (as bcc's offcputime and offwaketime), every thread's time on
// CPU, runnable and blocked, and run-queue latency as log2 histograms per
// CPU and per process (as bcc's runqlat) — from sched:sched_switch,
// sched:sched_waking, sched:sched_wakeup and sched:sched_wakeup_new,
// aggregated in the kernel. Symbolization and analysis are the caller's
// (the offcpu package at the top of the tree): this package reads maps.
package offcpu

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// Hooks are the tracepoints this probe attaches to . All
// four are required: without a wakeup there is no run-queue latency and
// no waker, and every kernel since 4.3 has them.
var Hooks = Spec.Hooks

// Group is the probe's one hook group. A context switch is, for the
// overhead budget, what a packet is to the network probes: an event that
// fires at the machine's pace (~100 k/s on a busy host), so the group is
// of class PerPacket and the governor may attach it in sampling windows.
// Each time it attaches again a new epoch begins (see the BPF file): no
// wait is timed across the gap.
const Group = "offcpu"

// Stacks says which halves of each stack to record.
type Stacks int

const (
	// KernelAndUser records both (the default).
	KernelAndUser Stacks = iota
	// KernelOnly skips user stacks: the wait's reason still shows (it is
	// read from kernel frames), not the application's call site.
	KernelOnly
	// UserOnly skips kernel stacks: the call site shows, the reason is
	// then guessed from user frames only.
	UserOnly
)

// DefaultMinBlock is the shortest wait aggregated by stack when
// Options.MinBlock is 0. Shorter waits are still timed and counted in
// every thread's totals (blocked, runnable) and in the run-queue
// histograms, so shares and latencies stay exact; only their stacks are
// not kept. bcc's offcputime and offwaketime default to 1 µs; perfscope
// takes 10 µs because a wait shorter than that costs about what the two
// context switches around it cost (`perf bench sched pipe` on one CPU
// takes 7-11 µs per round trip of two switches on our VM, BENCHMARKS.md),
// so it is not time an application can win back by waiting less, while a
// busy server's many sub-10 µs futex and epoll handoffs would fill the
// wait map with distinct stacks. What fell below is reported (ShortWaits,
// Short) rather than hidden.
const DefaultMinBlock = 10 * time.Microsecond

// Map sizes when Options leaves them 0.
const (
	DefaultThreadEntries  = 16384
	DefaultStackEntries   = 8192
	DefaultWaitEntries    = 16384
	DefaultProcessEntries = 4096
)

// MaxStackEvery bounds Options.StackEvery.
const MaxStackEvery = 1024

// Options configure a probe.
type Options struct {
	Method probes.AttachMethod
	// PID limits the probe to one process (its tgid in the host's pid
	// namespace); 0 watches every process.
	PID int
	// MinBlock is the shortest wait aggregated by stack (0:
	// DefaultMinBlock; negative: every wait).
	MinBlock time.Duration
	Stacks   Stacks
	// NoWakerStacks keeps who woke each wait (thread, process, name) but
	// not the waker's stacks: two stack walks fewer per wakeup.
	NoWakerStacks bool
	// StackEvery takes stacks at about 1 in StackEvery switch-outs
	// (default 1: every one, at most MaxStackEvery). Every wait is still
	// timed into the thread totals and histograms; Snapshot.StackEvery
	// says how to scale the aggregated waits.
	StackEvery int
	// Map sizes (0: the Default*Entries). ThreadEntries bounds the
	// threads followed at once; StackEntries the distinct stacks (kernel
	// and user halves, wakers' too); WaitEntries the distinct (thread,
	// stacks, state, waker) buckets; ProcessEntries the processes with a
	// run-queue histogram.
	ThreadEntries, StackEntries, WaitEntries, ProcessEntries int
}

func (o Options) minBlock() time.Duration {
	switch {
	case o.MinBlock == 0:
		return DefaultMinBlock
	case o.MinBlock < 0:
		return 0
	}
	return o.MinBlock
}

// Probe is a loaded and attached offcpu probe.
type Probe struct {
	probes.Loaded
	opts       Options
	stackEvery int
	epoch      uint32
}

var (
	_ probes.Snapshotter[Snapshot] = (*Probe)(nil)
	_ probes.Switchable            = (*Probe)(nil)
	_ probes.SelfCounted           = (*Probe)(nil)
)

// Open validates opts, loads the probe's BPF object, attaches it and
// starts its first window.
func Open(opts Options) (*Probe, error) {
	if opts.PID < 0 {
		return nil, fmt.Errorf("offcpu: pid %d must be positive", opts.PID)
	}
	if opts.Stacks < KernelAndUser || opts.Stacks > UserOnly {
		return nil, fmt.Errorf("offcpu: unknown stack selection %d", opts.Stacks)
	}
	if opts.StackEvery == 0 {
		opts.StackEvery = 1
	}
	if opts.StackEvery < 1 || opts.StackEvery > MaxStackEvery {
		return nil, fmt.Errorf("offcpu: stacks at 1 in %d switches out of range 1..%d", opts.StackEvery, MaxStackEvery)
	}
	sizes := []struct {
		name string
		n    *int
		def  int
	}{
		{offcpuMapThreads, &opts.ThreadEntries, DefaultThreadEntries},
		{offcpuMapStacks, &opts.StackEntries, DefaultStackEntries},
		{offcpuMapWaits, &opts.WaitEntries, DefaultWaitEntries},
		{offcpuMapRunqProc, &opts.ProcessEntries, DefaultProcessEntries},
	}
	for _, s := range sizes {
		if *s.n == 0 {
			*s.n = s.def
		}
		if *s.n < 1 || *s.n > 1<<22 {
			return nil, fmt.Errorf("offcpu: %s map of %d entries out of range 1..%d", s.name, *s.n, 1<<22)
		}
	}
	spec, err := loadOffcpu()
	if err != nil {
		return nil, fmt.Errorf("load offcpu BPF spec: %w", err)
	}
	for _, s := range sizes {
		spec.Maps[s.name].MaxEntries = uint32(*s.n)
	}
	att, err := probes.LoadAndAttach(spec, Hooks, opts.Method, func(s *ebpf.CollectionSpec) error {
		return probes.SetVariables(s, map[string]any{
			offcpuVarTargetTgid:    uint32(opts.PID),
			offcpuVarMinBlockNs:    uint64(opts.minBlock()),
			offcpuVarCollectKernel: opts.Stacks != UserOnly,
			offcpuVarCollectUser:   opts.Stacks != KernelOnly,
			offcpuVarCollectWakers: !opts.NoWakerStacks,
			offcpuVarStackEvery:    uint32(opts.StackEvery),
		})
	})
	if err != nil {
		return nil, fmt.Errorf("offcpu probe: %w", err)
	}
	p := &Probe{opts: opts, stackEvery: opts.StackEvery}
	slots := map[string]uint32{
		Hooks[0].String(): uint32(offcpuOffcpuHookOFFCPU_HOOK_SWITCH),
		Hooks[1].String(): uint32(offcpuOffcpuHookOFFCPU_HOOK_WAKING),
		Hooks[2].String(): uint32(offcpuOffcpuHookOFFCPU_HOOK_WAKEUP),
		Hooks[3].String(): uint32(offcpuOffcpuHookOFFCPU_HOOK_WAKEUP_NEW),
	}
	p.Loaded = probes.NewLoaded(att, slots, selfRuns, att.Group(Group, probes.PerPacket, Hooks, func() error {
		_, err := p.StartWindow()
		return err
	}))
	if _, err := p.StartWindow(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func selfRuns(v offcpuSelfCost) probes.SelfRuns {
	return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
}

// Monotonic is CLOCK_MONOTONIC now: the clock of bpf_ktime_get_ns, which
// stamps every time the programs keep.
func Monotonic() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("read CLOCK_MONOTONIC: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// StartWindow begins a new epoch whose window starts now and returns its
// start (CLOCK_MONOTONIC). Every wait in flight belongs to the old epoch
// and is not timed; a thread's first event in the new one accounts for
// the time since the start (see the BPF file). The hook group calls it
// before attaching again after a gap.
func (p *Probe) StartWindow() (time.Duration, error) {
	now, err := Monotonic()
	if err != nil {
		return 0, err
	}
	p.epoch++
	cfg := offcpuOffcpuConfig{WindowStartNs: uint64(now), Epoch: p.epoch}
	if err := p.Maps()[offcpuMapConfig].Update(uint32(0), &cfg, ebpf.UpdateExist); err != nil {
		return 0, fmt.Errorf("offcpu: start a window: %w", err)
	}
	return now, nil
}

// State is the state a thread left the CPU in.
type State uint8

// The states, in the order of enum offcpu_state (bpf/types.h, which
// bpf2go cannot see: no map or variable has that type; TestStates checks
// the count against the generated totals' arrays).
const (
	// Runnable: preempted (or yielded) while runnable: all of its time
	// off CPU was spent waiting for one. ps shows R.
	Runnable State = iota
	// Sleeping: interruptible sleep (S): a lock, a socket, a timer...
	Sleeping
	// Uninterruptible: D, usually disk I/O or a kernel lock.
	Uninterruptible
	// Idle: TASK_IDLE (I), a kernel thread waiting for work.
	Idle
	// Other: stopped, traced or parked.
	Other
	// StateCount is the number of states a wait can have.
	StateCount
)

var stateNames = [...]string{"runnable", "sleeping", "uninterruptible", "idle", "other"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// Letter is the state as ps and /proc/PID/stat print it.
func (s State) Letter() string {
	if int(s) < len(stateNames) {
		return [...]string{"R", "S", "D", "I", "T"}[s]
	}
	return "?"
}

// RunqKind is what a run-queue wait followed.
type RunqKind int

const (
	// AfterWakeup: woken (or created), then waited for a CPU: bcc
	// runqlat's latency.
	AfterWakeup RunqKind = RunqKind(offcpuOffcpuRunqKindOFFCPU_RUNQ_WAKEUP)
	// AfterPreemption: preempted, then waited to run again.
	AfterPreemption RunqKind = RunqKind(offcpuOffcpuRunqKindOFFCPU_RUNQ_PREEMPTED)
	// RunqKinds is the number of kinds.
	RunqKinds = int(offcpuOffcpuRunqKindOFFCPU_RUNQ_KINDS)
)

func (k RunqKind) String() string {
	if k == AfterPreemption {
		return "preempted"
	}
	return "wakeup"
}

// Bits of the halves fields (enum offcpu_half in bpf/types.h, which no map
// or variable has as its type).
const (
	halfKernel   = 1
	halfUser     = 2
	wakerKnown   = 4
	wakerKernel  = 8
	wakerUser    = 16
	histSlotsLen = len(offcpuHist{}.Slots)
)

// HistSlots is the number of slots of a run-queue histogram: slot k counts
// latencies in [2^k, 2^(k+1)) ns (slot 0 also 0 ns), the last open-ended.
const HistSlots = histSlotsLen

// Hist is a log2 histogram of run-queue latencies.
type Hist struct {
	Slots [HistSlots]uint64
	Count uint64
	Sum   time.Duration
}

// Add sums two histograms.
func (h Hist) Add(o Hist) Hist {
	for i := range h.Slots {
		h.Slots[i] += o.Slots[i]
	}
	h.Count += o.Count
	h.Sum += o.Sum
	return h
}

// Sub is h − prev (a slot that went back is 0).
func (h Hist) Sub(prev Hist) Hist {
	for i := range h.Slots {
		h.Slots[i] = sub(h.Slots[i], prev.Slots[i])
	}
	h.Count = sub(h.Count, prev.Count)
	h.Sum = time.Duration(sub(uint64(h.Sum), uint64(prev.Sum)))
	return h
}

func histOf(v offcpuHist) Hist {
	return Hist{Slots: v.Slots, Count: v.Count, Sum: time.Duration(v.SumNs)}
}

// ThreadTotals is what a thread did while the probe watched it.
type ThreadTotals struct {
	OnCPU time.Duration
	// Runnable is the time it waited for a CPU, by what the wait
	// followed (RunqKind), and RunnableCount those waits.
	Runnable      [RunqKinds]time.Duration
	RunnableCount [RunqKinds]uint64
	// Blocked is its time off CPU and not runnable, by the state it left
	// the CPU in (Blocked[Runnable] is always 0).
	Blocked [StateCount]time.Duration
	// Switches counts its switches out by state (Switches[Runnable] are
	// involuntary).
	Switches [StateCount]uint64
	// Before is time off CPU since before the window (or the last gap of
	// the overhead budget) until the thread was first seen: its state then
	// is unknown.
	Before time.Duration
	// Waits counts off-CPU intervals timed; ShortWaits of them were
	// shorter than the minimum block time and are in no Wait, taking
	// Short in all.
	Waits, ShortWaits uint64
	Short             time.Duration
}

func totalsOf(v offcpuThreadState) ThreadTotals {
	t := v.Totals
	out := ThreadTotals{OnCPU: time.Duration(t.OnNs), Before: time.Duration(t.BeforeNs), Waits: t.Waits,
		ShortWaits: t.ShortWaits, Short: time.Duration(t.ShortNs)}
	for k := range RunqKinds {
		out.Runnable[k] = time.Duration(t.RunqNs[k])
		out.RunnableCount[k] = t.RunqCount[k]
	}
	for s := range int(StateCount) {
		out.Blocked[s] = time.Duration(t.BlockedNs[s])
		out.Switches[s] = t.Switches[s]
	}
	return out
}

// Sub is t − prev; a counter that went back (the thread id was reused in
// between) makes the whole of t the difference.
func (t ThreadTotals) Sub(prev ThreadTotals) ThreadTotals {
	if t.OnCPU < prev.OnCPU || t.Waits < prev.Waits || t.Before < prev.Before {
		return t
	}
	d := ThreadTotals{OnCPU: t.OnCPU - prev.OnCPU, Before: t.Before - prev.Before, Waits: t.Waits - prev.Waits,
		ShortWaits: sub(t.ShortWaits, prev.ShortWaits), Short: t.Short - min(t.Short, prev.Short)}
	for k := range RunqKinds {
		d.Runnable[k] = t.Runnable[k] - min(t.Runnable[k], prev.Runnable[k])
		d.RunnableCount[k] = sub(t.RunnableCount[k], prev.RunnableCount[k])
	}
	for s := range int(StateCount) {
		d.Blocked[s] = t.Blocked[s] - min(t.Blocked[s], prev.Blocked[s])
		d.Switches[s] = sub(t.Switches[s], prev.Switches[s])
	}
	return d
}

// RunnableTotal is the thread's time waiting for a CPU, of either kind.
func (t ThreadTotals) RunnableTotal() time.Duration {
	var d time.Duration
	for _, v := range t.Runnable {
		d += v
	}
	return d
}

// BlockedTotal is the thread's time off CPU and not runnable.
func (t ThreadTotals) BlockedTotal() time.Duration {
	var d time.Duration
	for _, v := range t.Blocked {
		d += v
	}
	return d
}

// Thread is one thread the probe saw.
type Thread struct {
	TID, PID int
	// Comm is the thread's name at its last switch out ("" if it has not
	// switched out in the probe's sight).
	Comm string
	// Exited: the thread's last switch out was its exit.
	Exited bool
	Totals ThreadTotals
	// In flight at the snapshot, in CLOCK_MONOTONIC (0: none), and only
	// when Current (the thread was seen in the snapshot's epoch):
	// OffSince is when it switched out (in OffState), RunnableSince when
	// it became runnable, OnSince when it switched in.
	Current                          bool
	OffSince, RunnableSince, OnSince time.Duration
	OffState                         State
}

// Waker is who woke a wait: the thread that ran sched_waking for it. A
// PID and TID of 0 is the idle task: an interrupt or softirq on an idle
// CPU, whose kernel stack says which.
type Waker struct {
	PID, TID    int
	Comm        string
	KernelStack []uint64
	UserStack   []uint64
}

// Wait is an aggregation bucket of waits of at least the minimum block
// time: one thread, the stacks it left the CPU with (leaf first; nil when
// not taken), its state, and who woke it (nil: not known: preempted, or
// woken before it had waited the minimum, or a waker the probe missed).
type Wait struct {
	PID, TID    int
	State       State
	KernelStack []uint64
	UserStack   []uint64
	Waker       *Waker
	Count       uint64
	// Total is switch-out to switch-in; Runnable the part of it spent
	// runnable (after the wakeup, or all of it when preempted); Max the
	// longest single wait.
	Total, Runnable, Max time.Duration

	key offcpuWaitKey
}

// Lost counts what the probe could not record, by reason.
type Lost struct {
	// ThreadsFull: a thread found no room in the thread map: it is not
	// followed (Options.ThreadEntries).
	ThreadsFull uint64 `json:"threads_full"`
	// KernelStacksFull, UserStacksFull: a wait's stack had no room
	// (Options.StackEntries); the wait is kept without that half.
	KernelStacksFull uint64 `json:"kernel_stacks_full"`
	UserStacksFull   uint64 `json:"user_stacks_full"`
	// KernelStackFaults, UserStackFaults: the walk failed (a user stack
	// not resident); the wait is kept without that half.
	KernelStackFaults uint64 `json:"kernel_stack_faults"`
	UserStackFaults   uint64 `json:"user_stack_faults"`
	// WaitsFull: a wait found no room in the wait map
	// (Options.WaitEntries): it is in its thread's totals only.
	WaitsFull uint64 `json:"waits_full"`
	// ProcessesFull: a run-queue wait not in its process's histogram
	// (Options.ProcessEntries); the per-CPU histograms have it.
	ProcessesFull uint64 `json:"processes_full"`
	// WakerStacks: a waker's stack not stored (map full or a fault).
	WakerStacks uint64 `json:"waker_stacks"`
}

// Total is everything lost or degraded.
func (l Lost) Total() uint64 {
	return l.ThreadsFull + l.KernelStacksFull + l.UserStacksFull + l.KernelStackFaults + l.UserStackFaults +
		l.WaitsFull + l.ProcessesFull + l.WakerStacks
}

// Sub is l − prev.
func (l Lost) Sub(prev Lost) Lost {
	return Lost{sub(l.ThreadsFull, prev.ThreadsFull), sub(l.KernelStacksFull, prev.KernelStacksFull),
		sub(l.UserStacksFull, prev.UserStacksFull), sub(l.KernelStackFaults, prev.KernelStackFaults),
		sub(l.UserStackFaults, prev.UserStackFaults), sub(l.WaitsFull, prev.WaitsFull),
		sub(l.ProcessesFull, prev.ProcessesFull), sub(l.WakerStacks, prev.WakerStacks)}
}

// Snapshot is what the probe has counted since it loaded.
type Snapshot struct {
	Taken time.Time
	// Mono is CLOCK_MONOTONIC just before the threads were read: the end
	// of the in-flight waits the caller closes.
	Mono time.Duration
	// WindowStart is the current epoch's start (CLOCK_MONOTONIC).
	WindowStart time.Duration
	Threads     []Thread
	Waits       []Wait
	// RunqCPU is each CPU's run-queue histograms by kind (index: CPU
	// number, then RunqKind); RunqProcess each process's.
	RunqCPU     [][RunqKinds]Hist
	RunqProcess map[int][RunqKinds]Hist
	Lost        Lost
	// MinBlock and StackEvery are the probe's options: Waits hold waits
	// of at least MinBlock, from about 1 in StackEvery switch-outs.
	MinBlock   time.Duration
	StackEvery int
}

// Snapshot reads every map. Programs keep running meanwhile, so the maps
// are read in an order that keeps a wait's parts together: histograms and
// thread totals before the waits.
func (p *Probe) Snapshot() (Snapshot, error) {
	s := Snapshot{Taken: time.Now(), MinBlock: p.opts.minBlock(), StackEvery: p.stackEvery, RunqProcess: map[int][RunqKinds]Hist{}}
	maps := p.Maps()
	var cfg offcpuOffcpuConfig
	if err := maps[offcpuMapConfig].Lookup(uint32(0), &cfg); err != nil {
		return s, fmt.Errorf("read offcpu config: %w", err)
	}
	s.WindowStart = time.Duration(cfg.WindowStartNs)
	var err error
	if s.Mono, err = Monotonic(); err != nil {
		return s, err
	}
	threads, err := probes.ReadHash[uint32, offcpuThreadState](maps[offcpuMapThreads])
	if err != nil {
		return s, err
	}
	for tid, v := range threads {
		th := Thread{TID: int(tid), PID: int(v.Tgid), Comm: probes.CommString(v.Comm), Exited: v.Dead != 0, Totals: totalsOf(v),
			Current: v.Epoch == cfg.Epoch}
		if th.Current {
			th.OffSince, th.RunnableSince, th.OnSince = time.Duration(v.OffNs), time.Duration(v.RunnableNs), time.Duration(v.OnNs)
			th.OffState = State(v.State)
		}
		s.Threads = append(s.Threads, th)
	}
	sort.Slice(s.Threads, func(i, j int) bool { return s.Threads[i].TID < s.Threads[j].TID })

	perCPU, err := probes.ReadPerCPUArray[offcpuHist](maps[offcpuMapRunqCpu])
	if err != nil {
		return s, err
	}
	for kind, cpus := range perCPU {
		if kind >= RunqKinds {
			break
		}
		if s.RunqCPU == nil {
			s.RunqCPU = make([][RunqKinds]Hist, len(cpus))
		}
		for cpu, v := range cpus {
			s.RunqCPU[cpu][kind] = histOf(v)
		}
	}
	procs, err := probes.ReadHash[offcpuProcKey, offcpuHist](maps[offcpuMapRunqProc])
	if err != nil {
		return s, err
	}
	for k, v := range procs {
		if int(k.Kind) >= RunqKinds {
			continue
		}
		h := s.RunqProcess[int(k.Tgid)]
		h[k.Kind] = histOf(v)
		s.RunqProcess[int(k.Tgid)] = h
	}

	waits, err := probes.ReadHash[offcpuWaitKey, offcpuWaitStat](maps[offcpuMapWaits])
	if err != nil {
		return s, err
	}
	stack := stackReader(maps[offcpuMapStacks])
	for k, v := range waits {
		w := Wait{PID: int(k.Tgid), TID: int(k.Pid), State: State(k.State), Count: v.Count, Total: time.Duration(v.TotalNs),
			Runnable: time.Duration(v.RunqNs), Max: time.Duration(v.MaxNs), key: k}
		if w.KernelStack, err = stack(k.KernelStack, k.Halves&halfKernel != 0); err != nil {
			return s, err
		}
		if w.UserStack, err = stack(k.UserStack, k.Halves&halfUser != 0); err != nil {
			return s, err
		}
		if k.Halves&wakerKnown != 0 {
			wk := &Waker{PID: int(k.WakerTgid), TID: int(k.WakerPid), Comm: probes.CommString(k.WakerComm)}
			if wk.KernelStack, err = stack(k.WakerKernelStack, k.Halves&wakerKernel != 0); err != nil {
				return s, err
			}
			if wk.UserStack, err = stack(k.WakerUserStack, k.Halves&wakerUser != 0); err != nil {
				return s, err
			}
			w.Waker = wk
		}
		s.Waits = append(s.Waits, w)
	}
	sort.Slice(s.Waits, func(i, j int) bool { return s.Waits[i].Total > s.Waits[j].Total })

	lost, err := probes.SumPerCPUCounters(maps[offcpuMapLost], int(offcpuOffcpuLostOFFCPU_LOST_REASONS))
	if err != nil {
		return s, err
	}
	s.Lost = Lost{
		ThreadsFull:       lost[offcpuOffcpuLostOFFCPU_LOST_THREADS_FULL],
		KernelStacksFull:  lost[offcpuOffcpuLostOFFCPU_LOST_KERNEL_STACKS_FULL],
		UserStacksFull:    lost[offcpuOffcpuLostOFFCPU_LOST_USER_STACKS_FULL],
		KernelStackFaults: lost[offcpuOffcpuLostOFFCPU_LOST_KERNEL_STACK_FAULT],
		UserStackFaults:   lost[offcpuOffcpuLostOFFCPU_LOST_USER_STACK_FAULT],
		WaitsFull:         lost[offcpuOffcpuLostOFFCPU_LOST_WAITS_FULL],
		ProcessesFull:     lost[offcpuOffcpuLostOFFCPU_LOST_PROCS_FULL],
		WakerStacks:       lost[offcpuOffcpuLostOFFCPU_LOST_WAKER_STACK],
	}
	return s, nil
}

// stackReader returns a reader of stacks by hash, caching each; a stack
// gone from the map (it never is: nothing deletes) reads as nil.
func stackReader(m *ebpf.Map) func(hash uint64, present bool) ([]uint64, error) {
	ips := make([]uint64, m.ValueSize()/8)
	cache := map[uint64][]uint64{}
	return func(hash uint64, present bool) ([]uint64, error) {
		if !present {
			return nil, nil
		}
		if s, ok := cache[hash]; ok {
			return s, nil
		}
		if err := m.Lookup(hash, ips); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil, nil
			}
			return nil, fmt.Errorf("read stack %#x: %w", hash, err)
		}
		n := 0
		for n < len(ips) && ips[n] != 0 {
			n++
		}
		s := append([]uint64(nil), ips[:n]...)
		cache[hash] = s
		return s, nil
	}
}

// Sub is what was counted between prev and s: thread totals, waits and
// histograms that grew; in-flight times and stacks are s's.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := s
	d.Lost = s.Lost.Sub(prev.Lost)
	before := make(map[int]Thread, len(prev.Threads))
	for _, t := range prev.Threads {
		before[t.TID] = t
	}
	d.Threads = nil
	for _, t := range s.Threads {
		if p, ok := before[t.TID]; ok && p.PID == t.PID {
			t.Totals = t.Totals.Sub(p.Totals)
		}
		d.Threads = append(d.Threads, t)
	}
	old := make(map[offcpuWaitKey]Wait, len(prev.Waits))
	for _, w := range prev.Waits {
		old[w.key] = w
	}
	d.Waits = nil
	for _, w := range s.Waits {
		if p, ok := old[w.key]; ok {
			if w.Count <= p.Count {
				continue
			}
			w.Count -= p.Count
			w.Total -= min(w.Total, p.Total)
			w.Runnable -= min(w.Runnable, p.Runnable)
		}
		d.Waits = append(d.Waits, w)
	}
	d.RunqCPU = make([][RunqKinds]Hist, len(s.RunqCPU))
	for cpu, hs := range s.RunqCPU {
		for k := range hs {
			if cpu < len(prev.RunqCPU) {
				d.RunqCPU[cpu][k] = hs[k].Sub(prev.RunqCPU[cpu][k])
			} else {
				d.RunqCPU[cpu][k] = hs[k]
			}
		}
	}
	d.RunqProcess = make(map[int][RunqKinds]Hist, len(s.RunqProcess))
	for pid, hs := range s.RunqProcess {
		p := prev.RunqProcess[pid]
		for k := range hs {
			hs[k] = hs[k].Sub(p[k])
		}
		d.RunqProcess[pid] = hs
	}
	return d
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
