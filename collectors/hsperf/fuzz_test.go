package hsperf

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: an hsperfdata file lives in /tmp/hsperfdata_USER, owned and
// written by the JVM's user, and perfscope reads it as root: whatever it
// holds, Parse and the heap reading built on it never panic and never
// return counters without an error-free snapshot.
//
//	go test ./collectors/hsperf -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.hsperf")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte{0xca, 0xfe, 0xc0, 0xc0, 1, 2, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if s != nil {
				t.Fatal("a snapshot returned with an error")
			}
			return
		}
		var w Window
		h := s.Heap()
		w.Add(h)
		w.Add(h)
		w.EdenAtCollection()
		s.TicksToDuration(1 << 62)
	})
}
