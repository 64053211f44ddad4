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

	"github.com/perfscope/perfscope/report"
	"github.com/perfscope/perfscope/spec"
)

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
			if len(s) > spec.MaxText || hasControl(strings.ReplaceAll(s, "\n", " ")) {
				d.wantGot(n, "description", fmt.Sprintf("a text of at most %d bytes", spec.MaxText))
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
		v, err := dom.Parse(dom.Kind.JoinItems(items))
		if err != nil {
			d.errorf(n.Line, path, "%v", err)
			return nil, false
		}
		return v, true
	}
	s, ok := d.scalar(n, path, dom.Want())
	if !ok {
		return nil, false
	}
	v, err := dom.Parse(s)
	if err != nil {
		d.errorf(n.Line, path, "%v", wantGot(dom.Want(), describe(n)))
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
				d.errorf(n.Line, path, "want %s, got ${%s}, which is not a parameter of this recipe%s", dom.Want(), m[1], d.paramList())
				return r, false
			case !dom.Accepts(p.Kind):
				d.errorf(n.Line, path, "want %s, got ${%s}, %s parameter", dom.Want(), m[1], article(string(p.Kind)))
				return r, false
			case p.Default != nil:
				if err := dom.Check(dom.Convert(p.Default)); err != nil {
					d.errorf(n.Line, path, "parameter %s's default: %v", p.Name, err)
					return r, false
				}
			}
			r.Param = m[1]
			return r, true
		}
		if strings.Contains(n.Value, "${") {
			d.errorf(n.Line, path, "want %s or a whole ${parameter}, got %s", dom.Want(), describe(n))
			return r, false
		}
	}
	if dom.Kind.NamesFile() {
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
