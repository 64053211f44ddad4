package recipes

import (
	"context"
	"fmt"
	"time"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	offcpuprobe "github.com/perfscope/perfscope/probes/offcpu"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
	"github.com/perfscope/perfscope/spec"
)

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
// (Open(src, m.List()...)) and measures window after window, calling
// Result after each. The async-profiler and gclog collectors are not
// parts (they own their window, or read files afterwards): Plan.Run adds
// them.
type Measurement struct {
	plan *Plan
	measure.Parts
}

// NewMeasurement builds the plan's parts.
func (p *Plan) NewMeasurement(h Hooks) *Measurement {
	m := &Measurement{plan: p}
	m.Interval = p.window.Interval
	timeline := p.window.Interval > 0
	if u, ok := p.use(softirq.Spec.Name); ok {
		m.Softirq = measure.NewSoftirq(measure.SoftirqOptions{Method: p.method, CPUs: u.opts["cpus"].(cpuset.Set),
			NoLatency: !u.opts["latency"].(bool), Timeline: timeline, OnInterval: h.OnSoftirqInterval})
	}
	if u, ok := p.use(lockstat.Spec.Name); ok {
		// A one-shot run's per-lock table is sized by its length; serve's
		// keeps the largest, for windows after windows.
		maxLocks := lockstat.DefaultMaxLocks
		if !h.Continuous {
			maxLocks = lockstat.LocksFor(p.window.Duration)
		}
		m.Locks = measure.NewLocks(measure.LockOptions{Method: p.method, StackEvery: int(u.opts["stacks_every"].(int64)),
			TCP: u.opts["tcp"].(bool), Timeline: timeline, MaxLocks: maxLocks})
	}
	if u, ok := p.use(cpuprofile.Spec.Name); ok {
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
		m.Profile = measure.NewProfile(o)
	}
	if u, ok := p.use(measure.HSPerfSpec.Name); ok {
		m.Pauses = measure.NewJVMPauses(measure.JVMPauseOptions{PID: int(u.opts["pid"].(int64)), Timeline: timeline})
	}
	if u, ok := p.use(offcpuprobe.Spec.Name); ok {
		m.OffCPU = measure.NewOffCPU(p.offCPUOptions(u))
	}
	if p.measuresNet() {
		m.Net = p.netParts(m, timeline)
	}
	return m
}

func (p *Plan) offCPUOptions(u boundUse) measure.OffCPUOptions {
	o := measure.OffCPUOptions{Method: p.method, PID: int(u.opts["pid"].(int64)), MinBlock: u.opts["min_block"].(time.Duration),
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
	for _, u := range p.uses {
		if u.Has(spec.InputNet) {
			return true
		}
	}
	return false
}

// netParts joins the plan's network parts, with its softirq, lock and
// profile parts, into one network run.
func (p *Plan) netParts(m *Measurement, timeline bool) *measure.NetParts {
	o := measure.NetOptions{Iface: p.iface, Method: p.method, Select: p.workload}
	// The sockets section's port and process: the counters' own, else the
	// probes'.
	for _, part := range []*spec.Part{&measure.NetCountersSpec, &udpsock.Spec, &measure.TCPSpec, &udpdrop.Spec} {
		if u, ok := p.use(part.Name); ok {
			if v, ok := u.opts["port"].(int64); ok && o.Port == 0 {
				o.Port = int(v)
			}
			if v, ok := u.opts["pid"].(int64); ok && o.PID == 0 {
				o.PID = int(v)
			}
		}
	}
	m.NetOptions = o
	n := &measure.NetParts{Softirq: m.Softirq, Locks: m.Locks, Profile: m.Profile,
		Counters:  measure.NewNetCounters(measure.NetCounterOptions{Iface: o.Iface.Name, Ifindex: o.Iface.Index, Port: o.Port, PID: o.PID, Timeline: timeline}),
		NoProfile: "on-CPU profile: " + p.disabledWhy(cpuprofile.Spec.Name)}
	if _, ok := p.use(netqueue.Spec.Name); ok {
		n.Queues = measure.NewQueues(measure.QueueOptions{Method: p.method, Iface: o.Iface, Timeline: timeline})
	}
	if u, ok := p.use(udpdrop.Spec.Name); ok {
		n.Drops = measure.NewDrops(measure.DropOptions{Method: p.method, Port: int(u.opts["port"].(int64)), PID: o.PID, Timeline: timeline})
	}
	if u, ok := p.use(udpsock.Spec.Name); ok {
		n.Sockets = measure.NewSocketReads(measure.SocketOptions{Method: p.method, Port: int(u.opts["port"].(int64)), PID: int(u.opts["pid"].(int64)), Timeline: timeline})
	}
	if u, ok := p.use(measure.TCPSpec.Name); ok {
		n.TCP = measure.NewTCP(measure.TCPOptions{Method: p.method, Port: int(u.opts["port"].(int64)), PID: int(u.opts["pid"].(int64)), Select: p.workload,
			Top: int(u.opts["top"].(int64)), SampleEvery: u.opts["sample_interval"].(time.Duration), Timeline: timeline})
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

func (p *Plan) profileOptions(u boundUse) measure.ProfileOptions {
	o := measure.ProfileOptions{PID: int(u.opts["pid"].(int64)), Frequency: int(u.opts["frequency"].(int64)),
		IncludeIdle: u.opts["include_idle"].(bool), StackEntries: int(u.opts["stack_entries"].(int64)), JVM: p.jvm}
	// The option's domain is cpuprofile.EventNames: the name parses.
	o.Event, _ = cpuprofile.ParseEvent(u.opts["event"].(string))
	switch u.opts["stacks"].(string) {
	case "kernel":
		o.Stacks = cpuprofile.KernelOnly
	case "user":
		o.Stacks = cpuprofile.UserOnly
	}
	for i, name := range cpuprofile.RootFrameNames {
		if name == u.opts["root"].(string) {
			o.Root = cpuprofile.RootFrame(i)
		}
	}
	return o
}

// Window is the plan's window with the hooks.
func (m *Measurement) Window(h Hooks) measure.Window {
	w := m.plan.window
	w.Started, w.OnStart, w.OnTick = h.Started, h.OnStart, h.OnTick
	if w.Interval == 0 {
		w.Interval = h.TickEvery
	} else if w.Budget.On() && w.Interval < w.Budget.OpensEvery() {
		// A timeline's every interval gets its sampling windows: the
		// budget's periods follow the ticks (both start with the window).
		w.Budget.Period = w.Interval
	}
	// Per-packet probes cost more with statistics left on.
	return w
}

// Result assembles the evidence of the window just measured. A profile
// part's frames are named here: call it after the session has closed in
// a one-shot run.
func (m *Measurement) Result(ctx context.Context, src measure.Sources, run measure.Run) *Result {
	return &Result{Plan: m.plan, Sections: m.Sections(ctx, src, run)}
}

// Judge runs the recipe's rules on a result, as Run does: for continuous
// runs, after each window's Result.
func (m *Measurement) Judge(r *Result, src measure.Sources) []diagnose.Finding {
	return m.plan.judge(r, src)
}
