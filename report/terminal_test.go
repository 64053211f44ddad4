package report

import (
	"bytes"
	"testing"
)

// A process named "\x1b]0;pwned\x07" or "\x1b[2J" must not retitle or
// clear the terminal; ordinary UTF-8 (bars, arrows, accents) passes.
func TestTerminalSafeEscapesControls(t *testing.T) {
	var b bytes.Buffer
	w := TerminalSafe(&b)
	w.Write([]byte("comm \x1b]0;pwned\x07 \x1b[2J\r\x7f é █ →\tok\n"))
	w.Write([]byte("c1: \xc2"))
	w.Write([]byte("\x9b31m done\n"))
	want := "comm \\x1b]0;pwned\\x07 \\x1b[2J\\x0d\\x7f é █ →\tok\nc1: \\u009b31m done\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
	if got := Clean("eth0\x1b[31m"); got != "eth0\\x1b[31m" {
		t.Errorf("Clean = %q", got)
	}
}
