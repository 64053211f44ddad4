package flame

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/base/textenc"
)

// Format is an input format.
type Format string

const (
	FormatAuto       Format = "auto"
	FormatFolded     Format = "folded"
	FormatPerfScript Format = "perf"
	FormatPprof      Format = "pprof"
)

// ParseFormat accepts the names of input formats.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case FormatAuto, FormatFolded, FormatPerfScript, FormatPprof:
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown input format %q (want auto, folded, perf or pprof)", s)
}

// ErrUnknownFormat is returned when auto-detection cannot tell the format.
var ErrUnknownFormat = errors.New("input is not folded stacks, perf script output or pprof")

// Read reads a profile in format, detecting it from the first bytes when
// format is FormatAuto; it returns the format it read. Gzipped input of any
// format is decompressed; text in UTF-16 or UTF-32 (with a byte-order mark,
// or UTF-16 by its pattern: what Windows PowerShell's '>' writes) is
// decoded, and an error then names the encoding.
func Read(r io.Reader, format Format, roots RootFrames) (*Profile, Format, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, _ := br.Peek(2)
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, format, fmt.Errorf("gunzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<20)
	}
	enc := textenc.Plain
	if format != FormatPprof {
		var text io.Reader
		if text, enc = textenc.Decode(br); enc != textenc.Plain {
			br = bufio.NewReaderSize(text, 1<<20)
		}
	}
	p, format, err := read(br, format, roots)
	if err != nil && enc != textenc.Plain {
		err = fmt.Errorf("%w (the input was decoded from %s)", err, enc)
	}
	return p, format, err
}

func read(br *bufio.Reader, format Format, roots RootFrames) (*Profile, Format, error) {
	if format == FormatAuto || format == "" {
		head, _ := br.Peek(64 << 10)
		format = detect(head)
		if format == "" {
			return nil, format, ErrUnknownFormat
		}
	}
	var (
		p   *Profile
		err error
	)
	switch format {
	case FormatFolded:
		p, err = ReadFolded(br)
	case FormatPerfScript:
		p, err = ReadPerfScript(br, roots)
	case FormatPprof:
		p, err = readPprof(br, roots)
	default:
		err = fmt.Errorf("unknown input format %q", format)
	}
	return p, format, err
}

// detect guesses the format from the start of the input; "" if unknown.
// Text is recognised by its shape before binary by its bytes, so that a
// folded file with one stray Latin-1 byte, or a first stack longer than
// the peek, still reads as folded stacks.
func detect(head []byte) Format {
	if len(head) == 0 {
		return FormatFolded // empty input: an empty profile, as flamegraph.pl
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return FormatPprof // binary: protobuf
	}
	if looksLikePerfScript(head) {
		return FormatPerfScript
	}
	for line := range bytes.Lines(head) {
		complete := bytes.HasSuffix(line, []byte{'\n'})
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if sp := bytes.LastIndexByte(line, ' '); sp > 0 {
			// Frames and a count, also a count that is too large or not an
			// integer: reading it names the line and what is wrong.
			if _, err := parseCount(line[sp+1:]); err == nil || bytes.IndexByte(line[:sp], ';') >= 0 {
				return FormatFolded
			}
		}
		if !complete && bytes.IndexByte(line, ';') >= 0 {
			// A first stack longer than the peek: its count is out of
			// sight, but frames separated by ';' are folded stacks.
			return FormatFolded
		}
		break
	}
	if !utf8.Valid(trimPartialRune(head)) {
		return FormatPprof // binary without NUL in the peek
	}
	return ""
}

// trimPartialRune drops a UTF-8 sequence cut by the end of a peek.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size != 1 {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// ErrTooLarge is returned for an input past its size cap.
var ErrTooLarge = safeio.ErrTooLarge
