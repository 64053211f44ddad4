package flame

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every output format goes through Write, and an unknown one is an error
// that lists the formats.
func TestWriteEveryOutput(t *testing.T) {
	p := New(Samples)
	p.Add([]string{"main", "work"}, 3)
	for _, out := range Outputs {
		var b bytes.Buffer
		if err := Write(&b, p, out, Options{Title: "t"}); err != nil || b.Len() == 0 {
			t.Errorf("%s: %d bytes, %v", out, b.Len(), err)
		}
	}
	if err := Write(&bytes.Buffer{}, p, "png", Options{}); err == nil || !strings.Contains(err.Error(), "svg, html") {
		t.Errorf("png: %v", err)
	}
	d, err := NewDiff(p, p, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteDiff(&bytes.Buffer{}, d, OutputPprof, Options{}); err == nil {
		t.Error("a diff was written as pprof")
	}
	path := filepath.Join(t.TempDir(), "x.folded")
	if err := WriteFile(context.Background(), path, p, OutputFolded, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "main;work 3\n" {
		t.Errorf("folded file = %q", b)
	}
	if out, ok := OutputOf("cpu.pb.gz"); !ok || out != OutputPprof {
		t.Errorf("OutputOf(cpu.pb.gz) = %v %v", out, ok)
	}
}

// The first frame of each stack is a synthetic root, not a function.
func TestFunctionsUnderRoot(t *testing.T) {
	p := New(Samples)
	p.Add([]string{"comm-a", "outer", "inner"}, 5)
	p.Add([]string{"comm-b", "outer", "outer"}, 2)
	p.Add([]string{"comm-b"}, 1)
	got := p.FunctionsUnderRoot(0)
	if len(got) != 2 || got[0].Name != "inner" || got[0].Self != 5 || got[1].Name != "outer" || got[1].Self != 2 || got[1].Total != 7 {
		t.Errorf("FunctionsUnderRoot = %+v", got)
	}
	if all := p.Functions(0); len(all) != 4 {
		t.Errorf("Functions = %+v, want the roots too", all)
	}
}
