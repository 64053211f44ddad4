package lockstat

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// endRunner runs the raw_tp contention_end handler through
// BPF_PROG_TEST_RUN, unattached, on its own maps: it feeds the handler
// chosen lock addresses, where a flood only feeds the ones it contends.
type endRunner struct {
	End      *ebpf.Program `ebpf:"raw_contention_end"`
	Inflight *ebpf.Map     `ebpf:"inflight"`
	Locks    *ebpf.Map     `ebpf:"locks"`
	Owners   *ebpf.Map     `ebpf:"owners"`
}

func newEndRunner(tb testing.TB) *endRunner {
	tb.Helper()
	spec, err := loadLockstat()
	if err != nil {
		tb.Fatal(err)
	}
	r := &endRunner{}
	if err := spec.LoadAndAssign(r, nil); err != nil {
		tb.Fatal(err)
	}
	return r
}

func (r *endRunner) Close() {
	r.End.Close()
	r.Inflight.Close()
	r.Locks.Close()
	r.Owners.Close()
}

// end ends a contention on lock begun by this thread, as the first one
// on lock if firstSeen (the lock is removed from the per-lock map). The
// thread stays locked from the begin to the run: a contention is keyed by
// the waiter's tid, and a goroutine may move between threads.
func (r *endRunner) end(tb testing.TB, lock uint64, firstSeen bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if firstSeen {
		r.Locks.Delete(lock)
	}
	key := lockstatInflightKey{LockAddr: lock, Waiter: uint32(unix.Gettid())}
	if err := r.Inflight.Put(key, lockstatInflightWait{StartNs: 1, Flags: FlagSpin}); err != nil {
		tb.Fatal(err)
	}
	if _, err := r.End.Run(&ebpf.RunOptions{Context: [2]uint64{lock, 0}}); err != nil {
		tb.Fatal(err)
	}
}

// owner is what the handler recorded for lock.
func (r *endRunner) owner(lock uint64) (Owner, bool) {
	var o lockstatLockOwner
	if err := r.Owners.Lookup(lock, &o); err != nil {
		return Owner{}, false
	}
	return ownerOf(o), true
}

// contentionRunner runs a whole lockstat object, loaded with stack_every set
// and unattached, through BPF_PROG_TEST_RUN of the raw_tp handlers: a test
// then knows exactly how many contentions the probe saw.
type contentionRunner struct {
	Begin  *ebpf.Program `ebpf:"raw_contention_begin"`
	End    *ebpf.Program `ebpf:"raw_contention_end"`
	Sites  *ebpf.Map     `ebpf:"sites"`
	Stacks *ebpf.Map     `ebpf:"stacks"`
	Locks  *ebpf.Map     `ebpf:"locks"`
	Owners *ebpf.Map     `ebpf:"owners"`
	Lost   *ebpf.Map     `ebpf:"lost"`

	stackEvery int
}

// LoadAndAssign, not NewCollection: a collection memory-maps .rodata for
// its Variables, which keeps the map alive after Close until a GC.
func newContentionRunner(tb testing.TB, stackEvery int) *contentionRunner {
	tb.Helper()
	spec, err := loadLockstat()
	if err != nil {
		tb.Fatal(err)
	}
	if err := spec.Variables[lockstatVarStackEvery].Set(uint32(stackEvery)); err != nil {
		tb.Fatal(err)
	}
	r := &contentionRunner{stackEvery: stackEvery}
	if err := spec.LoadAndAssign(r, nil); err != nil {
		tb.Fatal(err)
	}
	return r
}

func (r *contentionRunner) Close() {
	for _, c := range []interface{ Close() error }{r.Begin, r.End, r.Sites, r.Stacks, r.Locks, r.Owners, r.Lost} {
		c.Close()
	}
}

func (r *contentionRunner) contend(tb testing.TB, lock uint64, flags uint32, n int) {
	onOneCPU(tb, func() {
		for i := 0; i < n; i++ {
			r.begin(tb, lock, flags)
			r.end(tb, lock)
		}
	})
}

// onOneCPU runs f on a thread pinned to one CPU: a spinning wait
// is kept per CPU and a sleeping one per thread, so a begin and its end
// must share both, as they do in the kernel (BPF_F_TEST_RUN_ON_CPU would
// run the handler in an IPI, under another task's tid).
func onOneCPU(tb testing.TB, f func()) {
	tb.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		tb.Fatal(err)
	}
	var one unix.CPUSet
	for cpu := 0; cpu < 8*int(unsafe.Sizeof(was)); cpu++ {
		if was.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		tb.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &was)
	f()
}

func (r *contentionRunner) begin(tb testing.TB, lock uint64, flags uint32) {
	tb.Helper()
	if _, err := r.Begin.Run(&ebpf.RunOptions{Context: [2]uint64{lock, uint64(flags)}}); err != nil {
		tb.Fatal(err)
	}
}

func (r *contentionRunner) end(tb testing.TB, lock uint64) {
	tb.Helper()
	if _, err := r.End.Run(&ebpf.RunOptions{Context: [2]uint64{lock, 0}}); err != nil {
		tb.Fatal(err)
	}
}

func (r *contentionRunner) snapshot(tb testing.TB) Snapshot {
	tb.Helper()
	maps := map[string]*ebpf.Map{lockstatMapSites: r.Sites, lockstatMapStacks: r.Stacks, lockstatMapLocks: r.Locks,
		lockstatMapOwners: r.Owners, lockstatMapLost: r.Lost}
	s, err := readSnapshot(maps, r.stackEvery)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
