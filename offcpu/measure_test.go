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
