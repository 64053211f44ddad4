// Package textenc reads the text files users hand perfscope (GC logs,
// folded stacks, perf script output) as UTF-8 whatever Unicode encoding
// they were saved in. Windows PowerShell's `>` and `Out-File` write
// UTF-16LE with a byte-order mark, and editors add UTF-8 BOMs: read byte by
// byte such a file is one NUL in every two bytes, and every line fails to
// parse for a reason the user cannot see.
package textenc

import (
	"bufio"
	"io"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
	"golang.org/x/text/transform"
)

// Encoding names a Unicode encoding as users know it ("UTF-16LE").
type Encoding string

// The encodings Sniff recognises. Plain means no byte-order mark and no
// UTF-16 pattern: UTF-8, ASCII, or bytes that are not text at all.
const (
	Plain   Encoding = ""
	UTF8BOM Encoding = "UTF-8 with BOM"
	UTF16LE Encoding = "UTF-16LE"
	UTF16BE Encoding = "UTF-16BE"
	UTF32LE Encoding = "UTF-32LE"
	UTF32BE Encoding = "UTF-32BE"
)

// SniffBytes is how much of the input Sniff looks at.
const SniffBytes = 1024

// Sniff says how the text starting with head is encoded, and how many
// bytes of byte-order mark start it. UTF-16 without a byte-order mark is
// recognised by its pattern: in at least 90 % of the first (up to 512)
// two-byte units one byte is NUL and the other not, always the same one,
// as ASCII text in UTF-16 is. A NUL-filled hole (bytes that are all NUL)
// or binary data does not have that pattern.
func Sniff(head []byte) (Encoding, int) {
	switch {
	case hasPrefix(head, 0xff, 0xfe, 0, 0):
		return UTF32LE, 4
	case hasPrefix(head, 0, 0, 0xfe, 0xff):
		return UTF32BE, 4
	case hasPrefix(head, 0xef, 0xbb, 0xbf):
		return UTF8BOM, 3
	case hasPrefix(head, 0xff, 0xfe):
		return UTF16LE, 2
	case hasPrefix(head, 0xfe, 0xff):
		return UTF16BE, 2
	}
	head = head[:min(len(head), SniffBytes)]
	units := len(head) / 2
	if units < 8 {
		return Plain, 0
	}
	var le, be int
	for i := 0; i+1 < len(head); i += 2 {
		switch {
		case head[i] != 0 && head[i+1] == 0:
			le++
		case head[i] == 0 && head[i+1] != 0:
			be++
		}
	}
	switch {
	case le*10 >= units*9:
		return UTF16LE, 0
	case be*10 >= units*9:
		return UTF16BE, 0
	}
	return Plain, 0
}

func hasPrefix(b []byte, p ...byte) bool {
	if len(b) < len(p) {
		return false
	}
	for i, c := range p {
		if b[i] != c {
			return false
		}
	}
	return true
}

// Decode looks at br's first bytes (Sniff) and returns a reader of its
// text as UTF-8, without the byte-order mark, and the encoding it found.
// For Plain input it returns br itself: nothing is copied. Invalid
// sequences (a lone surrogate) become U+FFFD, as every decoder does.
func Decode(br *bufio.Reader) (io.Reader, Encoding) {
	head, _ := br.Peek(SniffBytes)
	enc, bom := Sniff(head)
	if enc == Plain {
		return br, Plain
	}
	br.Discard(bom)
	var dec encoding.Encoding
	switch enc {
	case UTF8BOM:
		return br, enc
	case UTF16LE:
		dec = unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM)
	case UTF16BE:
		dec = unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM)
	case UTF32LE:
		dec = utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM)
	case UTF32BE:
		dec = utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM)
	}
	return transform.NewReader(br, dec.NewDecoder()), enc
}
