package recipes

import (
	"context"
	"errors"
	"fmt"
	"github.com/perfscope/perfscope/collectors/cgroup"
	"sync"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	offcpuprobe "github.com/perfscope/perfscope/probes/offcpu"
)

// Load finds a recipe (a built-in's name or a file), binds set to its
// parameters and checks the plan against the system: what a command, a
// `perfscope recipe run` or a continuous run starts from.
func Load(nameOrFile string, set map[string]string, src Sources) (*Plan, error) {
	r, err := Find(nameOrFile)
	if err != nil {
		return nil, err
	}
	p, err := r.Bind(set)
	if err != nil {
		return nil, err
	}
	if err := p.Prepare(src); err != nil {
		return nil, err
	}
	return p, nil
}

// Hooks tell a user what a run is doing; none changes what is measured.
type Hooks struct {
	// Started is the process start, from which the attach time counts.
	Started time.Time
	// OnStart runs once every part has its first reading.
	OnStart func()
	// TickEvery ticks OnTick (and OnSoftirqInterval) this often when the
	// recipe's window has no interval of its own: progress without a
	// timeline.
	TickEvery time.Duration
	OnTick    func(now time.Time, left time.Duration)
	// OnSoftirqInterval is told each interval's softirq summary.
	OnSoftirqInterval func(evidence.SoftirqInterval)
	// JVMStarted runs once async-profiler runs in the JVM.
	JVMStarted func()
	// Continuous builds parts that are measured window after window on
	// one session (perfscope serve): those counting since their start in
	// the kernel (the CPU profile) empty their maps every window.
	Continuous bool
}

// Measurement is a plan's parts, built fresh for one session: a one-shot
// run measures one window (Plan.Run); a continuous run opens them once
// (Open(src, m.Parts()...)) and measures window after window, calling
// Result after each. The async-profiler and gclog collectors are not
// parts (they own their window, or read files afterwards): Plan.Run adds
// them.
type Measurement struct {
	plan    *Plan
	softirq *Softirq
	locks   *Locks
	profile *Profile
	pauses  *JVMPauses
	offcpu  *OffCPU
	net     *netParts
	netOpts NetOptions
}

// NewMeasurement builds the plan's parts.
func (p *Plan) NewMeasurement(h Hooks) *Measurement {
	m := &Measurement{plan: p}
	timeline := p.window.Interval > 0
	if u, ok := p.use("softirq"); ok {
		m.softirq = NewSoftirq(SoftirqOptions{Method: p.method, CPUs: u.opts["cpus"].(cpuset.Set),
			NoLatency: !u.opts["latency"].(bool), Timeline: timeline, OnInterval: h.OnSoftirqInterval})
	}
	if u, ok := p.use("lockstat"); ok {
		m.locks = NewLocks(LockOptions{Method: p.method, StackEvery: int(u.opts["stacks_every"].(int64)),
			TCP: u.opts["tcp"].(bool), Timeline: timeline})
	}
	if u, ok := p.use("cpuprofile"); ok {
		o := p.profileOptions(u)
		// NET_RX on a real NIC runs mostly from irq_exit on idle CPUs: a
		// network run's profile keeps those samples of the idle task and
		// drops only its loop, as `perfscope udp` always has.
		o.KeepIdleInterrupts = p.measuresNet() && !o.IncludeIdle
		o.Continuous = h.Continuous
		// A network run's profile is rooted at CPUs and holds the
		// softirqs' work, done in whatever task was interrupted: it stays
		// host-wide; a profile of its own keeps the selection's samples.
		if !p.measuresNet() {
			o.Select = p.workload
		}
		m.profile = NewProfile(o)
	}
	if u, ok := p.use("hsperfdata"); ok {
		m.pauses = NewJVMPauses(JVMPauseOptions{PID: int(u.opts["pid"].(int64)), Timeline: timeline})
	}
	if u, ok := p.use("offcpu"); ok {
		m.offcpu = NewOffCPU(p.offCPUOptions(u))
	}
	if p.measuresNet() {
		m.net = p.netParts(m, timeline)
	}
	return m
}

func (p *Plan) offCPUOptions(u boundUse) OffCPUOptions {
	o := OffCPUOptions{Method: p.method, PID: int(u.opts["pid"].(int64)), MinBlock: u.opts["min_block"].(time.Duration),
		StackEvery: int(u.opts["stack_every"].(int64)), NoWakerStacks: !u.opts["waker_stacks"].(bool), Top: int(u.opts["top"].(int64))}
	if o.MinBlock == 0 {
		o.MinBlock = -1 // the probe's 0 is its default: the recipe's 0 is every wait
	}
	switch u.opts["stacks"].(string) {
	case "kernel":
		o.Stacks = offcpuprobe.KernelOnly
	case "user":
		o.Stacks = offcpuprobe.UserOnly
	}
	return o
}

func (p *Plan) measuresNet() bool {
	for _, n := range []string{"netqueue", "udpdrop", "udpsock", "tcp", "netcounters"} {
		if _, ok := p.use(n); ok {
			return true
		}
	}
	return false
}

// netParts joins the plan's network parts, with its softirq, lock and
// profile parts, into one network run.
func (p *Plan) netParts(m *Measurement, timeline bool) *netParts {
	o := NetOptions{Iface: p.iface, Method: p.method, Select: p.workload}
	// The sockets section's port and process: the counters' own, else the
	// probes'.
	for _, name := range []string{"netcounters", "udpsock", "tcp", "udpdrop"} {
		if u, ok := p.use(name); ok {
			if v, ok := u.opts["port"].(int64); ok && o.Port == 0 {
				o.Port = int(v)
			}
			if v, ok := u.opts["pid"].(int64); ok && o.PID == 0 {
				o.PID = int(v)
			}
		}
	}
	m.netOpts = o
	n := &netParts{softirq: m.softirq, locks: m.locks, profile: m.profile,
		counters:  NewNetCounters(NetCounterOptions{Iface: o.Iface.Name, Port: o.Port, PID: o.PID, Timeline: timeline}),
		noProfile: "on-CPU profile: " + p.disabledWhy("cpuprofile")}
	if _, ok := p.use("netqueue"); ok {
		n.queues = NewQueues(QueueOptions{Method: p.method, Iface: o.Iface, Timeline: timeline})
	}
	if u, ok := p.use("udpdrop"); ok {
		n.drops = NewDrops(DropOptions{Method: p.method, Port: int(u.opts["port"].(int64)), Timeline: timeline})
	}
	if u, ok := p.use("udpsock"); ok {
		n.sockets = NewSocketReads(SocketOptions{Method: p.method, Port: int(u.opts["port"].(int64)), PID: int(u.opts["pid"].(int64)), Timeline: timeline})
	}
	if u, ok := p.use("tcp"); ok {
		n.tcp = NewTCP(TCPOptions{Method: p.method, Port: int(u.opts["port"].(int64)), PID: int(u.opts["pid"].(int64)),
			Top: int(u.opts["top"].(int64)), SampleEvery: u.opts["sample_interval"].(time.Duration)})
	}
	return n
}

// disabledWhy says why a component of the recipe is not in the run.
func (p *Plan) disabledWhy(name string) string {
	for _, u := range append(append([]Use{}, p.Recipe.Probes...), p.Recipe.Collectors...) {
		if u.Name == name && u.Enabled != nil && u.Enabled.Param != "" {
			return fmt.Sprintf("disabled (%s=%s)", u.Enabled.Param, formatValue(p.Values[u.Enabled.Param]))
		}
	}
	return "not in the recipe"
}

func (p *Plan) profileOptions(u boundUse) ProfileOptions {
	o := ProfileOptions{PID: int(u.opts["pid"].(int64)), Frequency: int(u.opts["frequency"].(int64)),
		IncludeIdle: u.opts["include_idle"].(bool), StackEntries: int(u.opts["stack_entries"].(int64)), JVM: p.jvm}
	// The option's domain is cpuprofile.EventNames: the name parses.
	o.Event, _ = cpuprofile.ParseEvent(u.opts["event"].(string))
	switch u.opts["stacks"].(string) {
	case "kernel":
		o.Stacks = cpuprofile.KernelOnly
	case "user":
		o.Stacks = cpuprofile.UserOnly
	}
	for i, name := range rootFrames {
		if name == u.opts["root"].(string) {
			o.Root = cpuprofile.RootFrame(i)
		}
	}
	return o
}

// Parts are the parts to open, in the order they open and read.
func (m *Measurement) Parts() []Part {
	parts := partsOf(m.softirq, m.locks, m.profile)
	if m.net != nil {
		parts = m.net.list() // the softirq, lock and profile parts among them
	}
	return append(parts, partsOf(m.pauses, m.offcpu)...)
}

// SetBudget replaces the recipe's overhead budget (window.budget) with
// the user's (--overhead-budget, --exact): the zero Budget counts every
// event.
func (p *Plan) SetBudget(b Budget) { p.window.Budget = b }

// SetWorkload keeps the run to the processes sel selected (--cgroup,
// --container, --pod): the sockets they own with those sockets' lock
// waits and drops, and a profile's samples of them. Host-wide sections
// (softirq per CPU, queues, IRQs) stay host-wide.
func (p *Plan) SetWorkload(sel *cgroup.Selection) { p.workload = sel }

// Window is the plan's window with the hooks.
func (m *Measurement) Window(h Hooks) Window {
	w := m.plan.window
	w.Started, w.OnStart, w.OnTick = h.Started, h.OnStart, h.OnTick
	if w.Interval == 0 {
		w.Interval = h.TickEvery
	} else if w.Budget.On() && w.Interval < w.Budget.period() {
		// A timeline's every interval gets its sampling windows: the
		// budget's periods follow the ticks (both start with the window).
		w.Budget.Period = w.Interval
	}
	// Per-packet probes cost more with statistics left on.
	return w
}

// opened checks, once the parts are open, the probes a recipe outside a
// network run cannot do without (a network run reports a missing probe
// as an unavailable section instead, as `perfscope udp` does).
func (m *Measurement) opened() error {
	if m.net != nil {
		// The profile is optional in a network run, but not the event
		// asked for by name: a run without it would not be the one asked.
		if m.profile != nil && m.profile.opts.Event == cpuprofile.EventCycles {
			if err := m.profile.OpenErr(); err != nil {
				return m.profile.explain(err)
			}
		}
		return nil
	}
	if m.locks != nil {
		if err := m.locks.OpenErr(); err != nil {
			return fmt.Errorf("lock contention: %w", err)
		}
	}
	if m.profile != nil {
		if err := m.profile.OpenErr(); err != nil {
			return m.profile.explain(err)
		}
	}
	return nil
}

// Result is what one run of a plan measured, per section, with the
// findings of the rules the recipe chose.
type Result struct {
	Plan *Plan
	Run  Run
	// Net holds the network section; the softirq, lock and profile
	// evidence of a network run is inside it.
	Net       *NetResult
	Softirq   *evidence.SoftirqEvidence
	Locks     *evidence.LockSection
	Profile   *ProfileResult
	JVMPauses *evidence.JVMPauses
	JVM       *JVMResult
	GC        *GCResult
	OffCPU    *evidence.OffCPU
	Go        *GoResult
	Timeline  *evidence.Timeline
	Findings  []diagnose.Finding
}

// Result assembles the evidence of the window just measured. A profile
// part's frames are named here: call it after the session has closed in
// a one-shot run.
func (m *Measurement) Result(ctx context.Context, src Sources, run Run) *Result {
	r := &Result{Plan: m.plan, Run: run}
	if m.net != nil {
		res := m.net.assemble(src, m.netOpts, run)
		res.Run = run
		r.Net = &res
	} else {
		if m.softirq != nil {
			ev := m.softirq.Evidence()
			r.Softirq = &ev
		}
		if m.locks != nil {
			ev := m.locks.Evidence()
			r.Locks = &ev
		}
		if m.profile != nil {
			res := m.profile.result(ctx, run)
			r.Profile = &res
		}
	}
	if m.pauses != nil {
		ev := m.pauses.Evidence()
		r.JVMPauses = &ev
	}
	if m.offcpu != nil {
		r.OffCPU = m.offcpu.Evidence()
	}
	r.Timeline = m.timeline(r, run)
	return r
}

// JVMError is async-profiler's run failing on a JVM: callers turn the
// attach protocol's errors into their sentences.
type JVMError struct {
	PID int
	Err error
}

func (e *JVMError) Error() string { return e.Err.Error() }
func (e *JVMError) Unwrap() error { return e.Err }

// Run measures the plan once: its parts over one window, async-profiler
// over the same window in the JVM, then the GC logs; and judges the
// result with the recipe's rules. When the JVM exits mid-run, Run returns
// what was measured until then, judged, together with a *JVMError wrapping
// jvm.ErrTargetExited: report it, and fail.
func (p *Plan) Run(ctx context.Context, src Sources, h Hooks) (*Result, error) {
	if !p.prepared {
		if err := p.Prepare(src); err != nil {
			return nil, err
		}
	}
	if _, ok := p.use("goalloc"); ok {
		return p.runGo(ctx, src, h)
	}
	m := p.NewMeasurement(h)
	var res *Result
	var jvmRes *JVMResult
	var jvmErr error
	if parts := m.Parts(); len(parts) > 0 {
		s, err := Open(src, parts...)
		if err != nil {
			if m.profile != nil && m.net == nil {
				err = m.profile.explain(err)
			}
			return nil, err
		}
		if err := m.opened(); err != nil {
			s.Close()
			return nil, err
		}
		var wg sync.WaitGroup
		if _, ok := p.use("async-profiler"); ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer gosafe.Recover(&jvmErr)
				jvmRes, jvmErr = p.runJVM(ctx, src, h)
			}()
		}
		run, err := s.Measure(ctx, m.Window(h))
		s.Close()
		wg.Wait()
		if err != nil {
			return nil, err
		}
		res = m.Result(ctx, src, run)
	} else {
		// No parts: the JVM's window is the run's.
		res = &Result{Plan: p, Run: Run{Begin: time.Now()}}
		if _, ok := p.use("async-profiler"); ok {
			if h.OnStart != nil {
				h.OnStart()
			}
			jvmRes, jvmErr = p.runJVM(ctx, src, h)
		}
		res.Run.End = time.Now()
	}
	if jvmErr != nil && (jvmRes == nil || !errors.Is(jvmErr, jvm.ErrTargetExited)) {
		return nil, jvmErr
	}
	res.JVM = jvmRes
	if u, ok := p.use("gclog"); ok {
		gc, err := p.runGC(ctx, u)
		if err != nil {
			return nil, err
		}
		res.GC = &gc
	}
	res.Findings = p.judge(res, src)
	return res, jvmErr
}

func (p *Plan) runJVM(ctx context.Context, src Sources, h Hooks) (*JVMResult, error) {
	o := *p.jvmOptions
	o.FS, o.Started = src.JVMs, h.JVMStarted
	res, err := RunJVM(ctx, src, o)
	if res.Result == nil {
		return nil, &JVMError{PID: o.PID, Err: err}
	}
	if err != nil {
		// The JVM exited mid-run (jvm.ErrTargetExited): what was measured
		// until then, with the error.
		return &res, &JVMError{PID: o.PID, Err: err}
	}
	return &res, nil
}

func (p *Plan) runGC(ctx context.Context, u boundUse) (GCResult, error) {
	files, err := GCLogFiles(u.opts["files"].([]string), false)
	if err != nil {
		return GCResult{}, err
	}
	return RunGC(ctx, GCOptions{Files: files, PauseGoal: u.opts["pause_goal"].(time.Duration),
		YoungInterval: u.opts["young_interval"].(time.Duration), RPS: u.opts["rps"].(float64),
		Requests: u.opts["requests"].(float64), TargetRPS: u.opts["target_rps"].(float64)})
}

// Continuous says why the plan cannot be measured window after window on
// one session (`perfscope serve`); nil when it can. async-profiler owns
// its window inside the JVM and gclog reads files after it: both measure
// once. A served recipe writes no files, so an output directory is
// refused rather than ignored.
func (p *Plan) Continuous() error {
	for _, name := range []string{"async-profiler", "gclog", "offcpu", "goalloc"} {
		if u, ok := p.use(name); ok {
			// offcpu names its stacks once, after its probe is closed.
			return badInput("recipe %s uses %s (%s), which measures once: run it with perfscope recipe run", p.Recipe.Name, name, u.Path)
		}
	}
	for _, o := range p.outputs {
		if o.dir != "" {
			return badInput("%s: a served recipe writes no files; leave it unset", p.optionName(o.Dir))
		}
	}
	if len(p.NewMeasurement(Hooks{}).Parts()) == 0 {
		return badInput("recipe %s has no probe or collector to measure continuously", p.Recipe.Name)
	}
	return nil
}

// Components are the names of the plan's enabled probes and collectors.
func (p *Plan) Components() []string {
	out := make([]string, 0, len(p.uses))
	for _, u := range p.uses {
		out = append(out, u.Name)
	}
	return out
}

// Opened checks, once the parts of a continuous run are open, the probes
// the recipe cannot do without, as Run does.
func (m *Measurement) Opened() error { return m.opened() }

// Judge runs the recipe's rules on a result, as Run does: for continuous
// runs, after each window's Result.
func (m *Measurement) Judge(r *Result, src Sources) []diagnose.Finding {
	return m.plan.judge(r, src)
}
