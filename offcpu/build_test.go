package offcpu

import (
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// fakeSymbols names addresses from a table. Build looks one byte back
// for every frame past the leaf (a return address), so the fixture's
// stacks hold the named address plus one there.
type fakeSymbols map[uint64]string

func (f fakeSymbols) name(a uint64) string {
	if n, ok := f[a]; ok {
		return n
	}
	return "[unknown]"
}

func (f fakeSymbols) Kernel(addrs []uint64) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = f.name(a) + "_[k]"
	}
	return out
}

func (f fakeSymbols) User(pid int, addrs []uint64) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = f.name(a)
	}
	return out
}

var syms = fakeSymbols{
	0x10: "futex_do_wait", 0x11: "__futex_wait", 0x12: "futex_wait", 0x13: "do_futex", 0x14: "__x64_sys_futex",
	0x20: "hrtimer_nanosleep", 0x21: "common_nsleep", 0x22: "__x64_sys_clock_nanosleep",
	0x30: "bpf_prog_1_btf_sched_waking", 0x31: "try_to_wake_up", 0x32: "wake_up_q", 0x33: "futex_wake", 0x34: "do_futex", 0x35: "do_syscall_64",
	0x40: "preempt_schedule_irq", 0x41: "asm_sysvec_apic_timer_interrupt",
	0x1000: "__lll_lock_wait", 0x1001: "pthread_mutex_lock", 0x1002: "take_order", 0x1003: "worker",
	0x1010: "clock_nanosleep", 0x1011: "pause_between_orders", 0x1012: "worker",
	0x1020: "__lll_unlock_wake", 0x1021: "pthread_mutex_unlock", 0x1022: "finish_order", 0x1023: "worker",
	0x1030: "compute_total",
}

var (
	lockKernel  = []uint64{0x10, 0x12, 0x13, 0x14, 0x15}
	lockUser    = []uint64{0x1000, 0x1002, 0x1003, 0x1004}
	sleepKernel = []uint64{0x20, 0x22, 0x23}
	sleepUser   = []uint64{0x1010, 0x1012, 0x1013}
	wakeKernel  = []uint64{0x30, 0x32, 0x33, 0x34, 0x35, 0x36}
	wakeUser    = []uint64{0x1020, 0x1022, 0x1023, 0x1024}
	preemptedK  = []uint64{0x40, 0x42}
)

// fixture is a process 100 with a pool of three workers (101-103), its
// main thread (100), a fourth worker the probe never saw (104), and
// another process (200) a pid run leaves out. The window is one second.
func fixture() Input {
	ms := time.Millisecond
	holder := &probe.Waker{PID: 100, TID: 102, Comm: "pool-1-thread-2", KernelStack: wakeKernel, UserStack: wakeUser}
	tot := func(on, runnable, sleeping time.Duration) probe.ThreadTotals {
		t := probe.ThreadTotals{OnCPU: on, Waits: 10}
		t.Runnable[probe.AfterWakeup] = runnable
		t.RunnableCount[probe.AfterWakeup] = 10
		t.Blocked[probe.Sleeping] = sleeping
		return t
	}
	var h probe.Hist
	h.Slots[10], h.Slots[20] = 90, 10 // 90 waits of ~1 µs, 10 of ~1 ms
	h.Count, h.Sum = 100, 90*1500*time.Nanosecond+10*1500*time.Microsecond
	snap := probe.Snapshot{
		Mono: 10 * time.Second, WindowStart: 9 * time.Second, MinBlock: 10 * time.Microsecond, StackEvery: 1,
		Threads: []probe.Thread{
			{TID: 100, PID: 100, Comm: "app", Totals: tot(10*ms, 0, 990*ms)},
			{TID: 101, PID: 100, Comm: "pool-1-thread-1", Totals: tot(100*ms, 100*ms, 800*ms)},
			{TID: 102, PID: 100, Comm: "pool-1-thread-2", Totals: tot(100*ms, 100*ms, 800*ms)},
			// Off CPU since 9.8 s, runnable since 9.9 s: 100 ms blocked
			// and 100 ms runnable to close at the snapshot.
			{TID: 103, PID: 100, Comm: "pool-1-thread-3", Totals: tot(100*ms, 100*ms, 600*ms), Current: true,
				OffSince: 9800 * ms, RunnableSince: 9900 * ms, OffState: probe.Sleeping},
			{TID: 201, PID: 200, Comm: "other", Totals: tot(500*ms, 0, 500*ms)},
		},
		Waits: []probe.Wait{
			{PID: 100, TID: 101, State: probe.Sleeping, KernelStack: lockKernel, UserStack: lockUser, Waker: holder, Count: 40, Total: 600 * ms, Runnable: 50 * ms, Max: 30 * ms},
			{PID: 100, TID: 103, State: probe.Sleeping, KernelStack: lockKernel, UserStack: lockUser, Waker: holder, Count: 40, Total: 500 * ms, Runnable: 50 * ms, Max: 30 * ms},
			{PID: 100, TID: 102, State: probe.Sleeping, KernelStack: sleepKernel, UserStack: sleepUser, Count: 20, Total: 200 * ms, Max: 10 * ms},
			{PID: 100, TID: 101, State: probe.Runnable, KernelStack: preemptedK, UserStack: []uint64{0x1030}, Count: 5, Total: 5 * ms, Runnable: 5 * ms, Max: 2 * ms},
			{PID: 200, TID: 201, State: probe.Sleeping, KernelStack: sleepKernel, Count: 1, Total: 500 * ms},
		},
		RunqCPU:     [][probe.RunqKinds]probe.Hist{{h, {}}, {}},
		RunqProcess: map[int][probe.RunqKinds]probe.Hist{100: {h, {}}, 200: {h, {}}},
		Lost:        probe.Lost{UserStackFaults: 3},
	}
	return Input{Snapshot: snap, Symbols: syms, PID: 100, Comm: "app", Duration: time.Second, CPUs: 2,
		Busy:     []evidence.CPUBusy{{CPU: 0, BusyShare: 0.95}, {CPU: 1, BusyShare: 0.5}},
		TasksEnd: map[int][]procfs.Task{100: {{TID: 100, Comm: "app", State: 'S'}, {TID: 104, Comm: "pool-1-thread-4", State: 'S'}}},
		Stacks:   "kernel+user", AttachMethod: "tp_btf"}
}

func TestBuild(t *testing.T) {
	ev := Build(fixture())
	if ev.Target != "pid" || ev.PID != 100 || ev.Comm != "app" || ev.MinBlockNs != 10000 || ev.StackEvery != 1 {
		t.Errorf("header %+v", ev)
	}
	// Thread 201 is another process's; 104 was never seen: asleep all
	// window.
	if ev.Totals.Threads != 5 || ev.Totals.ThreadsUnseen != 1 {
		t.Errorf("threads %d, unseen %d", ev.Totals.Threads, ev.Totals.ThreadsUnseen)
	}
	if len(ev.Pools) != 2 {
		t.Fatalf("pools %+v", ev.Pools)
	}
	p := ev.Pools[0]
	if p.Name != "pool-1-thread-*" || p.Threads != 4 || p.Process != "app" {
		t.Fatalf("pool %+v", p)
	}
	// Three seen threads of 1 s each (103's in-flight wait closed at the
	// snapshot) and one asleep for the whole second.
	if p.SeenNs != int64(4*time.Second) || p.OnCPUNs != int64(300*time.Millisecond) || p.RunnableNs != int64(400*time.Millisecond) ||
		p.BlockedNs != int64(3300*time.Millisecond) {
		t.Errorf("pool times: seen %v on %v runnable %v blocked %v", time.Duration(p.SeenNs), time.Duration(p.OnCPUNs),
			time.Duration(p.RunnableNs), time.Duration(p.BlockedNs))
	}
	if s := p.OnCPUShare + p.RunnableShare + p.BlockedShare; s < 0.999 || s > 1.001 {
		t.Errorf("shares add up to %v", s)
	}
	if p.TopSite != "take_order" || p.TopSiteReason != "lock" || p.TopSiteNs != int64(1000*time.Millisecond) || p.TopSiteThreads != 2 ||
		!strings.Contains(p.TopSiteWaker, "pool-1-thread-2 (finish_order → futex_wake_[k])") {
		t.Errorf("pool's top site %q (%s) %v woken by %q", p.TopSite, p.TopSiteReason, time.Duration(p.TopSiteNs), p.TopSiteWaker)
	}
	if p.MeanRunnableNs != int64(400*time.Millisecond)/30 {
		t.Errorf("mean runnable %v", time.Duration(p.MeanRunnableNs))
	}

	if len(ev.ByReason) != 3 || ev.ByReason[0].Reason != "lock" || ev.ByReason[0].Ns != int64(1100*time.Millisecond) ||
		ev.ByReason[0].TopSite != "take_order" || len(ev.ByReason[0].Sites) != 1 || ev.ByReason[0].Sites[0].Waits != 80 {
		t.Errorf("by reason %+v", ev.ByReason)
	}
	w := ev.Waits[0]
	if w.TID != 101 || w.Reason != "lock" || w.Site != "take_order" || w.Pool != "pool-1-thread-*" || w.Comm != "pool-1-thread-1" ||
		strings.Join(w.Stack, ";") != "worker;take_order;pthread_mutex_lock;__lll_lock_wait;__x64_sys_futex_[k];do_futex_[k];futex_wait_[k];__futex_wait_[k];futex_do_wait_[k]" {
		t.Errorf("top wait %+v", w)
	}
	if w.Waker == nil || w.Waker.Kind != WakerThread || w.Waker.TID != 102 || w.Waker.Site != "finish_order → futex_wake_[k]" ||
		strings.Contains(strings.Join(w.Waker.Stack, ";"), "bpf_prog") {
		t.Errorf("top wait's waker %+v", w.Waker)
	}
	if len(ev.Folded) != 4 || ev.Folded[0].Us != 600000 || ev.Folded[0].Stack != "pool-1-thread-1;worker;take_order;pthread_mutex_lock;__lll_lock_wait;__x64_sys_futex_[k];do_futex_[k];futex_wait_[k];__futex_wait_[k];futex_do_wait_[k]" ||
		ev.Folded[3].Stack != "pool-1-thread-1;compute_total;asm_sysvec_apic_timer_interrupt_[k];preempt_schedule_irq_[k]" {
		t.Errorf("folded %+v", ev.Folded)
	}
	if ev.Totals.KeptNs != int64(1305*time.Millisecond) {
		t.Errorf("kept %v", time.Duration(ev.Totals.KeptNs))
	}

	rq := ev.RunQueue.All
	if rq.Count != 100 || rq.P50Ns < 1024 || rq.P50Ns >= 2048 || rq.P99Ns < 1<<20 || rq.P99Ns >= 1<<21 {
		t.Errorf("run queue: count %d p50 %v p99 %v", rq.Count, rq.P50Ns, rq.P99Ns)
	}
	if len(ev.RunQueue.PerProc) != 1 || ev.RunQueue.PerProc[0].PID != 100 || len(ev.RunQueue.PerCPU) != 1 {
		t.Errorf("per process %+v, per CPU %+v", ev.RunQueue.PerProc, ev.RunQueue.PerCPU)
	}
	if ev.Lost.UserStackFaults != 3 {
		t.Errorf("lost %+v", ev.Lost)
	}
}

// Stacks taken at 1 in N switches: the waits and folded stacks scale by
// N and the evidence says they are estimates.
func TestBuildScalesSampledStacks(t *testing.T) {
	in := fixture()
	in.Snapshot.StackEvery = 4
	ev := Build(in)
	if ev.StackEvery != 4 || ev.Waits[0].Count != 160 || ev.Waits[0].TotalNs != int64(2400*time.Millisecond) || ev.Folded[0].Us != 2400000 {
		t.Errorf("sampled: every %d, top wait %d × %v, folded %d µs", ev.StackEvery, ev.Waits[0].Count, time.Duration(ev.Waits[0].TotalNs), ev.Folded[0].Us)
	}
	if !strings.Contains(strings.Join(ev.Warnings, "\n"), "1 in 4") {
		t.Errorf("warnings %q", ev.Warnings)
	}
	// A system-wide run keeps every process.
	in.PID = 0
	if ev := Build(in); ev.Target != "all" || len(ev.Pools) != 3 || len(ev.RunQueue.PerProc) != 2 {
		t.Errorf("system-wide: target %s, %d pools, %d processes", ev.Target, len(ev.Pools), len(ev.RunQueue.PerProc))
	}
}

// A thread the probe never saw is counted from /proc: from its schedstat
// when both ends of the window have it, else asleep for the whole window
// in the state /proc shows.
func TestUnseenThreadsFromProc(t *testing.T) {
	in := fixture()
	in.TasksStart = map[int][]procfs.Task{100: {{TID: 104, Sched: &procfs.SchedStat{OnCPU: time.Second, RunQueueWait: time.Second}}}}
	in.TasksEnd[100][1].Sched = &procfs.SchedStat{OnCPU: 1100 * time.Millisecond, RunQueueWait: 1200 * time.Millisecond}
	var unseen threadTime
	for _, tt := range threadTimes(in) {
		if tt.tid == 104 {
			unseen = tt
		}
	}
	if !unseen.unseen || unseen.on != 100*time.Millisecond || unseen.runnable != 200*time.Millisecond || unseen.blocked[probe.Sleeping] != 700*time.Millisecond {
		t.Errorf("unseen thread %+v", unseen)
	}
}
