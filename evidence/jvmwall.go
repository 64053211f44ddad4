package evidence

// JVMWall is async-profiler's wall-clock view of a JVM (the Java stacks of
// every thread, running or waiting, sampled at an interval) beside the
// kernel's off-CPU view of the same threads over the same window, per
// thread pool: async-profiler names where in Java a thread waits, the
// kernel how long it was off CPU, in what state and who woke it.
type JVMWall struct {
	PID int `json:"pid"`
	// WallNs is the wall-clock time async-profiler sampled over every
	// thread (each sample weighs its interval).
	WallNs int64         `json:"wall_ns"`
	Pools  []JVMWallPool `json:"pools"`
	// Warnings say what could not be joined.
	Warnings []string `json:"warnings,omitempty"`
}

// JVMWallPool is one thread pool in both views. Pools are named as the
// off-CPU view names them: the thread's name as the kernel keeps it (15
// bytes) with its trailing number replaced by "*".
type JVMWallPool struct {
	Name string `json:"name"`
	// Threads are the pool's threads async-profiler sampled.
	Threads int `json:"threads"`
	// WallNs is the pool's sampled wall-clock time; RunningNs the part
	// whose stack was in running code, WaitingNs the part in a wait.
	WallNs    int64 `json:"wall_ns"`
	RunningNs int64 `json:"running_ns"`
	WaitingNs int64 `json:"waiting_ns"`
	// ByWait is WaitingNs by kind of wait, read from the stack's innermost
	// frames: sleep, monitor, wait, park, socket, poll, native.
	ByWait map[string]int64 `json:"by_wait"`
	// TopFrames are the Java frames the pool's wall time was spent under,
	// largest first.
	TopFrames []JVMWallFrame `json:"top_frames"`
	// OffCPU is the kernel's view of the same pool; null when the off-CPU
	// probe saw none of its threads switch.
	OffCPU *JVMWallKernel `json:"offcpu"`
}

// JVMWallFrame is the innermost application frame (else the innermost
// Java frame) of the pool's wall samples, with the kind of wait its
// stacks were in ("running" when not waiting).
type JVMWallFrame struct {
	Frame string  `json:"frame"`
	State string  `json:"state"`
	Ns    int64   `json:"ns"`
	Share float64 `json:"share"`
}

// JVMWallKernel is the off-CPU view's figures for the pool (ThreadPool's).
type JVMWallKernel struct {
	Threads       int     `json:"threads"`
	SeenNs        int64   `json:"seen_ns"`
	OnCPUNs       int64   `json:"on_cpu_ns"`
	RunnableNs    int64   `json:"runnable_ns"`
	BlockedNs     int64   `json:"blocked_ns"`
	BlockedShare  float64 `json:"blocked_share"`
	TopSite       string  `json:"top_site"`
	TopSiteReason string  `json:"top_site_reason"`
	TopSiteNs     int64   `json:"top_site_ns"`
	TopSiteWaker  string  `json:"top_site_waker,omitempty"`
}
