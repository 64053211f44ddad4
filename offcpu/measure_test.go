package offcpu

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/internal/testutil"
)

// A whole run on a mutex convoy: four threads take one lock 15 times
// each and sleep 10 ms holding it. The evidence must name the lock's call
// site as the pool's top wait, woken by the holder releasing it, and the
// flame graph must carry the same time in microseconds.
func TestMeasureLockConvoy(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	prog := testutil.StartLockConvoy(t, 4, 10*time.Millisecond, 15)
	ev, err := Measure(context.Background(), Options{PID: prog.PID(), Duration: 20 * time.Second, Started: func() { prog.Go(t) }})
	if err != nil {
		t.Fatal(err)
	}
	truth := prog.Wait(t, 10*time.Second)
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)

	if ev.Target != "pid" || ev.PID != prog.PID() || ev.Comm != "prog" || ev.CPUs < 1 || len(ev.CPUBusy) != ev.CPUs {
		t.Errorf("header: target %s pid %d comm %q cpus %d busy %v", ev.Target, ev.PID, ev.Comm, ev.CPUs, ev.CPUBusy)
	}
	if ev.DurationNs <= 0 || time.Duration(ev.DurationNs) > 15*time.Second || !strings.Contains(strings.Join(ev.Warnings, "\n"), "exited") {
		t.Errorf("window %v, warnings %q: want the run ended by the program's exit", time.Duration(ev.DurationNs), ev.Warnings)
	}
	if len(ev.Pools) != 1 || ev.Pools[0].Name != "prog" || ev.Pools[0].Threads != 5 {
		t.Fatalf("pools %+v, want one of the program's 5 threads", ev.Pools)
	}
	pool := ev.Pools[0]
	t.Logf("pool %s: %d threads, on %.3f runnable %.3f blocked %.3f; top site %s (%s) %.2f of blocked, woken by %s",
		pool.Name, pool.Threads, pool.OnCPUShare, pool.RunnableShare, pool.BlockedShare, pool.TopSite, pool.TopSiteReason, pool.TopSiteShare, pool.TopSiteWaker)
	if pool.TopSite != testutil.WaitForLockFunction || pool.TopSiteReason != string(Lock) || pool.TopSiteShare < 0.4 {
		t.Errorf("the pool's top site is %s (%s, %.2f of its blocked time), want %s (lock)", pool.TopSite, pool.TopSiteReason, pool.TopSiteShare, testutil.WaitForLockFunction)
	}
	if !strings.Contains(pool.TopSiteWaker, testutil.ReleaseLockFunction) {
		t.Errorf("the lock's waits were woken by %q, want the holder in %s", pool.TopSiteWaker, testutil.ReleaseLockFunction)
	}
	var lockNs int64
	for _, r := range ev.ByReason {
		t.Logf("reason %s: %v in %d waits (%.2f), top site %s", r.Reason, time.Duration(r.Ns), r.Waits, r.Share, r.TopSite)
		for _, site := range r.Sites {
			if r.Reason == string(Lock) && site.Site == testutil.WaitForLockFunction {
				lockNs = site.Ns
			}
		}
	}
	want := truth["waited_ns"]
	if d := lockNs - want; d < -want/10 || d > want/10 {
		t.Errorf("lock waits %v, the program measured %v", time.Duration(lockNs), time.Duration(want))
	}
	w := ev.Waits[0]
	if w.Reason != string(Lock) && w.Reason != string(Child) {
		t.Errorf("the longest wait is %s at %s", w.Reason, w.Site)
	}

	var us int64
	for _, f := range ev.Folded {
		us += f.Us
		if !strings.HasPrefix(f.Stack, "prog;") {
			t.Errorf("folded stack %q not rooted at the thread's name", f.Stack)
		}
	}
	if d := us - ev.Totals.KeptNs/1000; d < -int64(len(ev.Folded)) || d > int64(len(ev.Folded)) {
		t.Errorf("folded stacks hold %d µs, the waits %d ns", us, ev.Totals.KeptNs)
	}
	if f := findings(*ev)["offcpu.lock-serializes-pool"]; f == nil || !strings.Contains(f.Title, testutil.WaitForLockFunction) {
		t.Errorf("no finding of a lock serializing the pool at %s: %+v", testutil.WaitForLockFunction, findings(*ev))
	}
	p := Flame(*ev)
	var b bytes.Buffer
	if err := flame.Write(&b, p, flame.OutputFolded, flame.Options{}); err != nil || p.Total() != us {
		t.Errorf("flame: total %d µs, want %d: %v", p.Total(), us, err)
	}
	if !strings.Contains(b.String(), testutil.WaitForLockFunction+";") {
		t.Errorf("the folded output lacks the lock's call site")
	}
}

func findings(ev evidence.OffCPU) map[string]*diagnose.Finding {
	out := map[string]*diagnose.Finding{}
	for _, f := range diagnose.Run(diagnose.OffCPURules, ev) {
		out[f.ID] = &f
	}
	return out
}

// Eight CPU-bound threads pinned to CPU 0: that CPU is saturated (its
// run-queue tail is the threads' slices), and the eight-thread pool on a
// 2-CPU machine spends most of its time runnable.
func TestMeasureSaturation(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	prog := testutil.StartSpinners(t, 8, 2*time.Second, 0)
	ev, err := Measure(context.Background(), Options{PID: prog.PID(), Duration: 20 * time.Second, Started: func() { prog.Go(t) }})
	if err != nil {
		t.Fatal(err)
	}
	prog.Wait(t, 10*time.Second)
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
	p := ev.Pools[0]
	t.Logf("pool %s: %d threads, on %.3f runnable %.3f blocked %.3f; run queue p50 %v p99 %v; busy %+v", p.Name, p.Threads,
		p.OnCPUShare, p.RunnableShare, p.BlockedShare, time.Duration(ev.RunQueue.All.P50Ns), time.Duration(ev.RunQueue.All.P99Ns), ev.CPUBusy)
	if p.Threads != 9 || p.RunnableShare < 0.6 {
		t.Errorf("pool %+v: want 9 threads (8 spinners and main) mostly runnable", p)
	}
	fs := findings(*ev)
	for _, id := range []string{"offcpu.cpu-saturation", "offcpu.pool-too-large"} {
		if fs[id] == nil {
			t.Errorf("no %s finding; findings %v", id, fs)
		} else {
			t.Logf("%s: %s", id, fs[id].Title)
		}
	}
	if fs["offcpu.lock-serializes-pool"] != nil {
		t.Errorf("spinners that never block were found serialized by a lock: %s", fs["offcpu.lock-serializes-pool"].Title)
	}
}

// A whole run on threads that only sleep: three threads each sleep 10 ms
// thirty times in nanosleep. The evidence must put that time under
// "sleep" at the program's call site within 10 % of what the program
// timed itself, count every sleep, show the threads blocked (sleeping)
// nearly all the time, say a timer's interrupt woke them, and find
// nothing wrong with their pool.
func TestMeasureSleepers(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	const threads, rounds, sleep = 3, 30, 10 * time.Millisecond
	prog := testutil.StartSleepers(t, threads, sleep, rounds)
	ev, err := Measure(context.Background(), Options{PID: prog.PID(), Duration: 20 * time.Second, Started: func() { prog.Go(t) }})
	if err != nil {
		t.Fatal(err)
	}
	truth := prog.Wait(t, 10*time.Second)
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)

	var sleepNs int64
	var sleepWaits uint64
	for _, r := range ev.ByReason {
		t.Logf("reason %s: %v in %d waits (%.2f), top site %s", r.Reason, time.Duration(r.Ns), r.Waits, r.Share, r.TopSite)
		if r.Reason != string(Sleep) {
			continue
		}
		for _, site := range r.Sites {
			if site.Site == testutil.SleepFunction {
				sleepNs, sleepWaits = site.Ns, site.Waits
			}
		}
	}
	want := truth["slept_ns"]
	if d := sleepNs - want; d < -want/10 || d > want/10 {
		t.Errorf("sleep at %s: %v, the program measured %v (more than 10 %% apart)", testutil.SleepFunction, time.Duration(sleepNs), time.Duration(want))
	}
	// Every sleep, or all but one a thread: a sleeper preempted between
	// arming its timer and blocking finds the timer expired and never
	// leaves the CPU asleep (its wait is a preemption), which a busy CI
	// machine did once (89 of 90).
	if n := uint64(truth["sleeps"]); sleepWaits > n || sleepWaits+threads < n {
		t.Errorf("%d sleeps at %s, the program slept %d times", sleepWaits, testutil.SleepFunction, truth["sleeps"])
	}
	var byTimer, sleeping, seen int64
	for _, w := range ev.Waits {
		if w.Site != testutil.SleepFunction {
			continue
		}
		seen += w.TotalNs
		if w.State == "sleeping" {
			sleeping += w.TotalNs
		}
		if w.Waker != nil {
			t.Logf("thread %d: %d sleeps, %v, woken by %s %s (%d/%d)", w.TID, w.Count, time.Duration(w.TotalNs), w.Waker.Kind, w.Waker.Site, w.Waker.PID, w.Waker.TID)
			if w.Waker.Kind == WakerInterrupt && strings.HasPrefix(w.Waker.Site, "hrtimer_wakeup") {
				byTimer += w.TotalNs
			}
		}
	}
	if seen == 0 || sleeping < seen*99/100 {
		t.Errorf("of %v of sleeps listed, %v left the CPU sleeping (S)", time.Duration(seen), time.Duration(sleeping))
	}
	if byTimer < seen*9/10 {
		t.Errorf("only %v of %v of sleeps were woken by a timer's interrupt (hrtimer_wakeup)", time.Duration(byTimer), time.Duration(seen))
	}
	if len(ev.Pools) != 1 || ev.Pools[0].Threads != threads+1 {
		t.Fatalf("pools %+v, want one of the program's %d threads", ev.Pools, threads+1)
	}
	p := ev.Pools[0]
	t.Logf("pool %s: on %.3f runnable %.3f blocked %.3f unknown %v; top site %s (%s) %.2f, woken by %s", p.Name,
		p.OnCPUShare, p.RunnableShare, p.BlockedShare, time.Duration(p.UnknownNs), p.TopSite, p.TopSiteReason, p.TopSiteShare, p.TopSiteWaker)
	if p.BlockedShare < 0.9 || p.TopSiteReason != string(Sleep) && p.TopSiteReason != string(Child) {
		t.Errorf("pool %+v: want threads blocked nearly all the time, in sleeps (the main thread in join)", p)
	}
	if ev.Totals.Waits < uint64(truth["sleeps"]) || ev.Totals.KeptNs < want {
		t.Errorf("totals %+v: fewer waits than the %d sleeps", ev.Totals, truth["sleeps"])
	}
	// Every sleep ends in a wakeup: the process's run-queue histogram
	// has at least one entry per sleep.
	if len(ev.RunQueue.PerProc) != 1 || ev.RunQueue.PerProc[0].PID != prog.PID() || ev.RunQueue.Wakeup.Count < uint64(truth["sleeps"]) {
		t.Errorf("run queue: %d wakeups, per process %+v; want at least %d of pid %d", ev.RunQueue.Wakeup.Count, ev.RunQueue.PerProc, truth["sleeps"], prog.PID())
	}
	// The machine is shared: other work may saturate its CPUs (that
	// finding is about the machine), but nothing is wrong with this pool.
	fs := findings(*ev)
	for _, id := range []string{"offcpu.lock-serializes-pool", "offcpu.pool-too-large"} {
		if f := fs[id]; f != nil {
			t.Errorf("finding %s on threads that only sleep: %s", id, f.Title)
		}
	}
	var b bytes.Buffer
	if err := flame.Write(&b, Flame(*ev), flame.OutputFolded, flame.Options{}); err != nil || !strings.Contains(b.String(), testutil.SleepFunction+";") {
		t.Errorf("the folded output lacks the sleep's call site: %v", err)
	}
}

// measureSpinners runs Measure on threads CPU-bound threads pinned to
// CPU 0 for d and returns the pool's share of its not-blocked time spent
// runnable (the main thread only waits in join) and the evidence.
func measureSpinners(t *testing.T, threads int, d time.Duration) (float64, *evidence.OffCPU) {
	t.Helper()
	prog := testutil.StartSpinners(t, threads, d, 0)
	ev, err := Measure(context.Background(), Options{PID: prog.PID(), Duration: d + 20*time.Second, Started: func() { prog.Go(t) }})
	if err != nil {
		t.Fatal(err)
	}
	prog.Wait(t, d+20*time.Second)
	if len(ev.Pools) != 1 || ev.Pools[0].Threads != threads+1 {
		t.Fatalf("pools %+v, want one of %d threads", ev.Pools, threads+1)
	}
	p := ev.Pools[0]
	share := float64(p.RunnableNs) / float64(p.RunnableNs+p.OnCPUNs)
	t.Logf("%d spinners: on %v runnable %v blocked %v: runnable %.3f of the time not blocked; %d runnable waits, mean %v; process run queue p50 %v p99 %v (%d)",
		threads, time.Duration(p.OnCPUNs), time.Duration(p.RunnableNs), time.Duration(p.BlockedNs), share, p.RunnableWaits,
		time.Duration(p.MeanRunnableNs), time.Duration(ev.RunQueue.All.P50Ns), time.Duration(ev.RunQueue.All.P99Ns), ev.RunQueue.All.Count)
	return share, ev
}

// Run-queue latency under a CPU hog, as Measure reports it: one spinner
// pinned to CPU 0 waits for it a share x of its time (the machine's other
// work there); four spinners pinned to it each get a quarter of what is
// left, so they wait 1 − (1 − x)/4 of their time, and each of their waits
// is longer (the other three's slices). The CPU they share must carry
// those waits in its own histogram.
func TestMeasureRunQueueUnderCPUHog(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	const d = time.Second
	one, ev1 := measureSpinners(t, 1, d)
	four, ev4 := measureSpinners(t, 4, d)
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
	want := 1 - (1-one)/4
	t.Logf("runnable alone %.3f, four %.3f, predicted %.3f", one, four, want)
	if four < want-0.1 || four > want+0.1 {
		t.Errorf("four spinners on one CPU were runnable %.3f of their time, predicted %.3f", four, want)
	}
	p1, p4 := ev1.Pools[0], ev4.Pools[0]
	if p4.MeanRunnableNs <= p1.MeanRunnableNs || ev4.RunQueue.Preempted.MeanNs <= ev1.RunQueue.Preempted.MeanNs {
		t.Errorf("mean runnable wait alone %v, four %v; preempted run-queue mean alone %v, four %v: no growth",
			time.Duration(p1.MeanRunnableNs), time.Duration(p4.MeanRunnableNs),
			time.Duration(ev1.RunQueue.Preempted.MeanNs), time.Duration(ev4.RunQueue.Preempted.MeanNs))
	}
	// The spinners' run-queue time is the per-CPU histogram of CPU 0:
	// its sum over waits is at least the time they spent runnable (three
	// of four waiting at any moment) within the histogram's resolution.
	var cpu0 *evidence.CPURunQueue
	for i := range ev4.RunQueue.PerCPU {
		if ev4.RunQueue.PerCPU[i].CPU == 0 {
			cpu0 = &ev4.RunQueue.PerCPU[i]
		}
	}
	if cpu0 == nil {
		t.Fatalf("no run-queue histogram of CPU 0: %+v", ev4.RunQueue.PerCPU)
	}
	if got := cpu0.All.MeanNs * float64(cpu0.All.Count); got < float64(p4.RunnableNs)*0.9 {
		t.Errorf("CPU 0's run-queue waits sum to %v, the spinners were runnable %v", time.Duration(got), time.Duration(p4.RunnableNs))
	}
}
