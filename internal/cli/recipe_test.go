package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

func TestRecipeListAndShow(t *testing.T) {
	out, stderr, code := execute(t, "recipe", "list")
	if code != ExitOK {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	for _, name := range recipes.BuiltinNames() {
		if !strings.Contains(out, name) {
			t.Errorf("list does not name %s:\n%s", name, out)
		}
	}
	out, _, _ = execute(t, "recipe", "list", "-o", "json")
	var l struct {
		Data report.RecipeList `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Data.Recipes) != len(recipes.BuiltinNames()) {
		t.Fatalf("list -o json: %v (%d recipes)", err, len(l.Data.Recipes))
	}
	r, _ := recipes.Builtin("jvm-net")
	out, _, code = execute(t, "recipe", "show", "jvm-net")
	if code != ExitOK || out != string(r.Text) {
		t.Errorf("show jvm-net: exit %d, not the embedded YAML", code)
	}
	out, _, _ = execute(t, "recipe", "show", "jvm-net", "-o", "json")
	var s struct {
		Data report.RecipeInfo `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || len(s.Data.Parameters) == 0 || s.Data.Parameters[0].Name != "pid" || !s.Data.Parameters[0].Required {
		t.Errorf("show -o json: %v %+v", err, s.Data)
	}
	if _, stderr, code := execute(t, "recipe", "show", "nosuch"); code != ExitUsage || !strings.Contains(stderr, `no built-in recipe "nosuch" and no such file`) {
		t.Errorf("show nosuch: exit %d %q", code, stderr)
	}
	out, _, code = execute(t, "recipe", "catalog")
	if code != ExitOK || !strings.Contains(out, "jvm-net.drops-during-pause") || !strings.Contains(out, "min_stopped_ms=50") || !strings.Contains(out, "stacks_every") {
		t.Errorf("catalog: exit %d\n%s", code, out)
	}
}

func TestRecipeValidate(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("version: 1\nname: s\nprobes: [softirq]\nwindow: {duration: 1s}\n"), 0o644)
	os.WriteFile(bad, []byte("version: 1\nname: s\nprobes: [softirq]\nwindow: {duration: 1s, interval: 2s}\nbogus: 1\n"), 0o644)
	out, stderr, code := execute(t, "recipe", "validate", good)
	if code != ExitOK || out != good+": ok (recipe s)\n" {
		t.Errorf("good: exit %d %q %q", code, out, stderr)
	}
	out, stderr, code = execute(t, "recipe", "validate", good, bad, filepath.Join(dir, "none.yaml"))
	want := good + ": ok (recipe s)\n" +
		bad + ":4: window.interval: want an interval no longer than window.duration (1s), got \"2s\"\n" +
		bad + ":5: bogus: unknown field (want one of: version, name, description, parameters, probes, collectors, rules, window, outputs)\n" +
		filepath.Join(dir, "none.yaml") + ": recipe " + filepath.Join(dir, "none.yaml") + ": no such file or directory\n"
	if code != ExitUsage || out != want || !strings.Contains(stderr, "2 of 3 recipes have errors") {
		t.Errorf("exit %d\n%s\nwant\n%s\nstderr %q", code, out, want, stderr)
	}
	out, _, _ = execute(t, "recipe", "validate", "-o", "json", bad)
	var v struct {
		Data report.RecipeValidation `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Data.Files) != 1 || len(v.Data.Files[0].Errors) != 2 ||
		v.Data.Files[0].Errors[1] != (report.RecipeError{Line: 5, Path: "bogus", Message: "unknown field (want one of: version, name, description, parameters, probes, collectors, rules, window, outputs)"}) {
		t.Errorf("validate -o json: %v %+v", err, v.Data)
	}
}

// Bad input to recipe run: one sentence each, exit 2, nothing loaded.
func TestRecipeRunBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"recipe", "run", "nosuch"}, `no built-in recipe "nosuch"`},
		{[]string{"recipe", "run", "jvm-net"}, "recipe jvm-net needs --set pid=VALUE: the JVM (a process id)"},
		{[]string{"recipe", "run", "jvm-net", "--set", "pid"}, `--set "pid": want NAME=VALUE`},
		{[]string{"recipe", "run", "jvm-net", "--set", "pid=1", "--set", "pid=2"}, "--set pid is given twice"},
		{[]string{"recipe", "run", "jvm-net", "--set", "pid=x", "--set", "port=1"}, `--set pid=x: want a process id, got "x"`},
		{[]string{"recipe", "run", "softirq-balance", "--set", "cpu=0"}, "--set cpu=0: recipe softirq-balance has no parameter cpu (parameters: duration, interval, cpus, attach_method)"},
		{[]string{"recipe", "run", "softirq-balance", "--set", "interval=1m"}, "interval=1m: window.interval (builtin/softirq-balance.yaml:"},
		{[]string{"recipe", "run", "softirq-balance", "-o", "svg"}, "-o svg draws stacks, and recipe softirq-balance samples none"},
		{[]string{"recipe", "run", "softirq-balance", "--fail-on", "bad"}, "--fail-on"},
		{[]string{"recipe", "run", "udp-rx", "--set", "iface=nosuch0"}, "unknown interface nosuch0"},
		// A list parameter takes --set once per item: the items reach the
		// recipe's check of how the options go together.
		{[]string{"recipe", "run", "jvm-alloc", "--set", "pid=1", "--set", "requests_match=uri=/x", "--set", "requests_match=status!=5.."},
			"requests_metric and requests_match select series of requests_from: add requests_from URL"},
		{[]string{"recipe", "run", "jvm-alloc", "--set", "pid=1", "--set", "requests_from=http://x/m", "--set", "requests_match=uri=/x", "--set", "requests_match=bad"},
			`requests_match "bad": want LABEL=REGEX or LABEL!=REGEX`},
	} {
		_, stderr, code := execute(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}

// Completion names the built-ins, a recipe's parameters, and an enum's
// values.
func TestRecipeCompletion(t *testing.T) {
	out, _, _ := execute(t, "__complete", "recipe", "run", "")
	if !strings.Contains(out, "jvm-net\t") || !strings.Contains(out, "udp-rx\t") {
		t.Errorf("recipe names:\n%s", out)
	}
	out, _, _ = execute(t, "__complete", "recipe", "run", "jvm-net", "--set", "")
	if !strings.Contains(out, "pid=\tthe JVM") || !strings.Contains(out, "port=\t") {
		t.Errorf("parameters:\n%s", out)
	}
	out, _, _ = execute(t, "__complete", "recipe", "run", "jvm-alloc", "--set", "event=")
	if !strings.Contains(out, "event=alloc\n") || !strings.Contains(out, "event=wall\n") {
		t.Errorf("enum values:\n%s", out)
	}
}
