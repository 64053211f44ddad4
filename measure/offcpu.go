package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/offcpu"
	"github.com/perfscope/perfscope/probes"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// OffCPUProbe is the off-CPU probe with its programs' own counts.
type OffCPUProbe interface {
	probes.Snapshotter[probe.Snapshot]
	SelfCosts() (probes.SelfCosts, error)
}

// OffCPUOptions configure the off-CPU part.
type OffCPUOptions struct {
	Method probes.AttachMethod
	// PID is the process watched (0: every process).
	PID int
	// MinBlock, Stacks, StackEvery and NoWakerStacks are the probe's
	// (probes/offcpu.Options).
	MinBlock      time.Duration
	Stacks        probe.Stacks
	StackEvery    int
	NoWakerStacks bool
	// Top bounds the waits listed.
	Top int
}

// OffCPU is the off-CPU part: where the watched threads waited, by stack,
// state and waker, their run-queue latency and each thread pool's time on
// CPU, runnable and blocked (offcpu.Session, the code offcpu.Measure
// runs).
type OffCPU struct {
	opts    OffCPUOptions
	session *offcpu.Session
	ev      *evidence.OffCPU
	cov     *budget.Coverage
	proc    procfs.FS
	// exited says the watched process exited before the window ended.
	exited string
	// begin and end are the window's first and last readings.
	begin, end time.Time
}

// NewOffCPU returns the off-CPU part.
func NewOffCPU(opts OffCPUOptions) *OffCPU { return &OffCPU{opts: opts} }

// SetCoverage implements Sampled: the budget may attach the probe's
// sched hooks in sampling windows only.
func (p *OffCPU) SetCoverage(c *budget.Coverage) { p.cov = c }

// Open implements Part.
func (p *OffCPU) Open(src Sources) error {
	if !src.Probes.Has(&probe.Spec) {
		return Unavailable("off-CPU: no probe opener in this run")
	}
	o := offcpu.Options{PID: p.opts.PID, Top: p.opts.Top, Proc: src.Root, Symbols: src.Symbols,
		Probe: probe.Options{Method: p.opts.Method, MinBlock: p.opts.MinBlock, Stacks: p.opts.Stacks,
			StackEvery: p.opts.StackEvery, NoWakerStacks: p.opts.NoWakerStacks},
		Open: func(po probe.Options) (offcpu.Probe, error) {
			return OpenProbe[OffCPUProbe](src.Probes, &probe.Spec, po)
		},
	}
	if src.Probes.KernelNamer != nil {
		o.KernelNamer = src.Probes.KernelNamer
	}
	p.proc = src.Root
	s, err := offcpu.Open(o)
	if err != nil {
		return err
	}
	p.session = s
	return nil
}

// Probes implements Part.
func (p *OffCPU) Probes() []probes.Probe {
	if p.session == nil {
		return nil
	}
	return probesOf(p.session.Probe().(OffCPUProbe))
}

// Begin implements Part.
func (p *OffCPU) Begin(context.Context) error {
	p.begin = time.Now()
	p.session.Begin()
	return nil
}

// End implements Part: the last reading. The probe is closed with the
// session's; the stacks are named in Evidence, after it.
func (p *OffCPU) End(context.Context) error {
	if err := p.session.Read(); err != nil {
		return err
	}
	p.end = time.Now()
	p.exited = offcpu.Ended(offcpu.Options{PID: p.opts.PID, Proc: p.proc})
	return nil
}

// Evidence is what the window measured, its stacks named (once: call it
// after the session has closed).
func (p *OffCPU) Evidence() *evidence.OffCPU {
	if p.ev != nil || p.session == nil {
		return p.ev
	}
	e := p.cov.Estimate(probe.Group)
	if e != nil {
		// The probe's own window is its last epoch: the threads were
		// watched for the sampling windows' sum.
		p.session.SetWindow(time.Duration(e.Coverage * float64(p.end.Sub(p.begin))))
	}
	ev := p.session.Finish("")
	if p.exited != "" {
		ev.Warnings = append(ev.Warnings, p.exited+" before the window ended: its threads' times stop there")
	}
	if e != nil {
		// The probe starts a new epoch each time it attaches again: no
		// wait is timed across a gap, so the times are of the sampling
		// windows only. They are not scaled up: a wait longer than a
		// window is cut, and which waits fell in the gaps is unknown.
		ev.Coverage = e
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("the sched tracepoints were attached %.0f %% of the %v window, in %d sampling windows (overhead budget): off-CPU, runnable and on-CPU times are of those %v only, and waits longer than a sampling window are cut; --exact keeps them attached",
			100*e.Coverage, p.end.Sub(p.begin).Round(time.Millisecond), e.Windows, time.Duration(ev.DurationNs).Round(time.Millisecond)))
	}
	p.ev = ev
	return ev
}

func init() {
	registerBuilder(probe.Spec.Name, func(b Build, u PartUse, ps *Parts) {
		o := OffCPUOptions{Method: b.Method, PID: optInt(u, "pid"), MinBlock: u.Opts["min_block"].(time.Duration),
			StackEvery: optInt(u, "stack_every"), NoWakerStacks: !u.Opts["waker_stacks"].(bool), Top: optInt(u, "top")}
		if o.MinBlock == 0 {
			o.MinBlock = -1 // the probe's 0 is its default: the option's 0 is every wait
		}
		switch u.Opts["stacks"].(string) {
		case "kernel":
			o.Stacks = probe.KernelOnly
		case "user":
			o.Stacks = probe.UserOnly
		}
		ps.OffCPU = NewOffCPU(o)
	})
}
