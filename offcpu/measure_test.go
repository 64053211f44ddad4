package offcpu

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

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
	p := Flame(*ev)
	var b bytes.Buffer
	if err := flame.Write(&b, p, flame.OutputFolded, flame.Options{}); err != nil || p.Total() != us {
		t.Errorf("flame: total %d µs, want %d: %v", p.Total(), us, err)
	}
	if !strings.Contains(b.String(), testutil.WaitForLockFunction+";") {
		t.Errorf("the folded output lacks the lock's call site")
	}
}
