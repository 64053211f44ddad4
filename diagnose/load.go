package diagnose

import (
	"fmt"

	"github.com/perfscope/perfscope/evidence"
)

// LittlesLaw is why the knee's cause is read from what grew: the
// requests in a system are its throughput times their latency.
const LittlesLaw = "Little's law (J. D. C. Little, 1961): requests in flight = throughput × latency; once throughput is flat, every " +
	"request added by concurrency waits somewhere, and where the service's threads' waiting grew is where they wait"

// LoadThresholds are the knee rule's thresholds, which a recipe may
// override.
var LoadThresholds = struct {
	Gain, P99Rise, Busy, Runnable, PoolOnCPU, Growth Threshold
}{
	// 10 %: a doubling of the concurrency that buys less than a tenth
	// more requests/s bought nothing measurable on a shared host, whose
	// level-to-level noise is a few per cent.
	Gain: Threshold{Name: "knee_gain", Default: 0.1, Min: 0, Max: 1,
		Doc: "throughput gain from one level to the next, as a share of the concurrency added, below which throughput stopped rising (0.1: 10 % for a doubling)"},
	P99Rise: Threshold{Name: "knee_p99_rise", Default: 0.2, Min: 0, Max: 100,
		Doc: "rise of p99 latency at that level (0.2: 20 %) that makes it a knee rather than a client-bound plateau"},
	// 80 %: a queue served at 80 % utilization waits on average four
	// service times (M/M/1: ρ/(1−ρ)); over seconds, on a few CPUs, that is
	// saturation.
	Busy: Threshold{Name: "knee_busy_share", Default: 0.8, Min: 0, Max: 1,
		Doc: "the CPUs' mean busy share from which they count as saturated"},
	Runnable: Threshold{Name: "knee_cpu_wait_share", Default: 0.3, Min: 0, Max: 1,
		Doc: "share of the time the service's threads wanted a CPU that they waited for one (runnable over on CPU + runnable) that makes the CPUs the cause"},
	PoolOnCPU: Threshold{Name: "knee_pool_on_cpu_share", Default: 0.9, Min: 0, Max: 1,
		Doc: "on-CPU share of the service's busiest pool from which its threads are the limit (a single-threaded event loop)"},
	Growth: Threshold{Name: "knee_growth_threads", Default: 0.5, Min: 0, Max: 1e6,
		Doc: "growth, in threads waiting on average, that a wait needs to be where the added requests waited"},
}

// LoadRules are the rules of `perfscope load`.
var LoadRules = []Rule[evidence.Load]{
	{ID: "load.knee", CheckTuned: checkKnee, Tunables: []Threshold{LoadThresholds.Gain, LoadThresholds.P99Rise, LoadThresholds.Busy,
		LoadThresholds.Runnable, LoadThresholds.PoolOnCPU, LoadThresholds.Growth}},
}

// The knee's reasons.
const (
	KneeCPU     = "cpu"
	KneeLock    = "lock"
	KneePool    = "pool"
	KneeNetwork = "network"
	KneeDisk    = "disk"
	KneeUnknown = "unknown"
)

// LoadKnee finds where the load stopped scaling: the first level whose
// throughput rose less than the Gain threshold of the concurrency it
// added (gain / added, both relative to the level before) while its p99
// rose by P99Rise or more. The knee is the level before it: the most
// concurrency that still bought throughput. nil when every level scaled
// (or fewer than two levels ran).
func LoadKnee(ev evidence.Load, t Thresholds) *evidence.LoadKnee {
	lv := ev.Levels
	for i := 1; i < len(lv); i++ {
		k, f := lv[i-1], lv[i]
		if k.RPS <= 0 || k.Concurrency <= 0 || f.Concurrency <= k.Concurrency {
			continue
		}
		added := float64(f.Concurrency)/float64(k.Concurrency) - 1
		gain := (f.RPS/k.RPS - 1) / added
		if gain >= t.Get(LoadThresholds.Gain) || float64(f.P99Ns) < (1+t.Get(LoadThresholds.P99Rise))*float64(k.P99Ns) {
			continue
		}
		knee := &evidence.LoadKnee{Concurrency: k.Concurrency, Flat: f.Concurrency, RPS: k.RPS, FlatRPS: f.RPS, Gain: gain,
			P99Ns: k.P99Ns, FlatP99Ns: f.P99Ns}
		knee.Reason, knee.Site, knee.Why = kneeCause(k, f, t)
		return knee
	}
	return nil
}

// kneeCause says why the flat level f did not scale past the knee k:
// where the service's threads' waiting grew (the added requests wait
// there), else what the CPUs and threads show.
func kneeCause(k, f evidence.LoadLevel, t Thresholds) (reason, site, why string) {
	th, tk := f.Threads, k.Threads
	busy := f.CPUBusy >= 0 && f.CPUBusy >= t.Get(LoadThresholds.Busy)
	if th == nil || tk == nil {
		if busy {
			return KneeCPU, "", fmt.Sprintf("the CPUs were %s busy (the off-CPU probe did not run: the threads were not seen)", pct(f.CPUBusy))
		}
		return KneeUnknown, "", "the off-CPU probe did not run: where the threads waited was not seen"
	}
	// What grew most from the knee to the flat level, in threads.
	type growth struct {
		reason, site, waker string
		threads             float64
	}
	best := growth{reason: "runnable", threads: th.RunnableThreads - tk.RunnableThreads}
	before := map[[2]string]float64{}
	for _, w := range tk.Waits {
		before[[2]string{w.Reason, w.Site}] = w.Threads
	}
	for _, w := range th.Waits {
		if g := w.Threads - before[[2]string{w.Reason, w.Site}]; g > best.threads {
			best = growth{w.Reason, w.Site, w.Waker, g}
		}
	}
	grewBy := fmt.Sprintf("%.1f threads on average (%s at concurrency %d, %s at %d)", best.threads,
		waitThreads(tk, best.reason, best.site), k.Concurrency, waitThreads(th, best.reason, best.site), f.Concurrency)
	if best.threads >= t.Get(LoadThresholds.Growth) {
		switch best.reason {
		case "runnable", "preempted":
			return KneeCPU, "", fmt.Sprintf("the added requests waited for a CPU: runnable threads grew by %.1f (runnable %s of the threads' time, run-queue p99 %s, CPUs %s busy)",
				best.threads, pct(th.RunnableShare), dur(float64(th.RunQueueP99Ns)), busyText(f.CPUBusy))
		case "lock":
			why = fmt.Sprintf("the added requests waited at a lock: threads waiting at %s grew by %s", best.site, grewBy)
			return KneeLock, best.site, withWaker(why, best.waker)
		case "condition":
			why = fmt.Sprintf("the added requests waited for a bounded resource (a condition variable at %s: a connection or worker pool handing out slots) — grew by %s", best.site, grewBy)
			return KneePool, best.site, withWaker(why, best.waker)
		case "socket-read", "socket-write", "socket-accept":
			why = fmt.Sprintf("the added requests waited on sockets (%s at %s): grew by %s — a downstream service or the network is the limit", best.reason, best.site, grewBy)
			return KneeNetwork, best.site, withWaker(why, best.waker)
		case "disk-io", "page-fault":
			why = fmt.Sprintf("the added requests waited for the disk (%s at %s): grew by %s", best.reason, best.site, grewBy)
			return KneeDisk, best.site, why
		}
	}
	switch {
	case busy:
		return KneeCPU, "", fmt.Sprintf("the CPUs were %s busy at concurrency %d (the service used %s CPUs, perfscope's load generator %s)",
			pct(f.CPUBusy), f.Concurrency, cpus(f.ServiceCPU), cpus(f.LoadGeneratorCPU))
	case th.CPUWaitShare >= t.Get(LoadThresholds.Runnable):
		return KneeCPU, "", fmt.Sprintf("of the time the service's threads wanted a CPU they waited for one %s (run-queue p99 %s; CPUs %s busy)",
			pct(th.CPUWaitShare), dur(float64(th.RunQueueP99Ns)), busyText(f.CPUBusy))
	case th.BusiestPool != nil && th.BusiestPool.OnCPUShare >= t.Get(LoadThresholds.PoolOnCPU):
		p := th.BusiestPool
		return KneeCPU, "", fmt.Sprintf("the service's %s pool (%d threads) was on CPU %s of its time: its threads are the limit, not the machine's CPUs (%s busy)",
			p.Name, p.Threads, pct(p.OnCPUShare), busyText(f.CPUBusy))
	case th.CPUWaitShare < t.Get(LoadThresholds.Runnable)/2 && th.OnCPUShare < t.Get(LoadThresholds.PoolOnCPU):
		return KneePool, "", fmt.Sprintf("no wait of the service's threads grew by %.1f threads or more and few were runnable (%s): the added requests "+
			"queued before a thread took them — a bounded worker pool or connection limit (the threads were on CPU %s, blocked %s of their time)",
			t.Get(LoadThresholds.Growth), pct(th.RunnableShare), pct(th.OnCPUShare), pct(th.BlockedShare))
	}
	return KneeUnknown, "", fmt.Sprintf("no wait grew, the CPUs were %s busy and the threads on CPU %s, runnable %s, blocked %s of their time",
		busyText(f.CPUBusy), pct(th.OnCPUShare), pct(th.RunnableShare), pct(th.BlockedShare))
}

func waitThreads(th *evidence.LoadThreads, reason, site string) string {
	for _, w := range th.Waits {
		if w.Reason == reason && w.Site == site {
			return fmt.Sprintf("%.1f", w.Threads)
		}
	}
	return "0"
}

func withWaker(why, waker string) string {
	if waker == "" {
		return why
	}
	return why + "; woken by " + waker
}

func busyText(b float64) string {
	if b < 0 {
		return "unknown"
	}
	return pct(b)
}

func cpus(c float64) string {
	if c < 0 {
		return "an unknown number of"
	}
	return fmt.Sprintf("%.2f", c)
}

// checkKnee names the knee and its cause.
func checkKnee(ev evidence.Load, t Thresholds) *Finding {
	k := LoadKnee(ev, t)
	if k == nil {
		return nil
	}
	var flat evidence.LoadLevel
	for _, l := range ev.Levels {
		if l.Concurrency == k.Flat {
			flat = l
		}
	}
	f := &Finding{
		Severity: Warn,
		Title: fmt.Sprintf("throughput stopped rising at concurrency %d (%.0f requests/s): at %d it served %.0f/s while p99 went from %s to %s — %s",
			k.Concurrency, k.RPS, k.Flat, k.FlatRPS, dur(float64(k.P99Ns)), dur(float64(k.FlatP99Ns)), kneeTitle(k)),
		Evidence: []string{
			fmt.Sprintf("from concurrency %d to %d requests/s went from %.0f to %.0f: %.0f %% of what the added concurrency would give if it scaled",
				k.Concurrency, k.Flat, k.RPS, k.FlatRPS, 100*k.Gain),
			"why: " + k.Why,
		},
	}
	if flat.ServiceCPU >= 0 || flat.CPUBusy >= 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("at concurrency %d the service used %s CPUs of %d; the machine's CPUs were %s busy",
			k.Flat, cpus(flat.ServiceCPU), ev.CPUs, busyText(flat.CPUBusy)))
	}
	if flat.Errors > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d of the %d requests at concurrency %d failed or were answered outside 2xx (first: %s)",
			flat.Errors, flat.Requests, k.Flat, flat.FirstError))
	}
	f.Impact = 1 - max(0, min(flat.CPUBusy, 1)) // the CPU left unused when it stopped scaling
	rec := Recommendation{Kind: KindAdvice, Reference: LittlesLaw + "; " + RPCLoadTest}
	switch k.Reason {
	case KneeCPU:
		f.Severity = Info
		if flat.Threads != nil {
			f.Impact = min(flat.Threads.CPUWaitShare, 1)
		}
		rec.Why = "The service is CPU-bound at this concurrency: more concurrent requests only queue for the CPUs, adding latency."
		rec.Apply = []string{
			fmt.Sprintf("limit the concurrent requests per instance near %d (its pool, a connection limit, the load balancer's)", k.Concurrency),
			"perfscope profile --pid PID --duration 10s   # remove CPU work: it raises the knee",
			"add CPUs or instances to raise throughput past it",
		}
		rec.Expected = "Throughput stays where the CPUs cap it; latency falls back to the knee's once concurrency does not exceed it."
		rec.Caveats = []string{"on a small machine the load generator (perfscope itself) competes with the service for the same CPUs: " +
			"its own CPU lowers the knee"}
	case KneeLock:
		rec.Kind = KindCode
		rec.Why = fmt.Sprintf("Requests take turns at the lock at %s: the service runs about as fast as one thread holding it, whatever the concurrency.", k.Site)
		rec.Apply = []string{fmt.Sprintf("perfscope offcpu --pid PID --exact   # the lock's waiters and the holder that wakes them (%s)", k.Site)}
		rec.Code = []CodeSketch{{Lang: "c", Code: "/* hold the lock for the shared update only, or shard it */\nprepare(req);\npthread_mutex_lock(&m);\nupdate_shared(req);\npthread_mutex_unlock(&m);"}}
		rec.Expected = "Shortening the critical section or sharding the lock moves the knee up until the CPUs are the limit."
		rec.Reference = GreggOffCPU + "; " + LittlesLaw
	case KneePool:
		rec.Why = "The service's threads were not where the added requests waited: they queued for a worker, a connection or a permit before any thread took them."
		rec.Apply = []string{"raise the bounded pool or limit (worker threads, connection pool, max connections) while CPUs stay below saturation",
			"perfscope offcpu --pid PID   # what the pool's threads wait for while they hold a request"}
		rec.Expected = "A larger pool raises throughput while the CPUs have room; past that the knee moves to the CPUs."
	case KneeNetwork:
		rec.Why = fmt.Sprintf("The added requests waited on sockets (%s): a downstream service, or the network between, is the limit.", k.Site)
		rec.Apply = []string{"perfscope tcp --pid PID   # the service's connections: queues, retransmits, windows"}
		rec.Expected = "Throughput rises with the downstream's capacity, not this service's concurrency."
	case KneeDisk:
		rec.Why = "The added requests waited for the disk."
		rec.Apply = []string{"perfscope offcpu --pid PID   # the disk waits' stacks"}
		rec.Expected = "Throughput rises with the disk's throughput or with fewer synchronous reads and writes per request."
	default:
		f.Severity = Info
		rec.Why = "The service stopped scaling, but its threads do not show where the added requests wait (a runtime's own scheduler, an accept queue, the client)."
		rec.Apply = []string{"perfscope go --pid PID   # for a Go service: goroutines wait in the runtime, not in threads",
			"perfscope tcp --pid PID   # accept queues"}
		rec.Expected = "Finding the wait names the limit."
	}
	f.Recommendation = rec
	return f
}

func kneeTitle(k *evidence.LoadKnee) string {
	switch k.Reason {
	case KneeCPU:
		return "the CPUs are saturated"
	case KneeLock:
		return "a lock at " + k.Site
	case KneePool:
		return "a bounded pool"
	case KneeNetwork:
		return "waits on sockets at " + k.Site
	case KneeDisk:
		return "the disk"
	}
	return "the cause is not seen in the service's threads"
}
