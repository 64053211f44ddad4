package textenc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"unicode/utf16"
)

const sample = "[0.010s][info][gc] Using G1\n[1.000s][info][gc] GC(0) Pause Young (Normal) 24M->4M(256M) 5.000ms — µs\n"

func utf16Bytes(s string, order binary.AppendByteOrder, bom bool) []byte {
	var b []byte
	if bom {
		b = order.AppendUint16(b, 0xfeff)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return b
}

func utf32Bytes(s string, order binary.AppendByteOrder) []byte {
	b := order.AppendUint32(nil, 0xfeff)
	for _, r := range s {
		b = order.AppendUint32(b, uint32(r))
	}
	return b
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Encoding
	}{
		{"plain", []byte(sample), Plain},
		{"utf-8 bom", append([]byte{0xef, 0xbb, 0xbf}, sample...), UTF8BOM},
		{"utf-16le bom (PowerShell >)", utf16Bytes(sample, binary.LittleEndian, true), UTF16LE},
		{"utf-16be bom", utf16Bytes(sample, binary.BigEndian, true), UTF16BE},
		{"utf-16le without bom", utf16Bytes(sample, binary.LittleEndian, false), UTF16LE},
		{"utf-16be without bom", utf16Bytes(sample, binary.BigEndian, false), UTF16BE},
		{"utf-32le bom", utf32Bytes(sample, binary.LittleEndian), UTF32LE},
		{"utf-32be bom", utf32Bytes(sample, binary.BigEndian), UTF32BE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, enc := Decode(bufio.NewReader(bytes.NewReader(tc.in)))
			if enc != tc.want {
				t.Fatalf("encoding %q, want %q", enc, tc.want)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != sample {
				t.Errorf("decoded %q, want %q", got, sample)
			}
		})
	}
}

// Not UTF-16: a NUL-filled hole (what a crash or copytruncate rotation
// leaves), a hole followed by text, binary bytes, short input.
func TestSniffLeavesOtherBytesAlone(t *testing.T) {
	hole := make([]byte, 4096)
	for name, in := range map[string][]byte{
		"hole":           hole,
		"hole then text": append(make([]byte, 600), sample...),
		"text then hole": append([]byte(sample), hole...),
		"binary":         {0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x1a, 0x00, 0x22, 0x05, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07},
		"short":          {'a', 0, 'b', 0},
		"empty":          nil,
	} {
		if enc, bom := Sniff(in); enc != Plain || bom != 0 {
			t.Errorf("%s: sniffed %q (BOM %d bytes), want plain", name, enc, bom)
		}
	}
}
