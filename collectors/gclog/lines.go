package gclog

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// MaxLineBytes bounds one line. A JVM writes lines of a few kilobytes at
// most; a longer one is damage (lost newlines, a binary file, a runaway
// writer) and is not read but counted: as an unrecognised record (it may
// hold pauses), in Stats.OverlongLines, and the result is marked partial.
// The bound keeps memory constant whatever the file holds.
const MaxLineBytes = 256 << 10

// pieceKind says what lineReader.next found.
type pieceKind uint8

const (
	// pieceText is a line, or the part of one before a NUL byte.
	pieceText pieceKind = iota
	// pieceLong is a line longer than MaxLineBytes: only its head is kept.
	pieceLong
	// pieceNUL is a run of NUL bytes: a hole in the file.
	pieceNUL
)

// pieceEnd says what ended a piece.
type pieceEnd uint8

const (
	endNewline pieceEnd = iota
	endNUL              // a NUL byte (the piece after it is on the same line)
	endEOF              // the end of the input, without a newline
)

// piece is one thing lineReader.next found in the input.
type piece struct {
	kind pieceKind
	// text is the line without its end (pieceText) or the first bytes of
	// an over-long line (pieceLong); valid until the next call.
	text []byte
	// n is how many bytes of input the piece took, its newline included.
	n int64
	// lineStart: the piece starts a line (its number advances).
	lineStart bool
	// end says what ended a line or an over-long line.
	end pieceEnd
}

// lineReader splits input into lines, treating a run of NUL bytes as a
// line break of its own kind. Files have holes: a JVM logging to a file
// that logrotate's copytruncate emptied goes on writing at its old offset
// (the start of the file reads as NULs), and a crash or a preallocated
// file leaves NULs at the end. Read as text, the NULs would glue the last
// record to gigabytes of nothing and the record would be lost with them.
//
// Lines are sliced out of a window of the buffer, which is handed back to
// the bufio.Reader only when the window is used up: one '\n' search per
// line and one NUL search per window, as cheap as bufio's ReadSlice.
type lineReader struct {
	br *bufio.Reader
	// win is what was buffered at the last read; off how much of it was
	// consumed (not yet discarded from br); nul the index in win of the
	// first NUL at or after off, len(win) when there is none.
	win      []byte
	off, nul int
	head     []byte
	atStart  bool
}

func (lr *lineReader) reset(r io.Reader) {
	if lr.br == nil {
		lr.br = bufio.NewReaderSize(r, MaxLineBytes)
	} else {
		lr.br.Reset(r)
	}
	lr.win, lr.off, lr.nul = nil, 0, 0
	lr.atStart = true
}

// window returns the unconsumed bytes, reading when there are none; an
// empty slice comes with the error that ended the input.
func (lr *lineReader) window() ([]byte, error) {
	if lr.off < len(lr.win) {
		return lr.win[lr.off:], nil
	}
	lr.br.Discard(lr.off)
	lr.win, lr.off = nil, 0
	if b, err := lr.br.Peek(1); len(b) == 0 {
		if err == nil {
			err = io.EOF
		}
		return nil, err
	}
	b, _ := lr.br.Peek(lr.br.Buffered())
	lr.setWindow(b)
	return b, nil
}

// fill makes the window as large as the buffer: the line in it goes on
// past what was buffered.
func (lr *lineReader) fill() ([]byte, error) {
	lr.br.Discard(lr.off)
	b, err := lr.br.Peek(MaxLineBytes)
	lr.setWindow(b)
	return b, err
}

func (lr *lineReader) setWindow(b []byte) {
	lr.win, lr.off = b, 0
	lr.nul = indexOrLen(b, 0)
}

// consume moves past n bytes of the window.
func (lr *lineReader) consume(n int) {
	lr.off += n
	if lr.nul < lr.off {
		lr.nul = lr.off + indexOrLen(lr.win[lr.off:], 0)
	}
}

func indexOrLen(b []byte, c byte) int {
	if i := bytes.IndexByte(b, c); i >= 0 {
		return i
	}
	return len(b)
}

// next returns the next piece of input; io.EOF at its end.
func (lr *lineReader) next() (piece, error) {
	// The common case first, kept small: a whole line in the window.
	if b := lr.win[lr.off:]; len(b) > 0 && b[0] != 0 {
		if i := bytes.IndexByte(b[:lr.nul-lr.off], '\n'); i >= 0 {
			start := lr.atStart
			lr.off += i + 1 // before the NUL: nul stays right
			lr.atStart = true
			return piece{kind: pieceText, text: b[:i], n: int64(i) + 1, lineStart: start, end: endNewline}, nil
		}
	}
	b, err := lr.window()
	if err != nil {
		return piece{}, err
	}
	start := lr.atStart
	if b[0] == 0 {
		return lr.nuls(start)
	}
	if i := lr.lineEnd(b); i >= 0 {
		return lr.text(b, i, start), nil
	}
	// No end in the window: the line goes on past it.
	b, err = lr.fill()
	if i := lr.lineEnd(b); i >= 0 {
		return lr.text(b, i, start), nil
	}
	if len(b) < MaxLineBytes {
		if err != io.EOF {
			return piece{}, err
		}
		// The last line, without a newline.
		lr.consume(len(b))
		lr.atStart = false
		return piece{kind: pieceText, text: b, n: int64(len(b)), lineStart: start, end: endEOF}, nil
	}
	return lr.long(b, start)
}

// lineEnd is the index of the first newline or NUL in b, the unconsumed
// window; -1 if none.
func (lr *lineReader) lineEnd(b []byte) int {
	nul := lr.nul - lr.off
	if i := bytes.IndexByte(b[:nul], '\n'); i >= 0 {
		return i
	}
	if nul < len(b) {
		return nul
	}
	return -1
}

func (lr *lineReader) text(b []byte, i int, start bool) piece {
	pc := piece{kind: pieceText, text: b[:i], n: int64(i), lineStart: start, end: endNUL}
	if b[i] == '\n' {
		pc.n++
		pc.end = endNewline
	}
	lr.consume(int(pc.n))
	lr.atStart = pc.end == endNewline
	return pc
}

// long skips a line that does not fit in the buffer (b, the filled
// window), keeping its first bytes.
func (lr *lineReader) long(b []byte, start bool) (piece, error) {
	lr.head = append(lr.head[:0], b[:200]...)
	lr.consume(len(b))
	n, err := lr.skipUntil(lr.lineEnd)
	if err != nil {
		return piece{}, err
	}
	pc := piece{kind: pieceLong, text: lr.head, n: int64(len(b)) + n, lineStart: start, end: endEOF}
	if next, err := lr.window(); err == nil {
		pc.end = endNUL
		if next[0] == '\n' {
			lr.consume(1)
			pc.n++
			pc.end = endNewline
		}
	}
	lr.atStart = pc.end == endNewline
	return pc, nil
}

// nuls skips a run of NUL bytes.
func (lr *lineReader) nuls(start bool) (piece, error) {
	n, err := lr.skipUntil(func(b []byte) int {
		if k := leadingZeros(b); k < len(b) {
			return k
		}
		return -1
	})
	if err != nil {
		return piece{}, err
	}
	// What follows the hole is on the same line as far as line numbers go:
	// an editor shows the NULs and the text after them on one line.
	lr.atStart = false
	return piece{kind: pieceNUL, n: n, lineStart: start}, nil
}

// skipUntil consumes input up to where stop says the skipped run ends in
// the window (-1: not there, skip it all), or to the end of the input,
// and returns how many bytes it consumed.
func (lr *lineReader) skipUntil(stop func([]byte) int) (int64, error) {
	var n int64
	for {
		b, err := lr.window()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		k := stop(b)
		if k < 0 {
			k = len(b)
		}
		lr.consume(k)
		n += int64(k)
		if k < len(b) {
			return n, nil
		}
	}
}

// zeros is compared a block at a time: holes are gigabytes long.
var zeros [4096]byte

func leadingZeros(b []byte) int {
	n := 0
	for len(b) >= len(zeros) && bytes.Equal(b[:len(zeros)], zeros[:]) {
		n += len(zeros)
		b = b[len(zeros):]
	}
	for _, c := range b {
		if c != 0 {
			break
		}
		n++
	}
	return n
}

// Warnings are the sentences a report prints first when some of the input
// was not read: the numbers below them cover only the rest.
func (s Stats) Warnings() []string {
	if s.OverlongLines == 0 {
		return nil
	}
	var at []string
	for _, k := range s.Skipped {
		if !strings.HasPrefix(k.Reason, nulReason) {
			at = append(at, fmt.Sprintf("%s:%d", k.File, k.Line))
		}
	}
	if int64(len(at)) < s.OverlongLines {
		at = append(at, "…")
	}
	w := []string{fmt.Sprintf("partial result: %d %s longer than %d KiB (%s in all) not read, at %s: the numbers cover the rest of the log",
		s.OverlongLines, plural(s.OverlongLines, "line", "lines"), MaxLineBytes>>10, humanBytes(s.OverlongBytes), strings.Join(at, ", "))}
	for _, f := range s.EndsInsideLine {
		w = append(w, fmt.Sprintf("%s ends inside a line longer than %d KiB with no newline after it: cut while being written, or no text from there on", f, MaxLineBytes>>10))
	}
	return w
}

// Notes say how the input was read when that is not plain text: holes of
// NUL bytes skipped, files decoded from another encoding.
func (s Stats) Notes() []string {
	var n []string
	if s.NULBytes > 0 {
		var at []string
		for _, k := range s.Skipped {
			if strings.HasPrefix(k.Reason, nulReason) {
				at = append(at, fmt.Sprintf("%s:%d", k.File, k.Line))
			}
		}
		n = append(n, fmt.Sprintf("%s of NUL bytes skipped (at %s): holes in the file, left by a crash, a preallocated file, or copytruncate rotation under a JVM still writing; they hold no text",
			humanBytes(s.NULBytes), strings.Join(at, ", ")))
	}
	for _, d := range s.Decoded {
		if d.Encoding != "" {
			n = append(n, fmt.Sprintf("%s was read as %s", d.File, d.Encoding))
		}
	}
	return n
}

// nulReason starts the reason of a skipped NUL run.
const nulReason = "NUL bytes"

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// humanBytes is n in binary units, with the exact count when it is large.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
