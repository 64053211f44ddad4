package evidence

// OffCPU is the result of an off-CPU run (`perfscope offcpu`'s data, and
// the off-CPU section of `profile --off-cpu`): where the watched threads
// waited, who woke them, how long they waited for a CPU, and each thread
// pool's time on CPU, runnable and blocked.
type OffCPU struct {
	// Target is "all" or "pid".
	Target string `json:"target"`
	PID    int    `json:"pid,omitempty"`
	// Comm is the target process's name (pid runs).
	Comm       string `json:"comm,omitempty"`
	DurationNs int64  `json:"duration_ns"`
	CPUs       int    `json:"cpus"`
	// AttachMethod is how the probe attached (tp_btf, raw_tp, tracepoint).
	AttachMethod string `json:"attach_method"`
	// Stacks is "kernel+user", "kernel" or "user".
	Stacks string `json:"stacks"`
	// MinBlockNs is the shortest wait kept by stack; shorter ones count in
	// the thread and pool totals only (Totals.ShortWaits).
	MinBlockNs int64 `json:"min_block_ns"`
	// StackEvery: stacks were taken at 1 in StackEvery switches and the
	// waits table scaled by it (1: every switch, exact).
	StackEvery int `json:"stack_every"`
	// CPUBusy is each CPU's busy share over the window from /proc/stat
	// (everything but idle and iowait); nil when it could not be read.
	CPUBusy []CPUBusy    `json:"cpu_busy"`
	Totals  OffCPUTotals `json:"totals"`
	// ByReason splits the waits kept by stack by why the thread waited,
	// largest first.
	ByReason []OffCPUReason `json:"by_reason"`
	// Waits are the longest waits by stack (at most the run's --top),
	// largest total first.
	Waits []OffCPUWait `json:"waits"`
	// Pools are the watched threads grouped by name pattern and process,
	// largest first by time seen.
	Pools    []ThreadPool `json:"pools"`
	RunQueue RunQueue     `json:"run_queue"`
	// Folded holds every wait kept by stack in FlameGraph's folded form
	// (root first: thread name, user frames, kernel frames), with its
	// microseconds off CPU as bcc's offcputime -f prints them.
	Folded []FoldedTime `json:"folded"`
	Lost   OffCPULost   `json:"lost"`
	// Programs are the probe's programs' own counts and per-run times
	// (self-timed: 1 in 64 runs), per tracepoint.
	Programs []ProgramCost `json:"programs,omitempty"`
	// Coverage, when the overhead budget attached the sched tracepoints
	// in sampling windows only, says how much of the run they covered:
	// every time above is of those windows (not scaled). Absent: attached
	// the whole run.
	Coverage *Estimate `json:"coverage,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
}

// CPUBusy is one CPU's busy share of the window.
type CPUBusy struct {
	CPU       int     `json:"cpu"`
	BusyShare float64 `json:"busy_share"`
}

// OffCPUTotals sums every watched thread's time over the window. On CPU,
// runnable, blocked and unknown add up to the time the threads were seen.
type OffCPUTotals struct {
	Threads int `json:"threads"`
	// ThreadsUnseen are threads of the watched processes that never
	// switched while the probe watched: asleep (or running) the whole
	// window, counted from /proc.
	ThreadsUnseen int   `json:"threads_unseen"`
	OnCPUNs       int64 `json:"on_cpu_ns"`
	// RunnableNs is time waiting for a CPU: after a wakeup or a
	// preemption.
	RunnableNs int64 `json:"runnable_ns"`
	BlockedNs  int64 `json:"blocked_ns"`
	// BlockedByState splits BlockedNs by the state the threads left the
	// CPU in: sleeping (S), uninterruptible (D), idle (I), other.
	BlockedByState map[string]int64 `json:"blocked_by_state"`
	// UnknownNs is time off CPU before a thread was first seen, in a state
	// the probe did not see.
	UnknownNs int64 `json:"unknown_ns"`
	// Waits is every off-CPU interval timed; ShortWaits of them were
	// shorter than MinBlockNs (ShortNs in all) and are in no table.
	Waits      uint64 `json:"waits"`
	ShortWaits uint64 `json:"short_waits"`
	ShortNs    int64  `json:"short_ns"`
	// KeptNs is the off-CPU time of the waits kept by stack (Folded's sum,
	// in nanoseconds).
	KeptNs int64 `json:"kept_ns"`
}

// OffCPUReason is the off-CPU time of one reason.
type OffCPUReason struct {
	// Reason: preempted, lock, condition, idle, socket-read,
	// socket-accept, socket-write, poll, disk-io, page-fault, sleep, pipe,
	// child, signal, other.
	Reason string `json:"reason"`
	Ns     int64  `json:"ns"`
	Waits  uint64 `json:"waits"`
	// Share is Ns over Totals.KeptNs.
	Share float64 `json:"share"`
	// TopSite is where most of it waited; Sites the sites with the most
	// of it (at most five), largest first.
	TopSite string       `json:"top_site"`
	Sites   []OffCPUSite `json:"sites"`
}

// OffCPUSite is one call site's off-CPU time.
type OffCPUSite struct {
	Site  string `json:"site"`
	Ns    int64  `json:"ns"`
	Waits uint64 `json:"waits"`
}

// OffCPUWait is one thread's waits with one stack, state and waker.
type OffCPUWait struct {
	PID  int    `json:"pid"`
	TID  int    `json:"tid"`
	Comm string `json:"comm"`
	// Pool is the thread's pool name (ThreadPool.Name).
	Pool string `json:"pool"`
	// State is the state the thread left the CPU in: runnable, sleeping,
	// uninterruptible, idle, other.
	State  string `json:"state"`
	Reason string `json:"reason"`
	// Site is the waiting call site: the innermost application frame, or
	// the kernel function that waited when there is none.
	Site  string `json:"site"`
	Count uint64 `json:"count"`
	// TotalNs is switch-out to switch-in; RunnableNs the part spent
	// waiting for a CPU after the wakeup; MaxNs the longest one.
	TotalNs    int64 `json:"total_ns"`
	RunnableNs int64 `json:"runnable_ns"`
	MaxNs      int64 `json:"max_ns"`
	// Stack is root first: user frames, then kernel frames.
	Stack []string     `json:"stack"`
	Waker *OffCPUWaker `json:"waker,omitempty"`
}

// OffCPUWaker is who woke a wait, as bcc's offwaketime shows it.
type OffCPUWaker struct {
	PID  int    `json:"pid"`
	TID  int    `json:"tid"`
	Comm string `json:"comm"`
	// Kind is "thread" (a thread's own call: a futex wake, a write),
	// "softirq" (a softirq run in that thread's context, or in
	// ksoftirqd: a packet's delivery) or "interrupt" (a hardware
	// interrupt such as a timer's, in whatever ran then).
	Kind string `json:"kind"`
	// Site is what woke it: the kernel function that did (futex_wake,
	// sock_def_readable, hrtimer_wakeup) and, for a thread, its
	// innermost application frame.
	Site  string   `json:"site"`
	Stack []string `json:"stack"`
}

// ThreadPool is threads of one process whose names differ only in a
// number ("pool-2-thread-*", "http-nio-8080-e" as the kernel truncates
// Tomcat's, a Go program's Ms that share its name).
type ThreadPool struct {
	PID     int    `json:"pid"`
	Process string `json:"process"`
	Name    string `json:"name"`
	Threads int    `json:"threads"`
	// Seen is the threads' time in the window the probe accounts for;
	// the shares are of it.
	SeenNs        int64   `json:"seen_ns"`
	OnCPUNs       int64   `json:"on_cpu_ns"`
	RunnableNs    int64   `json:"runnable_ns"`
	BlockedNs     int64   `json:"blocked_ns"`
	UnknownNs     int64   `json:"unknown_ns"`
	OnCPUShare    float64 `json:"on_cpu_share"`
	RunnableShare float64 `json:"runnable_share"`
	BlockedShare  float64 `json:"blocked_share"`
	// Preemptions and MeanRunnableNs: how often the pool's threads waited
	// for a CPU and for how long on average.
	RunnableWaits  uint64 `json:"runnable_waits"`
	MeanRunnableNs int64  `json:"mean_runnable_ns"`
	// ByReason is the pool's blocked time kept by stack, by reason.
	ByReason map[string]int64 `json:"by_reason"`
	// TopSite is the call site where the pool was blocked longest, its
	// reason, and its share of BlockedNs.
	TopSite       string  `json:"top_site"`
	TopSiteReason string  `json:"top_site_reason"`
	TopSiteNs     int64   `json:"top_site_ns"`
	TopSiteShare  float64 `json:"top_site_share"`
	// TopSiteThreads is how many of the pool's threads waited there.
	TopSiteThreads int `json:"top_site_threads"`
	// TopSiteWaker is what most often woke the top site's waits.
	TopSiteWaker string `json:"top_site_waker,omitempty"`
}

// RunQueue is run-queue latency: from wakeup (or preemption) to running,
// as bcc's runqlat measures it.
type RunQueue struct {
	// All combines both kinds over every CPU; Wakeup and Preempted split
	// them.
	All       LatencyHist       `json:"all"`
	Wakeup    LatencyHist       `json:"wakeup"`
	Preempted LatencyHist       `json:"preempted"`
	PerCPU    []CPURunQueue     `json:"per_cpu"`
	PerProc   []ProcessRunQueue `json:"per_process"`
}

// CPURunQueue is one CPU's run-queue latency (the CPU the thread got to
// run on).
type CPURunQueue struct {
	CPU       int         `json:"cpu"`
	All       LatencyHist `json:"all"`
	Wakeup    LatencyHist `json:"wakeup"`
	Preempted LatencyHist `json:"preempted"`
}

// ProcessRunQueue is one process's run-queue latency.
type ProcessRunQueue struct {
	PID       int         `json:"pid"`
	Comm      string      `json:"comm"`
	All       LatencyHist `json:"all"`
	Wakeup    LatencyHist `json:"wakeup"`
	Preempted LatencyHist `json:"preempted"`
}

// LatencyHist is a log2 latency histogram and what it says: the
// percentiles are interpolated inside their bucket (exact to within it).
type LatencyHist struct {
	Count   uint64          `json:"count"`
	MeanNs  float64         `json:"mean_ns"`
	P50Ns   float64         `json:"p50_ns"`
	P99Ns   float64         `json:"p99_ns"`
	Buckets []LatencyBucket `json:"buckets"`
}

// FoldedTime is one distinct stack and its microseconds off CPU.
type FoldedTime struct {
	Stack string `json:"stack"`
	Us    int64  `json:"us"`
}

// OffCPULost counts what the probe could not record (mirrors
// probes/offcpu.Lost).
type OffCPULost struct {
	ThreadsFull       uint64 `json:"threads_full"`
	KernelStacksFull  uint64 `json:"kernel_stacks_full"`
	UserStacksFull    uint64 `json:"user_stacks_full"`
	KernelStackFaults uint64 `json:"kernel_stack_faults"`
	UserStackFaults   uint64 `json:"user_stack_faults"`
	WaitsFull         uint64 `json:"waits_full"`
	ProcessesFull     uint64 `json:"processes_full"`
	WakerStacks       uint64 `json:"waker_stacks"`
}

// NewLatencyHist reads log2 slots (slot k: [2^k, 2^(k+1)) ns, slot 0 also
// 0) and their sum of latencies into a histogram with its percentiles.
func NewLatencyHist(slots []uint64, sumNs uint64) LatencyHist {
	h := LatencyHist{}
	for i, n := range slots {
		low := uint64(1) << uint(i)
		if i == 0 {
			low = 0
		}
		h.Buckets = append(h.Buckets, LatencyBucket{LowNs: low, HighNs: uint64(1) << uint(i+1), Count: n})
		h.Count += n
	}
	if h.Count > 0 {
		h.MeanNs = float64(sumNs) / float64(h.Count)
	}
	h.P50Ns = Quantile(h.Buckets, h.Count, 0.50)
	h.P99Ns = Quantile(h.Buckets, h.Count, 0.99)
	return h
}

// Quantile interpolates linearly inside the log2 bucket that holds q, as
// bcc's and bpftrace's histogram readers do; the result is exact to within
// that bucket.
func Quantile(b []LatencyBucket, total uint64, q float64) float64 {
	if total == 0 || len(b) == 0 {
		return 0
	}
	target := q * float64(total)
	var seen float64
	for _, bk := range b {
		if bk.Count == 0 {
			continue
		}
		if seen+float64(bk.Count) >= target {
			frac := (target - seen) / float64(bk.Count)
			return float64(bk.LowNs) + frac*float64(bk.HighNs-bk.LowNs)
		}
		seen += float64(bk.Count)
	}
	return float64(b[len(b)-1].HighNs)
}
