package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/recipes"
)

// testServer is a Server without probes, for its handler and its loop.
func testServer(t *testing.T) *Server {
	t.Helper()
	m := NewMetrics("test")
	return &Server{opts: Options{Interval: time.Second},
		recipe: &Recipe{Plan: &recipes.Plan{Recipe: &recipes.Recipe{Name: "test"}}}, metrics: m, reg: newRegistry(m)}
}

func TestRetryDelay(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := retryDelay(i + 1); got != w {
			t.Errorf("failure %d: retry in %v, want %v", i+1, got, w)
		}
	}
	if got := retryDelay(1 << 30); got != retryMax {
		t.Errorf("after 2^30 failures: %v", got)
	}
}

// The loop under a window that fails at once, as an attach refused for
// want of descriptors did 231,739 times in 10 s: it waits between
// attempts (1 s, doubling, at most a minute), prints each distinct error
// once and the streak's length at powers of ten, counts every failure in
// the metrics, and says how many failed, per error, when windows complete
// again.
func TestMeasureBacksOffAndDeduplicates(t *testing.T) {
	srv := testServer(t)
	var log bytes.Buffer
	srv.opts.Log = &log
	emfile := errors.New("attach tp_btf lock:contention_begin: too many open files")
	proc := errors.New("read /proc/softirqs: open /proc/softirqs: too many open files")
	const failures = 231739
	var waited []time.Duration
	var slept time.Duration
	calls, added := 0, 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	window := func(context.Context, time.Time) (Window, error) {
		calls++
		switch {
		case calls <= failures && calls%1000 == 500:
			return Window{}, proc
		case calls <= failures:
			return Window{}, emfile
		case calls == failures+1:
			return Window{End: time.Now()}, nil
		case calls == failures+2:
			return Window{}, proc // a new streak: printed again
		default:
			cancel()
			return Window{}, ctx.Err()
		}
	}
	srv.opts.OnWindow = func(Window) { added++ }
	wait := func(_ context.Context, d time.Duration) bool {
		if len(waited) < 10 {
			waited = append(waited, d)
		}
		slept += d
		return true
	}
	if err := srv.measure(ctx, nil, window, wait); err != nil {
		t.Fatal(err)
	}
	if added != 1 {
		t.Errorf("%d windows added, want 1", added)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if fmt.Sprint(waited) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", waited, want)
	}
	if minimum := time.Duration(failures-10) * time.Minute; slept < minimum {
		t.Errorf("the loop waited %v over %d failures, want at least %v", slept, failures, minimum)
	}
	fams := scrape(t, srv.Handler(), "")
	if v, _ := value(fams["perfscope_window_errors_total"]); v != failures+1 {
		t.Errorf("window_errors_total %v, want %d", v, failures+1)
	}
	out := log.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The first of each error, 5 powers of ten, the recovery, and the
	// next streak's first.
	if len(lines) != 2+5+1+1 || len(out) > 4096 {
		t.Fatalf("%d lines, %d bytes for %d failures:\n%s", len(lines), len(out), failures+1, out)
	}
	for i, want := range []string{
		"perfscope serve: window failed: " + emfile.Error() + "; retrying in 1s",
		"perfscope serve: 10 windows in a row failed since ",
		"perfscope serve: 100 windows in a row failed since ",
		"perfscope serve: window failed: " + proc.Error() + " (500 failures in a row; retrying in 1m0s)",
		"perfscope serve: 1000 windows in a row failed since ",
	} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d: %q, want %q…", i+1, lines[i], want)
		}
	}
	recovered := fmt.Sprintf("perfscope serve: windows complete again after %d failed in a row over ", failures)
	if !strings.HasPrefix(lines[7], recovered) ||
		!strings.HasSuffix(lines[7], fmt.Sprintf(": %d× %s; %d× %s", failures-232, emfile, 232, proc)) {
		t.Errorf("recovery line %q", lines[7])
	}
	if !strings.HasPrefix(lines[8], "perfscope serve: window failed: "+proc.Error()+"; retrying in 1s") {
		t.Errorf("a new streak's first failure: %q", lines[8])
	}
}

// Past maxDistinct distinct errors in one streak, the others are counted
// together and not printed.
func TestWindowFailuresBoundDistinctErrors(t *testing.T) {
	var out bytes.Buffer
	f := newWindowFailures(&out)
	for i := range 1000 {
		f.failed(fmt.Errorf("read /proc/%d/stat: no such process", i))
	}
	f.completed()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// 16 distinct, 2 powers of ten (10 is the 10th distinct, printed as
	// such), the recovery.
	if len(lines) != maxDistinct+2+1 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "; 984× other errors") {
		t.Errorf("recovery line %q", last)
	}
	if len(f.counts) != 0 || f.streak != 0 {
		t.Error("the streak's errors are kept after recovery")
	}
}

// The HTTP server's own log (failed accepts, handshakes): each distinct
// error once, then its count at powers of ten; an accept error's growing
// retry delay does not make it a new error.
func TestHTTPErrorsDeduplicated(t *testing.T) {
	var out bytes.Buffer
	l := log.New(&httpErrors{w: &out}, "", 0)
	for i := range 12000 {
		l.Printf("http: Accept error: accept tcp 127.0.0.1:9742: accept4: too many open files; retrying in %v", time.Duration(5<<min(i, 8))*time.Millisecond)
	}
	for i := range 40 {
		l.Printf("http: TLS handshake error from 10.0.0.%d:4000: EOF", i)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := 1 + 4 + // the accept error, at 10, 100, 1000, 10000
		(maxDistinct - 1) + // distinct handshake errors until the bound
		1 + 1 // the first past it, "other" at 10
	if len(lines) != want {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), want, out.String())
	}
	if lines[0] != "perfscope serve: http: Accept error: accept tcp 127.0.0.1:9742: accept4: too many open files (repeats are counted, not printed)" {
		t.Errorf("first line %q", lines[0])
	}
	if lines[4] != "perfscope serve: 10000 times: http: Accept error: accept tcp 127.0.0.1:9742: accept4: too many open files" {
		t.Errorf("line 5 %q", lines[4])
	}
}
