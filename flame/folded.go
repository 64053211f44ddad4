package flame

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ReadFolded reads folded stacks: one "frame;frame;frame value" line per
// stack, root first, as written by FlameGraph's stackcollapse scripts and
// async-profiler's collapsed output. The value is everything after the last
// space, so frames may contain spaces. Empty lines are skipped; any other
// malformed line is an error naming its line number.
func ReadFolded(r io.Reader) (*Profile, error) {
	p := New(Samples)
	if err := p.readFolded(r); err != nil {
		return nil, err
	}
	return p, nil
}

// MaxLineBytes is the longest line the text readers accept: 16 MiB holds a
// MaxDepth-frame stack of 250-byte Java names, and a line without end
// (/dev/zero through gunzip, `yes`) fails instead of growing without bound.
const MaxLineBytes = 16 << 20

func (p *Profile) readFolded(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var long []byte // a line longer than the buffer, assembled
	// path holds the node ids of the previous stack: inputs are usually
	// sorted, so consecutive stacks share a prefix, and comparing a frame's
	// bytes with the previous line's name is cheaper than a lookup.
	var path []int32
	lineNo := 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
				if len(long) > MaxLineBytes {
					return fmt.Errorf("folded line %d: longer than %d MiB", lineNo+1, MaxLineBytes>>20)
				}
			}
			line = long
		}
		if len(line) > 0 {
			lineNo++
			if perr := p.addFoldedLine(line, &path); perr != nil {
				return fmt.Errorf("folded line %d: %w", lineNo, perr)
			}
			if p.refused != nil {
				return fmt.Errorf("folded line %d: %w", lineNo, p.refused)
			}
		}
		if err == io.EOF {
			return p.Err()
		}
		if err != nil {
			return err
		}
	}
}

var errFoldedValue = errors.New(`not a folded stack ("frame;frame value")`)

func (p *Profile) addFoldedLine(line []byte, path *[]int32) error {
	line = bytes.TrimRight(line, "\r\n\t ")
	if len(line) == 0 {
		return nil
	}
	sp := bytes.LastIndexByte(line, ' ')
	if sp <= 0 {
		return errFoldedValue
	}
	value, ok := parseCount(line[sp+1:])
	if !ok {
		return errFoldedValue
	}
	stack := bytes.TrimRight(line[:sp], " ")
	if value == 0 || len(stack) == 0 {
		return nil
	}
	if !p.fits(value) {
		return ErrOverflow
	}
	if bytes.Count(stack, []byte{';'}) >= MaxDepth {
		return ErrTooDeep
	}
	p.node(0).total += value
	n := int32(0)
	depth := 0
	prev := *path
	same := true // still on the previous stack's path
	for len(stack) > 0 {
		var frame []byte
		if i := bytes.IndexByte(stack, ';'); i >= 0 {
			frame, stack = stack[:i], stack[i+1:]
		} else {
			frame, stack = stack, nil
		}
		if same && depth < len(prev) && p.names[p.node(prev[depth]).name] == string(frame) {
			n = prev[depth]
		} else {
			same = false
			n = p.child(n, p.internBytes(frame))
		}
		p.node(n).total += value
		if depth < len(prev) {
			prev[depth] = n
		} else {
			prev = append(prev, n)
		}
		depth++
	}
	*path = prev[:depth]
	p.node(n).self += value
	return nil
}

// parseCount parses a non-negative decimal count without strconv's
// generality (this runs once per line of inputs with millions of lines).
// Fractional counts, which FlameGraph accepts, are rounded.
func parseCount(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return parseFractionalCount(b)
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return parseFractionalCount(b)
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

func parseFractionalCount(b []byte) (int64, bool) {
	f, err := strconv.ParseFloat(string(b), 64)
	// Written so that NaN fails too: strconv accepts "NaN" and "Inf".
	if err != nil || !(f >= 0 && f <= 1<<62) {
		return 0, false
	}
	return int64(f + 0.5), true
}

// WriteFolded writes p as folded stacks, one line per distinct stack,
// frames and lines in alphabetical order.
func WriteFolded(w io.Writer, p *Profile) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	var buf []byte
	err := p.Walk(func(frames []string, value int64) error {
		buf = buf[:0]
		for i, f := range frames {
			if i > 0 {
				buf = append(buf, ';')
			}
			buf = append(buf, f...)
		}
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, value, 10)
		buf = append(buf, '\n')
		_, err := bw.Write(buf)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}
