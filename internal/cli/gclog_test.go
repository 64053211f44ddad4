package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/report"

	"github.com/perfscope/perfscope/collectors/gclog"
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
		got.PauseGoal != 50*time.Millisecond || got.YoungInterval != 30*time.Second || got.report.format != report.HTML || got.report.failOn != diagnose.Warn {
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
	stdout, stderr, code := execute(t, "gclog", gclogFixture("SampleSun1_8_0ParallelPrintGCID.txt"), "--requests", "9463.95626", "--target-rps", "200", "-o", "json")
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
	// 9463.95626 requests over the 94.6395626 s window (the first pause
	// starts at 3.117 s, the last at 97.301 s and takes 0.4555626 s): 100
	// requests/s.
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

// fetches matches what a browser would load from elsewhere: the page must
// open offline.
var fetches = regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//|url\(\s*['"]?(https?:)?//|@import`)

func TestGCLogTextHTMLAndFailOn(t *testing.T) {
	cms := gclogFixture("SampleSun1_6_0CMS.txt")
	stdout, _, code := execute(t, "gclog", cms)
	if code != ExitOK || !strings.Contains(stdout, "concurrent mode failure") || !strings.Contains(stdout, "gc.concurrent-mode-failure") {
		t.Errorf("exit %d, text:\n%s", code, stdout)
	}
	stdout, _, code = execute(t, "gclog", cms, "-o", "html")
	if code != ExitOK || !strings.HasPrefix(stdout, "<!DOCTYPE html>") || strings.Count(stdout, `<svg class="chart"`) != 2 || fetches.MatchString(stdout) || !strings.Contains(stdout, `data-finding="gc.concurrent-mode-failure"`) {
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

// Hostile input: a FIFO with no writer, /dev/zero and a corrupt gzip are
// bad input (exit 2) at once; a parser panic is one sentence and exit 4.
func TestGCLogHostileInput(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "gc.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(dir, "bad.log.gz")
	os.WriteFile(gz, []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3}, 0o600)
	for _, args := range [][]string{
		{"gclog", fifo},
		{"gclog", "--no-rotated", fifo},
		{"gclog", "--no-rotated", "/dev/zero"},
		{"gclog", "--no-rotated", gz},
	} {
		done := make(chan int, 1)
		var stderr string
		go func() {
			var code int
			_, stderr, code = execute(t, args...)
			done <- code
		}()
		select {
		case code := <-done:
			if code != ExitUsage || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("%v: exit %d, stderr %q; want exit 2 and one sentence", args, code, stderr)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v hangs", args)
		}
	}

	defer func(f func(context.Context, []string, time.Duration) (gclog.Summary, error)) { analyzeGCLogs = f }(analyzeGCLogs)
	analyzeGCLogs = func(context.Context, []string, time.Duration) (gclog.Summary, error) {
		var s []int
		_ = s[3] // a parser bug
		return gclog.Summary{}, nil
	}
	_, stderr, code := execute(t, "gclog", gclogFixture("SampleSun1_6_0CMS.txt"))
	if code != ExitFailure || strings.Count(strings.TrimSpace(stderr), "\n") > 0 || strings.Contains(stderr, "goroutine") {
		t.Errorf("panic: exit %d, stderr %q; want exit 4 and one sentence", code, stderr)
	}
}

// A log with records perfscope cannot read says so, and never ends in a
// confident "No findings".
func TestGCLogUnreadableRecordsAreReported(t *testing.T) {
	log := filepath.Join(t.TempDir(), "gc.log")
	os.WriteFile(log, []byte("2.000: [GC [PSYoungGen: 8192K->1024K(9216K)] 8192K->1100K(29696K), 0.0050000 secs]\n"+
		"5.000: [Full GC [PSYoungGen: 1024K->0K(9216K)] [ParOldGen: 18000K->9000K(20480K)] 19024K->9000K(29696K)\n"), 0o600)
	stdout, _, code := execute(t, "gclog", "--no-rotated", log)
	if code != ExitOK || !strings.Contains(stdout, "1 GC records could not be read ("+log+":2)") ||
		!strings.Contains(stdout, "gc.log.unreadable-records") || strings.Contains(stdout, "No findings") {
		t.Errorf("exit %d, text:\n%s", code, stdout)
	}
}

// A log of safepoints only (-Xlog:safepoint) is a report, not "no GC
// events": a 24 s RedefineClasses stop is the finding.
func TestGCLogSafepointsOnly(t *testing.T) {
	log := filepath.Join(t.TempDir(), "gc.log")
	os.WriteFile(log, []byte("[2021-10-05T21:57:58.002+0200][993.432s] Entering safepoint region: RedefineClasses\n"+
		"[2021-10-05T21:58:22.188+0200][1017.618s] Leaving safepoint region\n"+
		"[2021-10-05T21:58:22.188+0200][1017.618s] Total time for which application threads were stopped: 24.1957920 seconds, Stopping threads took: 0.0094382 seconds\n"), 0o600)
	stdout, stderr, code := execute(t, "gclog", "--no-rotated", log, "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Data struct {
			GC struct {
				Safepoints struct {
					Count int   `json:"count"`
					MaxNs int64 `json:"max_ns"`
				}
			}
		}
		Findings []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.Data.GC.Safepoints.Count != 1 || r.Data.GC.Safepoints.MaxNs != 24195792000 {
		t.Errorf("safepoints %+v", r.Data.GC.Safepoints)
	}
	if len(r.Findings) == 0 || r.Findings[0].ID != "gc.safepoint.non-gc-stops" {
		t.Errorf("findings %+v", r.Findings)
	}
}
