package evidence

// Profile is the result of a CPU profile run (`perfscope profile`'s
// data): who was sampled, how, and the functions and stacks it found.
type Profile struct {
	// Target is "all" or "pid".
	Target      string `json:"target"`
	PID         int    `json:"pid,omitempty"`
	FrequencyHz int    `json:"frequency_hz"`
	CPUs        int    `json:"cpus"`
	// Stacks is "kernel+user", "kernel" or "user".
	Stacks string `json:"stacks"`
	// RootFrames is "comm", "none", "process", "thread" or "cpu".
	RootFrames string      `json:"root_frames"`
	DurationNs int64       `json:"duration_ns"`
	Samples    uint64      `json:"samples"`
	Lost       uint64      `json:"lost"`
	LostBy     ProfileLost `json:"lost_by_reason"`
	// ProfileSampling: the event, and the CPUs the profile did not see.
	ProfileSampling
	// CPUs is the profile per CPU: samples kept, taken and expected.
	PerCPU []ProfileCPU `json:"per_cpu"`
	// TopFunctions is sorted by self samples.
	TopFunctions []FunctionSamples `json:"top_functions"`
	// Folded holds every distinct stack, root first, in FlameGraph's
	// folded form, sorted by count.
	Folded   []FoldedStack `json:"folded"`
	Warnings []string      `json:"warnings,omitempty"`
}

// ProfileLost counts samples dropped, by reason (mirrors
// probes/cpuprofile.Lost).
type ProfileLost struct {
	KernelStacksFull  uint64 `json:"kernel_stacks_full"`
	UserStacksFull    uint64 `json:"user_stacks_full"`
	KernelStackFaults uint64 `json:"kernel_stack_faults"`
	UserStackFaults   uint64 `json:"user_stack_faults"`
	CountsFull        uint64 `json:"counts_full"`
}

// FunctionSamples is one function's samples.
type FunctionSamples struct {
	Function string `json:"function"`
	// Kind is the frame's kind as the flame graph colours it (kernel,
	// jit, native, go, ...).
	Kind string `json:"kind,omitempty"`
	// Self counts samples where the function was running; Total those
	// where it was anywhere on the stack.
	Self       uint64  `json:"self"`
	Total      uint64  `json:"total"`
	SelfShare  float64 `json:"self_share"`
	TotalShare float64 `json:"total_share"`
}

// FoldedStack is one distinct stack and its samples.
type FoldedStack struct {
	Stack string `json:"stack"`
	Count uint64 `json:"count"`
}
