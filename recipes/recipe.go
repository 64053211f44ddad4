package recipes

import (
	"strings"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/report"
	"github.com/perfscope/perfscope/spec"
)

// FormatVersion is the recipe format this perfscope reads (the `version`
// field). A later format gets a new number; this reader refuses it rather
// than guess.
const FormatVersion = 1

// MaxRecipeBytes bounds a recipe file: recipes are a page of YAML.
const MaxRecipeBytes = 256 << 10

// Recipe is one declarative recipe, decoded and checked: what to measure
// (probes and collectors from the catalog, with options), how long and in
// what intervals (the window), which rules judge it, and which files to
// write. Values may be literals or ${parameter} references; Bind turns a
// recipe and the parameters' values into a Plan.
type Recipe struct {
	Name        string
	Description string
	// Source is "builtin" or the file the recipe was read from; File is
	// what errors name ("builtin/udp-rx.yaml" for a built-in).
	Source, File string
	// Text is the YAML as written.
	Text       []byte
	Parameters []Parameter
	Probes     []Use
	Collectors []Use
	// Rules are the recipe's choice of rules; with RulesGiven false every
	// rule its evidence supports runs.
	Rules      []RuleChoice
	RulesGiven bool
	Window     WindowSpec
	Outputs    []OutputSpec
}

// Parameter is one input of a recipe, set with --set NAME=VALUE.
type Parameter struct {
	Name string
	Domain
	// Default is the parsed default (nil without one).
	Default     any
	Required    bool
	Description string
	Line        int
}

// Ref is a value as a recipe writes it: a literal, or a whole
// ${parameter} reference resolved when the recipe is bound.
type Ref struct {
	// Param names the parameter referred to ("" for a literal).
	Param string
	// Value is the literal's parsed value.
	Value any
	// Path and Line place it, for errors found when binding.
	Path string
	Line int
}

// Use is one probe or collector a recipe names, with its options.
type Use struct {
	Component
	// Path is "probes[2].lockstat".
	Path string
	Line int
	// Enabled, when set, turns the component on and off by a parameter.
	Enabled *Ref
	Options map[string]Ref
}

// RuleChoice selects rules by ID or by family, optionally overriding
// their severity, dropping findings of little impact, or overriding a
// rule's thresholds.
type RuleChoice struct {
	ID, Family string
	// Enabled, when set, keeps the choice by a parameter, as a part's
	// does: a disabled choice is as if it were not in the list.
	Enabled    *Ref
	Severity   diagnose.Severity
	MinImpact  float64
	Thresholds map[string]Ref
	Path       string
	Line       int
}

// WindowSpec is the recipe's measurement window.
type WindowSpec struct {
	Duration Ref
	// Interval, when set, makes every part keep a timeline.
	Interval *Ref
	Stats    measure.Stats
	// AttachMethod forces tp_btf, raw_tp or tracepoint for every probe.
	AttachMethod *Ref
	// Budget is the overhead budget (window.budget: a percentage of any
	// one CPU, or exact); nil: DefaultBudget.
	Budget *budget.Budget
}

// OutputSpec is a file a run writes: only inside a directory parameter.
type OutputSpec struct {
	Format report.Format
	Dir    Ref
	Name   string
	// Stacks chooses a network run's CPUs: netrx, other or all.
	Stacks string
	// Title heads a flame graph; ${parameter}s are replaced.
	Title string
	Path  string
	Line  int
}

// hasStacks says whether a run of the recipe can have stacks to draw.
func (r *Recipe) hasStacks() bool { return r.gives(spec.InputStacks) }

// isNet says whether the recipe measures the network: its network probes
// and counters are then joined into one network section.
func (r *Recipe) isNet() bool { return r.gives(spec.InputNet) }

// gives says whether a part the recipe names gives in (enabled or not).
func (r *Recipe) gives(in spec.Input) bool {
	for _, u := range append(append([]Use{}, r.Probes...), r.Collectors...) {
		if u.Has(in) {
			return true
		}
	}
	return false
}

// Parameter finds a parameter by name.
func (r *Recipe) Parameter(name string) (Parameter, bool) {
	for _, p := range r.Parameters {
		if p.Name == name {
			return p, true
		}
	}
	return Parameter{}, false
}

// DefaultText is the parameter's default as --set takes it; ok is false
// without one.
func (p Parameter) DefaultText() (string, bool) {
	if p.Default == nil {
		return "", false
	}
	return p.Format(p.Default), true
}

// Summary is the description's first clause, up to its first colon,
// semicolon or full stop.
func (r *Recipe) Summary() string {
	s := strings.Join(strings.Fields(r.Description), " ")
	if i := strings.IndexAny(s, ":;"); i > 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i]
	}
	if len(s) > 100 {
		s = s[:97] + "…"
	}
	return s
}
