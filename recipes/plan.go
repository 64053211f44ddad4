package recipes

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
)

// Plan is a recipe bound to its parameters' values: every option known,
// the window fixed. Prepare checks it against the system; Run measures.
type Plan struct {
	Recipe *Recipe
	// Values are every parameter's value, defaults filled in.
	Values map[string]any
	// Set are the values given (--set), as given.
	Set map[string]string

	window  measure.Window
	method  probes.AttachMethod
	uses    []boundUse
	rules   []boundRule
	outputs []boundOutput

	prepared bool
	iface    netdev.Interface
	jvm      *attach.Target
	// flags name the parameters as a command's flags (BindFlags).
	flags map[string]string
	// jvmOptions are the async-profiler collector's, checked by Prepare.
	jvmOptions *jvm.Options
	// goOptions are the goalloc collector's (goalloc.go).
	goOptions *golang.Options
	// workload is the --cgroup, --container or --pod selection the
	// sockets, drops, lock waits and profile samples are kept by
	// (SetWorkload); nil: all.
	workload *cgroup.Selection
	// outDirs are the output directories Prepare opened, by the path
	// given: WriteOutputs writes through them, never by path again.
	outDirs map[string]*safeio.Dir
}

// SetBudget replaces the recipe's overhead budget (window.budget) with
// the user's (--overhead-budget, --exact): the zero Budget counts every
// event.
func (p *Plan) SetBudget(b budget.Budget) { p.window.Budget = b }

// SetWorkload keeps the run to the processes sel selected (--cgroup,
// --container, --pod): the sockets they own with those sockets' lock
// waits and drops, and a profile's samples of them. Host-wide sections
// (softirq per CPU, queues, IRQs) stay host-wide.
func (p *Plan) SetWorkload(sel *cgroup.Selection) { p.workload = sel }

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
func (p *Plan) Run(ctx context.Context, src measure.Sources, h Hooks) (*Result, error) {
	if !p.prepared {
		if err := p.Prepare(src); err != nil {
			return nil, err
		}
	}
	if _, ok := p.use(golang.Spec.Name); ok {
		return p.runGo(ctx, src, h)
	}
	m := p.NewMeasurement(h)
	var res *Result
	var jvmRes *measure.JVMResult
	var jvmErr error
	if parts := m.List(); len(parts) > 0 {
		s, err := measure.Open(src, parts...)
		if err != nil {
			return nil, m.OpenFailed(err)
		}
		if err := m.Opened(); err != nil {
			s.Close()
			return nil, err
		}
		var wg sync.WaitGroup
		window := m.Window(h)
		if _, ok := p.use(measure.AsyncProfilerSpec.Name); ok {
			// The probes measure the JVM's window: from when the
			// profiler's window begins to when it ends (a load perfscope
			// drives may make it longer or shorter than the duration).
			begin, end := make(chan struct{}), make(chan struct{})
			var beginOnce, endOnce sync.Once
			opened := func() { beginOnce.Do(func() { close(begin) }) }
			ended := func() { opened(); endOnce.Do(func() { close(end) }) }
			window.Begin, window.Until = begin, end
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer ended() // also when the JVM could not be profiled
				defer gosafe.Recover(&jvmErr)
				jvmRes, jvmErr = p.runJVMWindow(ctx, src, h, opened, ended)
			}()
		}
		run, err := s.Measure(ctx, window)
		s.Close()
		wg.Wait()
		if err != nil {
			return nil, err
		}
		res = m.Result(ctx, src, run)
	} else {
		// No parts: the JVM's window is the run's.
		res = &Result{Plan: p, Sections: measure.Sections{Run: measure.Run{Begin: time.Now()}}}
		if _, ok := p.use(measure.AsyncProfilerSpec.Name); ok {
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
	if u, ok := p.use(measure.GCLogSpec.Name); ok {
		gc, err := p.runGC(ctx, u)
		if err != nil {
			return nil, err
		}
		res.GC = &gc
	}
	res.Findings = p.judge(res, src)
	return res, jvmErr
}

func (p *Plan) runJVM(ctx context.Context, src measure.Sources, h Hooks) (*measure.JVMResult, error) {
	return p.runJVMWindow(ctx, src, h, nil, nil)
}

// runJVMWindow is runJVM calling starts and ends when the JVM's window
// begins and ends.
func (p *Plan) runJVMWindow(ctx context.Context, src measure.Sources, h Hooks, starts, ends func()) (*measure.JVMResult, error) {
	o := *p.jvmOptions
	o.FS, o.Started = src.JVMs, h.JVMStarted
	o.WindowStarts, o.WindowEnds = starts, ends
	res, err := measure.RunJVM(ctx, src, o)
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

func (p *Plan) runGC(ctx context.Context, u boundUse) (measure.GCResult, error) {
	files, err := measure.GCLogFiles(u.opts["files"].([]string), false)
	if err != nil {
		return measure.GCResult{}, err
	}
	return measure.RunGC(ctx, measure.GCOptions{Files: files, PauseGoal: u.opts["pause_goal"].(time.Duration),
		YoungInterval: u.opts["young_interval"].(time.Duration), RPS: u.opts["rps"].(float64),
		Requests: u.opts["requests"].(float64), TargetRPS: u.opts["target_rps"].(float64)})
}

// Continuous says why the plan cannot be measured window after window on
// one session (`perfscope serve`); nil when it can. async-profiler owns
// its window inside the JVM and gclog reads files after it: both measure
// once. A served recipe writes no files, so an output directory is
// refused rather than ignored.
func (p *Plan) Continuous() error {
	for _, u := range p.uses {
		if u.Once {
			return measure.BadInput("recipe %s uses %s (%s), which measures once: run it with perfscope recipe run", p.Recipe.Name, u.Name, u.Path)
		}
	}
	for _, o := range p.outputs {
		if o.dir != "" {
			return measure.BadInput("%s: a served recipe writes no files; leave it unset", p.optionName(o.Dir))
		}
	}
	if len(p.NewMeasurement(Hooks{}).List()) == 0 {
		return measure.BadInput("recipe %s has no probe or collector to measure continuously", p.Recipe.Name)
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
