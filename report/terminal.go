package report

import (
	"fmt"
	"io"
	"strings"
)

// TerminalSafe wraps w, the destination of text output, so that control
// characters cannot reach the user's terminal: process, thread and
// interface names, and frames from profiles, come from other users, and
// an ESC sequence in a comm would otherwise retitle or clear root's
// terminal. Every C0 control except tab and newline, DEL, and the C1
// controls (U+0080–U+009F, which some terminals obey) print as \xNN.
func TerminalSafe(w io.Writer) io.Writer {
	if t, ok := w.(*terminalSafe); ok {
		return t
	}
	return &terminalSafe{w: w}
}

type terminalSafe struct {
	w io.Writer
	// c2 is set when the previous write ended with 0xC2, the first byte of
	// a UTF-8 encoded C1 control or of an ordinary character.
	c2  bool
	buf []byte
}

func (t *terminalSafe) Write(p []byte) (int, error) {
	t.buf = t.buf[:0]
	for i := 0; i < len(p); i++ {
		c := p[i]
		if t.c2 {
			t.c2 = false
			if c >= 0x80 && c <= 0x9f {
				t.buf = fmt.Appendf(t.buf, `\u%04x`, c)
				continue
			}
			t.buf = append(t.buf, 0xc2)
		}
		switch {
		case c == 0xc2:
			t.c2 = true
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			t.buf = fmt.Appendf(t.buf, `\x%02x`, c)
		default:
			t.buf = append(t.buf, c)
		}
	}
	if _, err := t.w.Write(t.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Clean returns s with the control characters TerminalSafe escapes
// escaped, for strings from the system printed outside a TerminalSafe
// writer (error messages).
func Clean(s string) string {
	var b strings.Builder
	t := &terminalSafe{w: &b}
	io.WriteString(t, s)
	if t.c2 {
		b.WriteByte(0xc2)
	}
	return b.String()
}
