package recipes

import (
	"context"
	"fmt"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes/cpuprofile"
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

// NewMeasurement builds the plan's parts (measure.NewParts: each part's
// constructor reads its options and the run's settings).
func (p *Plan) NewMeasurement(h Hooks) *Measurement {
	uses := make([]measure.PartUse, 0, len(p.uses))
	for i := range p.uses {
		uses = append(uses, measure.PartUse{Part: &p.uses[i].Component, Opts: p.uses[i].opts})
	}
	b := measure.Build{Method: p.method, Window: p.window.Duration, Interval: p.window.Interval, Continuous: h.Continuous,
		Select: p.workload, Iface: p.iface, JVM: p.jvm, OnSoftirqInterval: h.OnSoftirqInterval,
		NoProfile: "on-CPU profile: " + p.disabledWhy(cpuprofile.Spec.Name)}
	return &Measurement{plan: p, Parts: *measure.NewParts(b, uses)}
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
