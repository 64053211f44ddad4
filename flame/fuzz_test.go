package flame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkProfile asserts what every profile read from untrusted input must
// satisfy: no wrapped totals, every stack within MaxDepth, and writers
// that accept it.
func checkProfile(t *testing.T, p *Profile) {
	t.Helper()
	if p.Total() < 0 {
		t.Fatalf("negative total %d", p.Total())
	}
	var sum int64
	err := p.Walk(func(frames []string, v int64) error {
		if v <= 0 || len(frames) > MaxDepth {
			t.Fatalf("stack of %d frames with value %d", len(frames), v)
		}
		if sum > math.MaxInt64-v {
			t.Fatal("self values overflow")
		}
		sum += v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum != p.Total() {
		t.Fatalf("stacks add up to %d, total says %d", sum, p.Total())
	}
	if err := WriteFolded(io.Discard, p); err != nil {
		t.Fatal(err)
	}
	if err := WritePprof(io.Discard, p); err != nil {
		t.Fatal(err)
	}
}

func seedFiles(f *testing.F, pattern string) {
	files, _ := filepath.Glob(pattern)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 8192 {
			b = b[:8192]
		}
		f.Add(b)
	}
}

// FuzzReadFolded: folded stacks never panic, never wrap, and either read
// or fail naming the line.
//
//	go test ./flame -run '^$' -fuzz '^FuzzReadFolded$' -fuzztime 60s
func FuzzReadFolded(f *testing.F) {
	seedFiles(f, "testdata/*.folded")
	for _, s := range []string{"a;b 1\n", "a;b;c 10\na;b 5\n", "x 1.5\n", "a NaN\n", "a 1e300\n", "a;b 9223372036854775807\nc 1\n", " 1\n", "a;;b 2\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ReadFolded(bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "folded line ") {
				t.Fatalf("error does not name the line: %v", err)
			}
			return
		}
		checkProfile(t, p)
		// What it writes, it reads back the same (frames named by nothing
		// or by blanks, from "a;;b", have no unambiguous folded form).
		for _, name := range p.names[1:] {
			if strings.TrimSpace(name) == "" {
				return
			}
		}
		var buf bytes.Buffer
		if err := WriteFolded(&buf, p); err != nil {
			t.Fatal(err)
		}
		q, err := ReadFolded(&buf)
		if err != nil {
			t.Fatalf("round trip: total %d → %v", p.Total(), err)
		}
		if q.Total() != p.Total() {
			t.Fatalf("round trip: total %d → %d", p.Total(), q.Total())
		}
	})
}

// FuzzReadPerfScript: perf script output (a text format from another
// tool, often edited or truncated) never panics and never yields a
// wrapped total, with every root-frame option.
//
//	go test ./flame -run '^$' -fuzz '^FuzzReadPerfScript$' -fuzztime 60s
func FuzzReadPerfScript(f *testing.F) {
	seedFiles(f, "testdata/perf-script.txt")
	f.Add([]byte("x 1/2 [000] 1.0: 1 cpu-clock:\n\tffff f+0x1 ([kernel.kallsyms])\n\n"))
	f.Add([]byte("a 1 [9999999999] 1.0:\n\t0 [unknown] (/tmp/perf-1.map)\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ReadPerfScript(bytes.NewReader(data), RootFrames{CPU: true, Process: true, Thread: true})
		if err == nil {
			checkProfile(t, p)
		}
	})
}

// FuzzReadPprof: pprof input (and whatever auto-detection makes of any
// bytes) never panics and never yields a wrapped total.
//
//	go test ./flame -run '^$' -fuzz '^FuzzReadPprof$' -fuzztime 60s
func FuzzReadPprof(f *testing.F) {
	seedFiles(f, "testdata/*.pb.gz")
	p := New(Nanoseconds)
	p.Add([]string{"main", "work"}, 1000)
	p.Add([]string{"main", "idle"}, 10)
	var buf bytes.Buffer
	if err := WritePprof(&buf, p); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte{0x0a, 0x04, 0x08, 0x01, 0x10, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		if q, err := ReadPprof(bytes.NewReader(data)); err == nil {
			checkProfile(t, q)
		}
		q, _, err := Read(bytes.NewReader(data), FormatAuto, RootFrames{Process: true, CPU: true})
		if err == nil {
			checkProfile(t, q)
		} else if errors.Is(err, ErrOverflow) && q != nil {
			t.Fatal("a profile returned with an overflow error")
		}
	})
}

// A profile of more distinct frames than MaxFrames fails at the line that
// crossed it instead of growing without bound.
func TestReadFoldedStopsAtMaxFrames(t *testing.T) {
	defer func(n int32) { MaxFrames = n }(MaxFrames)
	MaxFrames = 100
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "main;f%d 1\n", i)
	}
	_, err := ReadFolded(strings.NewReader(b.String()))
	if !errors.Is(err, ErrTooManyFrames) || !strings.HasPrefix(err.Error(), "folded line 10") {
		t.Fatalf("err = %v, want ErrTooManyFrames near line 100", err)
	}
}

// A profile whose trie would take more than MaxBytes fails at the line
// that crossed it: few frames with long distinct names count as much as
// many frames with short ones, and merging two profiles is held to the
// same cap.
func TestReadFoldedStopsAtMaxBytes(t *testing.T) {
	defer func(n int64) { MaxBytes = n }(MaxBytes)
	MaxBytes = 1 << 20
	long := strings.Repeat("x", 64<<10)
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "main;%s%d 1\n", long, i)
	}
	_, err := ReadFolded(strings.NewReader(b.String()))
	if !errors.Is(err, ErrTooLarge) || !strings.HasPrefix(err.Error(), "folded line 1") || !strings.Contains(err.Error(), "more than 1 MiB") {
		t.Fatalf("err = %v, want ErrTooLarge near line 16", err)
	}
	small := func(prefix string) *Profile {
		p := New(Samples)
		for i := range 6000 {
			p.Add([]string{"main", fmt.Sprintf("%s%d", prefix, i)}, 1)
		}
		if p.Err() != nil || p.Bytes() > MaxBytes {
			t.Fatalf("%s: %v, %d bytes", prefix, p.Err(), p.Bytes())
		}
		return p
	}
	p := small("a")
	if err := p.Merge(small("b")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("merge past the cap: %v, want ErrTooLarge", err)
	}
}
