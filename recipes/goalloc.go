package recipes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/report"
)

// GoResult is one measurement of a Go program and its findings.
type GoResult struct {
	*golang.Result
	Findings []diagnose.Finding
}

// bindGo turns the goalloc probe's options into golang.Options, checking
// how the window's load and request sources go together (as bindJVM
// does). A body file is read by Prepare (readGoBody).
func (p *Plan) bindGo(u boundUse) error {
	if len(p.uses) > 1 {
		return measure.BadInput("%s measures alone, over its own window: recipe %s uses %d probes and collectors", u.Path, p.Recipe.Name, len(p.uses))
	}
	opt := func(name string) any { return u.opts[name] }
	name := func(option string) string { return p.useOptionName(u, option) }
	o := golang.Options{PID: int(opt("pid").(int64)), Duration: p.window.Duration, Requests: opt("requests").(int64), TopSites: int(opt("top").(int64))}
	switch opt("count").(string) {
	case "on":
		o.Passive = jvm.PassiveRequired
	case "off":
		o.Passive = jvm.PassiveOff
	}
	for _, port := range opt("http_ports").([]int64) {
		o.HTTPPorts = append(o.HTTPPorts, uint16(port))
	}
	switch opt("pools").(string) {
	case "exact":
		o.ExactPools = true
	case "off":
		o.NoPools = true
	}
	load, from := opt("load").(string), opt("requests_from").(string)
	headers := opt("header").([]string)
	body, bodyFile := opt("body").(string), opt("body_file").(string)
	if load == "" {
		if body != "" || bodyFile != "" || len(headers) > 0 || opt("method").(string) != "GET" {
			return measure.BadInput("%s, %s and %s shape the load: add %s URL", name("method"), name("body"), name("header"), name("load"))
		}
		if from == "" {
			if opt("requests_metric").(string) != "" {
				return measure.BadInput("%s names a counter of %s: add %s URL", name("requests_metric"), name("requests_from"), name("requests_from"))
			}
			p.goOptions = &o
			return nil
		}
		if o.Requests > 0 {
			return measure.BadInput("%s N and %s both count the window's requests: give one", name("requests"), name("requests_from"))
		}
		// URL#metric names the counter.
		metric := opt("requests_metric").(string)
		if url, frag, ok := strings.Cut(from, "#"); ok {
			if metric != "" && frag != metric {
				return measure.BadInput("%s %s names the counter %q and %s %q: give one", name("requests_from"), from, frag, name("requests_metric"), metric)
			}
			from, metric = url, frag
		}
		var jo jvm.Options
		if err := p.metricsSource(boundUse{Use: u.Use, opts: map[string]any{"requests_metric": metric, "requests_match": []string(nil)}}, &jo, from); err != nil {
			return err
		}
		o.RequestsFrom = jo.RequestsFrom
		p.goOptions = &o
		return nil
	}
	spec, err := p.loadSpec(u, o.Requests)
	if err != nil {
		return err
	}
	o.Load, o.Requests = spec, 0
	p.goOptions = &o
	return nil
}

// readGoBody reads the load's body file, if the recipe names one.
func (p *Plan) readGoBody() error {
	u, ok := p.use(golang.Spec.Name)
	if !ok || p.goOptions == nil || p.goOptions.Load == nil {
		return nil
	}
	file := u.opts["body_file"].(string)
	if file == "" {
		return nil
	}
	b, err := readBody(file)
	if err != nil {
		return measure.BadInput("%s %s: %v", p.useOptionName(u, "body_file"), file, err)
	}
	p.goOptions.Load.Body = b
	return nil
}

// GoOptions are the goalloc probe's bound options (nil when the recipe
// does not use it), for a command that measures with them itself.
func (p *Plan) GoOptions() *golang.Options {
	if p.goOptions == nil {
		return nil
	}
	o := *p.goOptions
	return &o
}

// runGo measures the plan's one Go program over its window and judges
// it. A program that exits mid-run still gives what was measured, with
// the error (wrapping golang.ErrTargetExited).
func (p *Plan) runGo(ctx context.Context, src measure.Sources, h Hooks) (*Result, error) {
	o := *p.goOptions
	o.FS = golang.FS{Root: src.Root.Root}
	o.Started = h.OnStart
	begin := time.Now()
	g, err := golang.Measure(ctx, o)
	if g == nil {
		return nil, GoError(o.PID, err)
	}
	res := p.GoRun(src, g, begin, time.Now())
	if err != nil {
		return res, GoError(o.PID, err)
	}
	return res, nil
}

// GoRun is one measurement of the plan's Go program as the recipe's
// result: its workload named, judged with the recipe's rules. `perfscope
// go` measures with GoOptions itself and reports through this.
func (p *Plan) GoRun(src measure.Sources, g *golang.Result, begin, end time.Time) *Result {
	g.Evidence.Workload = src.Workload(g.Evidence.PID)
	res := &Result{Plan: p, Sections: measure.Sections{Run: measure.Run{Begin: begin, End: end}}}
	res.Go = &GoResult{Result: g, Findings: diagnose.Run(diagnose.GoRules, g.Evidence)}
	res.Findings = p.judge(res, src)
	return res
}

// GoError is one sentence with the way out for what went wrong measuring
// pid, marked bad input or unavailable where it is; everything attached
// was detached before golang.Measure returned.
func GoError(pid int, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, golang.ErrNoProcess):
		return measure.BadInput("pid %d is not running: pass the pid of a running Go program", pid)
	case errors.Is(err, golang.ErrNotGo):
		return measure.BadInput("pid %d is not a Go program (%v): pass the pid of a program built by the Go toolchain", pid, err)
	case errors.Is(err, golang.ErrUnsupportedGo):
		return measure.Unavailable("%v; perfscope reads Go 1.19 and later on amd64 and measured nothing rather than guess", err)
	case errors.Is(err, jvm.ErrBadSource):
		return measure.BadInput("%v; nothing was attached to pid %d", err, pid)
	case errors.Is(err, probes.ErrPermission):
		return measure.Unavailable("pid %d: %v; run as root (or with CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE)", pid, err)
	case errors.Is(err, probes.ErrNotSupported):
		return measure.Unavailable("pid %d: %v; `perfscope doctor` shows which kernel features this machine has", pid, err)
	case errors.Is(err, os.ErrPermission):
		way := "run as root or as the program's user"
		if os.Geteuid() == 0 {
			// Root was refused: the process is protected from this one
			// (another user namespace's, or a kernel-managed process).
			way = "the kernel refused even root: the process is protected from this one (another user namespace, or a process such as a VM's init)"
		}
		if prefix := fmt.Sprintf("pid %d: ", pid); strings.HasPrefix(err.Error(), prefix) {
			return measure.Unavailable("%v; %s", err, way)
		}
		return measure.Unavailable("pid %d: %v; %s", pid, err, way)
	}
	return err
}

// fill makes rep the Go program's report: its data, allocation flame
// graph and perfscope's cost.
func (g *GoResult) fill(rep *report.Report) {
	e := g.Evidence
	rep.Data = report.GoData{Go: e, Load: g.Load}
	rep.Overhead = g.Overhead()
	rep.Meta.DurationNs = e.WindowNs
	if fp := GoFlame(e); fp != nil && fp.Total() > 0 {
		rep.Flame = fp
		rep.Show.Title = fmt.Sprintf("pid %d: bytes allocated", e.PID)
		rep.Show.Subtitle = fmt.Sprintf("%s, %s sampled allocations weighted to %s", e.Binary.GoVersion, report.Count(float64(e.Sampling.Samples)), report.Bytes(float64(fp.Total())))
	}
}

// Overhead is perfscope's cost in the window: the uprobes' own runs and
// time, as a share of the machine's CPUs.
func (g *GoResult) Overhead() *evidence.Overhead {
	ov := &evidence.Overhead{AttachMethod: "uprobes", AttachNs: g.AttachNs, Programs: g.Costs}
	var ns uint64
	for _, c := range g.Costs {
		ns += c.RunTimeNs
	}
	if w := g.Evidence.WindowNs; w > 0 {
		ov.BPFTimeShare = float64(ns) / (float64(w) * float64(max(runtime.NumCPU(), 1)))
	}
	return ov
}

// GoFlame is the allocation flame graph: the sampled stacks, root first,
// weighted to estimated bytes (nil without stacks).
func GoFlame(e evidence.Go) *flame.Profile {
	if len(e.Stacks) == 0 {
		return nil
	}
	fp := flame.New(flame.Bytes)
	fp.SampleType = "alloc_space"
	for _, s := range e.Stacks {
		fp.Add(s.Frames, int64(s.Bytes+0.5))
	}
	return fp
}
