package recipes

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds the recipe decoder arbitrary bytes. It must never panic;
// a refusal is Errors, each naming the file, a line within it (or none)
// and saying what is wrong; an accepted recipe binds with its defaults or
// says which parameter is missing, and parses the same again.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodRecipe))
	for _, r := range Builtins() {
		f.Add(r.Text)
	}
	for _, s := range []string{
		"", "version: 1", "- a\n- b", "version: 1\nname: x\nprobes: [softirq]\nwindow: {duration: 1s}\n",
		"version: 1\nname: x\nprobes: [{lockstat: {stacks_every: \"${x}\"}}]\nwindow: {duration: &a 1s}\nrules: *a\n",
		"a: &a [*a, *a]\n", "version: 1\nparameters: {x: {type: enum, values: [a, a]}}\n",
		"version: 1\nname: x\nparameters: {d: {type: duration, min: 1s, max: 1ms}}\nprobes: [softirq]\nwindow: {duration: \"${d}\", interval: \"${d}\"}\n",
		"%YAML 1.2\n---\n!!binary x: 1\n", "version: 1\nname: x\nprobes:\n  - softirq: !custom {cpus: 0}\nwindow: {duration: 1s}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse("fuzz.yaml", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 || len(es) > maxErrors {
				t.Fatalf("refusal is not a list of field errors: %T %v", err, err)
			}
			// YAML breaks lines at CR LF, CR and LF.
			lines := bytes.Count(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\n")) + bytes.Count(data, []byte("\r")) + 2
			for _, e := range es {
				if e.File != "fuzz.yaml" || e.Msg == "" || e.Line < 0 || e.Line > lines || !strings.HasPrefix(e.Error(), "fuzz.yaml") {
					t.Fatalf("error %+v (file has %d lines)", e, lines)
				}
			}
			return
		}
		if r.Name == "" || len(r.Probes)+len(r.Collectors) == 0 || r.Window.Duration.Param == "" && r.Window.Duration.Value == nil {
			t.Fatalf("accepted an incomplete recipe: %+v", r)
		}
		set := map[string]string{}
		for _, p := range r.Parameters {
			if p.Required {
				set[p.Name] = "1"
			}
		}
		// Binding may refuse a value, never panic.
		_, _ = r.Bind(set)
		again, err := Parse("fuzz.yaml", data)
		if err != nil || again.Name != r.Name || len(again.Parameters) != len(r.Parameters) {
			t.Fatalf("parsing again: %v", err)
		}
	})
}
