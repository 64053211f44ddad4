package evidence

// Load is the result of `perfscope load`: an HTTP load stepped through
// rising concurrency levels, and per level what the service did — its
// throughput and latency as the client saw them, its CPU, and where its
// threads spent the level (on CPU, runnable, blocked, the top wait).
type Load struct {
	URL    string `json:"url"`
	Method string `json:"method"`
	// PIDs are the service's processes (given, or the owners of the
	// URL's listening port); Comm the first one's name.
	PIDs []int  `json:"pids"`
	Comm string `json:"comm,omitempty"`
	// PIDFrom says how the processes were found: "flag" (--pid) or
	// "port" (the local owners of the URL's port).
	PIDFrom string `json:"pid_from"`
	CPUs    int    `json:"cpus"`
	// DurationPerLevelNs and RequestsPerLevel are the level's bounds (0:
	// not bounded that way); the first reached ends a level.
	DurationPerLevelNs int64       `json:"duration_per_level_ns"`
	RequestsPerLevel   int         `json:"requests_per_level"`
	Levels             []LoadLevel `json:"levels"`
	// Knee is the concurrency beyond which throughput stopped rising while
	// latency climbed, and why (nil: no level stopped scaling). The
	// load.knee finding says the same in words.
	Knee *LoadKnee `json:"knee"`
	// AttachMethod is how the off-CPU probe attached; empty when the
	// levels ran without it (Warnings say why).
	AttachMethod string   `json:"attach_method,omitempty"`
	Warnings     []string `json:"warnings,omitempty"`
}

// LoadLevel is one concurrency level.
type LoadLevel struct {
	Concurrency int   `json:"concurrency"`
	DurationNs  int64 `json:"duration_ns"`
	// Requests sent; Completed answered (any status); Errors the ones
	// not answered plus the answers outside 2xx; FirstError the first.
	Requests   int64   `json:"requests"`
	Completed  int64   `json:"completed"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	RPS        float64 `json:"requests_per_second"`
	P50Ns      int64   `json:"p50_ns"`
	P99Ns      int64   `json:"p99_ns"`
	MeanNs     int64   `json:"mean_ns"`
	// ServiceCPU is the CPU the service's processes used over the level,
	// in CPUs (utime+stime from /proc/PID/stat over the level's time: 1.0
	// is one CPU busy all the level); -1 when it could not be read.
	ServiceCPU float64 `json:"service_cpu"`
	// CPUBusy is the machine's CPUs' mean busy share over the level
	// (/proc/stat: everything but idle and iowait); -1 when unknown.
	CPUBusy float64 `json:"cpu_busy"`
	// LoadGeneratorCPU is the CPU perfscope itself used over the level (the
	// load generator and the probe's reader), in CPUs: on the service's
	// machine it competes with the service for the same CPUs.
	LoadGeneratorCPU float64 `json:"load_generator_cpu"`
	// Threads (nil when the off-CPU probe did not run) is where the
	// service's threads spent the level.
	Threads *LoadThreads `json:"threads"`
}

// LoadThreads is where the service's threads spent one level, from the
// off-CPU probe. The shares are of the threads' time seen over the level
// (on CPU + runnable + blocked + unknown); the *Threads numbers are the
// same times over the level's length: how many threads were, on average,
// in that state (Little's law's "how many requests wait there" when one
// thread serves one request).
type LoadThreads struct {
	Threads         int     `json:"threads"`
	OnCPUShare      float64 `json:"on_cpu_share"`
	RunnableShare   float64 `json:"runnable_share"`
	BlockedShare    float64 `json:"blocked_share"`
	OnCPUThreads    float64 `json:"on_cpu_threads"`
	RunnableThreads float64 `json:"runnable_threads"`
	// CPUWaitShare is runnable over on CPU + runnable: of the time the
	// threads wanted a CPU, the share they waited for one.
	CPUWaitShare float64 `json:"cpu_wait_share"`
	// RunQueueP99Ns is the service's run-queue latency p99 (wakeup or
	// preemption to running) over the level.
	RunQueueP99Ns int64 `json:"run_queue_p99_ns"`
	// Waits are the service's waits kept by stack over the level, by
	// reason and call site, largest first (at most ten); idle workers
	// (reason idle) are left out: they wait for work, not for something
	// that limits it.
	Waits []LoadWait `json:"waits"`
	// TopWait is Waits' first (nil: none).
	TopWait *LoadWait `json:"top_wait"`
	// BusiestPool is the pool with the largest on-CPU share.
	BusiestPool *LoadPool `json:"busiest_pool,omitempty"`
}

// LoadWait is the service's time waiting at one reason and call site in
// one level.
type LoadWait struct {
	Reason string `json:"reason"`
	Site   string `json:"site"`
	Ns     int64  `json:"ns"`
	// Threads is Ns over the level's length: threads waiting there on
	// average.
	Threads float64 `json:"threads"`
	// Share is of the service's blocked time.
	Share float64 `json:"share"`
	// Waker is who woke most of it ("" when not known).
	Waker string `json:"waker,omitempty"`
}

// LoadPool is one of the service's thread pools in one level.
type LoadPool struct {
	Name       string  `json:"name"`
	Threads    int     `json:"threads"`
	OnCPUShare float64 `json:"on_cpu_share"`
}

// LoadKnee is where a load stopped scaling.
type LoadKnee struct {
	// Concurrency is the last level that still raised throughput; Flat the
	// next one, whose throughput rose less than the gain threshold while
	// its p99 climbed.
	Concurrency int     `json:"concurrency"`
	Flat        int     `json:"flat_concurrency"`
	RPS         float64 `json:"requests_per_second"`
	FlatRPS     float64 `json:"flat_requests_per_second"`
	// Gain is the flat level's throughput gain over the knee's, as a share
	// of the concurrency added (1: it grew with the concurrency).
	Gain      float64 `json:"gain"`
	P99Ns     int64   `json:"p99_ns"`
	FlatP99Ns int64   `json:"flat_p99_ns"`
	// Reason is why: "cpu" (the CPUs, or the service's threads, ran
	// out), "lock" (the added requests waited at a lock), "pool" (the
	// service's threads were all busy, few runnable: a bounded pool),
	// "network" (the added requests waited on sockets), or "unknown" (the
	// threads do not show it: Why says what was seen).
	Reason string `json:"reason"`
	// Site is the lock's or socket's call site (lock, network).
	Site string `json:"site,omitempty"`
	Why  string `json:"why"`
}
