package gclog

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// splitLog cuts a unified log into n parts at line boundaries.
func splitLog(t *testing.T, path string, n int) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	var parts []string
	for i := 0; i < n; i++ {
		parts = append(parts, strings.Join(lines[i*len(lines)/n:(i+1)*len(lines)/n], ""))
	}
	return parts
}

// Rotated files copied with one modification time (an archive, cp
// without -p) are ordered by their first stamp, not their numbers.
func TestRotatedSetEqualTimesOrderedByStamp(t *testing.T) {
	parts := splitLog(t, "testdata/sample-ujl-g1-gc-all.txt", 3)
	dir := t.TempDir()
	// Oldest part named .1, the middle one .0: numbers say the opposite.
	names := []string{"gc.log.1", "gc.log.0", "gc.log"}
	mt := time.Now().Add(-time.Hour)
	for i, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(parts[i]), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, mt, mt)
	}
	set, err := RotatedSet(filepath.Join(dir, "gc.log"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range set {
		got = append(got, filepath.Base(s))
	}
	if strings.Join(got, " ") != "gc.log.1 gc.log.0 gc.log" {
		t.Fatalf("order %v", got)
	}
	whole, rotated := analyze(t, "testdata/sample-ujl-g1-gc-all.txt"), analyze(t, set...)
	if rotated.Window.Seconds != whole.Window.Seconds || rotated.Window.JumpCount != 0 || rotated.All != whole.All {
		t.Errorf("rotated window %v (%d jumps), whole %v", rotated.Window.Seconds, rotated.Window.JumpCount, whole.Window.Seconds)
	}
}

// Files given out of order: uptime goes back with no JVM start-up line,
// which is reported where it happens, and the window still covers both.
func TestUptimeJumpWithoutRestartIsReported(t *testing.T) {
	rec := func(t float64) string {
		return strconv.FormatFloat(t, 'f', 3, 64) + ": [GC (Allocation Failure) [PSYoungGen: 8192K->1024K(9216K)] 8192K->1100K(29696K), 0.0050000 secs]\n"
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "gc.log.0"), filepath.Join(dir, "gc.log.1")
	os.WriteFile(a, []byte(rec(10)+rec(20)), 0o600)
	os.WriteFile(b, []byte(rec(30)+rec(40)), 0o600)
	s := analyze(t, b, a)
	if s.Window.JumpCount != 1 || len(s.Window.Jumps) != 1 {
		t.Fatalf("jumps %+v", s.Window)
	}
	if j := s.Window.Jumps[0]; j.File != a || j.Line != 1 || j.FromSecs != 40.005 || j.ToSecs != 10 {
		t.Errorf("jump %+v, want %s:1 from 40.005 to 10", j, a)
	}
	// Both files still count: 10.005 + 10.005 s.
	if math.Abs(s.Window.Seconds-20.01) > 1e-9 || s.All.Count != 4 {
		t.Errorf("window %v, %d pauses", s.Window.Seconds, s.All.Count)
	}
}

// A unified log with the JVM restarted inside it (stdout appended across
// restarts): two segments, the window is the sum, no jump reported — even
// when the first run lasted less than the tolerance for stamps going back.
func TestUnifiedRestartSplitsSegments(t *testing.T) {
	run := "[0.010s][info][gc] Using G1\n" +
		"[0.200s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms\n" +
		"[0.500s][info][gc] GC(1) Pause Young (Normal) (G1 Evacuation Pause) 28M->5M(256M) 5.000ms\n"
	p := &Parser{}
	a := NewAnalyzer(0)
	a.Attach(p)
	if err := p.Parse(strings.NewReader(run + run)); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	s := a.Summary(p.Stats)
	if s.Window.Segments != 2 || s.Window.JumpCount != 0 || math.Abs(s.Window.Seconds-2*0.49) > 1e-9 {
		t.Errorf("window %+v, want 2 segments of 0.49 s", s.Window)
	}
	// The young interval is measured within each run, never across.
	if s.YoungInterval != 300*time.Millisecond {
		t.Errorf("young interval %v, want 300ms", s.YoungInterval)
	}
}

// Siblings nobody named must be regular files of the named file's owner:
// a symlink to /etc/shadow, a FIFO or /dev/zero named like a rotated log
// is not read.
func TestRotatedSetSkipsHostileSiblings(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "gc.log")
	os.WriteFile(log, []byte("[0.2s][info][gc] GC(0) Pause Young (Normal) (x) 1M->0M(2M) 1.0ms\n"), 0o600)
	os.Symlink("/etc/shadow", filepath.Join(dir, "gc.log.0"))
	os.Symlink("/dev/zero", filepath.Join(dir, "gc.log.2"))
	if err := syscall.Mkfifo(filepath.Join(dir, "gc.log.1"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "gc.log.3")
	os.WriteFile(other, []byte("not this owner's\n"), 0o600)
	chowned := os.Getuid() == 0 && os.Chown(other, 65534, 65534) == nil
	set, err := RotatedSet(log)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{log}
	if !chowned {
		want = []string{other, log}
	}
	if strings.Join(set, " ") != strings.Join(want, " ") {
		t.Errorf("set %v, want %v", set, want)
	}
}

// A FIFO named on purpose is refused at once, not waited on.
func TestOpenRefusesFIFOWithoutBlocking(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "gc.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("err %v, want ErrNotRegular", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open blocked on a FIFO with no writer")
	}
	if _, err := Open("/dev/zero"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/zero: %v, want ErrNotRegular", err)
	}
}

// A gzip file damaged after its header is bad input (ErrCorrupt), not an
// I/O failure.
func TestCorruptGzipIsBadInput(t *testing.T) {
	data, err := os.ReadFile("testdata/SampleSun1_6_0CMS.txt")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	zw.Close()
	gz := buf.Bytes()
	for i := 20; i < len(gz)-8; i += 7 {
		gz[i] ^= 0x5a
	}
	path := filepath.Join(t.TempDir(), "gc.log.gz")
	os.WriteFile(path, gz, 0o600)
	_, err = AnalyzeFiles(context.Background(), []string{path}, 0)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("err %v, want ErrCorrupt", err)
	}
	trunc := filepath.Join(t.TempDir(), "gc.log.gz")
	os.WriteFile(trunc, buf.Bytes()[:len(buf.Bytes())/2], 0o600)
	if _, err = AnalyzeFiles(context.Background(), []string{trunc}, 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated gzip: err %v, want ErrCorrupt", err)
	}
}
