package recipes

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/report"
)

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
		f := d.fields(item, path, []string{"id", "family", "enabled", "severity", "min_impact", "thresholds"})
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
		if v, ok := f["enabled"]; ok {
			if r, ok := d.enabled(v, path+".enabled"); ok {
				c.Enabled = &r
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
