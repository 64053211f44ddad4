package serve

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/recipes"
)

// Recipe is a recipe plan served continuously: its measurement's parts
// are built once and opened once; after each window the measurement's
// Result and the recipe's rules turn the window's deltas into metrics.
// It is the same plan `perfscope recipe run` measures, built-in or a
// user's file.
type Recipe struct {
	Plan *recipes.Plan
	m    *recipes.Measurement
}

// LoadRecipe finds a recipe (a built-in's name or a file), binds set to
// its parameters, refuses a recipe that measures once (async-profiler,
// gclog, output files: recipes.Plan.Continuous) before anything on the
// system is touched, and checks the plan against the system.
func LoadRecipe(src measure.Sources, nameOrFile string, set map[string]string) (*Recipe, error) {
	r, err := recipes.Find(nameOrFile)
	if err != nil {
		return nil, err
	}
	if d := r.Window.Duration.Param; d != "" {
		if v, ok := set[d]; ok {
			// It would be bound and then ignored: the window lasts
			// --interval.
			return nil, &badInput{fmt.Sprintf("--set %s=%s: a served window lasts --interval, not the recipe's %s: pass --interval %s instead", d, v, d, v)}
		}
	}
	p, err := r.Bind(set)
	if err != nil {
		return nil, err
	}
	if err := p.Continuous(); err != nil {
		return nil, err
	}
	if err := p.Prepare(src); err != nil {
		return nil, err
	}
	return &Recipe{Plan: p, m: p.NewMeasurement(recipes.Hooks{Continuous: true})}, nil
}

// badInput is one sentence the user can correct (exit 2).
type badInput struct{ msg string }

func (e *badInput) Error() string        { return e.msg }
func (e *badInput) Is(target error) bool { return target == measure.ErrBadInput }

// Name is the recipe's name.
func (r *Recipe) Name() string { return r.Plan.Recipe.Name }

// Parts are the parts to open once.
func (r *Recipe) Parts() []measure.Part { return r.m.List() }

// Window is the recipe's window (its statistics mode and, when shorter
// than the window, its timeline interval) lasting every instead of the
// recipe's duration.
func (r *Recipe) Window(every time.Duration, started time.Time) measure.Window {
	w := r.m.Window(recipes.Hooks{Started: started})
	w.Duration = every
	if w.Interval >= every {
		w.Interval = 0 // a timeline of one row adds nothing
	}
	return w
}

// Collect turns the window just measured into metrics' input: the
// sections' deltas and the findings of the recipe's rules over them.
func (r *Recipe) Collect(ctx context.Context, src measure.Sources, run measure.Run) Window {
	res := r.m.Result(ctx, src, run)
	res.Findings = r.m.Judge(res, src)
	w := Window{Begin: run.Begin, End: run.End, Findings: res.Findings, Overhead: run.Overhead,
		Softirq: res.Softirq, Locks: res.Locks, JVMPauses: res.JVMPauses, Report: res.Report("serve", "")}
	if p := res.Profile; p != nil {
		w.Profile = &WindowProfile{ProfileSampling: p.Evidence.ProfileSampling, CPUs: p.Evidence.PerCPU}
	}
	if n := res.Net; n != nil {
		// A section the recipe does not measure is left out, not
		// exported as unavailable.
		ev := n.Evidence
		for name, set := range map[string]func(){
			softirq.Spec.Name:    func() { w.Softirq = &ev.Softirq },
			netqueue.Spec.Name:   func() { w.Queues = &ev.Queues },
			lockstat.Spec.Name:   func() { w.Locks = &ev.Locks },
			udpdrop.Spec.Name:    func() { w.Drops = &ev.Drops },
			measure.TCPSpec.Name: func() { w.TCP = ev.TCP },
			cpuprofile.Spec.Name: func() {
				if ev.Profile.Unavailable == "" {
					w.Profile = &WindowProfile{ProfileSampling: ev.Profile.ProfileSampling, CPUs: ev.Profile.CPUs}
				}
			},
		} {
			if hasComponent(r.Plan, name) {
				set()
			}
		}
	}
	return w
}

func hasComponent(p *recipes.Plan, name string) bool {
	for _, c := range p.Components() {
		if c == name {
			return true
		}
	}
	return false
}

// Names are the built-ins that can be served: those using no part that
// measures once (async-profiler, gclog, offcpu, goalloc: their specs say
// Once; recipes.Plan.Continuous checks a bound plan, this the recipe as
// written, for help and completion).
func Names() []string {
	var out []string
	for _, name := range recipes.BuiltinNames() {
		r, ok := recipes.Builtin(name)
		if !ok {
			continue
		}
		once := false
		for _, u := range append(append([]recipes.Use{}, r.Probes...), r.Collectors...) {
			once = once || u.Once
		}
		if !once {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
