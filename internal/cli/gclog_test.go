package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/report"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/internal/testutil"
)

func gclogFixture(name string) string {
	return filepath.Join(testutil.RepoRoot(), "collectors", "gclog", "testdata", name)
}

func TestGCLogFlags(t *testing.T) {
	var got *gclogOptions
	o := &gclogOptions{run: func(_ context.Context, o *gclogOptions, _ *Globals) error { got = o; return nil }}
	var out bytes.Buffer
	cmd := gclogCmd(&Globals{Out: &out, Err: &out}, o)
	cmd.SetArgs([]string{"a.log", "b.log", "--rps", "800", "--target-rps", "2000", "--pause-goal", "50ms",
		"--young-interval", "30s", "-o", "html", "--fail-on", "warn", "--no-rotated=false"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || strings.Join(got.Files, ",") != "a.log,b.log" || got.RPS != 800 || got.TargetRPS != 2000 ||
		got.PauseGoal != 50*time.Millisecond || got.YoungInterval != 30*time.Second || got.format != report.HTML || got.failOn != diagnose.Warn {
		t.Fatalf("options %+v", got)
	}
}

func TestGCLogBadInputExit2(t *testing.T) {
	cms := gclogFixture("SampleSun1_6_0CMS.txt")
	for _, args := range [][]string{
		{"gclog"},
		{"gclog", cms, "-o", "xml"},
		{"gclog", cms, "--rps", "10", "--requests", "100"},
		{"gclog", cms, "--target-rps", "100"},
		{"gclog", cms, "--rps", "-1"},
		{"gclog", cms, "--pause-goal", "0s"},
		{"gclog", cms, "--fail-on", "sometimes"},
		{"gclog", "/nonexistent/gc.log"},
		{"gclog", "--no-rotated", "/nonexistent/gc.log"},
		{"gclog", t.TempDir()},
		{"gclog", filepath.Join(testutil.RepoRoot(), "go.mod")},
	} {
		_, stderr, code := execute(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, ExitUsage, stderr)
		}
		if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines > 1 {
			t.Errorf("%v: want one sentence, got %q", args, stderr)
		}
	}
}

func TestGCLogJSON(t *testing.T) {
	stdout, stderr, code := execute(t, "gclog", gclogFixture("SampleSun1_8_0ParallelPrintGCID.txt"), "--requests", "9418.4", "--target-rps", "200", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Schema, Command string
		Data            struct {
			GC struct {
				Collector string
				Pauses    []struct {
					Kind  string
					Count int
				}
				FullGCCauses []struct{ Cause string } `json:"full_gc_causes"`
				Model        *struct {
					RPS       float64 `json:"rps"`
					TargetRPS float64 `json:"target_rps"`
				}
			}
			Series []json.RawMessage
		}
		Findings []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != report.Schema || r.Command != "gclog" || r.Data.GC.Collector != "Parallel" || len(r.Data.Series) != 5 {
		t.Errorf("report %+v", r)
	}
	// 9418.4 requests over the 94.184 s window: 100 requests/s.
	if m := r.Data.GC.Model; m == nil || m.RPS < 99.99 || m.RPS > 100.01 || m.TargetRPS != 200 {
		t.Errorf("model %+v", r.Data.GC.Model)
	}
	var ids []string
	for _, f := range r.Findings {
		ids = append(ids, f.ID)
	}
	// Two System.gc() full GCs of 649 and 456 ms: both rules fire.
	if !strings.Contains(strings.Join(ids, " "), "gc.full-gc.system-gc") || !strings.Contains(strings.Join(ids, " "), "gc.pause-over-goal") {
		t.Errorf("findings %v", ids)
	}
}

func TestGCLogTextHTMLAndFailOn(t *testing.T) {
	cms := gclogFixture("SampleSun1_6_0CMS.txt")
	stdout, _, code := execute(t, "gclog", cms)
	if code != ExitOK || !strings.Contains(stdout, "concurrent mode failure") || !strings.Contains(stdout, "gc.concurrent-mode-failure") {
		t.Errorf("exit %d, text:\n%s", code, stdout)
	}
	stdout, _, code = execute(t, "gclog", cms, "-o", "html")
	if code != ExitOK || !strings.HasPrefix(stdout, "<!DOCTYPE html>") || strings.Count(stdout, "<svg") != 2 || strings.Contains(stdout, "http://") || strings.Contains(stdout, "https://") {
		t.Errorf("exit %d, html not self-contained with two charts", code)
	}
	if _, _, code = execute(t, "gclog", cms, "--fail-on", "crit"); code != ExitFindings {
		t.Errorf("--fail-on crit with a concurrent mode failure: exit %d, want %d", code, ExitFindings)
	}
}

func TestGCLogCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := Execute(ctx, []string{"gclog", gclogFixture("SampleSun1_6_0CMS.txt")}, &out, &errb)
	if code == ExitOK || out.Len() != 0 {
		t.Errorf("cancelled run: exit %d, output %q", code, out.String())
	}
}
