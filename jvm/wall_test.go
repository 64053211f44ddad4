package jvm

import (
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/asprof"
)

// Stacks as async-profiler 4.1's wall mode wrote them for the sample
// app's /contend (OpenJDK 17): the holder asleep, the others blocked
// entering the monitor (HotSpot's frames below the Java frame are not
// walked: the futex follows the Java frame directly), an idle worker.
const contendHandler = "[pool-1-thread-%d tid=%d];java/lang/Thread.run;java/util/concurrent/ThreadPoolExecutor$Worker.run;java/util/concurrent/ThreadPoolExecutor.runWorker;sun/net/httpserver/ServerImpl$Exchange.run;com/sun/net/httpserver/Filter$Chain.doFilter;SampleApp$$Lambda$18.0x00007f4298009440.handle;SampleApp.contend"

func stack(s string, w int64) asprof.Stack {
	return asprof.Stack{Frames: strings.Split(s, ";"), Weight: w}
}

func TestWallJoinsPoolsAndClassifiesWaits(t *testing.T) {
	h1 := strings.Replace(strings.Replace(contendHandler, "%d", "1", 1), "%d", "101", 1)
	h2 := strings.Replace(strings.Replace(contendHandler, "%d", "2", 1), "%d", "102", 1)
	p := &asprof.Profile{Event: asprof.Wall, Stacks: []asprof.Stack{
		stack(h1+";java/lang/Thread.sleep;__futex_abstimed_wait_common", 2_000_000_000),
		stack(h2+";__futex_abstimed_wait_common", 5_000_000_000),
		stack(h2+";SampleApp.reply;sun/nio/ch/SocketDispatcher.write0;__GI_write", 100_000_000),
		stack("[pool-1-thread-3 tid=103];java/lang/Thread.run;java/util/concurrent/LinkedBlockingQueue.take;java/util/concurrent/locks/LockSupport.park;jdk/internal/misc/Unsafe.park;__futex_abstimed_wait_common", 300_000_000),
		stack("[Attach Listener tid=7];__GI_accept", 1_000_000_000),
		stack("__futex_abstimed_wait_common", 50_000_000),
	}}
	off := &evidence.OffCPU{Pools: []evidence.ThreadPool{
		{PID: 42, Name: "pool-1-thread-*", Threads: 3, SeenNs: 7_500_000_000, BlockedNs: 7_200_000_000, TopSite: "futex_do_wait_[k]", TopSiteReason: "lock"},
		{PID: 43, Name: "pool-1-thread-*", Threads: 9},
	}}
	v := Wall(p, off, 42, 5)
	if len(v.Pools) != 2 || v.Pools[0].Name != "pool-1-thread-*" {
		t.Fatalf("pools %+v", v.Pools)
	}
	pool := v.Pools[0]
	if pool.Threads != 3 || pool.WallNs != 7_400_000_000 || pool.RunningNs != 100_000_000 {
		t.Errorf("pool %+v", pool)
	}
	want := map[string]int64{"sleep": 2_000_000_000, "monitor": 5_000_000_000, "park": 300_000_000}
	for k, ns := range want {
		if pool.ByWait[k] != ns {
			t.Errorf("by_wait[%s] = %d, want %d (%v)", k, pool.ByWait[k], ns, pool.ByWait)
		}
	}
	if top := pool.TopFrames[0]; top.Frame != "SampleApp.contend" || top.State != "monitor" {
		t.Errorf("top frame %+v", top)
	}
	if pool.OffCPU == nil || pool.OffCPU.BlockedNs != 7_200_000_000 || pool.OffCPU.Threads != 3 {
		t.Errorf("kernel side %+v (the JVM's pool, not pid 43's)", pool.OffCPU)
	}
	if v.Pools[1].Name != "Attach Listener" || v.Pools[1].ByWait["native"] != 1_000_000_000 || v.Pools[1].OffCPU != nil {
		t.Errorf("attach listener %+v", v.Pools[1])
	}
	if v.WallNs != 8_450_000_000 || len(v.Warnings) != 1 {
		t.Errorf("wall %d, warnings %v", v.WallNs, v.Warnings)
	}
	if w := Wall(p, nil, 42, 5); w.Pools[0].OffCPU != nil || len(w.Warnings) != 2 {
		t.Errorf("without the probe: %+v", w)
	}
	// Names past the kernel's 15 bytes are cut as the kernel cuts them.
	long := Wall(&asprof.Profile{Stacks: []asprof.Stack{stack("[http-nio-8080-exec-12 tid=9];org.example.A.b", 10)}}, nil, 1, 5)
	if long.Pools[0].Name != "http-nio-8080-e" {
		t.Errorf("long name pooled as %q", long.Pools[0].Name)
	}
}
