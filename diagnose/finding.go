// Package diagnose holds perfscope's rules and the Finding model they
// produce. A rule is a pure function of a run's evidence: it reads numbers
// and configuration that collectors and probes gathered and returns at most
// one Finding. Rules never touch the system, so every rule is tested with
// table-driven evidence fixtures, including one where it must stay silent.
package diagnose

import (
	"fmt"
	"sort"
	"strings"
)

// Severity orders findings and drives --fail-on.
type Severity int

const (
	Info Severity = iota + 1
	Warn
	Crit
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warn:
		return "warn"
	case Crit:
		return "crit"
	}
	return "unknown"
}

// MarshalText makes severities read as words in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText accepts the words MarshalText writes.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	*s = v
	return err
}

// ParseSeverity parses "info", "warn" or "crit" (as --fail-on takes them).
func ParseSeverity(v string) (Severity, error) {
	switch strings.ToLower(v) {
	case "info":
		return Info, nil
	case "warn", "warning":
		return Warn, nil
	case "crit", "critical":
		return Crit, nil
	}
	return 0, fmt.Errorf("unknown severity %q (want info, warn or crit)", v)
}

// Finding is one diagnosed problem with the numbers behind it.
type Finding struct {
	// ID is stable across releases ("net.socket-lock-contention"); scripts
	// and --apply refer to findings by it.
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	// Evidence lines quote the measured numbers that triggered the rule.
	Evidence []string `json:"evidence"`
	// Impact estimates the share of the bottleneck the finding explains, in
	// [0,1] (e.g. the CPU share spent in the removable function, or the
	// fraction of packets dropped). Findings are ranked by it.
	Impact         float64        `json:"impact"`
	Recommendation Recommendation `json:"recommendation"`
	// Estimates names the report sections ("softirq", "locks") whose
	// estimates the finding rests on: numbers the overhead budget counted
	// in sampling windows only (its evidence says how). Empty: exact.
	Estimates []string `json:"estimates,omitempty"`
}

// Kind says whether perfscope can apply a recommendation itself.
type Kind string

const (
	// KindSetting is a system setting perfscope can apply with --apply and
	// undo with --revert: its Changes are typed and executed natively.
	KindSetting Kind = "setting"
	// KindCode needs a change in the application; perfscope never applies it.
	KindCode Kind = "code"
	// KindAdvice needs a human decision (hardware, a reboot, a JVM flag).
	KindAdvice Kind = "advice"
)

// Recommendation is what to do about a finding and how to undo it.
type Recommendation struct {
	Kind Kind   `json:"kind"`
	Why  string `json:"why"`
	// Changes are the typed system changes of a setting, in the order
	// --apply makes them; each carries the value the run found and the
	// value it sets. Only these are ever executed, by perfscope itself.
	Changes []Change `json:"changes,omitempty"`
	// Apply and Revert are for humans: the shell commands equivalent to
	// Changes (rendered by AddChanges, every value quoted), or, for advice,
	// steps to take by hand. perfscope never runs them. Revert lists the
	// undo steps in the order perfscope takes them, last change first.
	Apply  []string `json:"apply,omitempty"`
	Revert []string `json:"revert,omitempty"`
	// Code sketches show the application change (C, Go, Java...).
	Code []CodeSketch `json:"code,omitempty"`
	// Expected effect, with a reference measurement where one exists (e.g.
	// Makita's measured gain).
	Expected  string `json:"expected"`
	Reference string `json:"reference,omitempty"`
	// Caveats the user must weigh (security, other workloads).
	Caveats []string `json:"caveats,omitempty"`
	// Parameters are the recommendation's computed values for scripts
	// (e.g. "so_rcvbuf_bytes"), so they need not be parsed from text.
	Parameters map[string]int64 `json:"parameters,omitempty"`
}

// Applicable reports whether --apply can make this recommendation: a
// setting with typed changes. A recommendation with only command strings
// is shown, never executed.
func (r Recommendation) Applicable() bool { return r.Kind == KindSetting && len(r.Changes) > 0 }

// CodeSketch is a short illustration of an application change.
type CodeSketch struct {
	Lang string `json:"lang"`
	Code string `json:"code"`
}

// Rule is one diagnosis over evidence of type E.
type Rule[E any] struct {
	ID    string
	Check func(E) *Finding
	// Tunables are the thresholds a recipe may override; a rule that has
	// them is checked by CheckTuned (Check is then unused).
	Tunables   []Threshold
	CheckTuned func(E, Thresholds) *Finding
	// Changes are the shapes of every typed change the rule can make
	// (none for a rule that only advises); a revert file is held to them.
	Changes []ChangeShape
}

// Threshold is a number a rule compares its evidence against, which a
// recipe may override within [Min, Max]. Each family declares its
// thresholds in one struct (NetThresholds, JVMThresholds, GCThresholds,
// LockThresholds, TimelineThresholds) whose defaults are the numbers the
// rules are documented with; a rule lists those it reads in Tunables and
// reads them through Thresholds.Get, so it stays a pure function of its
// evidence and the overrides.
type Threshold struct {
	Name              string
	Default, Min, Max float64
	Doc               string
}

// Thresholds are a recipe's overrides by threshold name; a name left out
// keeps the rule's default.
type Thresholds map[string]float64

// Get is t's value of th.
func (t Thresholds) Get(th Threshold) float64 {
	if v, ok := t[th.Name]; ok {
		return v
	}
	return th.Default
}

func (r Rule[E]) check(e E, t Thresholds) *Finding {
	if r.CheckTuned != nil {
		return r.CheckTuned(e, t)
	}
	return r.Check(e)
}

// Run applies every rule to e and returns the findings ranked: by impact,
// then severity, then ID so the order is stable.
func Run[E any](rules []Rule[E], e E) []Finding {
	return RunTuned(rules, e, nil)
}

// RunTuned is Run with a recipe's threshold overrides: thresholds(id) are
// those of the rule with that ID (nil: every default).
func RunTuned[E any](rules []Rule[E], e E, thresholds func(id string) Thresholds) []Finding {
	var out []Finding
	for _, r := range rules {
		var t Thresholds
		if thresholds != nil {
			t = thresholds(r.ID)
		}
		f := r.check(e, t)
		if f == nil {
			continue
		}
		if f.ID == "" {
			f.ID = r.ID
		}
		out = append(out, *f)
	}
	Rank(out)
	return out
}

// Rank sorts findings by impact, severity and ID.
func Rank(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Impact != fs[j].Impact {
			return fs[i].Impact > fs[j].Impact
		}
		if fs[i].Severity != fs[j].Severity {
			return fs[i].Severity > fs[j].Severity
		}
		return fs[i].ID < fs[j].ID
	})
}

// Worst is the highest severity among fs (0 when there are none).
func Worst(fs []Finding) Severity {
	var w Severity
	for _, f := range fs {
		if f.Severity > w {
			w = f.Severity
		}
	}
	return w
}
