package gclog

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

// sevenPauses is a unified G1 log of seven young pauses whose last line has
// no newline, as a JVM killed mid-write (or a log still open) leaves it.
const sevenPauses = `[0.010s][info][gc] Using G1
[1.000s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms
[2.000s][info][gc] GC(1) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms
[3.000s][info][gc] GC(2) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms
[4.000s][info][gc] GC(3) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms
[5.000s][info][gc] GC(4) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms
[6.000s][info][gc] GC(5) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms
[7.000s][info][gc] GC(6) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms`

// sevenPausesZstd is sevenPauses compressed by the zstd tool itself
// (`zstd -19`, v1.5.4), not by the library that reads it.
const sevenPausesZstd = `KLUv/WSRAR0EAPIGGBhgzQOPCD9O4JsvQkWgJSUVJF9ZQEFbkAdxgPFB4TmhOQrs5/8Z9DUjdGo+
IpjP+coaR1Za7GR4k8qXYx9IH8pvlrTizJYs4utVIf9Zo0CTfjPeidfl0qqbjGnd3549DQ4gsOM2
l4S+QBlaAj2aRVToC5ShJQC9dklHDmE6Lzcyc2vyKA==`

func writeLog(t *testing.T, name string, parts ...[]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, bytes.Join(parts, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func youngPauses(s Summary) int { return counts(s)["young"] }

// The last line, without a newline, before a hole of NUL bytes (a sparse
// tail: a crash or a preallocated file) is read; the hole is counted, not
// glued to the line and dropped with it.
func TestLastLineBeforeNULHoleIsRead(t *testing.T) {
	log := writeLog(t, "gc.log", []byte(sevenPauses))
	const hole = 64 << 20 // several buffers' worth; the CLI test makes 3 GiB
	if err := os.Truncate(log, int64(len(sevenPauses))+hole); err != nil {
		t.Fatal(err)
	}
	s := analyze(t, log)
	if got := youngPauses(s); got != 7 {
		t.Errorf("%d young pauses, want 7", got)
	}
	p := s.Parse
	if p.NULBytes != hole || p.Partial || p.OverlongLines != 0 || p.Unknown != 0 || p.UnrecognisedRecords != 0 || p.Lines != 8 {
		t.Errorf("parse stats %+v", p)
	}
	if len(p.Skipped) != 1 || p.Skipped[0].Line != 8 || !strings.Contains(p.Skipped[0].Reason, "NUL") {
		t.Errorf("skipped %+v", p.Skipped)
	}
	if notes := p.Notes(); len(notes) != 1 || !strings.Contains(notes[0], "64.0 MiB of NUL bytes skipped (at "+log+":8)") {
		t.Errorf("notes %q", notes)
	}
	if w := p.Warnings(); len(w) != 0 {
		t.Errorf("warnings %q over a complete read", w)
	}
}

// logrotate's copytruncate empties the file while the JVM keeps writing at
// its offset: the file starts with a hole (sparse), then the new lines, a
// hole again and more lines. Written NULs read the same as a hole.
func TestCopytruncateHoleThenLines(t *testing.T) {
	lines := strings.SplitAfter(sevenPauses, "\n")
	first, second := []byte(strings.Join(lines[:4], "")), []byte(strings.Join(lines[4:], ""))
	sparse := writeLog(t, "gc.log")
	f, err := os.OpenFile(sparse, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(first, 300<<10)
	f.WriteAt(second, 5<<20)
	f.Close()
	dense := writeLog(t, "gc.log.1", make([]byte, 300<<10), first, make([]byte, 5<<20-300<<10-len(first)), second)
	for _, log := range []string{sparse, dense} {
		s := analyze(t, log)
		p := s.Parse
		if got := youngPauses(s); got != 7 || p.NULBytes != 5<<20-int64(len(first)) || p.Unknown != 0 || p.Lines != 8 || p.Bytes != 5<<20+int64(len(second)) {
			t.Errorf("%s: %d young pauses, stats %+v", log, got, p)
		}
		if len(p.Skipped) != 2 || p.Skipped[0].Line != 1 || p.Skipped[1].Line != 5 {
			t.Errorf("%s: holes at %+v, want lines 1 and 5", log, p.Skipped)
		}
	}
}

// A line longer than MaxLineBytes in the middle is not read, and is
// counted as an unrecognised record with its line number: the result is
// partial, never silently short.
func TestOverlongLineIsAnUnrecognisedRecord(t *testing.T) {
	lines := strings.SplitAfter(sevenPauses, "\n")
	long := bytes.Repeat([]byte("x"), 20<<20)
	log := writeLog(t, "gc.log", []byte(strings.Join(lines[:4], "")), long, []byte("\n"), []byte(strings.Join(lines[4:], "")))
	s := analyze(t, log)
	p := s.Parse
	if got := youngPauses(s); got != 7 {
		t.Errorf("%d young pauses, want 7", got)
	}
	if p.OverlongLines != 1 || p.OverlongBytes != 20<<20+1 || p.UnrecognisedRecords != 1 || !p.Partial || p.Unknown != 0 || len(p.EndsInsideLine) != 0 || p.Lines != 9 {
		t.Errorf("parse stats %+v", p)
	}
	if len(p.UnrecognisedSamples) != 1 || p.UnrecognisedSamples[0].Line != 5 || !strings.Contains(p.UnrecognisedSamples[0].Reason, "longer than the 256 KiB") {
		t.Errorf("unrecognised %+v", p.UnrecognisedSamples)
	}
	if w := p.Warnings(); len(w) != 1 || !strings.Contains(w[0], "partial result: 1 line longer than 256 KiB (20.0 MiB in all) not read, at "+log+":5") {
		t.Errorf("warnings %q", w)
	}
}

// A file that ends inside an over-long line says so.
func TestFileEndingInsideOverlongLine(t *testing.T) {
	log := writeLog(t, "gc.log", []byte(sevenPauses+"\n"), bytes.Repeat([]byte("y"), 3<<20))
	s := analyze(t, log)
	p := s.Parse
	if youngPauses(s) != 7 || !p.Partial || len(p.EndsInsideLine) != 1 || p.EndsInsideLine[0] != log || p.UnrecognisedRecords != 1 {
		t.Fatalf("stats %+v", p)
	}
	w := p.Warnings()
	if len(w) != 2 || !strings.Contains(w[1], log+" ends inside a line longer than 256 KiB with no newline") {
		t.Errorf("warnings %q", w)
	}
	if !strings.Contains(p.UnrecognisedSamples[0].Reason, "the file ends inside a line of 3145728 bytes") {
		t.Errorf("reason %q", p.UnrecognisedSamples[0].Reason)
	}
}

// NULs end a line but not its number: an editor shows them on one line.
func TestLineNumbersAcrossNULs(t *testing.T) {
	var p Parser
	var lines []int64
	p.OnEvent = func(e *Event) { lines = append(lines, e.Line) }
	log := strings.Split(sevenPauses, "\n")
	in := "junk\x00\x00" + log[1] + "\x00\n" + log[2] + "\n"
	if err := p.ParseNamed("x", strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	if len(lines) != 2 || lines[0] != 1 || lines[1] != 2 || p.Stats.Lines != 2 || p.Stats.NULBytes != 3 || p.Stats.Bytes != int64(len(in)) {
		t.Errorf("events at lines %v, stats %+v", lines, p.Stats)
	}
}

func TestZstdAndUTF16Logs(t *testing.T) {
	z, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(sevenPausesZstd, "\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	utf16le := binary.LittleEndian.AppendUint16(nil, 0xfeff) // PowerShell's `>`
	for _, u := range utf16.Encode([]rune(sevenPauses)) {
		utf16le = binary.LittleEndian.AppendUint16(utf16le, u)
	}
	for _, tc := range []struct {
		name, compression, encoding string
		data                        []byte
	}{
		{"gc.log.zst", "zstd", "", z},
		{"gc.log", "", "UTF-16LE", utf16le},
		{"gc.log.1", "", "UTF-8 with BOM", append([]byte{0xef, 0xbb, 0xbf}, sevenPauses...)},
	} {
		log := writeLog(t, tc.name, tc.data)
		s := analyze(t, log)
		if got := youngPauses(s); got != 7 || s.Parse.Unknown != 0 {
			t.Errorf("%s: %d young pauses, %d unknown lines %q", tc.name, got, s.Parse.Unknown, s.Parse.UnknownSamples)
		}
		want := []Decoding{{File: log, Compression: tc.compression, Encoding: tc.encoding}}
		if len(s.Parse.Decoded) != 1 || s.Parse.Decoded[0] != want[0] {
			t.Errorf("%s: decoded %+v, want %+v", tc.name, s.Parse.Decoded, want)
		}
	}
}

// A damaged or truncated zstd stream is ErrCorrupt (bad input), and a
// frame asking for a window beyond MaxZstdWindow is refused before its
// memory is taken.
func TestZstdCorrupt(t *testing.T) {
	z, _ := base64.StdEncoding.DecodeString(strings.ReplaceAll(sevenPausesZstd, "\n", ""))
	flipped := bytes.Clone(z)
	flipped[len(flipped)/2] ^= 0xff
	// Frame header: magic, descriptor 0 (no content size, not single
	// segment), window descriptor 0xF8 = exponent 31-10: a 2 GiB window.
	huge := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xf8}, 0x01, 0x00, 0x00)
	for name, data := range map[string][]byte{"flipped": flipped, "truncated": z[:len(z)-20], "huge window": huge} {
		_, err := AnalyzeFiles(context.Background(), []string{writeLog(t, "gc.log.zst", data)}, time.Second)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// refPiece splits data as lineReader should, byte by byte.
func refPieces(data []byte) []piece {
	var out []piece
	atStart := true
	for pos := 0; pos < len(data); {
		if data[pos] == 0 {
			k := pos
			for k < len(data) && data[k] == 0 {
				k++
			}
			out = append(out, piece{kind: pieceNUL, n: int64(k - pos), lineStart: atStart})
			atStart, pos = false, k
			continue
		}
		end := pos
		for end < len(data) && data[end] != '\n' && data[end] != 0 {
			end++
		}
		pc := piece{kind: pieceText, n: int64(end - pos), lineStart: atStart, end: endEOF, text: data[pos:end]}
		if end-pos >= MaxLineBytes {
			pc.kind, pc.text = pieceLong, data[pos:pos+200]
		}
		if end < len(data) {
			pc.end = endNUL
			if data[end] == '\n' {
				pc.end = endNewline
				pc.n++
			}
		}
		out = append(out, pc)
		atStart = pc.end == endNewline
		pos += int(pc.n)
	}
	return out
}

// The reader's pieces match a byte-by-byte split on inputs mixing short
// lines, holes and over-long lines at every position relative to the
// buffer's edges.
func TestLineReaderMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		var data []byte
		for len(data) < 3<<20 {
			switch r := rng.IntN(100); {
			case r < 80:
				data = append(data, bytes.Repeat([]byte("a"), rng.IntN(300))...)
				data = append(data, '\n')
			case r < 88:
				data = append(data, make([]byte, 1+rng.IntN(70000))...)
			case r < 93:
				data = append(data, bytes.Repeat([]byte("L"), MaxLineBytes-2+rng.IntN(5))...)
				data = append(data, "\n\x00"[rng.IntN(2)])
			default:
				data = append(data, bytes.Repeat([]byte("b"), rng.IntN(600000))...)
			}
		}
		data = data[:len(data)-rng.IntN(400000)]
		var lr lineReader
		lr.reset(bytes.NewReader(data))
		want := refPieces(data)
		for i := 0; ; i++ {
			got, err := lr.next()
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("round %d: %d pieces, want %d", round, i, len(want))
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if i >= len(want) {
				t.Fatalf("round %d: more than the %d pieces wanted", round, len(want))
			}
			w := want[i]
			if got.kind != w.kind || got.n != w.n || got.lineStart != w.lineStart || (got.kind != pieceNUL && got.end != w.end) || !bytes.Equal(got.text, w.text) {
				t.Fatalf("round %d, piece %d: got kind %d n %d start %v end %d, want kind %d n %d start %v end %d", round, i, got.kind, got.n, got.lineStart, got.end, w.kind, w.n, w.lineStart, w.end)
			}
		}
	}
}
