package recipes

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

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
		case p.Kind.NamesFile() || p.Kind == KindURL:
			d.errorf(v.Line, path+".default", "a %s parameter has no default: a recipe reads, writes and contacts only what the user names", p.Kind)
			good = false
		case p.Required:
			d.errorf(v.Line, path+".default", "a required parameter has no default")
			good = false
		default:
			if v.Kind == yaml.ScalarNode && strings.Contains(v.Value, "${") {
				d.errorf(v.Line, path+".default", "want %s, got %s: defaults are values, not references", p.Domain.Want(), describe(v))
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
