package lockstat

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/probes"
)

// Two senders flooding one socket that one goroutine reads: softirqs
// enqueuing and the reader dequeuing contend on the socket's receive-queue
// and wakeup locks (Makita's starting point). The probe must classify the
// contention and identify, in the kernel, the sink's socket as the owner of
// its locks — with whatever kernel.kptr_restrict the machine has, since no
// kernel address is read from /proc.
func TestProbeAttributesSocketContention(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	netns, err := sockets.Default.NetNS("self")
	if err != nil {
		t.Fatal(err)
	}
	ksyms, err := symbols.New(symbols.Default).KernelSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range probes.Methods {
		t.Run(string(m), func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			p, err := Open(Options{Method: m, StackEvery: 1})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			first, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			sink, err := udpflood.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			res, err := udpflood.Send(context.Background(), udpflood.Config{
				Target: sink.AddrPort(), Senders: 2, Duration: 700 * time.Millisecond, MaxPackets: 400000,
			})
			if err != nil {
				sink.Close()
				t.Fatal(err)
			}
			last, err := p.Snapshot()
			if err != nil {
				sink.Close()
				t.Fatal(err)
			}
			table, err := sockets.Default.UDP()
			if err != nil {
				sink.Close()
				t.Fatal(err)
			}
			port := sink.AddrPort().Port()
			d := last.Sub(first)
			pids, err := SocketOwners(sockets.Default, d.Inodes())
			sink.Close()
			if err != nil {
				t.Fatal(err)
			}

			byClass := map[Class]uint64{}
			var waitQueueWakeups uint64 // socket wakeups on a wait-queue lock, not on epoll's
			type site struct {
				n      uint64
				frames []string
			}
			var sites []site
			// Every stack is taken (StackEvery 1): this test compares the
			// classified stacks with the exact per-lock counts, and a few
			// dozen wakeups estimated from 1 in 8 stacks are too noisy
			// for that (TestSampledStacksKeepExactCounts covers sampling).
			for k, sw := range d.SiteWaits() {
				w := sw.Estimated
				frames := Symbolize(d.Stacks[k.StackID], ksyms)
				byClass[Classify(frames)] += w.Count
				if Classify(frames) == SocketWakeup && locker(frames) != "ep_poll_callback" {
					waitQueueWakeups += w.Count
				}
				sites = append(sites, site{w.Count, frames})
			}
			sort.Slice(sites, func(i, j int) bool { return sites[i].n > sites[j].n })
			for i, s := range sites {
				if i < 4 {
					t.Logf("%d × %s: %s", s.n, Classify(s.frames), strings.Join(s.frames, ";"))
				}
			}
			if out := os.Getenv("PERFSCOPE_RECORD_STACKS"); out != "" {
				var b strings.Builder
				for _, s := range sites {
					b.WriteString(strings.Join(s.frames, ";") + "\n")
				}
				os.WriteFile(out, []byte(b.String()), 0o644)
			}
			t.Logf("sent %d; contention by class %v; lost %+v", res.Sent, byClass, d.Lost)
			if byClass[SocketReceiveQueue]+byClass[SocketWakeup] == 0 {
				t.Errorf("no socket receive-queue or wakeup contention classified: %v", byClass)
			}

			var onPort *SocketWait
			waits := d.SocketWaits(NewSocketDirectory(netns, table, pids))
			for i, sw := range waits {
				t.Logf("socket %v port %d inode %d netns %d %s pids %v: %d waits %v by %+v", sw.Socket.Local, sw.Socket.Port,
					sw.Socket.Inode, sw.Socket.NetNS, sw.Socket.Protocol, sw.Socket.PIDs, sw.Count, sw.Total, sw.ByField)
				if sw.Socket.Port == port {
					onPort = &waits[i]
				}
			}
			if onPort == nil {
				t.Fatalf("no contention attributed to the sink's port %d; owners %+v", port, d.Owners)
			}
			ref := onPort.Socket
			if ref.Local != sink.AddrPort() || ref.OtherNetNS || ref.NetNS != netns || ref.Protocol != "udp" || ref.IPv6 {
				t.Errorf("sink socket = %+v, want %v in netns %d", ref, sink.AddrPort(), netns)
			}
			if !containsPID(ref.PIDs, os.Getpid()) {
				t.Errorf("socket on port %d owned by %v, want this test (%d)", port, ref.PIDs, os.Getpid())
			}
			fields := map[SockField]uint64{}
			for _, f := range onPort.ByField {
				fields[f.Field] = f.Count
			}
			if fields[FieldReceiveQueue]+fields[FieldReaderQueue] == 0 {
				t.Errorf("no receive-queue lock contention attributed to the sink's port %d: %v", port, fields)
			}
			// Wakeups contend on the sink's wait-queue lock when two softirqs
			// wake its reader at once (the rest of socket-wakeup is Go's
			// epoll lock and the senders' write-space wakeups). The stacks
			// are system-wide, so other sockets' share some of them: expect
			// most on the sink once there are a few.
			t.Logf("wait-queue wakeup contentions in the stacks: %d, on the sink's wait-queue lock: %d", waitQueueWakeups, fields[FieldWaitQueue])
			if waitQueueWakeups >= 10 && 2*fields[FieldWaitQueue] < waitQueueWakeups {
				t.Errorf("%d wait-queue wakeup contentions, %d on the sink's wait-queue lock", waitQueueWakeups, fields[FieldWaitQueue])
			}
			if err := p.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}

// locker is the first frame past the locking primitives: the function that
// took the lock.
func locker(frames []string) string {
	for _, f := range frames {
		if name := BaseName(f); !lockPrimitive(name) {
			return name
		}
	}
	return ""
}

func containsPID(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// floodLocks are lock addresses contended during a loopback flood into
// sink, which stays open so that its socket's locks stay where they are.
type floodLocks struct {
	sink *udpflood.Sink
	snap Snapshot
	// receiveQueue and waitQueue are the sink's locks, other the most
	// contended lock that is no socket's (0 when not contended).
	receiveQueue, waitQueue, other uint64
}

func contendedLocks(tb testing.TB) floodLocks {
	tb.Helper()
	p, err := Open(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	fl := floodLocks{sink: sink}
	for round := 0; round < 5 && (fl.receiveQueue == 0 || fl.waitQueue == 0 || fl.other == 0); round++ {
		_, err = udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: 500 * time.Millisecond, MaxPackets: 400000})
		if err != nil {
			sink.Close()
			tb.Fatal(err)
		}
		if fl.snap, err = p.Snapshot(); err != nil {
			sink.Close()
			tb.Fatal(err)
		}
		var otherCount uint64
		for addr, w := range fl.snap.Locks {
			o, ok := fl.snap.Owners[addr]
			switch {
			case !ok && w.Count > otherCount:
				fl.other, otherCount = addr, w.Count
			case ok && o.Port == sink.AddrPort().Port() && o.Field == FieldReceiveQueue:
				fl.receiveQueue = addr
			case ok && o.Port == sink.AddrPort().Port() && o.Field == FieldWaitQueue:
				fl.waitQueue = addr
			}
		}
	}
	if fl.receiveQueue == 0 {
		sink.Close()
		tb.Fatalf("the sink's receive-queue lock was not identified; owners %+v", fl.snap.Owners)
	}
	return fl
}

// The owner check must accept a socket's locks and nothing near them: fed
// addresses a few bytes off the sink's locks, a lock that is no socket's
// and addresses outside the kernel's memory, the handler
// must record no owner (its back-pointer check rejects them).
func TestIdentifyOnlySocketLocks(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	func() {
		fl := contendedLocks(t)
		defer fl.sink.Close()
		r := newEndRunner(t)
		defer r.Close()

		want := fl.snap.Owners[fl.receiveQueue]
		r.end(t, fl.receiveQueue, true)
		if o, ok := r.owner(fl.receiveQueue); !ok || o != want {
			t.Errorf("receive-queue lock: owner %+v, %v; want %+v", o, ok, want)
		}
		if fl.waitQueue != 0 {
			r.end(t, fl.waitQueue, true)
			o, ok := r.owner(fl.waitQueue)
			if !ok || o.Field != FieldWaitQueue || o.Inode != want.Inode || o.Port != want.Port {
				t.Errorf("wait-queue lock: owner %+v, %v; want field %s of inode %d", o, ok, FieldWaitQueue, want.Inode)
			}
		} else {
			t.Log("the sink's wait-queue lock was not contended; not checked")
		}

		rq := fl.receiveQueue
		notLocks := map[string]uint64{"lock+4": rq + 4, "lock-4": rq - 4, "lock+8": rq + 8, "lock+64": rq + 64, "lock-64": rq - 64,
			"zero": 0, "low": 0x10, "user space": 0x7f0000000000, "non-canonical": 0x8000000000000000}
		if fl.other != 0 {
			notLocks["no socket's lock"] = fl.other
		}
		for name, addr := range notLocks {
			r.end(t, addr, true)
			if o, ok := r.owner(addr); ok {
				t.Errorf("%s (%#x): identified as %+v", name, addr, o)
			}
		}
	}()
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}

// Sampling stacks must not change what is counted: with 1 in 8 stacks the
// per-lock counts are exactly those of every-stack mode, every contention is
// in a site (sampled or Unsampled), about 1 in 8 is sampled, and the
// estimates of each lock kind add up to its exact count and wait.
func TestSampledStacksKeepExactCounts(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	// Addresses no socket lives at: identify_owner's reads fail on them.
	const spinLock, mutex = uint64(0x10), uint64(0x20)
	const spins, mutexes = 600, 200
	for _, every := range []int{1, 8} {
		t.Run(fmt.Sprintf("1-in-%d", every), func(t *testing.T) {
			r := newContentionRunner(t, every)
			defer r.Close()
			r.contend(t, spinLock, FlagSpin, spins)
			r.contend(t, mutex, FlagMutex, mutexes)
			s := r.snapshot(t)
			if s.Lost.Total() != 0 {
				t.Errorf("lost %+v", s.Lost)
			}
			if got := s.Locks[spinLock].Count; got != spins {
				t.Errorf("spinlock counted %d times, want %d", got, spins)
			}
			if got := s.Locks[mutex].Count; got != mutexes {
				t.Errorf("mutex counted %d times, want %d", got, mutexes)
			}

			all, sampled := map[uint32]WaitStats{}, map[uint32]uint64{}
			for k, w := range s.Sites {
				all[k.Flags] = all[k.Flags].add(w)
				if k.StackID != Unsampled {
					sampled[k.Flags] += w.Count
				}
			}
			if all[FlagSpin].Count != spins || all[FlagMutex].Count != mutexes {
				t.Errorf("sites hold %d spinlock and %d mutex contentions, want %d and %d", all[FlagSpin].Count, all[FlagMutex].Count, spins, mutexes)
			}
			n := sampled[FlagSpin] + sampled[FlagMutex]
			t.Logf("%d of 800 contentions' stacks taken", n)
			// Gaps uniform in 1..2N-1: over 800 contentions the number of
			// samples is 800/N ± ~6 (one standard deviation) for N = 8.
			if lo, hi := uint64(800/every-40), uint64(800/every+40); every > 1 && (n < lo || n > hi) {
				t.Errorf("%d of 800 stacks taken with 1 in %d, want %d..%d", n, every, lo, hi)
			}
			if every == 1 && n != spins+mutexes {
				t.Errorf("%d of 800 stacks taken with every one sampled", n)
			}

			est := map[uint32]WaitStats{}
			sites := 0
			for k, sw := range s.SiteWaits() {
				if k.StackID == Unsampled {
					t.Errorf("lock kind %s has an Unsampled site %+v although %d of its stacks were sampled", LockKind(k.Flags), sw, sampled[k.Flags])
				}
				est[k.Flags] = est[k.Flags].add(sw.Estimated)
				sites++
			}
			for flags, w := range all {
				e := est[flags]
				// Counts are rounded per site; waits are scaled by their own ratio.
				if d := int64(e.Count) - int64(w.Count); d < -int64(sites) || d > int64(sites) {
					t.Errorf("%s: estimated %d contentions, counted %d", LockKind(flags), e.Count, w.Count)
				}
				if d := e.Total - w.Total; d < -time.Duration(sites) || d > time.Duration(sites) {
					t.Errorf("%s: estimated %v of wait, measured %v", LockKind(flags), e.Total, w.Total)
				}
			}
		})
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}

// Spinning waits are kept per CPU, innermost last: an interrupt's
// contention inside a thread's is timed on its own and the thread's wait
// includes it; a wait whose end never ran (the kernel skips a handler that
// fires inside itself) is dropped by the next end below it, or when the
// nest is full, and never times a later contention on its lock.
func TestSpinningWaitsNest(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	const task, irq, stale, mutex = uint64(0x10), uint64(0x20), uint64(0x30), uint64(0x40)
	r := newContentionRunner(t, 1)
	defer r.Close() // if the test stops early; closed again below, before the leak check
	onOneCPU(t, func() {
		// A thread spins on task; an interrupt spins on irq inside it, and
		// a mutex wait (thread-keyed) begins and ends in between too.
		r.begin(t, task, FlagSpin)
		r.begin(t, irq, FlagSpin)
		time.Sleep(2 * time.Millisecond)
		r.end(t, irq)
		r.begin(t, mutex, FlagMutex)
		r.end(t, mutex)
		r.end(t, task)

		// An end lost inside task's wait: task's end drops it.
		r.begin(t, task, FlagSpin)
		r.begin(t, stale, FlagSpin|FlagRead)
		r.end(t, task)
		// stale is no longer in flight: its next end is not a contention.
		r.end(t, stale)

		// Five begins whose ends were all lost overflow the nest of 4:
		// the fifth starts it again and is counted when it ends.
		for i := 0; i < 5; i++ {
			r.begin(t, irq, FlagSpin)
		}
		r.end(t, irq)
	})
	s := r.snapshot(t)
	r.Close()
	if got := s.Locks[task].Count; got != 2 {
		t.Errorf("task lock counted %d times, want 2", got)
	}
	if got := s.Locks[irq].Count; got != 2 {
		t.Errorf("irq lock counted %d times, want 2 (one nested, one after the overflow)", got)
	}
	if got := s.Locks[mutex].Count; got != 1 {
		t.Errorf("mutex counted %d times, want 1", got)
	}
	if _, ok := s.Locks[stale]; ok {
		t.Errorf("a wait whose end was lost was counted: %+v", s.Locks[stale])
	}
	if s.Locks[task].Max < s.Locks[irq].Max || s.Locks[irq].Max < 2*time.Millisecond {
		t.Errorf("the thread waited %v and the interrupt inside it %v: want ≥ 2 ms, the thread's no shorter", s.Locks[task].Max, s.Locks[irq].Max)
	}
	if s.Lost.InflightFull != 1 {
		t.Errorf("lost %+v, want one overflow of the nest", s.Lost)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}

// The per-lock table's size follows the run's length between 1,024 and
// the object's own size, which serve (length unknown) keeps.
func TestLocksFor(t *testing.T) {
	spec, err := loadLockstat()
	if err != nil {
		t.Fatal(err)
	}
	if n := spec.Maps[lockstatMapLocks].MaxEntries; n != DefaultMaxLocks {
		t.Fatalf("the object's locks table holds %d, DefaultMaxLocks is %d", n, DefaultMaxLocks)
	}
	for d, want := range map[time.Duration]int{0: DefaultMaxLocks, time.Second: 1024, 4 * time.Second: 2048, 10 * time.Second: 5120, time.Hour: DefaultMaxLocks} {
		if got := LocksFor(d); got != want {
			t.Errorf("LocksFor(%v) = %d, want %d", d, got, want)
		}
	}
	if _, err := Open(Options{MaxLocks: DefaultMaxLocks + 1}); err == nil {
		t.Error("a locks table larger than the object's opened")
	}
}
