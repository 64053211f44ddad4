package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/report"

	"github.com/perfscope/perfscope/flame"
)

func TestFlameFlagsReachRun(t *testing.T) {
	var got *flameOptions
	o := &flameOptions{run: func(_ context.Context, o *flameOptions, _ *Globals) error { got = o; return nil }}
	d := &flameDiffOptions{run: func(context.Context, *flameDiffOptions, *Globals) error { return nil }}
	g := &Globals{Out: new(bytes.Buffer), Err: new(bytes.Buffer)}
	cmd := flameCmd(g, o, d)
	cmd.SetArgs([]string{"a.folded", "-", "-o", "html", "--out", "x.html", "--title", "T", "--width", "800",
		"--minwidth", "1%", "--icicle", "--format", "perf", "--include", "^java", "--per-cpu", "--per-thread"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("run not called")
	}
	if got.format != report.HTML || got.Out != "x.html" || got.Title != "T" || got.Width != 800 || !got.Icicle ||
		got.input.Format != flame.FormatPerfScript || got.input.Filter.Include == nil || got.input.Filter.Exclude != nil ||
		!got.PerCPU || !got.PerThread || got.PerProcess || strings.Join(got.Files, ",") != "a.folded,-" {
		t.Errorf("options %+v", got)
	}
	if want := 0.01 * (800 - 20); got.minWidthPx != want {
		t.Errorf("--minwidth 1%% of 800 px = %v px, want %v", got.minWidthPx, want)
	}
}

func TestFlameDiffFlagsReachRun(t *testing.T) {
	var got *flameDiffOptions
	o := &flameOptions{run: func(context.Context, *flameOptions, *Globals) error { t.Error("flame ran instead of diff"); return nil }}
	d := &flameDiffOptions{run: func(_ context.Context, d *flameDiffOptions, _ *Globals) error { got = d; return nil }}
	cmd := flameCmd(&Globals{Out: new(bytes.Buffer), Err: new(bytes.Buffer)}, o, d)
	cmd.SetArgs([]string{"diff", "b.folded", "a.folded", "--shape", "before", "--absolute", "-o", "folded", "--minwidth", "0"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Before != "b.folded" || got.After != "a.folded" || got.shape != flame.ShapeBefore ||
		!got.Absolute || got.format != report.Folded || got.minWidthPx >= 0 {
		t.Errorf("options %+v", got)
	}
}

func TestFlameBadInputExit2(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.folded")
	bad := filepath.Join(dir, "bad.folded")
	os.WriteFile(good, []byte("a;b 1\n"), 0o644)
	os.WriteFile(bad, []byte("a;b 1\nnot a stack\n"), 0o644)
	for _, args := range [][]string{
		{"flame"},
		{"flame", filepath.Join(dir, "missing")},
		{"flame", bad},
		{"flame", good, "-o", "png"},
		{"flame", good, "--minwidth", "-1"},
		{"flame", good, "--width", "5"},
		{"flame", good, "--include", "("},
		{"flame", good, "--format", "xml"},
		{"flame", "-", "-"},
		{"flame", "diff", good},
		{"flame", "diff", good, good, "--shape", "sideways"},
		{"flame", "diff", good, good, "-o", "pprof"},
		{"flame", good, "--max-memory", "8"},
	} {
		_, stderr, code := execute(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, ExitUsage, stderr)
		}
		if strings.Count(strings.TrimSpace(stderr), "perfscope:") != 1 {
			t.Errorf("%v: want one error sentence, got %q", args, stderr)
		}
	}
	if _, stderr, _ := execute(t, "flame", bad); !strings.Contains(stderr, "line 2") {
		t.Errorf("malformed input error does not name the line: %q", stderr)
	}
}

// An input whose call tree needs more than --max-memory fails at the line
// that crosses it, with the way out, instead of taking the machine's
// memory; --include filters and merging are held to the same cap.
func TestFlameMaxMemory(t *testing.T) {
	defer func(n int64) { flame.MaxBytes = n }(flame.MaxBytes)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.folded")
	var b strings.Builder
	long := strings.Repeat("f", 1<<20)
	for i := range 20 {
		fmt.Fprintf(&b, "main;%s%d 1\n", long, i)
	}
	os.WriteFile(big, []byte(b.String()), 0o644)
	_, stderr, code := execute(t, "flame", big, "--max-memory", "16", "-o", "json")
	if code != ExitUsage || !strings.Contains(stderr, "folded line 1") || !strings.Contains(stderr, "more than 16 MiB") || !strings.Contains(stderr, "--max-memory") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming the line, the cap and --max-memory", code, stderr)
	}
	if _, stderr, code := execute(t, "flame", big, "--max-memory", "64", "-o", "json"); code != ExitOK {
		t.Fatalf("--max-memory 64: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := execute(t, "flame", big, big, big, big, "--max-memory", "64", "-o", "json"); code != ExitOK {
		t.Fatalf("the same input 4 times merges into one tree: exit %d, stderr %q", code, stderr)
	}
	// pprof is parsed whole, at ~20× its size: its input cap follows
	// --max-memory (1 MiB at 16 MiB, 3 MiB at 64 MiB).
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(make([]byte, 2<<20))
	zw.Close()
	pb := filepath.Join(dir, "zeros.pb.gz")
	os.WriteFile(pb, gz.Bytes(), 0o644)
	if _, stderr, code := execute(t, "flame", pb, "--max-memory", "16"); code != ExitUsage || !strings.Contains(stderr, "larger than 1 MiB") || !strings.Contains(stderr, "--max-memory") {
		t.Fatalf("2 MiB of pprof at --max-memory 16: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := execute(t, "flame", pb, "--max-memory", "64"); code != ExitUsage || strings.Contains(stderr, "larger than") {
		t.Fatalf("2 MiB of pprof at --max-memory 64: exit %d, stderr %q; want it read (and refused as malformed)", code, stderr)
	}
}

func TestFlameEndToEnd(t *testing.T) {
	dir := t.TempDir()
	before := filepath.Join(dir, "before.folded")
	after := filepath.Join(dir, "after.folded")
	os.WriteFile(before, []byte("main;work 10\nmain;idle 10\n"), 0o644)
	os.WriteFile(after, []byte("main;work 30\nmain;idle 10\n"), 0o644)

	// SVG to a file: written whole, nothing else left in the directory.
	out := filepath.Join(dir, "g.svg")
	if _, stderr, code := execute(t, "flame", before, after, "--out", out, "--title", "merged"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil {
		t.Errorf("SVG not well-formed: %v", err)
	}
	if !strings.Contains(string(b), "work (40 samples, 66.67%)") {
		t.Error("merged SVG lacks work with 40 of 60 samples")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("directory holds %d files, want 3 (no temporary files left)", len(entries))
	}

	// folded → pprof → folded through the command.
	pb := filepath.Join(dir, "g.pb.gz")
	if _, stderr, code := execute(t, "flame", before, "-o", "pprof", "--out", pb); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	stdout, stderr, code := execute(t, "flame", pb, "-o", "folded")
	if code != 0 || stdout != "main;idle 10\nmain;work 10\n" {
		t.Errorf("pprof → folded: exit %d, %q %s", code, stdout, stderr)
	}

	// JSON summary.
	stdout, _, code = execute(t, "flame", after, "-o", "json", "--top", "1")
	var r struct {
		Command string
		Data    report.FlameSummary
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 0 {
		t.Fatalf("json: %v (exit %d)", err, code)
	}
	if r.Command != "flame" || r.Data.Total != 40 || len(r.Data.Functions) != 1 || r.Data.Functions[0].Name != "work" || r.Data.Functions[0].Self != 30 {
		t.Errorf("json data %+v", r.Data)
	}

	// Diff: work grew from 50% to 75%.
	stdout, _, code = execute(t, "flame", "diff", before, after, "-o", "json")
	var dr struct{ Data report.FlameDiffSummary }
	if err := json.Unmarshal([]byte(stdout), &dr); err != nil || code != 0 {
		t.Fatalf("diff json: %v (exit %d)", err, code)
	}
	if dr.Data.BeforeScale != 2 || len(dr.Data.Changes) != 2 || dr.Data.Changes[1].Name != "work" || dr.Data.Changes[1].Delta != 10 ||
		dr.Data.Changes[0].Name != "idle" || dr.Data.Changes[0].Delta != -10 {
		t.Errorf("diff data %+v", dr.Data)
	}
	stdout, _, code = execute(t, "flame", "diff", before, after, "-o", "svg")
	if code != 0 || !strings.Contains(stdout, "rgb(255,") {
		t.Errorf("diff SVG: exit %d, no red frame", code)
	}
}
