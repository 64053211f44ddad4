package recipes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/spec"
)

// boundUse is an enabled component with every option's value.
type boundUse struct {
	Use
	opts map[string]any
}

type boundRule struct {
	RuleChoice
	thresholds diagnose.Thresholds
}

type boundOutput struct {
	OutputSpec
	dir   string
	title string
}

// Bind gives the recipe's parameters their values: set (NAME → text, as
// --set takes them) over the defaults. It checks every value against the
// parameter's type and every option it reaches; errors are bad input and
// name the parameter and, for an option, its place in the recipe.
func (r *Recipe) Bind(set map[string]string) (*Plan, error) {
	return r.bind(set, nil)
}

// BindFlags is Bind for a command whose flags are the recipe's parameters
// (perfscope jvm follows jvm-alloc): its sentences name the flag the user
// typed — flags[param], else --param-with-dashes — and it stops at the
// first, as a command's errors are one sentence. Prepare's sentences name
// the flags too.
func (r *Recipe) BindFlags(set, flags map[string]string) (*Plan, error) {
	if flags == nil {
		flags = map[string]string{}
	}
	p, err := r.bind(set, flags)
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
		return nil, j.Unwrap()[0]
	}
	return p, err
}

func (r *Recipe) bind(set, flags map[string]string) (*Plan, error) {
	p := &Plan{Recipe: r, Values: map[string]any{}, Set: map[string]string{}, flags: flags}
	var errs []error
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	refused := map[string]bool{}
	for _, n := range names {
		text := set[n]
		param, ok := r.Parameter(n)
		if !ok {
			errs = append(errs, measure.BadInput("--set %s=%s: recipe %s has no parameter %s%s", n, text, r.Name, n, r.paramNames()))
			continue
		}
		v, err := param.Parse(text)
		if err != nil {
			errs = append(errs, measure.BadInput("%s: %v", p.given(n, text), err))
			refused[n] = true
			continue
		}
		p.Values[n], p.Set[n] = v, text
	}
	for _, param := range r.Parameters {
		if _, given := p.Values[param.Name]; given || refused[param.Name] {
			continue
		}
		switch {
		case param.Required && flags != nil:
			errs = append(errs, measure.BadInput("%s is required: %s (%s)", p.name(param.Name), param.doc(), param.Want()))
		case param.Required:
			errs = append(errs, measure.BadInput("recipe %s needs --set %s=VALUE: %s (%s)", r.Name, param.Name, param.doc(), param.Want()))
		case param.Default != nil:
			p.Values[param.Name] = param.Default
		default:
			p.Values[param.Name] = zeroOf(param.Kind)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, u := range append(append([]Use{}, r.Probes...), r.Collectors...) {
		if u.Enabled != nil && !p.truth(*u.Enabled) {
			continue
		}
		b := boundUse{Use: u, opts: map[string]any{}}
		for _, o := range u.Component.Options {
			ref, given := u.Options[o.Name]
			switch {
			case given:
				v, err := p.value(ref, o.Domain)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				b.opts[o.Name] = v
			case o.Default != nil:
				b.opts[o.Name] = o.Default
			default:
				b.opts[o.Name] = zeroOf(o.Kind)
			}
		}
		p.uses = append(p.uses, b)
	}
	if len(p.uses) == 0 {
		errs = append(errs, measure.BadInput("recipe %s measures nothing with these parameters: every probe and collector is disabled", r.Name))
	}
	errs = append(errs, p.bindWindow()...)
	if u, ok := p.use(measure.AsyncProfilerSpec.Name); ok && len(errs) == 0 {
		if err := p.bindJVM(u); err != nil {
			errs = append(errs, err)
		}
	}
	if u, ok := p.use(golang.Spec.Name); ok && len(errs) == 0 {
		if err := p.bindGo(u); err != nil {
			errs = append(errs, err)
		}
	}
	for _, rc := range r.Rules {
		if rc.Enabled != nil && !p.truth(*rc.Enabled) {
			continue
		}
		br := boundRule{RuleChoice: rc}
		if len(rc.Thresholds) > 0 {
			br.thresholds = diagnose.Thresholds{}
			tunables := familyThresholds(rc.Family)
			if rc.ID != "" {
				info, _ := ruleByID(rc.ID)
				tunables = info.Thresholds
			}
			for name, ref := range rc.Thresholds {
				th := thresholdNamed(tunables, name)
				v, err := p.value(ref, Domain{Kind: KindFloat, Min: bound(th.Min), Max: bound(th.Max)})
				if err != nil {
					errs = append(errs, err)
					continue
				}
				br.thresholds[name] = v.(float64)
			}
		}
		p.rules = append(p.rules, br)
	}
	for _, o := range r.Outputs {
		v, err := p.value(o.Dir, Domain{Kind: KindDir})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.outputs = append(p.outputs, boundOutput{OutputSpec: o, dir: v.(string), title: p.expand(o.Title)})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// minInterval is the shortest timeline interval: ticks read every probe.
const minInterval = 10 * time.Millisecond

func (p *Plan) bindWindow() []error {
	w := p.Recipe.Window
	var errs []error
	d, err := p.value(w.Duration, windowDuration)
	if err != nil {
		return []error{err}
	}
	p.window = measure.Window{Duration: d.(time.Duration), Stats: w.Stats, Budget: budget.Budget{CPUShare: budget.Default}}
	if w.Budget != nil {
		p.window.Budget = *w.Budget
	}
	if w.Interval != nil {
		iv, err := p.value(*w.Interval, Domain{Kind: KindDuration})
		switch {
		case err != nil:
			errs = append(errs, err)
		case iv.(time.Duration) == 0:
			// A zero interval parameter: no timeline.
		case iv.(time.Duration) > p.window.Duration && w.Interval.Param == "":
			errs = append(errs, p.placed(w.Duration, fmt.Errorf("want a duration no shorter than window.interval (%v), got %v", iv, p.window.Duration)))
		case iv.(time.Duration) < minInterval || iv.(time.Duration) > p.window.Duration:
			errs = append(errs, p.placed(*w.Interval, fmt.Errorf("want an interval between %v and the window's %v (0: none), got %v", minInterval, p.window.Duration, iv)))
		default:
			p.window.Interval = iv.(time.Duration)
		}
	}
	if w.AttachMethod != nil {
		m, err := p.value(*w.AttachMethod, attachDomain)
		if err != nil {
			errs = append(errs, err)
		} else {
			p.method = probes.AttachMethod(m.(string))
		}
	}
	return errs
}

// value resolves a literal or a parameter reference for a field of domain
// dom, checking the parameter's value against the field's bounds.
func (p *Plan) value(r Ref, dom Domain) (any, error) {
	if r.Param == "" {
		return r.Value, nil
	}
	v := dom.Convert(p.Values[r.Param])
	if err := dom.Check(v); err != nil {
		return nil, p.placed(r, err)
	}
	return v, nil
}

// placed says which parameter's value a field refused, and where the
// recipe uses it.
func (p *Plan) placed(r Ref, err error) error {
	if r.Param == "" {
		return measure.BadInput("%s: %v", FieldError{File: p.Recipe.File, Line: r.Line, Path: r.Path}.place(), err)
	}
	given, ok := p.Set[r.Param]
	if !ok {
		param, _ := p.Recipe.Parameter(r.Param)
		given = param.Format(p.Values[r.Param])
	}
	if p.flags != nil {
		return measure.BadInput("%s: %v", p.given(r.Param, given), err)
	}
	return measure.BadInput("%s=%s: %s (%s): %v", r.Param, given, r.Path, FieldError{File: p.Recipe.File, Line: r.Line}.place(), err)
}

// name is how a sentence names a parameter: the command's flag when the
// plan was bound from flags (BindFlags), else the parameter's name.
func (p *Plan) name(param string) string {
	if p.flags == nil {
		return param
	}
	if f, ok := p.flags[param]; ok {
		return f
	}
	return "--" + strings.ReplaceAll(param, "_", "-")
}

// given names a parameter with its value as the user gave it: "--set
// pid=x", or a command's "--pid x".
func (p *Plan) given(param, text string) string {
	if p.flags == nil {
		return fmt.Sprintf("--set %s=%s", param, text)
	}
	return fmt.Sprintf("%s %s", p.name(param), text)
}

func (e FieldError) place() string {
	s := e.File
	if e.Line > 0 {
		s += fmt.Sprintf(":%d", e.Line)
	}
	if e.Path != "" {
		s += ": " + e.Path
	}
	return s
}

// truth is an `enabled` value: a bool, or whether a parameter is set.
func (p *Plan) truth(r Ref) bool {
	if r.Param == "" {
		b, _ := r.Value.(bool)
		return b
	}
	return isSet(p.Values[r.Param])
}

// expand replaces ${parameter}s in a text.
func (p *Plan) expand(s string) string {
	return textRefRE.ReplaceAllStringFunc(s, func(m string) string {
		return formatValue(p.Values[m[2:len(m)-1]])
	})
}

func zeroOf(k Kind) any {
	switch k {
	case KindInt, KindPort, KindPID, KindSize:
		return int64(0)
	case KindFloat:
		return float64(0)
	case KindBool:
		return false
	case KindDuration:
		return time.Duration(0)
	case KindCPUs:
		return cpuset.Set{}
	case KindFiles, KindList:
		return []string(nil)
	case KindPorts:
		return []int64(nil)
	}
	return ""
}

func (r *Recipe) paramNames() string {
	if len(r.Parameters) == 0 {
		return " (it takes none)"
	}
	names := make([]string, len(r.Parameters))
	for i, p := range r.Parameters {
		names[i] = p.Name
	}
	return " (parameters: " + strings.Join(names, ", ") + ")"
}

func (p Parameter) doc() string {
	if p.Description != "" {
		return p.Description
	}
	return p.Name
}

// use finds an enabled component by name.
func (p *Plan) use(name string) (boundUse, bool) {
	for _, u := range p.uses {
		if u.Name == name {
			return u, true
		}
	}
	return boundUse{}, false
}

// HasStacks says whether a run of the plan has stacks to draw (its
// profile or async-profiler is on).
func (p *Plan) HasStacks() bool {
	_, cpu := p.use(cpuprofile.Spec.Name)
	_, jvm := p.use(measure.AsyncProfilerSpec.Name)
	return cpu || jvm
}

// Window is the plan's measurement window.
func (p *Plan) Window() measure.Window { return p.window }

func optionRequired(c Component, name string) bool {
	o, _ := optionOf(c, name)
	return o.Required
}

// Prepare checks the plan against the system before anything is loaded:
// interfaces exist and are up, processes run, CPUs are online, the
// sampling rate is allowed, files and output directories exist. Errors
// are one sentence each, marked ErrBadInput or ErrUnavailable.
func (p *Plan) Prepare(src measure.Sources) error {
	var iface string
	for _, part := range []*spec.Part{&netqueue.Spec, &measure.NetCountersSpec} {
		u, ok := p.use(part.Name)
		if !ok {
			continue
		}
		n := u.opts["interface"].(string)
		switch {
		case n == "" && optionRequired(u.Component, "interface"):
			return p.missingOption(u, "interface")
		case n != "" && iface != "" && n != iface:
			return measure.BadInput("%s counts interface %s but another part of recipe %s measures %s: one interface per run", u.Path, n, p.Recipe.Name, iface)
		case n != "":
			iface = n
		}
	}
	if iface != "" {
		var err error
		if p.iface, err = measure.ResolveInterface(src, iface); err != nil {
			return err
		}
	}
	for _, u := range p.uses {
		if pid, ok := u.opts["pid"].(int64); ok && pid > 0 {
			if err := measure.CheckProcess(src.Root, p.useOptionName(u, "pid"), int(pid)); err != nil {
				return err
			}
		} else if ok && u.Name == measure.HSPerfSpec.Name || ok && u.Name == measure.AsyncProfilerSpec.Name {
			return p.missingOption(u, "pid")
		}
	}
	if u, ok := p.use(softirq.Spec.Name); ok {
		if err := checkOnline(src, u.opts["cpus"].(cpuset.Set)); err != nil {
			return err
		}
	}
	if u, ok := p.use(cpuprofile.Spec.Name); ok {
		freq := u.opts["frequency"].(int64)
		if max, ok, _ := src.Root.SysctlInt("kernel.perf_event_max_sample_rate"); ok && freq > max {
			return measure.BadInput("the profile's frequency %d is above kernel.perf_event_max_sample_rate (%d): lower it", freq, max)
		}
		if u.opts["jit_map"].(bool) {
			pid := u.opts["pid"].(int64)
			if pid == 0 {
				return measure.BadInput("%s: jit_map needs a pid: perf maps belong to one process", u.Path)
			}
			var err error
			if p.jvm, err = measure.CheckJITMap(src, int(pid)); err != nil {
				return err
			}
		}
	}
	if u, ok := p.use(measure.GCLogSpec.Name); ok {
		files := u.opts["files"].([]string)
		if len(files) == 0 {
			return p.missingOption(u, "files")
		}
		if err := measure.CheckGCLogs(files, false); err != nil {
			return err
		}
	}
	if u, ok := p.use(measure.AsyncProfilerSpec.Name); ok {
		if lib := u.opts["library"].(string); lib != "" {
			if _, err := os.Stat(lib); err != nil {
				return measure.BadInput("%s %s: %v", p.useOptionName(u, "library"), lib, errors.Unwrap(err))
			}
		}
		if err := p.readJVMBody(u); err != nil {
			return err
		}
	}
	if err := p.readGoBody(); err != nil {
		return err
	}
	for _, o := range p.outputs {
		if o.dir == "" || p.outDirs[o.dir] != nil {
			continue // not written, or opened already
		}
		// Opened (and created) before the window, not after a window
		// spent for nothing, and held: perfscope writes only into a
		// directory no other user can write to, reached through no
		// directory or link another user controls (safeio), and writes
		// through this descriptor (WriteOutputs), so the directory cannot
		// be swapped while the run measures.
		d, err := safeio.OpenPrivateDir(o.dir)
		if err != nil {
			if errors.Is(err, safeio.ErrUnsafeDir) {
				return measure.BadInput("%s: %v; perfscope writes only into a directory that no other user can write to", p.optionName(o.Dir), err)
			}
			if safeio.Refused(err) {
				return measure.BadInput("%s: %v", p.optionName(o.Dir), err)
			}
			return measure.BadInput("%s: cannot create %s: %v", p.optionName(o.Dir), o.dir, pathReason(err))
		}
		if p.outDirs == nil {
			p.outDirs = map[string]*safeio.Dir{}
		}
		p.outDirs[o.dir] = d
	}
	p.prepared = true
	return nil
}

// pathReason is the reason of a path error without the path, which the
// sentence names already.
func pathReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// optionName names a value for a sentence: its parameter, else its place.
func (p *Plan) optionName(r Ref) string {
	if r.Param != "" {
		return p.name(r.Param)
	}
	return FieldError{File: p.Recipe.File, Line: r.Line, Path: r.Path}.place()
}

// optionName names an option for a sentence: the parameter that set it
// (what the user typed), else its place in the recipe.
func (p *Plan) useOptionName(u boundUse, option string) string {
	if ref, ok := u.Options[option]; ok && ref.Param != "" {
		return p.name(ref.Param)
	}
	return join(u.Path, option)
}

func (p *Plan) missingOption(u boundUse, option string) error {
	if ref, ok := u.Options[option]; ok && ref.Param != "" && p.flags != nil {
		return measure.BadInput("%s is required", p.name(ref.Param))
	}
	if ref, ok := u.Options[option]; ok && ref.Param != "" {
		return measure.BadInput("recipe %s needs --set %s=VALUE (%s.%s)", p.Recipe.Name, ref.Param, u.Path, option)
	}
	return measure.BadInput("%s: %s is required", u.Path, option)
}

// checkOnline refuses CPUs that are not online, naming the ones that are.
func checkOnline(src measure.Sources, cpus cpuset.Set) error {
	if cpus.IsEmpty() {
		return nil
	}
	online, err := src.Root.Softirqs()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read /proc/softirqs: %w", err)
	}
	for _, c := range cpus.CPUs() {
		if _, ok := online.ByCPU("NET_RX", c); !ok {
			return measure.BadInput("CPU %d is not online (online: %s)", c, cpuset.Of(online.CPUs...).List())
		}
	}
	return nil
}
