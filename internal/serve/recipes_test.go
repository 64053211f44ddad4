package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
)

// A served window lasts --interval: a recipe's duration parameter set
// with --set would be bound and then ignored, so it is refused, by
// whatever name the recipe gives it.
func TestLoadRecipeRefusesDuration(t *testing.T) {
	file := filepath.Join(t.TempDir(), "length.yaml")
	err := os.WriteFile(file, []byte(`version: 1
name: softirq-length
description: softirq per CPU, its window named length
parameters:
  length: {type: duration, default: 10s, description: how long}
probes:
  - softirq: {}
window:
  duration: ${length}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ recipe, param string }{{"softirq-balance", "duration"}, {"udp-rx", "duration"}, {file, "length"}} {
		set := map[string]string{c.param: "1s", "iface": "lo"}
		if c.recipe != "udp-rx" {
			delete(set, "iface")
		}
		_, err := LoadRecipe(measure.Live(), c.recipe, set)
		want := fmt.Sprintf("--set %s=1s: a served window lasts --interval, not the recipe's %s: pass --interval 1s instead", c.param, c.param)
		if err == nil || err.Error() != want || !errors.Is(err, measure.ErrBadInput) {
			t.Errorf("%s with --set %s=1s: %v; want %q (bad input)", c.recipe, c.param, err, want)
		}
	}
	if _, err := LoadRecipe(measure.Live(), file, nil); err != nil {
		t.Errorf("the file without --set: %v", err)
	}
}

// Only built-ins whose every part can be measured window after window
// are offered: the parts that measure once (their specs say so) are not.
func TestNamesLeaveOutPartsThatMeasureOnce(t *testing.T) {
	for _, name := range Names() {
		r, ok := recipes.Builtin(name)
		if !ok {
			t.Fatalf("Names lists %s, which is not a built-in", name)
		}
		for _, u := range append(append([]recipes.Use{}, r.Probes...), r.Collectors...) {
			if u.Once {
				t.Errorf("Names lists %s, whose %s measures once", name, u.Name)
			}
		}
	}
	for _, once := range []string{"jvm-alloc", "gc-pressure", "offcpu", "go-alloc"} {
		if slices.Contains(Names(), once) {
			t.Errorf("Names lists %s, which measures once", once)
		}
	}
}
