package evidence

// Go is what `perfscope go` measured of one Go program over a window: what
// it allocated (from its runtime's own allocation samples, weighted to an
// unbiased estimate), per request, where, its GC cycles and its
// sync.Pools. Bytes are bytes, rates per second, times nanoseconds. A
// figure that could not be known is null in JSON with the reason beside
// it, never a zero.
type Go struct {
	PID int `json:"pid"`
	// Workload is what the program belongs to (cgroup, container, pod);
	// absent when unread.
	Workload *Workload `json:"workload,omitempty"`
	// Executable is the program's path as it sees it (inside its
	// container).
	Executable string   `json:"executable"`
	Binary     GoBinary `json:"binary"`
	WindowNs   int64    `json:"window_ns"`

	// Requests served in the window and who counted them: "load"
	// (perfscope drove them), "user" (--requests), "metrics"
	// (--requests-from), "passive-http" (the program's own socket
	// writes). Nil when unknown, RequestsUnknown says why.
	Requests            *int64   `json:"requests"`
	RequestsSource      string   `json:"requests_source,omitempty"`
	RequestsUnknown     string   `json:"requests_unknown,omitempty"`
	RequestsUncertainty float64  `json:"requests_uncertainty"`
	RequestsNote        string   `json:"requests_note,omitempty"`
	RequestRate         *float64 `json:"requests_per_second"`

	// Sampling is how the runtime sampled allocations and how the
	// samples were weighted.
	Sampling GoSampling `json:"sampling"`

	// AllocBytes and AllocObjects estimate everything the program
	// allocated on the heap in the window (nil when sampling was off);
	// AllocBytesError is the 95 % bound of AllocBytes (±).
	AllocBytes      *float64 `json:"alloc_bytes"`
	AllocBytesError *float64 `json:"alloc_bytes_error"`
	AllocObjects    *float64 `json:"alloc_objects"`
	AllocRate       *float64 `json:"alloc_bytes_per_second"`
	// BytesPerRequest is AllocBytes over Requests — the whole process,
	// what the GC sees — with its 95 % bound (the samples' counting error
	// and the request count's uncertainty). Nil when either is unknown,
	// BytesPerRequestUnknown says why.
	BytesPerRequest        *float64 `json:"bytes_per_request"`
	BytesPerRequestError   *float64 `json:"bytes_per_request_error"`
	ObjectsPerRequest      *float64 `json:"objects_per_request"`
	BytesPerRequestUnknown string   `json:"bytes_per_request_unknown,omitempty"`

	// GCCycles completed in the window (exact: counted where the runtime
	// counts them), per minute at the window's rate, and per request.
	GCCycles          int64    `json:"gc_cycles"`
	GCCyclesPerMinute float64  `json:"gc_cycles_per_minute"`
	GCCyclesPerKReq   *float64 `json:"gc_cycles_per_1000_requests"`
	// BytesPerGCCycle is what the program allocated per cycle: the
	// heap's growth between collections, which GOGC sets from the live
	// heap.
	BytesPerGCCycle *float64     `json:"bytes_per_gc_cycle"`
	GC              GoGCSettings `json:"gc_settings"`

	// Sites are the allocation sites by estimated bytes, largest first:
	// the first frame outside the runtime, with the object size.
	Sites []GoAllocSite `json:"sites"`
	// Stacks are the sampled stacks with their estimated bytes (root
	// first), for flame graphs.
	Stacks []GoAllocStack `json:"stacks,omitempty"`
	// Pools are the sync.Pools the program used in the window.
	Pools []GoPool `json:"pools"`
	// PoolsUnknown says why pools were not measured (or only in part).
	PoolsUnknown string `json:"pools_unknown,omitempty"`
	// PoolSampling says how long the pool hooks were attached: the whole
	// window (counts exact) or part of it (counts estimated, with
	// bounds). Nil when pools were not probed.
	PoolSampling *GoPoolSampling `json:"pool_sampling,omitempty"`

	Lost     GoLost   `json:"lost"`
	Warnings []string `json:"warnings,omitempty"`
}

// GoBinary is how the program was built.
type GoBinary struct {
	GoVersion string `json:"go_version"`
	Module    string `json:"module,omitempty"`
	PIE       bool   `json:"pie"`
	Cgo       bool   `json:"cgo"`
	Stripped  bool   `json:"stripped"`
	// FunctionTable says where the function table was read from.
	FunctionTable string `json:"function_table"`
	// PGO: built with profile-guided optimisation, which may inline
	// sync.Pool's methods into hot callers (those calls are not seen).
	PGO bool `json:"pgo,omitempty"`
}

// GoSampling says how allocation samples were taken and weighted.
type GoSampling struct {
	// MemProfileRate is the runtime's sampling rate in bytes (one sample
	// per that many bytes on average; 0: sampling is off, 1: every
	// allocation), RateSource where it was read: "memory" (the running
	// program's variable), "GODEBUG" (memprofilerate in its environment),
	// "default" (the runtime's 512 KiB, assumed: not readable), "linker"
	// (the program never reads a memory profile, so the linker turned
	// sampling off).
	MemProfileRate int64  `json:"mem_profile_rate"`
	RateSource     string `json:"rate_source"`
	RateNote       string `json:"rate_note,omitempty"`
	// Samples the runtime took in the window and their sizes summed
	// before weighting.
	Samples      int64 `json:"samples"`
	SampledBytes int64 `json:"sampled_bytes"`
	// Weighting: "unbiased" (each sample of an s-byte object stands for
	// 1/(1−exp(−s/rate)) objects, as pprof scales), "exact" (rate 1).
	Weighting string `json:"weighting"`
	// RelativeError is AllocBytes' 95 % bound over AllocBytes.
	RelativeError float64 `json:"relative_error"`
}

// GoGCSettings are the GC's knobs as the program runs with them.
type GoGCSettings struct {
	// GOGC is the percentage (nil: off); GOGCSource "environment" or
	// "default".
	GOGC       *int64 `json:"gogc"`
	GOGCSource string `json:"gogc_source"`
	// MemoryLimit is GOMEMLIMIT in bytes (nil: none set).
	MemoryLimit *int64 `json:"memory_limit"`
	// Note says what could not be read (the runtime can change both with
	// debug.SetGCPercent and debug.SetMemoryLimit, which the environment
	// does not show).
	Note string `json:"note,omitempty"`
}

// GoAllocSite is one allocation site: a function and line outside the
// runtime allocating objects of one size.
type GoAllocSite struct {
	Function string `json:"function"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	// Size is the object size the runtime allocated (its size class).
	Size    int64   `json:"size"`
	Bytes   float64 `json:"bytes"`
	Objects float64 `json:"objects"`
	Samples int64   `json:"samples"`
	Share   float64 `json:"share"`
	// BytesPerRequest and ObjectsPerRequest: nil without a request count.
	BytesPerRequest   *float64 `json:"bytes_per_request"`
	ObjectsPerRequest *float64 `json:"objects_per_request"`
	// InPoolNew: allocated by a sync.Pool's New function (a pool miss).
	InPoolNew bool `json:"in_pool_new,omitempty"`
	// Caller is the next frame outside the runtime, for context.
	Caller string `json:"caller,omitempty"`
}

// GoAllocStack is one sampled stack, root first, and its estimated bytes.
type GoAllocStack struct {
	Frames []string `json:"frames"`
	Bytes  float64  `json:"bytes"`
}

// GoPool is one sync.Pool's use in the window.
type GoPool struct {
	// Address is the pool's address in the program; Name its variable
	// when the symbol table names it.
	Address string `json:"address"`
	Name    string `json:"name,omitempty"`
	Gets    int64  `json:"gets"`
	Puts    int64  `json:"puts"`
	// News counts calls of the pool's New function: its misses. A pool
	// without a New function returns nil on a miss, which is not seen:
	// HitRate is then nil.
	News    int64    `json:"news"`
	HitRate *float64 `json:"hit_rate"`
	// HasNew: whether the pool has a New function, read from the running
	// program (nil: not readable).
	HasNew *bool `json:"has_new"`
	// GetsPerRequest: nil without a request count.
	GetsPerRequest *float64 `json:"gets_per_request"`
	// GetsError, PutsError and NewsError are the 95 % bounds (±) of the
	// counts when the hooks were attached for part of the window only
	// (PoolSampling.Mode "sampled"): the counts are then estimates
	// scaled to the window. Nil when exact.
	GetsError *float64 `json:"gets_error"`
	PutsError *float64 `json:"puts_error"`
	NewsError *float64 `json:"news_error"`
}

// GoPoolSampling is how the sync.Pool hooks ran in the window. Each call
// of Get or Put traps into the kernel, so a cost guard keeps them
// attached only while they cost the program less than BudgetShare of its
// CPU time.
type GoPoolSampling struct {
	// Mode: "exact" (attached the whole window), "sampled" (attached for
	// OnFraction of it in Periods stretches; counts scaled to the window).
	Mode       string  `json:"mode"`
	OnFraction float64 `json:"on_fraction"`
	OnNs       int64   `json:"on_ns"`
	Periods    int     `json:"periods"`
	// BudgetShare is the share of the program's CPU the hooks may take;
	// CostShare what they took while attached: calls × CostPerCallNs (the
	// programs' self-timed run plus the uprobe trap, assumed) over the
	// program's CPU time.
	BudgetShare   float64 `json:"budget_share"`
	CostShare     float64 `json:"cost_share"`
	CostPerCallNs float64 `json:"cost_per_call_ns"`
	// ScaledBy, when sampled, is what the counts seen were scaled to the
	// window by: "allocation samples" (the runtime's, counted the whole
	// window, so a load that changes is followed) or "time" (too few
	// samples: the load is assumed steady).
	ScaledBy string `json:"scaled_by,omitempty"`
	Note     string `json:"note,omitempty"`
}

// GoLost counts what the probe could not record in the window.
type GoLost struct {
	// SamplesNoSite: samples counted in the totals without a stack.
	SamplesNoSite int64 `json:"samples_no_site"`
	// SamplesUncounted: samples whose size could not be recorded (the
	// count map was full): the totals are scaled up for them.
	SamplesUncounted int64 `json:"samples_uncounted"`
	PoolsFull        int64 `json:"pools_full"`
	PoolNewUnjoined  int64 `json:"pool_new_unjoined"`
}
