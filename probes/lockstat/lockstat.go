// Package lockstat measures kernel lock contention from
// lock:contention_begin/end: count, total and longest wait per call site
// (the waiter's kernel stack, symbolized from /proc/kallsyms and classified
// — socket receive queue, socket wakeup, qdisc root lock, TX queue lock) and
// per lock address. The BPF program also recognises a socket's locks and
// records the socket's port and inodes (Owner), which SocketWaits joins with
// /proc to name the socket and its processes, whatever kernel.kptr_restrict
// says.
package lockstat

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/perfscope/perfscope/probes"
)

// Hooks are the tracepoints this probe attaches to (Linux 5.19+). They are
// the probe's whole purpose, so they are required: Open fails with
// probes.ErrNotSupported where they are missing.
var Hooks = Spec.Hooks

// Lock flags (LCB_F_* in include/trace/events/lock.h), stable since 5.19.
const (
	FlagSpin    = 1 << 0
	FlagRead    = 1 << 1
	FlagWrite   = 1 << 2
	FlagRT      = 1 << 3
	FlagPercpu  = 1 << 4
	FlagMutex   = 1 << 5
	FlagRTMutex = FlagRT | FlagMutex
)

// LockKind names a flags value the way perf lock does.
func LockKind(flags uint32) string {
	switch flags &^ FlagSpin {
	case 0:
		if flags&FlagSpin != 0 {
			return "spinlock"
		}
		return "unknown"
	case FlagRead:
		return "rwlock:R"
	case FlagWrite:
		return "rwlock:W"
	case FlagRead | FlagRT:
		return "rwsem:R"
	case FlagWrite | FlagRT:
		return "rwsem:W"
	case FlagRead | FlagPercpu:
		return "pcpu-sem:R"
	case FlagWrite | FlagPercpu:
		return "pcpu-sem:W"
	case FlagMutex:
		return "mutex"
	case FlagRTMutex:
		return "rtmutex"
	}
	return fmt.Sprintf("flags(%#x)", flags)
}

// Stack ids of sites without a stack (enum lockstat_stack in bpf/types.h).
const (
	// NoStack is the StackID of contention whose stack could not be
	// recorded.
	NoStack = -1
	// Unsampled is the StackID under which contention whose stack was not
	// sampled is counted (see Options.StackEvery), one site per lock kind.
	Unsampled = -2
)

// SiteKey is one call site: the waiter's kernel stack and the lock flags.
type SiteKey struct {
	StackID int32
	Flags   uint32
}

// WaitStats are contention counts and wait times.
type WaitStats struct {
	Count uint64
	Total time.Duration
	// Max is the longest single wait since the probe attached (a maximum
	// cannot be windowed; Sub keeps the later one).
	Max time.Duration
}

func (w WaitStats) add(o WaitStats) WaitStats {
	return WaitStats{Count: w.Count + o.Count, Total: w.Total + o.Total, Max: max(w.Max, o.Max)}
}

// Add is w and o together (the longer Max).
func (w WaitStats) Add(o WaitStats) WaitStats { return w.add(o) }

// Lost counts contentions not counted, or counted without a stack.
type Lost struct {
	InflightFull, SiteFull, LockFull uint64
	// OwnerFull are socket locks whose owner could not be stored.
	OwnerFull uint64
	// StackCollisions (EEXIST) and StackErrors (EFAULT, ...) were counted
	// under StackID NoStack.
	StackCollisions, StackErrors uint64
}

// Total is every lost or degraded event.
func (l Lost) Total() uint64 {
	return l.InflightFull + l.SiteFull + l.LockFull + l.OwnerFull + l.StackCollisions + l.StackErrors
}

// Snapshot holds cumulative counts since the probe attached, summed over
// CPUs.
type Snapshot struct {
	Taken time.Time
	Sites map[SiteKey]WaitStats
	// Locks is per lock address (an LRU map: the least recently contended
	// addresses are evicted when it is full).
	Locks map[uint64]WaitStats
	// Owners are the sockets of the lock addresses that are a socket's
	// lock, identified when each address entered Locks.
	Owners map[uint64]Owner
	// Stacks holds the kernel return addresses of every site's stack,
	// innermost first.
	Stacks map[int32][]uint64
	Lost   Lost
	// SockWaits are the waits on TCP sockets' sk_lock.slock by lock address
	// and circumstance (see SockWaitKind). A lock's first contentions,
	// begun before the first one ended and recorded its owner (one per CPU
	// at most), are counted in Locks only.
	SockWaits map[SockWaitKey]WaitStats
	// ContextReadable: the probe tells each TCP socket lock waiter's
	// context (softirq or process) by the stack it runs on (x86-64); false:
	// SockWaits are all ContextUnknown.
	ContextReadable bool
	// StackEvery is the probe's Options.StackEvery: Sites holds the stacks
	// of about 1 in StackEvery contentions and the rest under Unsampled.
	StackEvery int
}

// DefaultStackDepth is how many kernel frames a site keeps by default.
// Unwinding (ORC) costs roughly 100-200 ns per frame inside the lock slow
// path, which lengthens the very contention being measured; 16 frames reach
// from the lock primitive out to the socket or device function that
// classifies it (about 6-10 frames out) and a little beyond.
const DefaultStackDepth = 16

// DefaultStackEvery is how many contentions share one stack unwind by
// default. The unwind (~3-4 µs at begin) was half of what `perfscope udp`
// cost a loopback flood; sampling 1 in 8 leaves the per-lock numbers exact
// and, at the thousands of contentions a second that make contention worth
// reporting, still hundreds of stacks a second for the sites (see
// BENCHMARKS.md, "udp probes").
const DefaultStackEvery = 8

// MaxStackEvery bounds Options.StackEvery: beyond it a short window holds
// too few stacks to name any site.
const MaxStackEvery = 1024

// Options configure a probe.
type Options struct {
	Method probes.AttachMethod
	// StackDepth is the number of kernel frames recorded per site
	// (default DefaultStackDepth, at most 127, the kernel's limit).
	StackDepth int
	// StackEvery takes the waiter's stack for about 1 in StackEvery
	// contentions (default DefaultStackEvery; 1: every one, at most
	// MaxStackEvery). Every contention is still timed and counted per lock
	// address and per lock kind; SiteWaits scales the sampled sites.
	StackEvery int
	// MaxLocks is how many lock addresses the per-lock table holds before
	// the least recently contended is evicted (default DefaultMaxLocks).
	// Its per-CPU values are all allocated when the probe opens — 5–10 ms
	// of CPU for 8,192 on 2 CPUs, and in proportion to the CPUs — so a
	// short run asks for fewer (LocksFor).
	MaxLocks int
}

// DefaultMaxLocks is the per-lock table's size for a run of unknown
// length (perfscope serve), and the most LocksFor gives.
const DefaultMaxLocks = 8192

// LocksFor is the per-lock table's size for a run of length d (0:
// unknown, DefaultMaxLocks): 512 lock addresses a second, at least 1,024.
// An evicted address loses only its per-lock history (the socket list);
// its waits stay in the per-site and per-class counts, which are not
// evicted; a run that contends more distinct locks than that keeps the
// most recently contended ones.
func LocksFor(d time.Duration) int {
	if d <= 0 {
		return DefaultMaxLocks
	}
	return min(DefaultMaxLocks, max(1024, int(d.Seconds()*512)))
}

// Probe is a loaded and attached lockstat probe.
type Probe struct {
	probes.Loaded
	stackEvery      int
	contextReadable bool
}

var _ probes.Snapshotter[Snapshot] = (*Probe)(nil)

// Open loads the probe's BPF object and attaches it.
func Open(opts Options) (*Probe, error) {
	if opts.StackDepth == 0 {
		opts.StackDepth = DefaultStackDepth
	}
	if opts.StackDepth < 1 || opts.StackDepth > 127 {
		return nil, fmt.Errorf("lockstat: stack depth %d out of range 1..127", opts.StackDepth)
	}
	if opts.StackEvery == 0 {
		opts.StackEvery = DefaultStackEvery
	}
	if opts.StackEvery < 1 || opts.StackEvery > MaxStackEvery {
		return nil, fmt.Errorf("lockstat: stack sampling 1 in %d out of range 1..%d", opts.StackEvery, MaxStackEvery)
	}
	if opts.MaxLocks == 0 {
		opts.MaxLocks = DefaultMaxLocks
	}
	if opts.MaxLocks < 1 || opts.MaxLocks > DefaultMaxLocks {
		return nil, fmt.Errorf("lockstat: %d lock addresses out of range 1..%d", opts.MaxLocks, DefaultMaxLocks)
	}
	spec, err := loadLockstat()
	if err != nil {
		return nil, fmt.Errorf("load lockstat BPF spec: %w", err)
	}
	// The owners table is as large as the locks table: each address's
	// owner is written once, when it enters the locks table.
	spec.Maps[lockstatMapLocks].MaxEntries = uint32(opts.MaxLocks)
	spec.Maps[lockstatMapOwners].MaxEntries = uint32(opts.MaxLocks)
	// bpf_get_stackid unwinds at most value_size/8 frames.
	spec.Maps[lockstatMapStacks].ValueSize = uint32(8 * opts.StackDepth)
	threadSize := probes.KernelThreadSize()
	if err := probes.SetVariables(spec, map[string]any{lockstatVarStackEvery: uint32(opts.StackEvery),
		lockstatVarThreadSize: threadSize}); err != nil {
		return nil, fmt.Errorf("lockstat: %w", err)
	}
	att, err := probes.LoadAndAttach(spec, Hooks, opts.Method, nil)
	if err != nil {
		return nil, fmt.Errorf("lockstat probe: %w", err)
	}
	return &Probe{Loaded: loaded(att), stackEvery: opts.StackEvery, contextReadable: threadSize != 0}, nil
}

// Group is the probe's one hook group: contention is a batch event in the
// budget's sense, it fires only when a lock is contended.
const Group = "lockstat"

func loaded(att *probes.Attached) probes.Loaded {
	maps := att.Collection.Maps
	slots := map[string]uint32{
		Hooks[0].String(): uint32(lockstatLockstatHookLOCKSTAT_HOOK_BEGIN),
		Hooks[1].String(): uint32(lockstatLockstatHookLOCKSTAT_HOOK_END),
	}
	// A wait begun before a detached gap would be timed across it.
	return probes.NewLoaded(att, slots, selfRuns, att.Group(Group, probes.Batch, Hooks, func() error {
		return errors.Join(probes.ZeroPerCPUArray(maps["spinning"]), probes.ClearHash[lockstatInflightKey](maps["inflight"]))
	}))
}

func selfRuns(v lockstatSelfCost) probes.SelfRuns {
	return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
}

func sumWaits(perCPU []lockstatWaitStat) WaitStats {
	var w WaitStats
	for _, v := range perCPU {
		w = w.add(WaitStats{Count: v.Count, Total: time.Duration(v.TotalNs), Max: time.Duration(v.MaxNs)})
	}
	return w
}

// Snapshot reads the cumulative counts and the stacks of every site.
func (p *Probe) Snapshot() (Snapshot, error) {
	s, err := readSnapshot(p.Maps(), p.stackEvery)
	s.ContextReadable = p.contextReadable
	return s, err
}

// readSnapshot reads the maps of a loaded lockstat object, attached or not.
func readSnapshot(maps map[string]*ebpf.Map, stackEvery int) (Snapshot, error) {
	s := Snapshot{Taken: time.Now(), Sites: map[SiteKey]WaitStats{}, Locks: map[uint64]WaitStats{}, Owners: map[uint64]Owner{},
		Stacks: map[int32][]uint64{}, StackEvery: stackEvery}
	sites, err := probes.ReadPerCPUHash[lockstatSiteKey, lockstatWaitStat](maps["sites"])
	if err != nil {
		return s, err
	}
	for k, perCPU := range sites {
		s.Sites[SiteKey{StackID: k.StackId, Flags: k.Flags}] = sumWaits(perCPU)
		if k.StackId < 0 {
			continue
		}
		if _, ok := s.Stacks[k.StackId]; ok {
			continue
		}
		frames := make([]uint64, maps["stacks"].ValueSize()/8)
		if err := maps["stacks"].Lookup(uint32(k.StackId), &frames); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return s, fmt.Errorf("read stack %d: %w", k.StackId, err)
		}
		s.Stacks[k.StackId] = trimStack(frames)
	}
	locks, err := probes.ReadPerCPUHash[uint64, lockstatWaitStat](maps["locks"])
	if err != nil {
		return s, err
	}
	for addr, perCPU := range locks {
		s.Locks[addr] = sumWaits(perCPU)
	}
	owners, err := probes.ReadHash[uint64, lockstatLockOwner](maps["owners"])
	if err != nil {
		return s, err
	}
	for addr, o := range owners {
		s.Owners[addr] = ownerOf(o)
	}
	if m := maps[lockstatMapSockwaits]; m != nil {
		if s.SockWaits, err = readSockWaits(m); err != nil {
			return s, err
		}
	}
	lost, err := probes.SumPerCPUCounters(maps["lost"], int(lockstatLockstatLostLOCKSTAT_LOST_REASONS))
	if err != nil {
		return s, err
	}
	s.Lost = Lost{
		InflightFull:    lost[lockstatLockstatLostLOCKSTAT_LOST_INFLIGHT_FULL],
		SiteFull:        lost[lockstatLockstatLostLOCKSTAT_LOST_SITE_FULL],
		StackCollisions: lost[lockstatLockstatLostLOCKSTAT_LOST_STACK_COLLISION],
		StackErrors:     lost[lockstatLockstatLostLOCKSTAT_LOST_STACK_ERROR],
		LockFull:        lost[lockstatLockstatLostLOCKSTAT_LOST_LOCK_FULL],
		OwnerFull:       lost[lockstatLockstatLostLOCKSTAT_LOST_OWNER_FULL],
	}
	return s, nil
}

func trimStack(ips []uint64) []uint64 {
	for i, ip := range ips {
		if ip == 0 {
			return append([]uint64(nil), ips[:i]...)
		}
	}
	return append([]uint64(nil), ips...)
}

// Sub returns the contention between prev and s. Sites and locks with no
// new contention are left out; owners and stacks are s's (identities, not
// counts).
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Taken: s.Taken, Sites: map[SiteKey]WaitStats{}, Locks: map[uint64]WaitStats{}, Owners: s.Owners, Stacks: s.Stacks,
		StackEvery: s.StackEvery, ContextReadable: s.ContextReadable, SockWaits: subWaits(s.SockWaits, prev.SockWaits)}
	sub := func(cur, old WaitStats) (WaitStats, bool) {
		if cur.Count <= old.Count {
			return WaitStats{}, false
		}
		return WaitStats{Count: cur.Count - old.Count, Total: cur.Total - old.Total, Max: cur.Max}, true
	}
	for k, v := range s.Sites {
		if w, ok := sub(v, prev.Sites[k]); ok {
			d.Sites[k] = w
		}
	}
	for k, v := range s.Locks {
		// An address evicted and re-added restarts from zero: then the
		// current value is the delta.
		old := prev.Locks[k]
		if old.Count > v.Count {
			old = WaitStats{}
		}
		if w, ok := sub(v, old); ok {
			d.Locks[k] = w
		}
	}
	d.Lost = Lost{
		InflightFull: s.Lost.InflightFull - prev.Lost.InflightFull, SiteFull: s.Lost.SiteFull - prev.Lost.SiteFull,
		LockFull: s.Lost.LockFull - prev.Lost.LockFull, OwnerFull: s.Lost.OwnerFull - prev.Lost.OwnerFull,
		StackCollisions: s.Lost.StackCollisions - prev.Lost.StackCollisions,
		StackErrors:     s.Lost.StackErrors - prev.Lost.StackErrors,
	}
	return d
}
