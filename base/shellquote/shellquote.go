// Package shellquote renders command lines for humans to read and paste:
// every command perfscope shows (the apply and revert of a finding, the
// shell rendition in a revert file) goes through Quote, so a value taken
// from the system — an interface, a table name, a path — reaches the shell
// as one literal word whatever bytes it holds. perfscope itself never runs
// these strings; it executes typed changes.
package shellquote

import (
	"strings"
	"unicode/utf8"
)

// safe are the bytes a word may consist of without quoting. The set is
// conservative: no glob, expansion, redirection, history, comment or
// field-splitting character of any common shell.
func safe(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("@%+=:,./_-", b) >= 0
}

// Quote returns s as one shell word. Words of safe bytes stay bare; words
// of printable text are single-quoted (an inner single quote closes the
// quotes, is escaped with a backslash and reopens them); words
// with control bytes or invalid UTF-8 use $'…' with \xHH escapes, so that
// the rendered command never carries a raw newline or terminal escape (the
// POSIX.1-2024 shell, bash, zsh, ksh and busybox sh read $'…').
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	bare := true
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			bare = false
			break
		}
	}
	if bare {
		return s
	}
	if printable(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1, r < 0x20, r == 0x7f, 0x80 <= r && r < 0xa0:
			for _, c := range []byte(s[i : i+size]) {
				const hex = "0123456789abcdef"
				b.WriteString(`\x`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			}
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteString("'")
	return b.String()
}

// printable: valid UTF-8 without C0/C1 controls or DEL.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (0x80 <= r && r < 0xa0) {
			return false
		}
	}
	return true
}

// Join quotes each argument and joins them with spaces: a command line.
func Join(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}
