package diagnose

import (
	"fmt"
	"sort"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// The sources the off-CPU rules cite, by what they measured.
const (
	// GreggOffCPU is the method: off-CPU time by stack, and who woke the
	// waits.
	GreggOffCPU = "Brendan Gregg, \"Off-CPU Analysis\" (brendangregg.com/offcpuanalysis.html), and bcc's offcputime and offwaketime, " +
		"which pair each blocked stack with the waker's"
	// BccRunqlat is run-queue latency.
	BccRunqlat = "bcc's runqlat (Brendan Gregg): the time from a thread's wakeup until it runs, as a log2 histogram; " +
		"its tail grows once CPUs have more runnable threads than they can run"
	// RPCLoadTest is the load test of an RPC provider at rising
	// concurrency.
	RPCLoadTest = "a load test of an RPC (Dubbo) provider on 2 vCPUs driven with ab: with 1 KB payloads both cores ran 98-99 % busy and the " +
		"provider served 8,500-9,000 requests/s however many consumers were added (p95 4-6 ms); with 100 KB payloads its 200-thread pool " +
		"sat mostly WAITING in SynchronousQueue.take, raising the pool size did not help, and 20 concurrent requests instead of 10 doubled " +
		"p95 (23 to 45 ms) at the same 1,000-1,100 requests/s: more concurrency is not better"
)

// OffCPUThresholds are the off-CPU rules' thresholds, which a recipe may
// override.
var OffCPUThresholds = struct {
	RunqP99Ms, RunqP99CritMs, Busy, MinRunqWaits Threshold
	LockShare, LockPoolShare                     Threshold
	PoolRunnable, PoolRunnableCrit               Threshold
}{
	// 1 ms: a healthy server's run-queue p99 is tens to hundreds of µs;
	// a wakeup that waits a millisecond for a CPU in one case of a hundred
	// shows in the latency of millisecond requests.
	RunqP99Ms: Threshold{Name: "runq_p99_ms", Default: 1, Min: 0, Max: 10000,
		Doc: "run-queue latency p99 on a busy CPU, in ms, that makes a warning"},
	RunqP99CritMs: Threshold{Name: "runq_p99_crit_ms", Default: 10, Min: 0, Max: 10000,
		Doc: "the p99, in ms, that makes it critical"},
	Busy: Threshold{Name: "busy_share", Default: 0.9, Min: 0, Max: 1,
		Doc: "a CPU's busy share (everything but idle and iowait) from which it counts as busy"},
	MinRunqWaits: Threshold{Name: "min_runq_waits", Default: 50, Min: 1, Max: 1e9,
		Doc: "run-queue waits a CPU needs for its p99 to be judged"},
	LockShare: Threshold{Name: "lock_share", Default: 0.5, Min: 0, Max: 1,
		Doc: "share of a pool's blocked time in one lock call site that makes it serialize the pool"},
	LockPoolShare: Threshold{Name: "lock_pool_share", Default: 0.1, Min: 0, Max: 1,
		Doc: "share of the pool's threads' time waiting at that site below which the lock is not worth a finding"},
	PoolRunnable: Threshold{Name: "pool_runnable_share", Default: 0.2, Min: 0, Max: 1,
		Doc: "share of a pool's time runnable but waiting for a CPU that makes it too large for the CPUs (warning)"},
	PoolRunnableCrit: Threshold{Name: "pool_runnable_crit_share", Default: 0.5, Min: 0, Max: 1,
		Doc: "the share that makes it critical"},
}

// OffCPURules are the rules of an off-CPU run.
var OffCPURules = []Rule[evidence.OffCPU]{
	{ID: "offcpu.cpu-saturation", CheckTuned: checkCPUSaturation, Tunables: []Threshold{OffCPUThresholds.RunqP99Ms,
		OffCPUThresholds.RunqP99CritMs, OffCPUThresholds.Busy, OffCPUThresholds.MinRunqWaits}},
	{ID: "offcpu.lock-serializes-pool", CheckTuned: checkLockSerializesPool, Tunables: []Threshold{OffCPUThresholds.LockShare,
		OffCPUThresholds.LockPoolShare}},
	{ID: "offcpu.pool-too-large", CheckTuned: checkPoolTooLarge, Tunables: []Threshold{OffCPUThresholds.PoolRunnable,
		OffCPUThresholds.PoolRunnableCrit}},
}

func dur(ns float64) string { return time.Duration(ns).Round(time.Microsecond).String() }

// seenNs is the watched threads' time the run accounts for.
func seenNs(t evidence.OffCPUTotals) int64 {
	return t.OnCPUNs + t.RunnableNs + t.BlockedNs + t.UnknownNs
}

// checkCPUSaturation: CPUs that were busy while threads queued for them:
// run-queue p99 above the threshold on CPUs at least Busy busy.
func checkCPUSaturation(ev evidence.OffCPU, t Thresholds) *Finding {
	busy := map[int]float64{}
	for _, b := range ev.CPUBusy {
		busy[b.CPU] = b.BusyShare
	}
	if len(busy) == 0 {
		return nil // not known whether the CPUs were busy
	}
	warn, crit := t.Get(OffCPUThresholds.RunqP99Ms)*1e6, t.Get(OffCPUThresholds.RunqP99CritMs)*1e6
	type hot struct {
		cpu  int
		busy float64
		rq   evidence.LatencyHist
	}
	var hots []hot
	for _, c := range ev.RunQueue.PerCPU {
		b, ok := busy[c.CPU]
		if !ok || b < t.Get(OffCPUThresholds.Busy) || float64(c.All.Count) < t.Get(OffCPUThresholds.MinRunqWaits) || c.All.P99Ns < warn {
			continue
		}
		hots = append(hots, hot{c.CPU, b, c.All})
	}
	if len(hots) == 0 {
		return nil
	}
	sort.Slice(hots, func(i, j int) bool { return hots[i].rq.P99Ns > hots[j].rq.P99Ns })
	seen := seenNs(ev.Totals)
	share := 0.0
	if seen > 0 {
		share = float64(ev.Totals.RunnableNs) / float64(seen)
	}
	f := &Finding{
		Severity: Warn,
		Title: fmt.Sprintf("%d of %d CPUs saturated: threads waited for a CPU with a run-queue p99 of %s at %s busy",
			len(hots), max(ev.CPUs, len(busy)), dur(hots[0].rq.P99Ns), pct(hots[0].busy)),
		Impact: min(share, 1),
	}
	if hots[0].rq.P99Ns >= crit && 2*len(hots) >= len(busy) {
		f.Severity = Crit
	}
	for i, h := range hots {
		if i == 4 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("and %d more CPUs", len(hots)-4))
			break
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("CPU %d: %s busy, run-queue p99 %s, p50 %s over %d waits (wakeup and preemption)",
			h.cpu, pct(h.busy), dur(h.rq.P99Ns), dur(h.rq.P50Ns), h.rq.Count))
	}
	if seen > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the watched threads were runnable but waiting for a CPU %s of their time (%s of %s)",
			pct(share), dur(float64(ev.Totals.RunnableNs)), dur(float64(seen))))
	}
	if p := mostRunnable(ev.Pools); p != nil && p.RunnableNs > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the most runnable pool: %s of %s (%d threads), runnable %s, on CPU %s",
			p.Name, p.Process, p.Threads, pct(p.RunnableShare), pct(p.OnCPUShare)))
	}
	f.Recommendation = Recommendation{
		Kind: KindAdvice,
		Why: "The CPUs had more runnable threads than they could run: every wakeup queued behind others, which adds its wait to every " +
			"request's latency without adding throughput.",
		Apply: []string{
			"perfscope profile --pid PID --duration 10s   # where the CPU time goes: remove work first",
			"reduce the runnable threads: smaller pools, fewer concurrent requests per instance, or more CPUs/instances",
		},
		Expected: "The run-queue tail shrinks to tens of µs once runnable threads fit the CPUs; throughput stays where the CPUs cap it " +
			"(the RPC provider served the same 8,500-9,000 requests/s at full CPU whatever the load).",
		Reference: BccRunqlat + "; " + RPCLoadTest,
	}
	return f
}

func mostRunnable(pools []evidence.ThreadPool) *evidence.ThreadPool {
	var best *evidence.ThreadPool
	for i := range pools {
		if best == nil || pools[i].RunnableNs > best.RunnableNs {
			best = &pools[i]
		}
	}
	return best
}

// checkLockSerializesPool: a pool of threads most of whose blocked time
// is in one lock call site where several of them waited: they take turns
// at one lock.
func checkLockSerializesPool(ev evidence.OffCPU, t Thresholds) *Finding {
	var worst *evidence.ThreadPool
	for i := range ev.Pools {
		p := &ev.Pools[i]
		if p.Threads < 2 || p.TopSiteThreads < 2 || p.TopSiteReason != "lock" || p.SeenNs <= 0 || p.TopSiteShare < t.Get(OffCPUThresholds.LockShare) ||
			float64(p.TopSiteNs)/float64(p.SeenNs) < t.Get(OffCPUThresholds.LockPoolShare) {
			continue
		}
		if worst == nil || p.TopSiteNs > worst.TopSiteNs {
			worst = p
		}
	}
	if worst == nil {
		return nil
	}
	p := worst
	lost := float64(p.TopSiteNs) / float64(p.SeenNs)
	f := &Finding{
		Severity: Warn,
		Title: fmt.Sprintf("a lock serializes the %s pool of %s: %s of its blocked time is at %s",
			p.Name, p.Process, pct(p.TopSiteShare), p.TopSite),
		Evidence: []string{
			fmt.Sprintf("%s (pid %d, %d threads): %d of them waited %s at %s, %s of the %s the pool was blocked and %s of its threads' time",
				p.Name, p.PID, p.Threads, p.TopSiteThreads, dur(float64(p.TopSiteNs)), p.TopSite, pct(p.TopSiteShare), dur(float64(p.BlockedNs)), pct(lost)),
			fmt.Sprintf("the pool was on CPU %s, runnable %s, blocked %s of its time", pct(p.OnCPUShare), pct(p.RunnableShare), pct(p.BlockedShare)),
		},
		Impact: min(lost, 1),
	}
	if p.TopSiteWaker != "" {
		f.Evidence = append(f.Evidence, "the waits were woken by "+p.TopSiteWaker+": the lock's holder releasing it")
	}
	if lost >= 0.5 {
		f.Severity = Crit
	}
	if ev.StackEvery > 1 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("per-site times are estimates from stacks taken at 1 in %d switches", ev.StackEvery))
	}
	f.Recommendation = Recommendation{
		Kind: KindCode,
		Why: "The pool's threads take turns at one lock: while one holds it the others sleep, so the pool runs about as fast as a single " +
			"thread holding it, whatever its size.",
		Code: []CodeSketch{{Lang: "c", Code: "/* hold the lock for the shared update only */\nprepare(req);            /* outside the lock */\n" +
			"pthread_mutex_lock(&m);\nupdate_shared(req);\npthread_mutex_unlock(&m);\n/* or one lock per shard: &locks[hash(key) % NSHARDS] */"}},
		Expected: "Shortening the critical section or splitting the lock lets the pool's threads run in parallel: the lock's share of the " +
			"pool's time falls with it. The waker's stack (data.waits[].waker) shows where the holder spends the time it holds the lock.",
		Reference: GreggOffCPU,
	}
	return f
}

// checkPoolTooLarge: a pool with more threads than CPUs whose threads
// spend a large share of their time runnable, waiting for a CPU: with N
// runnable threads on C CPUs each waits about 1 − C/N of the time it
// would run.
func checkPoolTooLarge(ev evidence.OffCPU, t Thresholds) *Finding {
	if ev.CPUs <= 0 {
		return nil
	}
	var worst *evidence.ThreadPool
	for i := range ev.Pools {
		p := &ev.Pools[i]
		if p.Threads <= ev.CPUs || p.RunnableShare < t.Get(OffCPUThresholds.PoolRunnable) {
			continue
		}
		if worst == nil || p.RunnableNs > worst.RunnableNs {
			worst = p
		}
	}
	if worst == nil {
		return nil
	}
	p := worst
	active := p.OnCPUShare + p.RunnableShare
	f := &Finding{
		Severity: Warn,
		Title: fmt.Sprintf("the %s pool of %s is too large for the CPUs: %d threads on %d CPUs waited for one %s of their time",
			p.Name, p.Process, p.Threads, ev.CPUs, pct(p.RunnableShare)),
		Evidence: []string{
			fmt.Sprintf("%s (pid %d): %d threads, on CPU %s, runnable %s (%d waits for a CPU, %s each on average), blocked %s",
				p.Name, p.PID, p.Threads, pct(p.OnCPUShare), pct(p.RunnableShare), p.RunnableWaits, dur(float64(p.MeanRunnableNs)), pct(p.BlockedShare)),
		},
		Impact: min(p.RunnableShare, 1),
	}
	if active > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("of the time its threads wanted a CPU they waited for one %s: %d always-runnable threads on %d CPUs would wait %s",
			pct(p.RunnableShare/active), p.Threads, ev.CPUs, pct(1-float64(ev.CPUs)/float64(p.Threads))))
	}
	if p.RunnableShare >= t.Get(OffCPUThresholds.PoolRunnableCrit) {
		f.Severity = Crit
	}
	f.Recommendation = Recommendation{
		Kind: KindAdvice,
		Why: "More runnable threads than CPUs do not add throughput: they queue for the CPUs, and each request's latency grows by the " +
			"queue's wait plus the context switches between them.",
		Apply: []string{
			fmt.Sprintf("size the %s pool near the CPUs it can use (%d here) for CPU-bound work, or limit the concurrent requests it is given", p.Name, ev.CPUs),
			"find the concurrency where throughput stops rising: step the load's concurrency and watch requests/s against p99",
		},
		Expected: "Throughput stays where the CPUs cap it and latency falls with the queue: the RPC provider's throughput did not move " +
			"when its pool or the clients' concurrency grew, its latency did.",
		Reference: RPCLoadTest,
		Caveats: []string{"a pool whose threads also block on I/O needs more threads than CPUs: size it so that its runnable share stays low, " +
			"not to the CPU count"},
	}
	return f
}
