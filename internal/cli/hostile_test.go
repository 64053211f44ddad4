package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/internal/testutil"
)

// `flame --out` at a device node writes through it: root must never
// replace /dev/null with an SVG. The node lives in a temp directory.
func TestFlameOutDeviceNodeStaysADevice(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.folded")
	os.WriteFile(in, []byte("a;b 3\n"), 0o644)
	dev := filepath.Join(dir, "null")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := execute(t, "flame", in, "--out", dev); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if st, err := os.Lstat(dev); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("--out device replaced: %v %v", st.Mode(), err)
	}
}

// `udp --flame DIR` refuses a directory other users can write: they could
// plant a symlink under the name perfscope writes as root.
func TestUDPFlameRefusesSharedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(dir, 0o755)
	os.Chmod(dir, 0o777|os.ModeSticky)
	_, stderr, code := execute(t, "udp", "--iface", "lo", "--flame", dir)
	if code != ExitUsage || !strings.Contains(stderr, "not private to this user") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming the unsafe directory", code, stderr)
	}
	os.Chmod(dir, 0o777)
	_, stderr, code = execute(t, "udp", "--iface", "lo", "--flame", dir)
	if code != ExitUsage || !strings.Contains(stderr, "writable by group or others without the sticky bit") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming the unsafe directory", code, stderr)
	}
}

// Hostile profile inputs: bad input (exit 2) with one sentence, never an
// out-of-memory, a wrapped total or a panic.
func TestFlameHostileInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for range 300 { // 300 MiB of NUL bytes, which read as pprof
		zw.Write(zero)
	}
	zw.Close()
	cases := []struct {
		name, path, want string
	}{
		{"NaN count", write("nan.folded", []byte("a;b 1\na;c NaN\n")), "folded line 2: not a folded stack"},
		{"exponent count", write("exp.folded", []byte("a;b 1e3\n")), `folded line 1: count "1e3" is not a number of samples`},
		{"hex float count", write("hex.folded", []byte("a;b 1\na;c 0x1p4\n")), `folded line 2: count "0x1p4" is not a number of samples`},
		{"overflowing counts", write("big.folded", []byte("a;b 4611686018427387904\na;c 4611686018427387904\na;d 4611686018427387904\n")), "2^63-1"},
		// Counts above 2^62 used to fail detection ("not folded stacks").
		{"overflowing large counts", write("big2.folded", []byte("a;b 5000000000000000000\na;c 5000000000000000000\n")), "folded line 2: values add up to more than 2^63-1"},
		{"count beyond int64", write("big3.folded", []byte("a;b 99999999999999999999\n")), "folded line 1: count 99999999999999999999 is more than 2^63-1"},
		{"utf-16 folded, bad line", write("u16.folded", utf16LE("a;b 3\nnot a stack\n")), `folded line 2: not a folded stack ("frame;frame value") (the input was decoded from UTF-16LE)`},
		{"gzip bomb read as pprof", write("bomb.gz", bomb.Bytes()), "larger than 51 MiB"},
		{"directory", dir, "is a directory"},
	}
	for _, c := range cases {
		out, stderr, code := execute(t, "flame", c.path, "-o", "json")
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 saying %q", c.name, code, stderr, c.want)
		}
		if out != "" {
			t.Errorf("%s: printed a report for bad input: %.200s", c.name, out)
		}
	}
}

// A first stack longer than the 64 KiB detection window, or a stray
// non-UTF-8 byte, still reads as folded stacks.
func TestFlameDetectsFoldedDespiteLongOrLatin1Lines(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("frame_with_a_long_name;", 5000) + "leaf 7\nother 3\n"
	latin1 := "caf\xe9;main 5\nother 5\n"
	for name, text := range map[string]string{"long": long, "latin1": latin1} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		out, stderr, code := execute(t, "flame", p, "-o", "json")
		if code != ExitOK || !strings.Contains(out, `"format": "folded"`) {
			t.Errorf("%s: exit %d, stderr %q, out %.300s", name, code, stderr, out)
		}
	}
}

// `flame FIFO` with no writer stops on Ctrl-C.
func TestFlameFIFOWithoutWriterStopsOnInterrupt(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() { done <- Execute(ctx, []string{"flame", fifo}, &out, &errb) }()
	select {
	case code := <-done:
		if code != ExitInterrupted || !strings.Contains(errb.String(), "waiting for a writer") {
			t.Fatalf("exit %d, stderr %q; want %d after a waiting notice", code, errb.String(), ExitInterrupted)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("flame on a FIFO without writer ignored the interrupt")
	}
}

// A panic in any command is one sentence and exit 4, never Go's trace and
// exit 2 (the usage code).
func TestPanicIsOneSentenceExit4(t *testing.T) {
	var errb bytes.Buffer
	g := &Globals{Out: new(bytes.Buffer), Err: &errb, Started: time.Now()}
	root := NewRoot(g)
	root.AddCommand(&cobra.Command{Use: "boom", RunE: func(*cobra.Command, []string) error {
		var m map[string]int
		m["x"]++ // assignment to entry in nil map
		return nil
	}})
	code := execute1(context.Background(), g, root, []string{"boom"})
	if code != ExitFailure {
		t.Fatalf("exit %d, want %d", code, ExitFailure)
	}
	if s := strings.TrimSpace(errb.String()); strings.Count(s, "\n") != 0 || !strings.Contains(s, "internal error") || strings.Contains(s, "goroutine") {
		t.Fatalf("stderr %q: want one sentence without a trace", s)
	}
}

// A panic in one of perfscope's goroutines (a sampling loop, the
// symbolizer's prefetcher) reaches the command as an error: one sentence
// and exit 4, also when the command wrapped it as bad input.
func TestGoroutinePanicIsOneSentenceExit4(t *testing.T) {
	var errb bytes.Buffer
	g := &Globals{Out: new(bytes.Buffer), Err: &errb, Started: time.Now()}
	root := NewRoot(g)
	root.AddCommand(&cobra.Command{Use: "boom", RunE: func(*cobra.Command, []string) error {
		err := <-gosafe.Go(func() error {
			var s []int
			_ = s[3]
			return nil
		})
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("sampling: %w", err)}
	}})
	code := execute1(context.Background(), g, root, []string{"boom"})
	if code != ExitFailure {
		t.Fatalf("exit %d, want %d", code, ExitFailure)
	}
	if s := strings.TrimSpace(errb.String()); strings.Count(s, "\n") != 0 || !strings.Contains(s, "internal error: runtime error: index out of range") || strings.Contains(s, "goroutine") {
		t.Fatalf("stderr %q: want one sentence without a trace", s)
	}
}

// --compare accepts exactly one report per file.
func TestCompareRejectsTrailingDataAndSecondDocument(t *testing.T) {
	good, err := os.ReadFile("../../report/compare/testdata/before.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{
		"garbage": append(append([]byte{}, good...), []byte("}garbage")...),
		"two":     append(append(append([]byte{}, good...), '\n'), good...),
	} {
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, b, 0o644)
		_, stderr, code := execute(t, "udp", "--compare", p+","+p)
		if code != ExitUsage || !strings.Contains(stderr, "more after the report's end") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2", name, code, stderr)
		}
	}
}

// --revert and --compare on what is not a file: exit 2, promptly.
func TestRevertAndCompareBadFilesExit2(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"udp", "--revert", dir},
		{"udp", "--revert", "/dev/zero"},
		{"udp", "--revert", filepath.Join(dir, "missing.sh")},
		{"udp", "--compare", dir + "," + dir},
		{"udp", "--compare", "/dev/zero,/dev/zero"},
	} {
		_, stderr, code := execute(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (%q)", args, code, stderr)
		}
	}
}

// --revert on a FIFO with no writer stops on Ctrl-C.
func TestRevertFIFOStopsOnInterrupt(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"udp", "--revert", fifo}, {"udp", "--compare", fifo + "," + fifo}} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		done := make(chan int, 1)
		go func() { done <- Execute(ctx, args, new(bytes.Buffer), new(bytes.Buffer)) }()
		select {
		case code := <-done:
			if code == ExitOK {
				t.Errorf("%v: exit 0 without input", args)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v on a FIFO without writer ignored cancellation", args)
		}
		cancel()
	}
}

// An interface name with an escape sequence is printed escaped, never raw.
func TestErrorMessagesEscapeControlCharacters(t *testing.T) {
	_, stderr, _ := execute(t, "udp", "--iface", "x\x1b]0;pwned\x07")
	if strings.ContainsAny(stderr, "\x1b\x07") || !strings.Contains(stderr, `x\x1b]0;pwned\x07`) {
		t.Fatalf("stderr %q carries raw control characters", stderr)
	}
}

// A frame name with an escape sequence reaches -o text escaped.
func TestFlameTextEscapesControlCharacters(t *testing.T) {
	p := filepath.Join(t.TempDir(), "evil.folded")
	os.WriteFile(p, []byte("main;\x1b[2Jclear 5\n"), 0o644)
	out, stderr, code := execute(t, "flame", p, "-o", "text")
	if code != ExitOK || strings.Contains(out, "\x1b") || !strings.Contains(out, `\x1b[2Jclear`) {
		t.Fatalf("exit %d %s, out %q", code, stderr, out)
	}
}

// --pid of a zombie or of a thread is bad input, for every command that
// takes --pid (one shared check).
func TestPIDZombieAndThreadExit2(t *testing.T) {
	child := exec.Command("true")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	zombie := child.Process.Pid
	for i := 0; i < 100; i++ { // until it has exited and waits to be reaped
		if st, _ := procfs.Default.Status(zombie); st.State == "Z" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	tid := ""
	for _, e := range tasks {
		if e.Name() != strconv.Itoa(os.Getpid()) {
			tid = e.Name()
			break
		}
	}
	if tid == "" {
		t.Fatal("test process has one thread")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"udp", "--iface", "lo", "--pid", strconv.Itoa(zombie)}, "has exited"},
		{[]string{"profile", "--pid", strconv.Itoa(zombie)}, "has exited"},
		{[]string{"udp", "--iface", "lo", "--pid", tid}, "is a thread of process " + strconv.Itoa(os.Getpid())},
		{[]string{"profile", "--pid", tid}, "is a thread of process"},
	} {
		_, stderr, code := execute(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", c.args, code, stderr, c.want)
		}
	}
}

// utf16LE is s as Windows PowerShell's '>' writes it: UTF-16LE with a
// byte-order mark.
func utf16LE(s string) []byte {
	b := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return b
}

// A folded file saved as UTF-16 (PowerShell's '>') reads as the same
// stacks as its UTF-8 original.
func TestFlameReadsUTF16Folded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "u16.folded")
	os.WriteFile(p, utf16LE("main;work 7\nmain;idle 3\n"), 0o644)
	out, stderr, code := execute(t, "flame", p, "-o", "folded")
	if code != ExitOK || out != "main;idle 3\nmain;work 7\n" {
		t.Errorf("exit %d, stderr %q, out %q", code, stderr, out)
	}
}
