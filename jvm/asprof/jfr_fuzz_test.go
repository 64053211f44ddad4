package asprof

import (
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
