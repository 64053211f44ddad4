package recipes

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/report"
)

func TestProfileSummaryCountsSelfAndTotal(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	kallsyms := "ffffffff81000000 T outer\nffffffff81001000 T middle\nffffffff81002000 T inner\n"
	if err := os.WriteFile(filepath.Join(dir, "proc", "kallsyms"), []byte(kallsyms), 0o644); err != nil {
		t.Fatal(err)
	}
	part := NewProfile(ProfileOptions{Root: cpuprofile.RootComm, Frequency: 99})
	part.sym = symbols.New(symbols.FS{Root: dir})
	const outer, middle, inner = 0xffffffff81000010, 0xffffffff81001010, 0xffffffff81002010
	prof := cpuprofile.Profile{Samples: []cpuprofile.Sample{
		{PID: 1, Comm: "a", KernelStack: []uint64{inner, middle, outer}, Count: 5},
		{PID: 1, Comm: "a", KernelStack: []uint64{middle, outer}, Count: 3},
		// Recursion: middle twice on one stack counts once in total.
		{PID: 2, Comm: "b", KernelStack: []uint64{inner, middle, middle, outer}, Count: 2},
	}}
	part.profile = prof
	fp, d := summarizeProfile(part.opts, prof, part.Samples())
	if d.Samples != 10 || fp.Total() != 10 {
		t.Fatalf("samples = %d, flame total = %d; want 10", d.Samples, fp.Total())
	}
	want := map[string][2]uint64{"inner_[k]": {7, 7}, "middle_[k]": {3, 10}, "outer_[k]": {0, 10}}
	if len(d.TopFunctions) != len(want) {
		t.Fatalf("top functions = %+v, want the 3 kernel functions only (no root frame)", d.TopFunctions)
	}
	for _, f := range d.TopFunctions {
		if w := want[f.Function]; f.Self != w[0] || f.Total != w[1] {
			t.Errorf("%s: self %d total %d, want %d %d", f.Function, f.Self, f.Total, w[0], w[1])
		}
	}
	if d.TopFunctions[0].Function != "inner_[k]" || d.TopFunctions[0].SelfShare != 0.7 {
		t.Errorf("first top function = %+v, want inner_[k] at 70%%", d.TopFunctions[0])
	}
	if d.Folded[0] != (evidence.FoldedStack{Stack: "a;outer_[k];middle_[k];inner_[k]", Count: 5}) {
		t.Errorf("first folded stack = %+v", d.Folded[0])
	}
	if d.TopFunctions[0].Kind != "kernel" {
		t.Errorf("kind of inner_[k] = %q", d.TopFunctions[0].Kind)
	}
	r := ProfileResult{Evidence: d, Flame: fp}.Report("test")
	r.Show.Top = 2
	var text bytes.Buffer
	if err := report.Render(&text, r, report.Text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "70.0%") || !strings.Contains(text.String(), "inner_[k]") {
		t.Errorf("text output:\n%s", text.String())
	}
}
