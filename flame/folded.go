package flame

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
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
	value, err := parseCount(line[sp+1:])
	if err != nil {
		return err
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

// ErrCountTooLarge is a folded stack's count beyond what an int64 holds.
var ErrCountTooLarge = errors.New("is more than 2^63-1")

// badCount is a count that starts as a number and goes on as none.
func badCount(b []byte) error {
	return fmt.Errorf("count %q is not a number of samples (digits, as in \"frame;frame 42\")", b[:min(len(b), 40)])
}

// parseCount parses a stack's count: a decimal integer or, as FlameGraph's
// `\d+(?:\.\d*)?` accepts, one with a fraction ("12.5", rounded half up).
// Nothing else is a count — not "1e3", "+5", "0x10", "NaN" or "Inf", all of
// which strconv.ParseFloat would take: counts are numbers of samples, and a
// tool that printed an exponent lost digits. Hand-written, as it runs once
// per line of inputs with millions of lines.
func parseCount(b []byte) (int64, error) {
	var v int64
	over := false
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := int64(b[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			over = true
		}
		v = v*10 + d
	}
	if i == 0 {
		return 0, errFoldedValue
	}
	if i < len(b) {
		if b[i] != '.' {
			return 0, badCount(b)
		}
		frac := b[i+1:]
		for _, c := range frac {
			if c < '0' || c > '9' {
				return 0, badCount(b)
			}
		}
		if len(frac) > 0 && frac[0] >= '5' {
			over = over || v == math.MaxInt64
			v++
		}
	}
	if over {
		return 0, fmt.Errorf("count %.40s %w", b, ErrCountTooLarge)
	}
	return v, nil
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
