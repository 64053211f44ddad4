package recipes

import (
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/offcpu"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/report"
)

// Result is what one run of a plan measured, per section, with the
// findings of the rules the recipe chose.
type Result struct {
	Plan *Plan
	// Sections are what the parts measured (Run, Net, Softirq, Locks,
	// Profile, JVMPauses, OffCPU, Timeline).
	measure.Sections
	JVM      *measure.JVMResult
	GC       *measure.GCResult
	Go       *GoResult
	Findings []diagnose.Finding
}

// judge runs every rule that can read the result, with the recipe's
// thresholds, and keeps the findings of the rules it chose.
func (p *Plan) judge(r *Result, src measure.Sources) []diagnose.Finding {
	th := p.thresholds
	var all []diagnose.Finding
	var locks *evidence.LockSection
	switch {
	case r.Net != nil:
		all = append(all, diagnose.RunTuned(diagnose.NetRules, diagnose.NetInput{Evidence: r.Net.Evidence, Config: r.Net.Config}, th)...)
		if t := r.Net.Evidence.TCP; t != nil {
			all = append(all, diagnose.RunTuned(diagnose.TCPRules, diagnose.TCPInput{Evidence: *t, Config: r.Net.Config}, th)...)
		}
		if _, ok := p.use(lockstat.Spec.Name); ok {
			locks = &r.Net.Evidence.Locks
		}
	case r.Softirq != nil:
		var rules []diagnose.Rule[diagnose.NetInput]
		for _, rule := range diagnose.NetRules {
			if softirqOnly[rule.ID] {
				rules = append(rules, rule)
			}
		}
		in := diagnose.NetInput{Evidence: evidence.NetEvidence{Softirq: *r.Softirq, DurationNs: r.Softirq.DurationNs}}
		all = append(all, diagnose.RunTuned(rules, in, th)...)
	}
	if r.Locks != nil {
		locks = r.Locks
	}
	if locks != nil {
		in := diagnose.LockInput{Locks: *locks, DurationNs: int64(r.Run.Duration()), CPUs: measure.OnlineCPUs(src)}
		all = append(all, diagnose.RunTuned(diagnose.LockRules, in, th)...)
	}
	if r.JVM != nil {
		all = append(all, diagnose.RunTuned(diagnose.JVMRules, r.JVM.Evidence, th)...)
	}
	if r.GC != nil {
		all = append(all, diagnose.RunTuned(diagnose.GCRules, r.GC.GC, th)...)
	}
	if r.Timeline != nil {
		all = append(all, diagnose.RunTuned(diagnose.TimelineRules, *r.Timeline, th)...)
	}
	if r.OffCPU != nil {
		all = append(all, diagnose.RunTuned(diagnose.OffCPURules, *r.OffCPU, th)...)
	}
	if r.Go != nil {
		all = append(all, diagnose.RunTuned(diagnose.GoRules, r.Go.Evidence, th)...)
	}
	return p.choose(all)
}

// thresholds are the recipe's overrides for one rule: its family's, then
// its own over them (nil: every default).
func (p *Plan) thresholds(id string) diagnose.Thresholds {
	fam, _, _ := strings.Cut(id, ".")
	var out diagnose.Thresholds
	for _, byID := range []bool{false, true} {
		for _, br := range p.rules {
			if (byID && br.ID != id) || (!byID && (br.ID != "" || br.Family != fam)) {
				continue
			}
			for name, v := range br.thresholds {
				if out == nil {
					out = diagnose.Thresholds{}
				}
				out[name] = v
			}
		}
	}
	return out
}

// choose keeps the findings of the chosen rules (all when the recipe
// chose none), with the recipe's severity and impact overrides.
func (p *Plan) choose(all []diagnose.Finding) []diagnose.Finding {
	out := []diagnose.Finding{}
	for _, f := range all {
		if !p.Recipe.RulesGiven {
			out = append(out, f)
			continue
		}
		c, ok := p.choice(f.ID)
		if !ok || f.Impact < c.MinImpact {
			continue
		}
		if c.Severity != 0 {
			f.Severity = c.Severity
		}
		out = append(out, f)
	}
	diagnose.Rank(out)
	return out
}

// choice is the recipe's most specific choice for a rule: by ID, else by
// family.
func (p *Plan) choice(id string) (RuleChoice, bool) {
	fam, _, _ := strings.Cut(id, ".")
	var byFamily *RuleChoice
	for i, c := range p.rules {
		if c.ID == id {
			return c.RuleChoice, true
		}
		if c.Family == fam && byFamily == nil {
			byFamily = &p.rules[i].RuleChoice
		}
	}
	if byFamily != nil {
		return *byFamily, true
	}
	return RuleChoice{}, false
}

// Report is the run's report envelope for command ("udp", "softirq",
// "profile" for the commands that follow a built-in recipe, "recipe" for
// `perfscope recipe run`). A run with one section of a measuring command
// carries that command's data; any other run carries report.RecipeData.
func (r *Result) Report(command, version string) *report.Report {
	rep := report.New(command, version, r.started())
	// A window without probes (hsperfdata only) cost no BPF time: no
	// section of perfscope's cost but async-profiler's, if it ran.
	if ov := r.Run.Overhead; ov != nil && (ov.AttachMethod != "" || len(ov.Programs) > 0) {
		rep.Overhead = ov
	}
	rep.Meta.DurationNs = int64(r.Run.Duration())
	rep.Findings = r.Findings
	if rep.Findings == nil {
		rep.Findings = []diagnose.Finding{}
	}
	rep.Recipe = r.Plan.ref()
	if r.Go != nil {
		// goalloc measures alone (bindGo).
		r.Go.fill(rep)
		return rep
	}
	if r.Net != nil && r.Net.Flames != nil {
		// The HTML page draws the NET_RX CPUs' stacks apart from the
		// others', as the flame output does.
		netRX := cpuset.Of(r.Net.Evidence.Profile.NetRXCPUs...).List()
		rep.FlameSets = []report.FlameSet{
			{Title: "CPUs running NET_RX (" + netRX + ")", Profile: r.Net.Flames["netrx"]},
			{Title: "other CPUs", Profile: r.Net.Flames["other"]},
		}
	}
	sections := 0
	for _, present := range []bool{r.Net != nil, r.Softirq != nil, r.Locks != nil, r.Profile != nil, r.JVMPauses != nil, r.JVM != nil, r.GC != nil, r.OffCPU != nil} {
		if present {
			sections++
		}
	}
	if sections == 1 && r.Timeline == nil {
		switch {
		case r.Net != nil:
			rep.Meta.DurationNs = r.Net.Evidence.DurationNs
			rep.Data = report.NetData{NetEvidence: r.Net.Evidence, Config: r.Net.Config}
			return rep
		case r.Softirq != nil:
			rep.Meta.DurationNs = r.Softirq.DurationNs
			rep.Data = *r.Softirq
			return rep
		case r.Locks != nil:
			rep.Data = *r.Locks
			return rep
		case r.Profile != nil:
			rep.Data, rep.Flame = r.Profile.Evidence, r.Profile.Flame
			return rep
		case r.OffCPU != nil:
			rep.Meta.DurationNs = r.OffCPU.DurationNs
			rep.Data, rep.Flame = *r.OffCPU, offcpu.Flame(*r.OffCPU)
			return rep
		}
	}
	d := report.RecipeData{Softirq: r.Softirq, Locks: r.Locks, JVMPauses: r.JVMPauses, Timeline: r.Timeline, OffCPU: r.OffCPU}
	if r.OffCPU != nil && r.Profile == nil {
		rep.Flame = offcpu.Flame(*r.OffCPU)
	}
	if r.Net != nil {
		d.Net = &report.NetData{NetEvidence: r.Net.Evidence, Config: r.Net.Config}
		rep.Meta.DurationNs = r.Net.Evidence.DurationNs
	}
	if r.Profile != nil {
		d.Profile, rep.Flame = &r.Profile.Evidence, r.Profile.Flame
	}
	if r.JVM != nil {
		d.JVM = &r.JVM.Evidence
		if r.JVM.Load != nil {
			d.JVMLoad = r.JVM.Load
		}
		if rep.Flame == nil {
			rep.Flame = r.JVM.Flame()
		}
		if rep.Overhead == nil {
			rep.Overhead = r.JVM.Overhead(rep.Meta.CPUs)
			rep.Meta.DurationNs = r.JVM.Evidence.WindowNs
		}
	}
	if r.GC != nil {
		d.GC, d.GCFiles = &r.GC.GC, r.GC.Summary.Files
	}
	rep.Data = d
	return rep
}

func (r *Result) started() time.Time {
	if !r.Run.Begin.IsZero() {
		return r.Run.Begin
	}
	return time.Now()
}

// ref names the plan's recipe and every parameter's value.
func (p *Plan) ref() *report.RecipeRef {
	ref := &report.RecipeRef{Name: p.Recipe.Name, Source: p.Recipe.Source, Parameters: map[string]string{}}
	for _, param := range p.Recipe.Parameters {
		ref.Parameters[param.Name] = param.Format(p.Values[param.Name])
	}
	return ref
}

// WriteOutputs writes the recipe's outputs whose directory was given
// (report.WriteOutputFiles), through the directories Prepare checked and
// holds open; an output with nothing to draw (its profile disabled) is
// not written. Not the run's context: a Ctrl-C that ended the window
// early still wants what was measured written.
func (r *Result) WriteOutputs(rep *report.Report) error {
	var files []report.OutputFile
	for _, o := range r.Plan.outputs {
		if o.dir == "" {
			continue
		}
		f := report.OutputFile{Dir: o.dir, Name: o.Name, Format: o.Format, Place: o.Path}
		if f.Graph() {
			if f.Stacks, f.Title = r.stacks(o, rep); f.Stacks == nil {
				continue
			}
		}
		files = append(files, f)
	}
	dirs := r.Plan.outDirs
	r.Plan.outDirs = nil
	return report.WriteOutputFiles(rep, files, dirs)
}

// stacks are an output's stacks and title: a network run's profile split
// by its NET_RX CPUs, else the profile's, else async-profiler's.
func (r *Result) stacks(o boundOutput, rep *report.Report) (*flame.Profile, string) {
	title := o.title
	if title == "" {
		title = "perfscope recipe " + r.Plan.Recipe.Name
	}
	if r.Net != nil && r.Net.Flames != nil {
		split := map[string]string{
			"netrx": "CPUs running NET_RX (" + cpuset.Of(r.Net.Evidence.Profile.NetRXCPUs...).List() + ")",
			"other": "other CPUs",
			"all":   "all CPUs",
		}
		return r.Net.Flames[o.Stacks], title + ": " + split[o.Stacks]
	}
	if o.title == "" && rep.Show.Title != "" {
		title = rep.Show.Title
	}
	return rep.Flame, title
}

// JVMData is `perfscope jvm`'s data: the JVM's evidence, load and
// profile options, the off-CPU section (its findings are the recipe's
// already) and, with wall and async-profiler's wall clock, the two side
// by side per thread pool.
func (r *Result) JVMData(wall bool) report.JVMData {
	j := r.JVM
	data := report.NewJVMData(j.Evidence, j.Load, j.Warnings)
	data.ProfileOptions = j.ProfileOptions
	data.OffCPU = r.OffCPU
	if wall && j.ProfileOptions.Event == asprof.Wall {
		data.Wall = jvm.Wall(j.Profile, r.OffCPU, j.Evidence.PID, 5)
	}
	return data
}
