package asprof

import (
	"encoding/binary"
	"os"
	"testing"
)

// FuzzParseAllocJFR: a JFR recording is another program's binary output,
// read as root; a truncated or corrupt one must end in an error, never a
// panic, a hang or an allocation sized by a corrupt length.
func FuzzParseAllocJFR(f *testing.F) {
	if b, err := os.ReadFile("testdata/alloc-jvmti-32k.jfr"); err == nil {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("FLR\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseAllocJFR(b, AllocParse{Interval: 32 << 10, Threads: true})
		if err == nil && p == nil {
			t.Fatal("no profile and no error")
		}
	})
}

// TestJFRNegativeLengths: a length varint with its top bit set decodes
// as negative; the fuzzer found that one inside a metadata string made
// the reader allocate a slice of negative length.
func TestJFRNegativeLengths(t *testing.T) {
	negative := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	for _, enc := range []byte{3, 4, 5} {
		r := &jfrReader{b: append([]byte{enc}, negative...)}
		if s, _ := r.str().(string); s != "" || r.err == nil {
			t.Errorf("encoding %d with a negative length: %q, err %v; want an error", enc, s, r.err)
		}
	}
	r := &jfrReader{b: []byte{1, 2, 3}}
	if b := r.fixed(-1); len(b) != 0 || r.err == nil {
		t.Errorf("fixed(-1) = %v, err %v; want nothing and an error", b, r.err)
	}
	// An event whose size is near the top of int64 must not wrap past
	// the end-of-chunk check.
	rec, err := os.ReadFile("testdata/alloc-jvmti-32k.jfr")
	if err != nil {
		t.Fatal(err)
	}
	huge := append(append([]byte{}, rec[:jfrHeaderSize]...), 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x01)
	binary.BigEndian.PutUint64(huge[8:], uint64(len(huge)))
	binary.BigEndian.PutUint64(huge[24:], uint64(jfrHeaderSize))
	if _, err := ParseAllocJFR(huge, AllocParse{Interval: 32 << 10}); err == nil {
		t.Error("an event larger than the chunk parsed without an error")
	}
}
