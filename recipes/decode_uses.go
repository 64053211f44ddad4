package recipes

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
)

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
				o, _ := optionOf(c, v.key)
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
			w.Stats = measure.StatsSampled
		}
	}
	if v, ok := f["attach_method"]; ok {
		if r, ok := d.ref(v, "window.attach_method", attachDomain); ok {
			w.AttachMethod = &r
		}
	}
	if v, ok := f["budget"]; ok {
		if s, ok := d.scalar(v, "window.budget", budget.Want); ok {
			if b, err := budget.Parse(s); err != nil {
				d.wantGot(v, "window.budget", budget.Want)
			} else {
				w.Budget = &b
			}
		}
	}
	return w
}

// --- rules ----------------------------------------------------------------
