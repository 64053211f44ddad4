package recipes

import (
	"errors"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/measure"
)

// A valid recipe the broken ones below are variations of.
const goodRecipe = `version: 1
name: softirq-locks
description: Softirq and lock contention on a timeline.
parameters:
  duration: {type: duration, default: 10s}
  every: {type: int, default: 8, min: 1}
probes:
  - softirq
  - lockstat:
      stacks_every: ${every}
window:
  duration: ${duration}
  interval: 1s
`

func TestParseGoodRecipe(t *testing.T) {
	r, err := Parse("good.yaml", []byte(goodRecipe))
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "softirq-locks" || len(r.Parameters) != 2 || len(r.Probes) != 2 || r.Probes[1].Options["stacks_every"].Param != "every" ||
		r.Window.Interval == nil || r.RulesGiven || r.Summary() != "Softirq and lock contention on a timeline." {
		t.Errorf("parsed %+v", r)
	}
}

// Broken recipes: `perfscope recipe validate` reports each with its file,
// line, field path and what was expected.
func TestValidateBrokenRecipes(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string // every error line, in order
	}{
		{"stacks_every is not a number", strings.Replace(goodRecipe, "${every}", "eight", 1),
			[]string{`my.yaml:10: probes[1].lockstat.stacks_every: want an integer 1–1024, got "eight"`}},
		{"stacks_every out of range", strings.Replace(goodRecipe, "${every}", "0", 1),
			[]string{`my.yaml:10: probes[1].lockstat.stacks_every: want an integer 1–1024, got 0`}},
		{"an unknown field", goodRecipe + "timeout: 3s\n",
			[]string{`my.yaml:14: timeout: unknown field (want one of: version, name, description, parameters, probes, collectors, rules, window, outputs)`}},
		{"an unknown option", strings.Replace(goodRecipe, "stacks_every:", "stack_every:", 1),
			[]string{`my.yaml:10: probes[1].lockstat.stack_every: unknown field (want one of: enabled, stacks_every, tcp)`}},
		{"an unknown probe", strings.Replace(goodRecipe, "  - softirq\n", "  - kprobe\n", 1),
			[]string{`my.yaml:8: probes[0]: want one of softirq, netqueue, lockstat, udpdrop, udpsock, tcp, offcpu, cpuprofile, goalloc, got "kprobe"`}},
		{"a collector under probes", strings.Replace(goodRecipe, "  - softirq\n", "  - gclog\n", 1),
			[]string{`my.yaml:8: probes[0]: gclog is one of the collectors: list it there`}},
		{"a probe twice", strings.Replace(goodRecipe, "  - softirq\n", "  - softirq\n  - softirq\n", 1),
			[]string{`my.yaml:9: probes[1].softirq: softirq is already in the recipe (probes[0].softirq): each is measured once`}},
		{"an unknown parameter", strings.Replace(goodRecipe, "${every}", "${evry}", 1),
			[]string{`my.yaml:10: probes[1].lockstat.stacks_every: want an integer 1–1024, got ${evry}, which is not a parameter of this recipe (parameters: duration, every)`}},
		{"a parameter of the wrong type", strings.Replace(goodRecipe, "${every}", "${duration}", 1),
			[]string{`my.yaml:10: probes[1].lockstat.stacks_every: want an integer 1–1024, got ${duration}, a duration parameter`}},
		{"a default out of the option's range", strings.Replace(goodRecipe, "default: 8, min: 1", "default: 4096", 1),
			[]string{`my.yaml:10: probes[1].lockstat.stacks_every: parameter every's default: want an integer 1–1024, got 4096`}},
		{"half a reference", strings.Replace(goodRecipe, "${every}", "x${every}", 1),
			[]string{`my.yaml:10: probes[1].lockstat.stacks_every: want an integer 1–1024 or a whole ${parameter}, got "x${every}"`}},
		{"no window", strings.Replace(goodRecipe, "window:\n  duration: ${duration}\n  interval: 1s\n", "", 1),
			[]string{`my.yaml:1: window: is required: ` + "`window: {duration: 10s}`" + ` says how long to measure`}},
		{"an interval below 10ms", strings.Replace(goodRecipe, "interval: 1s", "interval: 1ms", 1),
			[]string{`my.yaml:13: window.interval: want an interval ≥ 10ms (0: none), got "1ms"`}},
		{"an interval longer than the window", strings.Replace(strings.Replace(goodRecipe, "interval: 1s", "interval: 1m", 1), "${duration}", "10s", 1),
			[]string{`my.yaml:13: window.interval: want an interval no longer than window.duration (10s), got "1m"`}},
		{"a file named in the recipe", goodRecipe + "collectors:\n  - gclog: {files: /var/log/gc.log}\n",
			[]string{`my.yaml:15: collectors[0].gclog.files: want a ${parameter}: a recipe names files only through parameters the user sets, got "/var/log/gc.log"`}},
		{"a directory parameter with a default", strings.Replace(goodRecipe, "parameters:\n", "parameters:\n  out: {type: dir, default: /etc}\n", 1),
			[]string{`my.yaml:5: parameters.out.default: a dir parameter has no default: a recipe reads, writes and contacts only what the user names`}},
		{"an output outside its directory", strings.Replace(goodRecipe, "parameters:\n", "parameters:\n  out: {type: dir}\n", 1) + "outputs:\n  - {format: json, dir: \"${out}\", name: ../../etc/passwd}\n",
			[]string{`my.yaml:16: outputs[0].name: want a plain file name (letters, digits, . _ -; no directories), got "../../etc/passwd"`}},
		{"a graph without stacks", strings.Replace(goodRecipe, "parameters:\n", "parameters:\n  out: {type: dir}\n", 1) + "outputs:\n  - {format: svg, dir: \"${out}\", name: x.svg}\n",
			[]string{`my.yaml:16: outputs[0].format: svg draws stacks: add the cpuprofile or offcpu probe or the async-profiler collector`}},
		{"a rule that cannot judge this recipe", goodRecipe + "rules:\n  - id: net.rss-indirection-narrow\n",
			[]string{`my.yaml:15: rules[0].id: net.rss-indirection-narrow judges a network run: add a network probe (netqueue, udpdrop, udpsock, tcp) or the netcounters collector`}},
		{"an unknown rule", goodRecipe + "rules:\n  - id: net.nosuch\n",
			[]string{"my.yaml:15: rules[0].id: want a rule ID like net.udp-rcvbuf (`perfscope recipe catalog` lists them), got \"net.nosuch\""}},
		{"a threshold the rule does not read", goodRecipe + "rules:\n  - id: net.softirq-concentrated\n    thresholds: {share: 0.5}\n",
			[]string{`my.yaml:16: rules[0].thresholds.share: unknown field (want one of: netrx_saturated_share, netrx_idle_share)`}},
		{"a threshold no rule of the family reads", goodRecipe + "rules:\n  - family: locks\n    thresholds: {netrx_idle_share: 0.5}\n",
			[]string{`my.yaml:16: rules[0].thresholds.netrx_idle_share: unknown field (want one of: warn_share, crit_share)`}},
		{"a threshold out of range", goodRecipe + "rules:\n  - id: locks.contended\n    thresholds: {warn_share: 2}\n",
			[]string{`my.yaml:16: rules[0].thresholds.warn_share: want a number 0–1, got 2`}},
		{"a rule by id and family", goodRecipe + "rules:\n  - {id: locks.contended, family: locks}\n",
			[]string{`my.yaml:15: rules[0]: give exactly one of id and family`}},
		{"a timeline rule without the JVM", goodRecipe + "rules:\n  - id: jvm-net.drops-during-pause\n",
			[]string{`my.yaml:15: rules[0].id: jvm-net.drops-during-pause compares a JVM's pauses with a port's drops: add the hsperfdata collector`}},
		{"another format version", strings.Replace(goodRecipe, "version: 1", "version: 2", 1),
			[]string{`my.yaml:1: version: want 1 (the recipe format this perfscope reads), got 2`}},
		{"no version", strings.Replace(goodRecipe, "version: 1\n", "", 1),
			[]string{"my.yaml:1: version: is required: `version: 1` names the recipe format"}},
		{"not YAML", "version: 1\nprobes: [softirq\n",
			[]string{`my.yaml:2: not valid YAML: did not find expected ',' or ']'`}},
		{"two documents", goodRecipe + "---\nversion: 1\n",
			[]string{`my.yaml:14: one recipe per file: a second YAML document starts here`}},
		{"an anchor", strings.Replace(goodRecipe, "  duration: ${duration}\n", "  duration: &d ${duration}\n", 1),
			[]string{`my.yaml:12: window.duration: anchors and aliases are not used in recipes: write the value out`}},
		{"a list where a mapping goes", strings.Replace(goodRecipe, "window:\n  duration: ${duration}\n  interval: 1s\n", "window: [10s]\n", 1),
			[]string{`my.yaml:11: window: want a mapping {duration, interval, stats, attach_method, budget}, got a list`}},
		{"a budget over 100 %", strings.Replace(goodRecipe, "  interval: 1s\n", "  interval: 1s\n  budget: 150%\n", 1),
			[]string{`my.yaml:14: window.budget: want a percentage of one CPU above 0 and at most 100 (1.5%), or exact, got "150%"`}},
		{"a budget in words", strings.Replace(goodRecipe, "  interval: 1s\n", "  interval: 1s\n  budget: cheap\n", 1),
			[]string{`my.yaml:14: window.budget: want a percentage of one CPU above 0 and at most 100 (1.5%), or exact, got "cheap"`}},
		{"an enum parameter without values", strings.Replace(goodRecipe, "parameters:\n", "parameters:\n  mode: {type: enum, default: a}\n", 1),
			[]string{`my.yaml:5: parameters.mode.values: an enum parameter lists its values`}},
		{"an unknown parameter type", strings.Replace(goodRecipe, "{type: int, default: 8, min: 1}", "{type: integer}", 1),
			[]string{`my.yaml:6: parameters.every.type: want one of: string, int, float, bool, duration, cpus, port, pid, interface, enum, size, url, list, ports, dir, file, files, got "integer"`}},
		{"an empty file", "", []string{"my.yaml: the file is empty: a recipe is a YAML mapping starting with `version: 1`"}},
		{"every error at once", "version: 1\nname: Bad_Name\nprobes:\n  - lockstat: {stacks_every: eight}\n  - nosuch\nwindow: {duration: forever}\n",
			[]string{
				`my.yaml:2: name: want a name of lower-case letters, digits and dashes (at most 40), got "Bad_Name"`,
				`my.yaml:4: probes[0].lockstat.stacks_every: want an integer 1–1024, got "eight"`,
				`my.yaml:5: probes[1]: want one of softirq, netqueue, lockstat, udpdrop, udpsock, tcp, offcpu, cpuprofile, goalloc, got "nosuch"`,
				`my.yaml:6: window.duration: want a duration 10ms–24h, got "forever"`,
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("my.yaml", []byte(c.yaml))
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("want Errors, got %v", err)
			}
			if !errors.Is(err, measure.ErrBadInput) {
				t.Error("recipe errors are not bad input")
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
