package offcpu

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
)

// The generated totals have one slot per state and run-queue kind the Go
// side names: the C enums and these constants cannot drift apart.
func TestStates(t *testing.T) {
	var v offcpuThreadState
	if len(v.Totals.BlockedNs) != int(StateCount) || len(v.Totals.Switches) != int(StateCount) {
		t.Errorf("C has %d states, Go %d", len(v.Totals.BlockedNs), StateCount)
	}
	if len(v.Totals.RunqNs) != RunqKinds {
		t.Errorf("C has %d run-queue kinds, Go %d", len(v.Totals.RunqNs), RunqKinds)
	}
	for s := State(0); s < StateCount; s++ {
		if strings.HasPrefix(s.String(), "state(") || s.Letter() == "?" {
			t.Errorf("state %d has no name", s)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{PID: -1}, {StackEvery: MaxStackEvery + 1}, {StackEvery: -2}, {Stacks: 7}, {WaitEntries: -1}} {
		if p, err := Open(o); err == nil {
			p.Close()
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

// names symbolizes a leaf-first stack; frames past the leaf are return
// addresses, looked up one byte back (inside the call).
func names(sym *symbols.Symbolizer, pid int, stack []uint64, kernel bool) []string {
	addrs := make([]uint64, len(stack))
	for i, a := range stack {
		if i > 0 && a > 0 {
			a--
		}
		addrs[i] = a
	}
	var out []string
	if kernel {
		out = sym.Kernel(addrs)
	} else {
		out = sym.User(pid, addrs)
	}
	for i, n := range out {
		out[i] = strings.TrimSuffix(n, symbols.KernelSuffix)
	}
	return out
}

func has(frames []string, fn string) bool { return slices.Contains(frames, fn) }

func open(t *testing.T, o Options) *Probe {
	t.Helper()
	p, err := Open(o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Three threads take one mutex ten times each and sleep 20 ms holding it.
// The time the probe saw them off CPU in pthread_mutex_lock must match the
// time the program measured around its own calls within 10 %, and the
// thread that woke each wait must be the holder, releasing the lock.
func TestLockConvoy(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	for _, m := range probes.Methods {
		t.Run(string(m), func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			prog := testutil.StartLockConvoy(t, 3, 20*time.Millisecond, 10)
			sym := symbols.New(symbols.Default)
			sym.Prefetch(prog.PID())
			p, err := Open(Options{Method: m, PID: prog.PID()})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			prog.Go(t)
			truth := prog.Wait(t, 30*time.Second)
			s, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)

			// sleeping: some lock waits are preemptions while spinning.
			var lockWait, sleeping, fromHolder, sleepWait time.Duration
			for _, w := range s.Waits {
				if w.PID != prog.PID() {
					t.Errorf("a wait of pid %d, want only %d", w.PID, prog.PID())
				}
				if !slices.Contains(prog.TIDs, w.TID) {
					continue
				}
				user := names(sym, w.PID, w.UserStack, false)
				switch {
				case has(user, testutil.WaitForLockFunction):
					lockWait += w.Total
					if w.State == Sleeping {
						sleeping += w.Total
					}
					if k := names(sym, 0, w.KernelStack, true); !slices.ContainsFunc(k, func(f string) bool { return strings.Contains(f, "futex") }) {
						t.Errorf("a lock wait without futex in its kernel stack: %v", k)
					}
					if w.Waker != nil && slices.Contains(prog.TIDs, w.Waker.TID) &&
						has(names(sym, w.Waker.PID, w.Waker.UserStack, false), testutil.ReleaseLockFunction) {
						fromHolder += w.Total
					}
				case has(user, testutil.HoldLockFunction):
					sleepWait += w.Total
				}
			}
			want := time.Duration(truth["waited_ns"])
			t.Logf("%s: lock waits %v (woken by the holder: %v), the program measured %v; sleeps holding it %v; lost %+v",
				m, lockWait, fromHolder, want, sleepWait, s.Lost)
			if want < 200*time.Millisecond {
				t.Fatalf("the threads waited only %v in all: no convoy", want)
			}
			if d := lockWait - want; d < -want/10 || d > want/10 {
				t.Errorf("off CPU in pthread_mutex_lock: %v, the program measured %v (more than 10 %% apart)", lockWait, want)
			}
			if sleeping < lockWait*9/10 {
				t.Errorf("only %v of %v lock waits sleeping (S)", sleeping, lockWait)
			}
			if fromHolder < lockWait*9/10 {
				t.Errorf("only %v of %v lock waits were woken by a holder releasing the lock", fromHolder, lockWait)
			}
			// 30 holds of 20 ms; nanosleep overshoots a little. The lower
			// bound allows the same 10 % as the lock: on a busy machine one
			// hold in thirty is now and then missing from hold_lock's
			// stacks (1 run in 4 here, most with a user stack walk that
			// faulted, whose wait is kept without its user half; once
			// with no fault counted, cause not found).
			if sleepWait < 30*20*time.Millisecond*9/10 || sleepWait > 30*30*time.Millisecond {
				t.Errorf("sleeps holding the lock: %v, want about %v", sleepWait, 30*20*time.Millisecond)
			}
		})
	}
}

// A thread blocked in recv on a loopback UDP socket, woken by datagrams
// the main thread sends: each wait's waker must be the packet's delivery
// (sock_def_readable in the waker's kernel stack: the softirq, run in the
// sender's context or ksoftirqd's). The reader's waits are found by their
// kernel stack: libc's recv uses the frame pointer register for itself,
// so the user stack often ends at recv.
func TestSocketReadWokenByPacket(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	const rounds = 40
	prog := testutil.StartSocketReader(t, rounds, 5*time.Millisecond)
	sym := symbols.New(symbols.Default)
	sym.Prefetch(prog.PID())
	p := open(t, Options{PID: prog.PID()})
	prog.Go(t)
	prog.Wait(t, 30*time.Second)
	s, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)

	reader := prog.TIDs[1]
	var reads, byPacket uint64
	for _, w := range s.Waits {
		kernel := names(sym, 0, w.KernelStack, true)
		if w.TID != reader || !has(kernel, "udp_recvmsg") {
			continue
		}
		reads += w.Count
		if w.Waker == nil {
			continue
		}
		wk := names(sym, 0, w.Waker.KernelStack, true)
		if has(wk, "sock_def_readable") {
			byPacket += w.Count
		}
		t.Logf("%d reads woken by %s (%d/%d): %v", w.Count, w.Waker.Comm, w.Waker.PID, w.Waker.TID, wk)
	}
	if reads < rounds*9/10 {
		t.Errorf("%d socket read waits, want about %d", reads, rounds)
	}
	if byPacket < reads*9/10 {
		t.Errorf("%d of %d reads were woken by a packet's delivery", byPacket, reads)
	}
}

// spinShares runs threads CPU-bound threads pinned to one CPU for d and
// returns their mean share of time runnable (waiting for the CPU) and
// the process's run-queue histogram of preemptions.
func spinShares(t *testing.T, threads int, d time.Duration) (float64, Hist) {
	t.Helper()
	prog := testutil.StartSpinners(t, threads, d, 0)
	p := open(t, Options{PID: prog.PID()})
	prog.Go(t)
	prog.Wait(t, d+20*time.Second)
	s, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	var share float64
	for _, th := range s.Threads {
		if !slices.Contains(prog.TIDs, th.TID) {
			continue
		}
		tt := th.Totals
		seen := tt.OnCPU + tt.RunnableTotal() + tt.BlockedTotal()
		t.Logf("%d spinners: thread %d on %v runnable %v (%d preemptions) blocked %v", threads, th.TID, tt.OnCPU,
			tt.RunnableTotal(), tt.RunnableCount[AfterPreemption], tt.BlockedTotal())
		// A spinner never blocks; it may wait for the CPU or run. The
		// exit path and the start barrier are its only sleeps.
		if tt.BlockedTotal() > seen/50 {
			t.Errorf("spinner %d blocked %v of %v", th.TID, tt.BlockedTotal(), seen)
		}
		if seen < d*8/10 || seen > d*12/10 {
			t.Errorf("spinner %d seen for %v, ran %v", th.TID, seen, d)
		}
		share += float64(tt.RunnableTotal()) / float64(seen) / float64(threads)
	}
	return share, s.RunqProcess[prog.PID()][AfterPreemption]
}

// Four CPU-bound threads pinned to one CPU each get a quarter of what the
// CPU has left over for them: if one thread alone waits a share x of its
// time (the machine's other work on that CPU), four wait 1 − (1 − x)/4.
// The run-queue latency of their preemptions grows with them.
func TestRunQueueGrowsWithRunnableThreads(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	const d = time.Second
	one, h1 := spinShares(t, 1, d)
	four, h4 := spinShares(t, 4, d)
	want := 1 - (1-one)/4
	t.Logf("runnable share alone %.3f, of four %.3f (predicted %.3f); preemptions %d, %d, mean wait %v, %v",
		one, four, want, h1.Count, h4.Count, mean(h1), mean(h4))
	if four < want-0.1 || four > want+0.1 {
		t.Errorf("four spinners on one CPU were runnable %.3f of the time, predicted %.3f", four, want)
	}
	if h4.Count == 0 || mean(h4) <= mean(h1) {
		t.Errorf("preempted waits: alone %d (mean %v), four %d (mean %v): no growth", h1.Count, mean(h1), h4.Count, mean(h4))
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}

func mean(h Hist) time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// The overhead budget detaches the probe's one hook group between
// sampling windows: nothing is counted while it is detached, counting
// resumes when it attaches again, and no wait is timed across the gap
// (a new epoch begins), so the reader's longest wait stays near the
// sender's gap instead of the detached span.
func TestGroupDetachesAndAttachesWithoutReload(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	prog := testutil.StartSocketReader(t, 150, 10*time.Millisecond)
	p := open(t, Options{PID: prog.PID()})
	groups := p.HookGroups()
	if len(groups) != 1 || groups[0].Name != Group || groups[0].Class != probes.PerPacket || !groups[0].IsAttached() || len(groups[0].Hooks) != len(Hooks) {
		t.Fatalf("hook groups = %+v", groups)
	}
	g := groups[0]
	prog.Go(t)
	reads := func() (n uint64, longest time.Duration) {
		s, err := p.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range s.Waits {
			if w.TID == prog.TIDs[1] {
				n += w.Count
				longest = max(longest, w.Max)
			}
		}
		return n, longest
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := g.Detach(); err != nil {
		t.Fatal(err)
	}
	if g.IsAttached() || p.Attached.Links() != 0 {
		t.Fatalf("detached group: attached %v, %d links", g.IsAttached(), p.Attached.Links())
	}
	before, _ := reads()
	time.Sleep(400 * time.Millisecond)
	during, _ := reads()
	if during != before {
		t.Errorf("%d reads counted while detached", during-before)
	}
	if _, err := g.Attach(); err != nil {
		t.Fatal(err)
	}
	prog.Wait(t, 30*time.Second)
	after, longest := reads()
	t.Logf("reads before the gap %d, after it %d; longest wait %v", before, after-during, longest)
	if before == 0 || after <= during {
		t.Errorf("reads: %d before the gap, %d after", before, after-during)
	}
	if longest > 200*time.Millisecond {
		t.Errorf("a wait of %v was timed across the 400 ms gap", longest)
	}
	p.Close()
	if _, err := g.Attach(); err == nil {
		t.Error("attached a closed probe's group")
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}
