// Package goalloc attaches uprobes to one running Go program: the
// allocations its runtime samples for the memory profile (size and user
// stack, counted in the kernel by stack and size), its completed GC
// cycles, and its sync.Pool Gets, Puts and the New calls behind misses,
// per pool. It knows nothing of Go binaries: the caller (package golang)
// finds the functions in the program's pclntab and hands their file
// offsets here, with the register the Go version passes the size in. See
// bpf/goalloc.bpf.c for what each hook counts.
//
// What a sample is, against the runtime's own counts: at MemProfileRate 1
// each heap object the runtime allocates is one call of mProf_Malloc, with
// its size class's size (a large object's whole pages) — the objects and
// bytes /gc/heap/allocs:objects and :bytes count. A tiny block (16 bytes
// that pointer-free allocations under 16 bytes share) is one object; the
// tiny allocations that fit into the current block return before the
// runtime's profiling check, so no probe on the profile sees them: they
// are /gc/heap/tiny/allocs:objects, which runtime.MemStats.Mallocs (and
// so testing.B's allocs/op) adds and the heap object count does not. The
// probe counts each sample as it happens; the runtime counts a small
// object only when its span leaves a P's cache (full, at a GC cycle's end,
// or at ReadMemStats), so a runtime/metrics reading without a flush lags
// the probe by up to a span per size class per P.
package goalloc

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// ArgReg is a register of the amd64 Go register ABI that carries an
// integer argument, in argument order.
type ArgReg uint32

// The argument registers, in the order Go assigns them.
const (
	RAX = ArgReg(goallocGoArgRegGO_REG_RAX)
	RBX = ArgReg(goallocGoArgRegGO_REG_RBX)
	RCX = ArgReg(goallocGoArgRegGO_REG_RCX)
	RDI = ArgReg(goallocGoArgRegGO_REG_RDI)
	RSI = ArgReg(goallocGoArgRegGO_REG_RSI)
	R8  = ArgReg(goallocGoArgRegGO_REG_R8)
	R9  = ArgReg(goallocGoArgRegGO_REG_R9)
	R10 = ArgReg(goallocGoArgRegGO_REG_R10)
	R11 = ArgReg(goallocGoArgRegGO_REG_R11)
)

// ArgRegs lists the argument registers in ABI order: the i-th integer
// argument arrives in ArgRegs[i].
var ArgRegs = []ArgReg{RAX, RBX, RCX, RDI, RSI, R8, R9, R10, R11}

// Hook names, as Missing and SelfCosts key them.
const (
	HookMalloc  = "uprobe:runtime.mProf_Malloc"
	HookGC      = "uprobe:runtime.gcMarkTermination"
	HookPoolGet = "uprobe:sync.(*Pool).Get"
	HookPoolPut = "uprobe:sync.(*Pool).Put"
	HookPoolNew = "uprobe:sync.(*Pool).Get→New"
)

// Options say where to attach. Offsets are file offsets in Executable
// (what the kernel's uprobe takes); 0 leaves that hook out.
type Options struct {
	// PID is the process (its tgid in the host's pid namespace).
	PID int
	// Executable is a path the kernel resolves to the program's binary:
	// /proc/PID/exe works for a process in a container too.
	Executable string
	// Malloc is runtime.mProf_Malloc's entry; SizeArg the register its
	// size argument arrives in.
	Malloc  uint64
	SizeArg ArgReg
	// NoStacks counts samples by size only (no stack walk).
	NoStacks bool
	// GC is runtime.gcMarkTermination's entry.
	GC uint64
	// PoolGet and PoolPut are sync.(*Pool).Get's and Put's entries;
	// PoolNew the instruction in Get that calls the pool's New function.
	// They are optional: a hook that does not attach is in Missing.
	PoolGet, PoolPut, PoolNew uint64
	// PoolsOneByOne attaches the pool hooks one by one where the kernel
	// has uprobe_multi links too, as on kernels before 6.10 (tests
	// compare the two).
	PoolsOneByOne bool
	// StackEntries and SampleEntries size the stack map and the
	// (stack, size) count hash (0: what the object declares).
	StackEntries, SampleEntries int
}

// Probe is a loaded goalloc object with its uprobes attached.
type Probe struct {
	objs    *probeObjects
	links   map[string]link.Link
	progs   map[string]*ebpf.Program
	missing map[string]error
	// attached lists every hook attached at Open, also while DetachPools
	// has the pool hooks off; ex, pid and offsets re-attach them.
	attached map[string]bool
	ex       *link.Executable
	exePath  string
	pid      int
	offsets  map[string]uint64
	// pools is the three pool hooks as one uprobe_multi program, nil
	// where the kernel has no uprobe_multi links (before 6.6) or its links
	// filter by thread (before 6.10: multiFiltersByProcess): the hooks
	// are then attached one by one. multi: the pool hooks are one
	// uprobe_multi link, poolLink while attached.
	pools    *ebpf.Program
	multi    bool
	poolLink link.Link
}

// probeObjects are the loaded maps and programs but the uprobe_multi one
// (Probe.pools).
type probeObjects struct {
	goallocMaps
	UprobeMalloc  *ebpf.Program `ebpf:"uprobe_malloc"`
	UprobeGc      *ebpf.Program `ebpf:"uprobe_gc"`
	UprobePoolGet *ebpf.Program `ebpf:"uprobe_pool_get"`
	UprobePoolPut *ebpf.Program `ebpf:"uprobe_pool_put"`
	UprobePoolNew *ebpf.Program `ebpf:"uprobe_pool_new"`
}

func (o *probeObjects) Close() error {
	return errors.Join(o.goallocMaps.Close(), o.UprobeMalloc.Close(), o.UprobeGc.Close(), o.UprobePoolGet.Close(),
		o.UprobePoolPut.Close(), o.UprobePoolNew.Close())
}

var (
	_ probes.Snapshotter[Snapshot] = (*Probe)(nil)
	_ probes.SelfCounted           = (*Probe)(nil)
)

// Sample is Count allocation samples of Size bytes each with the same user
// stack (addresses, leaf first; nil with NoStacks).
type Sample struct {
	Stack []uint64
	Size  uint64
	Count uint64
}

// PoolCounts is what sync.Pool's methods did with one pool.
type PoolCounts struct {
	Gets, Puts uint64
	// News counts calls of the pool's New function from Get: the misses
	// of a pool that has one.
	News uint64
}

// Lost counts what the probe could not record.
type Lost struct {
	// StacksFull and StackFaults: samples counted without their stack
	// (Sample.Stack nil): the stack map was full, or the user stack could
	// not be walked.
	StacksFull, StackFaults uint64
	// CountsFull: samples not in Samples at all (the count hash was
	// full); SampleCount and SampleBytes still count them.
	CountsFull uint64
	// PoolsFull: more pools than the pool map holds.
	PoolsFull uint64
	// PoolNewUnjoined: a New call whose Get was not seen.
	PoolNewUnjoined uint64
}

// Snapshot holds cumulative counts since the probe attached.
type Snapshot struct {
	Taken time.Time
	// SampleCount and SampleBytes count every sample the runtime took
	// (the unweighted sizes summed), whether or not its stack was kept.
	SampleCount, SampleBytes uint64
	Samples                  []Sample
	GCCycles                 uint64
	Pools                    map[uint64]PoolCounts
	Lost                     Lost
}

// Open loads the object and attaches the hooks Options name. Malloc and GC
// are required; on error nothing stays attached.
func Open(opts Options) (*Probe, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("goalloc: the probe reads amd64 registers, this is %s: %w", runtime.GOARCH, probes.ErrNotSupported)
	}
	if opts.PID <= 0 {
		return nil, errors.New("goalloc: no process to attach to")
	}
	if opts.Executable == "" || opts.Malloc == 0 || opts.GC == 0 {
		return nil, errors.New("goalloc: the executable, mProf_Malloc's and gcMarkTermination's offsets are needed")
	}
	valid := false
	for _, r := range ArgRegs {
		valid = valid || r == opts.SizeArg
	}
	if !valid {
		return nil, fmt.Errorf("goalloc: register %d is not an argument register", opts.SizeArg)
	}
	spec, err := loadGoalloc()
	if err != nil {
		return nil, fmt.Errorf("load goalloc BPF spec: %w", err)
	}
	if opts.StackEntries > 0 {
		spec.Maps[goallocMapGoStacks].MaxEntries = uint32(opts.StackEntries)
	}
	if opts.SampleEntries > 0 {
		spec.Maps[goallocMapAllocSamples].MaxEntries = uint32(opts.SampleEntries)
	}
	if opts.NoStacks {
		spec.Maps[goallocMapGoStacks].MaxEntries = 1
	}
	if err := probes.SetVariables(spec, map[string]any{
		goallocVarTargetTgid:    uint32(opts.PID),
		goallocVarSizeReg:       goallocGoArgReg(opts.SizeArg),
		goallocVarCollectStacks: !opts.NoStacks,
	}); err != nil {
		return nil, err
	}
	if opts.PoolsOneByOne || features.HaveBPFLinkUprobeMulti() != nil {
		delete(spec.Programs, goallocProgUprobePools)
	}
	probes.Prepare()
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, probes.Classify("load goalloc BPF programs", err)
	}
	pools := coll.DetachProgram(goallocProgUprobePools)
	objs := &probeObjects{}
	err = coll.Assign(objs)
	coll.Close()
	if err != nil {
		objs.Close()
		pools.Close()
		return nil, fmt.Errorf("goalloc: %w", err)
	}
	p := &Probe{objs: objs, pools: pools, links: map[string]link.Link{}, missing: map[string]error{}, attached: map[string]bool{},
		pid: opts.PID, offsets: map[string]uint64{}}
	p.progs = map[string]*ebpf.Program{
		HookMalloc: objs.UprobeMalloc, HookGC: objs.UprobeGc,
		HookPoolGet: objs.UprobePoolGet, HookPoolPut: objs.UprobePoolPut, HookPoolNew: objs.UprobePoolNew,
	}
	ex, err := link.OpenExecutable(opts.Executable)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("goalloc: open %s: %w", opts.Executable, err)
	}
	p.ex, p.exePath = ex, opts.Executable
	attach := func(hook string, off uint64) error {
		p.offsets[hook] = off
		if err := p.attach(hook); err != nil {
			return err
		}
		p.attached[hook] = true
		return nil
	}
	for _, h := range []struct {
		hook string
		off  uint64
	}{{HookMalloc, opts.Malloc}, {HookGC, opts.GC}} {
		if err := attach(h.hook, h.off); err != nil {
			p.Close()
			return nil, err
		}
	}
	for _, h := range []struct {
		hook string
		off  uint64
	}{{HookPoolGet, opts.PoolGet}, {HookPoolPut, opts.PoolPut}, {HookPoolNew, opts.PoolNew}} {
		p.offsets[h.hook] = h.off
	}
	if pools != nil && multiFiltersByProcess(ex, pools, p.offsets) && p.attachPoolsMulti() == nil {
		return p, nil
	}
	// One by one (no uprobe_multi, or it refused): each hook that does
	// not attach says why. Put and Get without the New call still give
	// Gets ≫ Puts; the New call without Get cannot be joined to a pool.
	for _, h := range []struct {
		hook string
		off  uint64
	}{{HookPoolGet, opts.PoolGet}, {HookPoolPut, opts.PoolPut}, {HookPoolNew, opts.PoolNew}} {
		switch {
		case h.off == 0:
			p.missing[h.hook] = errors.New("not found in the binary")
		case h.hook == HookPoolNew && p.links[HookPoolGet] == nil:
			p.missing[h.hook] = errors.New("sync.(*Pool).Get is not attached")
		default:
			if err := attach(h.hook, h.off); err != nil {
				p.missing[h.hook] = err
			}
		}
	}
	return p, nil
}

// attachPoolsMulti attaches the pool hooks found in the binary as one
// uprobe_multi link, New first (the kernel inserts and removes the
// breakpoints in this order: see DetachPools), and marks the probe as
// using it. New is left out without Get, whose record joins it to a pool.
// On a re-attach, a New called in the microseconds between New's
// breakpoint and Get's is counted as unjoined (Lost.PoolNewUnjoined).
func (p *Probe) attachPoolsMulti() error {
	var offs, cookies []uint64
	var hooks []string
	for _, hook := range poolHooks {
		off := p.offsets[hook]
		if off == 0 || (hook == HookPoolNew && p.offsets[HookPoolGet] == 0) {
			continue
		}
		offs = append(offs, off)
		cookies = append(cookies, uint64(poolSlots[hook]))
		hooks = append(hooks, hook)
	}
	if len(offs) == 0 {
		return errors.New("no pool hook found in the binary")
	}
	l, err := p.ex.UprobeMulti(nil, p.pools, &link.UprobeMultiOptions{Addresses: offs, Cookies: cookies, PID: uint32(p.pid)})
	if err != nil {
		return probes.Classify(fmt.Sprintf("attach %v as one uprobe_multi link to %s", hooks, p.exePath), err)
	}
	p.poolLink, p.multi = l, true
	for _, hook := range poolHooks {
		if !slices.Contains(hooks, hook) {
			if p.offsets[hook] == 0 {
				p.missing[hook] = errors.New("not found in the binary")
			} else {
				p.missing[hook] = errors.New("sync.(*Pool).Get is not attached")
			}
			continue
		}
		p.attached[hook] = true
	}
	return nil
}

// multiFiltersByProcess reports whether this kernel's uprobe_multi links
// filter by process. Before Andrii Nakryiko's "bpf: fix multi-uprobe PID
// filtering logic" (Linux 6.10, and the stable kernels it went to) a link
// made for a pid ran its program for that thread only, so a Go program's
// other threads' Gets and Puts would go uncounted. The fix also refuses a
// negative pid with EINVAL (the kernels before it look the pid up and say
// ESRCH), which is how libbpf tells them apart too: a link asked for pid
// -1 at a real hook is refused, and never made.
func multiFiltersByProcess(ex *link.Executable, prog *ebpf.Program, offsets map[string]uint64) bool {
	for _, hook := range poolHooks {
		off := offsets[hook]
		if off == 0 {
			continue
		}
		l, err := ex.UprobeMulti(nil, prog, &link.UprobeMultiOptions{Addresses: []uint64{off}, PID: math.MaxUint32})
		if err == nil {
			l.Close()
			return false
		}
		return errors.Is(err, unix.EINVAL)
	}
	return false
}

// poolSlots are the pool hooks' self-cost slots, which the uprobe_multi
// program also takes as its attach cookies.
var poolSlots = map[string]uint32{
	HookPoolGet: uint32(goallocGoallocHookGOALLOC_HOOK_POOL_GET),
	HookPoolPut: uint32(goallocGoallocHookGOALLOC_HOOK_POOL_PUT),
	HookPoolNew: uint32(goallocGoallocHookGOALLOC_HOOK_POOL_NEW),
}

func (p *Probe) attach(hook string) error {
	off := p.offsets[hook]
	l, err := p.ex.Uprobe("", p.progs[hook], &link.UprobeOptions{Address: off, PID: p.pid})
	if err != nil {
		return probes.Classify(fmt.Sprintf("attach %s at file offset %#x of %s", hook, off, p.exePath), err)
	}
	p.links[hook] = l
	return nil
}

// poolHooks in the order DetachPools starts taking them off: New first, so
// that a New call is never joined to a Get the probe did not see (Get
// records the goroutine's pool); AttachPools puts them back in reverse.
var poolHooks = []string{HookPoolNew, HookPoolGet, HookPoolPut}

// poolCloseLead is how long DetachPools lets New's close run before it
// starts Get's and Put's.
const poolCloseLead = time.Millisecond

// DetachPools takes the sync.Pool hooks off the program (each call of Get
// or Put costs it a uprobe trap) until AttachPools puts them back; the
// pool counts keep what was counted. The allocation and GC hooks stay.
//
// The three links are closed together. Closing a uprobe link first closes
// the BPF link, which takes the program off the perf event at once, then
// the perf event, whose release waits for the kernel's grace periods:
// 70–140 ms on 6.18. Polled every 2 ms while the links were closed one
// after another, each hook's count stopped within 2 ms of its close
// starting, not when it returned, so closed in turn Get kept firing
// through New's wait and Put through both (the hooks ran up to 6.3× the
// calls the guard had counted when it detached). Together they stop
// within about poolCloseLead of each other and the wait is paid once.
// New's close is started poolCloseLead ahead of the others, its program
// taken off (a close syscall's first step, microseconds) before Get's:
// Get's record stays behind every New the probe still sees.
//
// Where the hooks are one uprobe_multi link (Linux 6.10 and later), that
// one close takes every pool breakpoint out of the program's text as it
// starts, New's first, and waits for the grace periods once (16–44 ms). Three
// perf-event uprobes closed together took their breakpoints out one after
// another: read through /proc/PID/mem, New's was back 16–52 ms after the
// closes started, Put's 92–224 ms, Get's 115–244 ms, the closes returning
// at 220–320 ms (six runs of TestHooksLeaveTheTextAsTheyFoundIt). Their programs had
// stopped, but every Get and Put of those milliseconds still took the
// trap, a cost no counter charges.
func (p *Probe) DetachPools() error {
	if p.multi {
		if p.poolLink == nil {
			return nil
		}
		l := p.poolLink
		p.poolLink = nil
		return l.Close()
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, hook := range poolHooks {
		l := p.links[hook]
		if l == nil {
			continue
		}
		delete(p.links, hook)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
		if hook == HookPoolNew {
			time.Sleep(poolCloseLead)
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// AttachPools re-attaches the pool hooks DetachPools took off (those
// attached at Open). On error the ones attached stay; DetachPools or
// Close takes them off.
func (p *Probe) AttachPools() error {
	if p.objs == nil {
		return errors.New("goalloc: attach after Close")
	}
	if p.multi {
		if p.poolLink != nil {
			return nil
		}
		return p.attachPoolsMulti()
	}
	for i := len(poolHooks) - 1; i >= 0; i-- {
		hook := poolHooks[i]
		if p.attached[hook] && p.links[hook] == nil {
			if err := p.attach(hook); err != nil {
				return err
			}
		}
	}
	return nil
}

// PoolCounts reads the cumulative per-pool counts only (cheaper than
// Snapshot, which also reads the samples and their stacks).
func (p *Probe) PoolCounts() (map[uint64]PoolCounts, error) {
	out := map[uint64]PoolCounts{}
	if p.objs == nil {
		return out, errors.New("goalloc: pool counts after Close")
	}
	pools, err := probes.ReadPerCPUHash[uint64, goallocPoolCounts](p.objs.Pools)
	if err != nil {
		return out, err
	}
	for addr, perCPU := range pools {
		var pc PoolCounts
		for _, v := range perCPU {
			pc.Gets += v.Gets
			pc.Puts += v.Puts
			pc.News += v.News
		}
		out[addr] = pc
	}
	return out, nil
}

// Method is how the programs are attached.
func (p *Probe) Method() probes.AttachMethod { return "uprobe" }

// PoolsOneLink reports whether the pool hooks are one uprobe_multi link
// (Linux 6.10 and later), whose close takes every pool breakpoint out of
// the program's text as it starts; else they are attached one by one.
func (p *Probe) PoolsOneLink() bool { return p.multi }

// Missing lists the optional pool hooks that are not attached, with why.
func (p *Probe) Missing() map[string]error { return p.missing }

// Attached says whether hook (HookMalloc, ...) was attached at Open (a
// pool hook may be off for now: DetachPools).
func (p *Probe) Attached(hook string) bool { return p.attached[hook] }

// Costs is each attached program's bpf_stats run count and time.
func (p *Probe) Costs() []probes.ProgramCost {
	if p.objs == nil {
		return nil
	}
	progs := map[string]*ebpf.Program{}
	for hook := range p.attached {
		if _, pool := poolSlots[hook]; pool && p.multi {
			progs["uprobe_multi:sync.(*Pool)"] = p.pools
			continue
		}
		progs[hook] = p.progs[hook]
	}
	return probes.Costs(progs)
}

// SelfCosts implements probes.SelfCounted.
func (p *Probe) SelfCosts() (probes.SelfCosts, error) {
	if p.objs == nil {
		return nil, errors.New("goalloc: self costs after Close")
	}
	all := map[string]uint32{
		HookMalloc: uint32(goallocGoallocHookGOALLOC_HOOK_MALLOC),
		HookGC:     uint32(goallocGoallocHookGOALLOC_HOOK_GC),
	}
	for hook, slot := range poolSlots {
		all[hook] = slot
	}
	slots := map[string]uint32{}
	for hook := range p.attached {
		slots[hook] = all[hook]
	}
	return probes.SelfCostReader(p.objs.SelfCosts, slots, func(v goallocSelfCost) probes.SelfRuns {
		return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
	})()
}

// Close detaches every uprobe and frees the object. Safe to call more than
// once.
func (p *Probe) Close() error {
	if p == nil {
		return nil
	}
	var errs []error
	for hook, l := range p.links {
		errs = append(errs, l.Close())
		delete(p.links, hook)
	}
	if p.poolLink != nil {
		errs = append(errs, p.poolLink.Close())
		p.poolLink = nil
	}
	if p.objs != nil {
		errs = append(errs, p.objs.Close(), p.pools.Close())
		p.objs = nil
	}
	return errors.Join(errs...)
}

// Snapshot reads the cumulative counts.
func (p *Probe) Snapshot() (Snapshot, error) {
	s := Snapshot{Taken: time.Now(), Pools: map[uint64]PoolCounts{}}
	if p.objs == nil {
		return s, errors.New("goalloc: snapshot after Close")
	}
	c, err := probes.SumPerCPUCounters(p.objs.Counters, int(goallocGoallocCounterGOALLOC_COUNTERS))
	if err != nil {
		return s, err
	}
	s.SampleCount = c[goallocGoallocCounterGOALLOC_SAMPLES]
	s.SampleBytes = c[goallocGoallocCounterGOALLOC_SAMPLE_BYTES]
	s.GCCycles = c[goallocGoallocCounterGOALLOC_GC_CYCLES]
	s.Lost = Lost{
		StacksFull:      c[goallocGoallocCounterGOALLOC_LOST_STACKS_FULL],
		StackFaults:     c[goallocGoallocCounterGOALLOC_LOST_STACK_FAULT],
		CountsFull:      c[goallocGoallocCounterGOALLOC_LOST_COUNTS_FULL],
		PoolsFull:       c[goallocGoallocCounterGOALLOC_LOST_POOLS_FULL],
		PoolNewUnjoined: c[goallocGoallocCounterGOALLOC_LOST_POOL_NEW],
	}
	if s.Pools, err = p.PoolCounts(); err != nil {
		return s, err
	}
	counts, err := probes.ReadHash[goallocAllocKey, uint64](p.objs.AllocSamples)
	if err != nil {
		return s, err
	}
	ips := make([]uint64, p.objs.GoStacks.ValueSize()/8)
	stacks := map[uint64][]uint64{}
	for k, n := range counts {
		st, ok := stacks[k.Stack]
		if !ok && k.Stack != 0 {
			if err := p.objs.GoStacks.Lookup(k.Stack, ips); err != nil {
				return s, fmt.Errorf("read stack %#x: %w", k.Stack, err)
			}
			st = trim(ips)
			stacks[k.Stack] = st
		}
		s.Samples = append(s.Samples, Sample{Stack: st, Size: k.Size, Count: n})
	}
	return s, nil
}

// trim copies the frames before the first zero.
func trim(ips []uint64) []uint64 {
	n := 0
	for n < len(ips) && ips[n] != 0 {
		n++
	}
	return append([]uint64(nil), ips[:n]...)
}

// Sub returns the counts between prev and s. Samples are matched by stack
// and size.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{
		Taken:       s.Taken,
		SampleCount: s.SampleCount - prev.SampleCount,
		SampleBytes: s.SampleBytes - prev.SampleBytes,
		GCCycles:    s.GCCycles - prev.GCCycles,
		Pools:       map[uint64]PoolCounts{},
		Lost: Lost{
			StacksFull:      s.Lost.StacksFull - prev.Lost.StacksFull,
			CountsFull:      s.Lost.CountsFull - prev.Lost.CountsFull,
			StackFaults:     s.Lost.StackFaults - prev.Lost.StackFaults,
			PoolsFull:       s.Lost.PoolsFull - prev.Lost.PoolsFull,
			PoolNewUnjoined: s.Lost.PoolNewUnjoined - prev.Lost.PoolNewUnjoined,
		},
	}
	type key struct {
		stack string
		size  uint64
	}
	k := func(x Sample) key { return key{fmt.Sprint(x.Stack), x.Size} }
	before := make(map[key]uint64, len(prev.Samples))
	for _, x := range prev.Samples {
		before[k(x)] += x.Count
	}
	for _, x := range s.Samples {
		if n := before[k(x)]; x.Count > n {
			x.Count -= n
			d.Samples = append(d.Samples, x)
		}
	}
	for addr, c := range s.Pools {
		p := prev.Pools[addr]
		if c.Gets < p.Gets || c.Puts < p.Puts || c.News < p.News {
			p = PoolCounts{}
		}
		dc := PoolCounts{Gets: c.Gets - p.Gets, Puts: c.Puts - p.Puts, News: c.News - p.News}
		if dc != (PoolCounts{}) {
			d.Pools[addr] = dc
		}
	}
	return d
}

// AllocSamples is the allocation samples counted so far: one read of a
// per-CPU counter, cheap enough to take at every turn of the pool guard.
func (p *Probe) AllocSamples() (uint64, error) {
	if p.objs == nil {
		return 0, errors.New("goalloc: read after Close")
	}
	c, err := probes.SumPerCPUCounters(p.objs.Counters, int(goallocGoallocCounterGOALLOC_COUNTERS))
	if err != nil {
		return 0, err
	}
	return c[goallocGoallocCounterGOALLOC_SAMPLES], nil
}
