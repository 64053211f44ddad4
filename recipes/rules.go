package recipes

import (
	"sort"
	"strings"
	"sync"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/spec"
)

// RuleInfo is one rule a recipe can select: its ID, its family (the ID's
// prefix: net, jvm, gc, locks, jvm-net), what it judges, and the
// thresholds a recipe may override.
type RuleInfo struct {
	ID, Family string
	Judges     string
	Thresholds []diagnose.Threshold
	needs      ruleNeed
}

// ruleNeed is what a rule's evidence comes from.
type ruleNeed int

const (
	needNet ruleNeed = iota
	needSoftirq
	needLocks
	needJVM
	needGC
	needPauseTimeline
	needTCP
	needOffCPU
	needGo
)

var judges = map[ruleNeed]string{
	needNet:           "a network run",
	needSoftirq:       "softirq per CPU",
	needLocks:         "kernel lock contention",
	needJVM:           "a JVM's allocation (" + measure.AsyncProfilerSpec.Name + ")",
	needGo:            "a Go program's allocation, GC cycles and sync.Pools (" + golang.Spec.Name + ")",
	needGC:            "GC logs",
	needPauseTimeline: "a port's drops next to a JVM's pauses, interval by interval",
	needTCP:           "a TCP run (" + partsGiving(spec.InputTCP, "") + ")",
	needOffCPU:        "threads off CPU and run-queue latency",
}

// softirqOnly are the network rules that read nothing but softirq per
// CPU, so that a softirq recipe without a network probe can run them.
var softirqOnly = map[string]bool{"net.softirq-concentrated": true}

func rulesOf[E any](rules []diagnose.Rule[E], need func(id string) ruleNeed) []RuleInfo {
	out := make([]RuleInfo, 0, len(rules))
	for _, r := range rules {
		fam, _, _ := strings.Cut(r.ID, ".")
		n := need(r.ID)
		out = append(out, RuleInfo{ID: r.ID, Family: fam, Judges: judges[n], Thresholds: r.Tunables, needs: n})
	}
	return out
}

// Rules lists every rule a recipe can select, by family and ID.
var Rules = sync.OnceValue(func() []RuleInfo {
	var out []RuleInfo
	out = append(out, rulesOf(diagnose.NetRules, func(id string) ruleNeed {
		if softirqOnly[id] {
			return needSoftirq
		}
		return needNet
	})...)
	out = append(out, rulesOf(diagnose.TCPRules, func(string) ruleNeed { return needTCP })...)
	out = append(out, rulesOf(diagnose.LockRules, func(string) ruleNeed { return needLocks })...)
	out = append(out, rulesOf(diagnose.JVMRules, func(string) ruleNeed { return needJVM })...)
	out = append(out, rulesOf(diagnose.GoRules, func(string) ruleNeed { return needGo })...)
	out = append(out, rulesOf(diagnose.GCRules, func(string) ruleNeed { return needGC })...)
	out = append(out, rulesOf(diagnose.TimelineRules, func(string) ruleNeed { return needPauseTimeline })...)
	out = append(out, rulesOf(diagnose.OffCPURules, func(string) ruleNeed { return needOffCPU })...)
	return out
})

func ruleByID(id string) (RuleInfo, bool) {
	for _, r := range Rules() {
		if r.ID == id {
			return r, true
		}
	}
	return RuleInfo{}, false
}

func ruleFamilies() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range Rules() {
		if !seen[r.Family] {
			seen[r.Family] = true
			out = append(out, r.Family)
		}
	}
	sort.Strings(out)
	return out
}

func thresholdNamed(list []diagnose.Threshold, name string) diagnose.Threshold {
	for _, t := range list {
		if t.Name == name {
			return t
		}
	}
	return diagnose.Threshold{}
}

// familyThresholds are the thresholds the family's rules read, each once,
// in the rules' order.
func familyThresholds(family string) []diagnose.Threshold {
	var out []diagnose.Threshold
	seen := map[string]bool{}
	for _, r := range Rules() {
		if r.Family != family {
			continue
		}
		for _, t := range r.Thresholds {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// missing says what the recipe lacks for the rule to judge anything ("" when
// nothing): the parts that give the rule's inputs, by their specs.
func (ri RuleInfo) missing(r *Recipe) string {
	judges := func(what string, in spec.Input, adjective string) string {
		if r.gives(in) {
			return ""
		}
		return "judges " + what + ": add " + partsGiving(in, adjective)
	}
	switch ri.needs {
	case needNet:
		return judges("a network run", spec.InputNet, "network ")
	case needTCP:
		return judges("a TCP run", spec.InputTCP, "")
	case needSoftirq:
		return judges("softirq per CPU", spec.InputSoftirq, "")
	case needLocks:
		return judges("kernel lock contention", spec.InputLocks, "")
	case needJVM:
		return judges("a JVM's allocation", spec.InputJVM, "")
	case needGo:
		return judges("a Go program's allocation", spec.InputGo, "")
	case needGC:
		return judges("GC logs", spec.InputGC, "")
	case needOffCPU:
		return judges("threads off CPU", spec.InputOffCPU, "")
	case needPauseTimeline:
		const what = "compares a JVM's pauses with a port's drops: add "
		switch {
		case !r.gives(spec.InputPauses):
			return what + partsGiving(spec.InputPauses, "")
		case !r.gives(spec.InputPortDrop):
			return what + partsGiving(spec.InputPortDrop, "") + " with the port"
		case r.Window.Interval == nil:
			return "compares intervals: give window.interval"
		}
	}
	return ""
}

// partsGiving names the catalog's parts that give in, for a message: "the
// tcp probe", "the udpdrop probe or the netcounters collector", "a network
// probe (netqueue, udpdrop, udpsock, tcp) or the netcounters collector".
func partsGiving(in spec.Input, adjective string) string {
	var probes, collectors []string
	for _, p := range measure.Catalog {
		switch {
		case !p.Recipe || !p.Has(in):
		case p.Probe:
			probes = append(probes, p.Name)
		default:
			collectors = append(collectors, p.Name)
		}
	}
	var alts []string
	for _, k := range []struct {
		names []string
		kind  string
	}{{probes, "probe"}, {collectors, "collector"}} {
		switch len(k.names) {
		case 0:
		case 1:
			alts = append(alts, "the "+k.names[0]+" "+k.kind)
		default:
			alts = append(alts, "a "+adjective+k.kind+" ("+strings.Join(k.names, ", ")+")")
		}
	}
	return strings.Join(alts, " or ")
}

// familyApplies says whether any rule of the family can judge the recipe.
func familyApplies(fam string, r *Recipe) bool {
	for _, ri := range Rules() {
		if ri.Family == fam && ri.missing(r) == "" {
			return true
		}
	}
	return false
}
