package recipes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/report"
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
	Stats    Stats
	// AttachMethod forces tp_btf, raw_tp or tracepoint for every probe.
	AttachMethod *Ref
	// Budget is the overhead budget (window.budget: a percentage of any
	// one CPU, or exact); nil: DefaultBudget.
	Budget *Budget
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

var (
	nameRE      = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	paramNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	refRE       = regexp.MustCompile(`^\$\{([^}]*)\}$`)
	textRefRE   = regexp.MustCompile(`\$\{([^}]*)\}`)
	fileNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
)

var (
	windowDuration = Domain{Kind: KindDuration, Min: bound(float64(10 * time.Millisecond)), Max: bound(float64(24 * time.Hour))}
	windowInterval = Domain{Kind: KindDuration, Min: bound(0), Max: bound(float64(time.Hour))} // 0: no timeline
	attachDomain   = Domain{Kind: KindEnum, Values: attachMethods}
	outputFormats  = []string{string(report.JSON), string(report.Text)}
	stackChoices   = []string{"all", "netrx", "other"}
	severities     = []string{"info", "warn", "crit"}
)

func init() {
	for _, f := range report.GraphFormats {
		outputFormats = append(outputFormats, string(f))
	}
}

// Parse decodes and checks one recipe. Every problem is reported, each as
// FILE:LINE: PATH: want …, got … (Errors); unknown fields are errors.
func Parse(file string, data []byte) (*Recipe, error) {
	d := &decoder{file: file}
	r := d.recipe(data)
	if len(d.errs) > 0 {
		return nil, d.errs.sorted()
	}
	r.Source, r.File, r.Text = file, file, data
	return r, nil
}

// decoder walks a recipe's YAML nodes, collecting errors.
type decoder struct {
	file   string
	errs   Errors
	params map[string]*Parameter
	// rejected are fields already reported (an anchor, an alias), which
	// must not be reported again as missing; broken are parameters whose
	// declaration was refused, which must not be reported again where
	// they are used.
	rejected map[string]bool
	broken   map[string]bool
}

// missing reports a required field, unless it was there and refused.
func (d *decoder) missing(line int, path, format string, args ...any) {
	if !d.rejected[path] {
		d.errorf(line, path, format, args...)
	}
}

func (d *decoder) errorf(line int, path, format string, args ...any) {
	if len(d.errs) < maxErrors*2 {
		d.errs = append(d.errs, FieldError{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
}

func (d *decoder) wantGot(n *yaml.Node, path, want string) {
	d.errorf(n.Line, path, "want %s, got %s", want, describe(n))
}

// describe says what a node holds, for "got …".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias *" + n.Value
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		if n.Tag == "!!str" {
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "a document"
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *decoder) recipe(data []byte) *Recipe {
	r := &Recipe{}
	if len(data) > MaxRecipeBytes {
		d.errorf(0, "", "a recipe is at most %d KiB, this file has %d bytes", MaxRecipeBytes>>10, len(data))
		return r
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(0, "", "the file is empty: a recipe is a YAML mapping starting with `version: %d`", FormatVersion)
		} else {
			d.yamlError(err)
		}
		return r
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		d.errorf(next.Line, "", "one recipe per file: a second YAML document starts here")
		return r
	} else if !errors.Is(err, io.EOF) {
		d.yamlError(err)
		return r
	}
	if len(doc.Content) != 1 {
		d.errorf(doc.Line, "", "want a YAML mapping, got an empty document")
		return r
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		d.wantGot(root, "", "a recipe (a mapping of version, name, probes, …)")
		return r
	}
	fields := d.fields(root, "", []string{"version", "name", "description", "parameters", "probes", "collectors", "rules", "window", "outputs"})
	v, ok := fields["version"]
	if !ok {
		d.missing(root.Line, "version", "is required: `version: %d` names the recipe format", FormatVersion)
		return r
	}
	if v.Kind != yaml.ScalarNode || v.Value != strconv.Itoa(FormatVersion) {
		d.wantGot(v, "version", fmt.Sprintf("%d (the recipe format this perfscope reads)", FormatVersion))
		return r
	}
	if n, ok := fields["name"]; !ok {
		d.missing(root.Line, "name", "is required")
	} else if s, ok := d.scalar(n, "name", "a name of lower-case letters, digits and dashes"); ok {
		if !nameRE.MatchString(s) {
			d.wantGot(n, "name", "a name of lower-case letters, digits and dashes (at most 40)")
		}
		r.Name = s
	}
	if n, ok := fields["description"]; ok {
		if s, ok := d.scalar(n, "description", "a text"); ok {
			if len(s) > maxText || hasControl(strings.ReplaceAll(s, "\n", " ")) {
				d.wantGot(n, "description", fmt.Sprintf("a text of at most %d bytes", maxText))
			}
			r.Description = s
		}
	}
	d.params, d.broken = map[string]*Parameter{}, map[string]bool{}
	if n, ok := fields["parameters"]; ok {
		r.Parameters = d.parameters(n)
		for i := range r.Parameters {
			d.params[r.Parameters[i].Name] = &r.Parameters[i]
		}
	}
	if n, ok := fields["probes"]; ok {
		r.Probes = d.uses(n, "probes", Probes, Collectors, "collectors")
	}
	if n, ok := fields["collectors"]; ok {
		r.Collectors = d.uses(n, "collectors", Collectors, Probes, "probes")
	}
	if len(r.Probes)+len(r.Collectors) == 0 {
		d.errorf(root.Line, "probes", "a recipe measures something: name at least one probe or collector")
	}
	d.checkDuplicates(append(append([]Use{}, r.Probes...), r.Collectors...))
	if n, ok := fields["window"]; ok {
		r.Window = d.window(n)
	} else {
		d.missing(root.Line, "window", "is required: `window: {duration: 10s}` says how long to measure")
	}
	if n, ok := fields["rules"]; ok {
		r.RulesGiven = true
		r.Rules = d.rules(n, r)
	}
	if n, ok := fields["outputs"]; ok {
		r.Outputs = d.outputs(n, r)
	}
	if len(d.errs) == 0 {
		d.checkText(r)
	}
	return r
}

func (d *decoder) yamlError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		// The library numbers a parser error's line from 0 (the
		// construct it was parsing), a scanner error's from 1.
		for _, parser := range []string{"key", "',' or ']'", "',' or '}'", "node content", "'-' indicator", "<document start>"} {
			if msg == "did not find expected "+parser {
				line++
			}
		}
	}
	d.errorf(line, "", "not valid YAML: %s", msg)
}

// fields reads a mapping's keys, reporting unknown and repeated ones.
func (d *decoder) fields(n *yaml.Node, path string, allowed []string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := join(path, k.Value)
		if k.Kind != yaml.ScalarNode {
			d.wantGot(k, path, "a field name")
			continue
		}
		if !contains(allowed, k.Value) {
			d.errorf(k.Line, kp, "unknown field (want one of: %s)", strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			d.errorf(k.Line, kp, "given twice")
			continue
		}
		if v.Kind == yaml.AliasNode || v.Anchor != "" {
			d.errorf(v.Line, kp, "anchors and aliases are not used in recipes: write the value out")
			if d.rejected == nil {
				d.rejected = map[string]bool{}
			}
			d.rejected[kp] = true
			continue
		}
		out[k.Value] = v
	}
	return out
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scalar is a node's text when it is a plain value.
func (d *decoder) scalar(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.wantGot(n, path, want)
		return "", false
	}
	if n.Tag != "" && !strings.HasPrefix(n.Tag, "!!") {
		d.errorf(n.Line, path, "want %s, got a value tagged %s (recipes use no custom tags)", want, n.Tag)
		return "", false
	}
	return n.Value, true
}

// literal reads a plain value of the domain; a list may be a YAML
// sequence of plain values.
func (d *decoder) literal(n *yaml.Node, path string, dom Domain) (any, bool) {
	if n.Kind == yaml.SequenceNode && dom.Kind.IsList() {
		items := make([]string, 0, len(n.Content))
		for i, e := range n.Content {
			s, ok := d.scalar(e, fmt.Sprintf("%s[%d]", path, i), "a plain value")
			if !ok {
				return nil, false
			}
			if strings.ContainsAny(s, "\n,") && dom.Kind != KindList || strings.Contains(s, "\n") {
				d.wantGot(e, fmt.Sprintf("%s[%d]", path, i), "one item (no line break or comma)")
				return nil, false
			}
			items = append(items, s)
		}
		v, err := dom.parse(dom.Kind.JoinItems(items))
		if err != nil {
			d.errorf(n.Line, path, "%v", err)
			return nil, false
		}
		return v, true
	}
	s, ok := d.scalar(n, path, dom.want())
	if !ok {
		return nil, false
	}
	v, err := dom.parse(s)
	if err != nil {
		d.errorf(n.Line, path, "%v", wantGot(dom.want(), describe(n)))
		return nil, false
	}
	return v, true
}

// ref reads a value of the domain that may be a ${parameter} reference.
func (d *decoder) ref(n *yaml.Node, path string, dom Domain) (Ref, bool) {
	r := Ref{Path: path, Line: n.Line}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if m := refRE.FindStringSubmatch(n.Value); m != nil {
			p, ok := d.params[m[1]]
			switch {
			case d.broken[m[1]]:
				return r, false // its declaration was reported
			case !ok:
				d.errorf(n.Line, path, "want %s, got ${%s}, which is not a parameter of this recipe%s", dom.want(), m[1], d.paramList())
				return r, false
			case !dom.accepts(p.Kind):
				d.errorf(n.Line, path, "want %s, got ${%s}, %s parameter", dom.want(), m[1], article(string(p.Kind)))
				return r, false
			case p.Default != nil:
				if err := dom.check(dom.convert(p.Default)); err != nil {
					d.errorf(n.Line, path, "parameter %s's default: %v", p.Name, err)
					return r, false
				}
			}
			r.Param = m[1]
			return r, true
		}
		if strings.Contains(n.Value, "${") {
			d.errorf(n.Line, path, "want %s or a whole ${parameter}, got %s", dom.want(), describe(n))
			return r, false
		}
	}
	if dom.Kind.namesFile() {
		d.errorf(n.Line, path, "want a ${parameter}: a recipe names files only through parameters the user sets, got %s", describe(n))
		return r, false
	}
	v, ok := d.literal(n, path, dom)
	r.Value = v
	return r, ok
}

func (d *decoder) paramList() string {
	if len(d.params) == 0 {
		return " (it has none)"
	}
	names := make([]string, 0, len(d.params))
	for n := range d.params {
		names = append(names, n)
	}
	sort.Strings(names)
	return " (parameters: " + strings.Join(names, ", ") + ")"
}

func (d *decoder) mapping(n *yaml.Node, path, want string) bool {
	if n.Kind != yaml.MappingNode {
		d.wantGot(n, path, want)
		return false
	}
	return true
}

func (d *decoder) list(n *yaml.Node, path, want string) bool {
	if n.Kind != yaml.SequenceNode {
		d.wantGot(n, path, want)
		return false
	}
	return true
}

// --- parameters -----------------------------------------------------------

func (d *decoder) parameters(n *yaml.Node) []Parameter {
	if !d.mapping(n, "parameters", "a mapping of parameter names to {type, default, description}") {
		return nil
	}
	var out []Parameter
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := "parameters." + k.Value
		if !paramNameRE.MatchString(k.Value) {
			d.errorf(k.Line, path, "want a parameter name of lower-case letters, digits and underscores, got %s", describe(k))
			continue
		}
		if seen[k.Value] {
			d.errorf(k.Line, path, "given twice")
			continue
		}
		seen[k.Value] = true
		if p, ok := d.parameter(k.Value, v, path); ok {
			out = append(out, p)
		} else {
			d.broken[k.Value] = true
		}
	}
	return out
}

func (d *decoder) parameter(name string, n *yaml.Node, path string) (Parameter, bool) {
	p := Parameter{Name: name, Line: n.Line}
	if !d.mapping(n, path, "a mapping {type, default, description}") {
		return p, false
	}
	f := d.fields(n, path, []string{"type", "default", "required", "description", "min", "max", "values"})
	t, ok := f["type"]
	if !ok {
		d.errorf(n.Line, path+".type", "is required (one of: %s)", kindList())
		return p, false
	}
	kind, ok := d.scalar(t, path+".type", "a type")
	if !ok {
		return p, false
	}
	if !contains(kindNames(), kind) {
		d.wantGot(t, path+".type", "one of: "+kindList())
		return p, false
	}
	p.Kind = Kind(kind)
	good := true
	if v, ok := f["values"]; ok {
		if p.Kind != KindEnum {
			d.errorf(v.Line, path+".values", "only an enum parameter has values")
			good = false
		} else if d.list(v, path+".values", "a list of the allowed values") {
			for i, e := range v.Content {
				s, ok := d.scalar(e, fmt.Sprintf("%s.values[%d]", path, i), "a value")
				if ok && contains(p.Values, s) {
					d.errorf(e.Line, fmt.Sprintf("%s.values[%d]", path, i), "%q is listed twice", s)
				}
				p.Values = append(p.Values, s)
			}
		}
	}
	if p.Kind == KindEnum && len(p.Values) == 0 {
		d.errorf(n.Line, path+".values", "an enum parameter lists its values")
		return p, false
	}
	for _, b := range []struct {
		key string
		set **float64
	}{{"min", &p.Min}, {"max", &p.Max}} {
		v, ok := f[b.key]
		if !ok {
			continue
		}
		switch p.Kind {
		case KindInt, KindFloat, KindSize, KindDuration, KindPort, KindPID:
		default:
			d.errorf(v.Line, path+"."+b.key, "only int, float, size, duration, port and pid parameters have bounds")
			good = false
			continue
		}
		x, ok := d.literal(v, path+"."+b.key, Domain{Kind: p.Kind})
		if !ok {
			good = false
			continue
		}
		num := toFloat(x)
		*b.set = &num
	}
	if p.Min != nil && p.Max != nil && *p.Min > *p.Max {
		d.errorf(n.Line, path, "min is above max")
		good = false
	}
	if v, ok := f["required"]; ok {
		if x, ok := d.literal(v, path+".required", Domain{Kind: KindBool}); ok {
			p.Required = x.(bool)
		}
	}
	if v, ok := f["description"]; ok {
		p.Description, _ = d.scalar(v, path+".description", "a text")
	}
	if v, ok := f["default"]; ok {
		switch {
		case p.Kind.namesFile() || p.Kind == KindURL:
			d.errorf(v.Line, path+".default", "a %s parameter has no default: a recipe reads, writes and contacts only what the user names", p.Kind)
			good = false
		case p.Required:
			d.errorf(v.Line, path+".default", "a required parameter has no default")
			good = false
		default:
			if v.Kind == yaml.ScalarNode && strings.Contains(v.Value, "${") {
				d.errorf(v.Line, path+".default", "want %s, got %s: defaults are values, not references", p.Domain.want(), describe(v))
				good = false
			} else if x, ok := d.literal(v, path+".default", p.Domain); ok {
				p.Default = x
			} else {
				good = false
			}
		}
	} else if p.Kind == KindEnum && !p.Required {
		d.errorf(n.Line, path+".default", "an enum parameter needs a default or `required: true`")
		good = false
	}
	return p, good
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	case time.Duration:
		return float64(x)
	}
	return 0
}

func kindNames() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = string(k)
	}
	return out
}

func kindList() string { return strings.Join(kindNames(), ", ") }

// --- probes and collectors ------------------------------------------------

func (d *decoder) uses(n *yaml.Node, path string, catalog, other []Component, otherPath string) []Use {
	if !d.list(n, path, "a list of "+path+", each a name or {name: {options}}") {
		return nil
	}
	var out []Use
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		var nameNode, opts *yaml.Node
		switch {
		case item.Kind == yaml.ScalarNode:
			nameNode = item
		case item.Kind == yaml.MappingNode && len(item.Content) == 2:
			nameNode, opts = item.Content[0], item.Content[1]
		default:
			d.wantGot(item, ip, "a name like "+catalog[0].Name+", or one {name: {options}}")
			continue
		}
		name, ok := d.scalar(nameNode, ip, "a name")
		if !ok {
			continue
		}
		c, ok := component(catalog, name)
		if !ok {
			if _, isOther := component(other, name); isOther {
				d.errorf(nameNode.Line, ip, "%s is one of the %s: list it there", name, otherPath)
			} else {
				d.errorf(nameNode.Line, ip, "want one of %s, got %s", strings.Join(componentNames(catalog), ", "), describe(nameNode))
			}
			continue
		}
		u := Use{Component: c, Path: ip + "." + name, Line: nameNode.Line, Options: map[string]Ref{}}
		given := map[string]bool{}
		if opts != nil && !(opts.Kind == yaml.ScalarNode && opts.Tag == "!!null") {
			if !d.mapping(opts, u.Path, "a mapping of "+name+"'s options") {
				continue
			}
			allowed := append([]string{"enabled"}, optionNames(c)...)
			for _, v := range d.fieldsOrdered(opts, u.Path, allowed) {
				op := join(u.Path, v.key)
				if v.key == "enabled" {
					if r, ok := d.enabled(v.node, op); ok {
						u.Enabled = &r
					}
					continue
				}
				o, _ := c.option(v.key)
				given[v.key] = true
				if r, ok := d.ref(v.node, op, o.Domain); ok {
					u.Options[v.key] = r
				}
			}
		}
		for _, o := range c.Options {
			if o.Required && !given[o.Name] {
				d.missing(u.Line, join(u.Path, o.Name), "is required: %s", o.Doc)
			}
		}
		out = append(out, u)
	}
	return out
}

type keyNode struct {
	key  string
	node *yaml.Node
}

// fieldsOrdered is fields in the order written, so errors come in order.
func (d *decoder) fieldsOrdered(n *yaml.Node, path string, allowed []string) []keyNode {
	f := d.fields(n, path, allowed)
	var out []keyNode
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if v, ok := f[k]; ok && v == n.Content[i+1] {
			out = append(out, keyNode{k, v})
		}
	}
	return out
}

func optionNames(c Component) []string {
	out := make([]string, len(c.Options))
	for i, o := range c.Options {
		out[i] = o.Name
	}
	return out
}

// enabled is true, false, or a parameter: a bool parameter's value, or
// whether another parameter is set.
func (d *decoder) enabled(n *yaml.Node, path string) (Ref, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if m := refRE.FindStringSubmatch(n.Value); m != nil {
			if _, ok := d.params[m[1]]; !ok {
				if d.broken[m[1]] {
					return Ref{}, false
				}
				d.errorf(n.Line, path, "want true, false or a ${parameter}, got ${%s}, which is not a parameter of this recipe%s", m[1], d.paramList())
				return Ref{}, false
			}
			return Ref{Param: m[1], Path: path, Line: n.Line}, true
		}
	}
	v, ok := d.literal(n, path, Domain{Kind: KindBool})
	return Ref{Value: v, Path: path, Line: n.Line}, ok
}

func (d *decoder) checkDuplicates(all []Use) {
	first := map[string]string{}
	for _, u := range all {
		if p, dup := first[u.Name]; dup {
			d.errorf(u.Line, u.Path, "%s is already in the recipe (%s): each is measured once", u.Name, p)
			continue
		}
		first[u.Name] = u.Path
	}
}

// --- window ---------------------------------------------------------------

func (d *decoder) window(n *yaml.Node) WindowSpec {
	var w WindowSpec
	if !d.mapping(n, "window", "a mapping {duration, interval, stats, attach_method, budget}") {
		return w
	}
	f := d.fields(n, "window", []string{"duration", "interval", "stats", "attach_method", "budget"})
	if v, ok := f["duration"]; ok {
		w.Duration, _ = d.ref(v, "window.duration", windowDuration)
	} else {
		d.missing(n.Line, "window.duration", "is required: how long to measure")
	}
	if v, ok := f["interval"]; ok {
		if r, ok := d.ref(v, "window.interval", windowInterval); ok {
			w.Interval = &r
			iv, _ := r.Value.(time.Duration)
			dur, _ := w.Duration.Value.(time.Duration)
			switch {
			case r.Param != "":
			case iv != 0 && iv < minInterval:
				d.wantGot(v, "window.interval", fmt.Sprintf("an interval ≥ %v (0: none)", minInterval))
			case dur > 0 && iv > dur:
				d.wantGot(v, "window.interval", fmt.Sprintf("an interval no longer than window.duration (%v)", dur))
			}
		}
	}
	if v, ok := f["stats"]; ok {
		if s, ok := d.literal(v, "window.stats", Domain{Kind: KindEnum, Values: []string{"continuous", "sampled"}}); ok && s == "sampled" {
			w.Stats = StatsSampled
		}
	}
	if v, ok := f["attach_method"]; ok {
		if r, ok := d.ref(v, "window.attach_method", attachDomain); ok {
			w.AttachMethod = &r
		}
	}
	if v, ok := f["budget"]; ok {
		if s, ok := d.scalar(v, "window.budget", budgetWant); ok {
			if b, err := ParseBudget(s); err != nil {
				d.wantGot(v, "window.budget", budgetWant)
			} else {
				w.Budget = &b
			}
		}
	}
	return w
}

// --- rules ----------------------------------------------------------------

func (d *decoder) rules(n *yaml.Node, r *Recipe) []RuleChoice {
	if !d.list(n, "rules", "a list of {id: RULE} or {family: FAMILY}") {
		return nil
	}
	var out []RuleChoice
	for i, item := range n.Content {
		path := fmt.Sprintf("rules[%d]", i)
		if !d.mapping(item, path, "{id: RULE} or {family: FAMILY}") {
			continue
		}
		f := d.fields(item, path, []string{"id", "family", "severity", "min_impact", "thresholds"})
		c := RuleChoice{Path: path, Line: item.Line}
		idN, hasID := f["id"]
		famN, hasFam := f["family"]
		if hasID == hasFam {
			d.errorf(item.Line, path, "give exactly one of id and family")
			continue
		}
		var info RuleInfo
		if hasID {
			id, ok := d.scalar(idN, path+".id", "a rule ID")
			if !ok {
				continue
			}
			if info, ok = ruleByID(id); !ok {
				d.wantGot(idN, path+".id", "a rule ID like net.udp-rcvbuf (`perfscope recipe catalog` lists them)")
				continue
			}
			c.ID = id
			if msg := info.missing(r); msg != "" {
				d.errorf(idN.Line, path+".id", "%s %s", id, msg)
			}
		} else {
			fam, ok := d.scalar(famN, path+".family", "a rule family")
			if !ok {
				continue
			}
			if !contains(ruleFamilies(), fam) {
				d.wantGot(famN, path+".family", "one of "+strings.Join(ruleFamilies(), ", "))
				continue
			}
			c.Family = fam
			if !familyApplies(fam, r) {
				d.errorf(famN.Line, path+".family", "no %s rule can judge what this recipe measures", fam)
			}
		}
		if v, ok := f["severity"]; ok {
			if s, ok := d.literal(v, path+".severity", Domain{Kind: KindEnum, Values: severities}); ok {
				c.Severity, _ = diagnose.ParseSeverity(s.(string))
			}
		}
		if v, ok := f["min_impact"]; ok {
			if x, ok := d.literal(v, path+".min_impact", Domain{Kind: KindFloat, Min: bound(0), Max: bound(1)}); ok {
				c.MinImpact = x.(float64)
			}
		}
		if v, ok := f["thresholds"]; ok {
			tp := path + ".thresholds"
			// By id: that rule's thresholds; by family: every threshold
			// of the family's rules, for each rule that reads it.
			what, tunables := c.ID, info.Thresholds
			if c.ID == "" {
				what, tunables = "family "+c.Family, familyThresholds(c.Family)
			}
			switch {
			case len(tunables) == 0:
				d.errorf(v.Line, tp, "%s has no thresholds a recipe can change", what)
			case d.mapping(v, tp, "a mapping of threshold names to numbers"):
				c.Thresholds = map[string]Ref{}
				names := make([]string, len(tunables))
				for i, t := range tunables {
					names[i] = t.Name
				}
				for _, kv := range d.fieldsOrdered(v, tp, names) {
					th := thresholdNamed(tunables, kv.key)
					dom := Domain{Kind: KindFloat, Min: bound(th.Min), Max: bound(th.Max)}
					if ref, ok := d.ref(kv.node, join(tp, kv.key), dom); ok {
						c.Thresholds[kv.key] = ref
					}
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// --- outputs --------------------------------------------------------------

func (d *decoder) outputs(n *yaml.Node, r *Recipe) []OutputSpec {
	if !d.list(n, "outputs", "a list of {format, dir, name}") {
		return nil
	}
	var out []OutputSpec
	seen := map[string]string{}
	for i, item := range n.Content {
		path := fmt.Sprintf("outputs[%d]", i)
		if !d.mapping(item, path, "{format, dir, name}") {
			continue
		}
		f := d.fields(item, path, []string{"format", "dir", "name", "stacks", "title"})
		o := OutputSpec{Path: path, Line: item.Line, Stacks: "all"}
		ok := true
		for _, req := range []string{"format", "dir", "name"} {
			if _, given := f[req]; !given {
				d.missing(item.Line, path+"."+req, "is required")
				ok = false
			}
		}
		if !ok {
			continue
		}
		if v, good := d.literal(f["format"], path+".format", Domain{Kind: KindEnum, Values: outputFormats}); good {
			o.Format = report.Format(v.(string))
			if o.Format != report.JSON && o.Format != report.Text && !r.hasStacks() {
				d.errorf(f["format"].Line, path+".format", "%s draws stacks: add the cpuprofile or offcpu probe or the async-profiler collector", o.Format)
			}
		}
		dn := f["dir"]
		if ref, good := d.ref(dn, path+".dir", Domain{Kind: KindDir}); good {
			o.Dir = ref
		}
		if name, good := d.scalar(f["name"], path+".name", "a file name"); good {
			if !fileNameRE.MatchString(name) {
				d.wantGot(f["name"], path+".name", "a plain file name (letters, digits, . _ -; no directories)")
			} else if p, dup := seen[o.Dir.Param+"/"+name]; dup {
				d.errorf(f["name"].Line, path+".name", "%s is also written by %s", name, p)
			}
			seen[o.Dir.Param+"/"+name] = path
			o.Name = name
		}
		if v, good := f["stacks"]; good {
			if s, good := d.literal(v, path+".stacks", Domain{Kind: KindEnum, Values: stackChoices}); good {
				o.Stacks = s.(string)
				if o.Stacks != "all" && !r.isNet() {
					d.errorf(v.Line, path+".stacks", "%s splits a network run's profile by its NET_RX CPUs: this recipe has no network probe", o.Stacks)
				}
			}
		}
		if v, good := f["title"]; good {
			o.Title, _ = d.scalar(v, path+".title", "a text")
		}
		out = append(out, o)
	}
	return out
}

// checkText checks the ${parameter}s inside the free texts (titles).
func (d *decoder) checkText(r *Recipe) {
	for _, o := range r.Outputs {
		for _, m := range textRefRE.FindAllStringSubmatch(o.Title, -1) {
			if _, ok := d.params[m[1]]; !ok {
				d.errorf(o.Line, o.Path+".title", "${%s} is not a parameter of this recipe%s", m[1], d.paramList())
			}
		}
	}
}

// hasStacks says whether a run of the recipe can have stacks to draw.
func (r *Recipe) hasStacks() bool {
	return r.uses("cpuprofile") || r.uses("async-profiler") || r.uses("offcpu") || r.uses("goalloc")
}

// isNet says whether the recipe measures the network: its network probes
// and counters are then joined into one network section.
func (r *Recipe) isNet() bool {
	return r.uses("netqueue") || r.uses("udpdrop") || r.uses("udpsock") || r.uses("tcp") || r.uses("netcounters")
}

func (r *Recipe) uses(name string) bool {
	for _, u := range append(append([]Use{}, r.Probes...), r.Collectors...) {
		if u.Name == name {
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
	return p.format(p.Default), true
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
