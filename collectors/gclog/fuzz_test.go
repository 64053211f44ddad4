package gclog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary text to the parser and analyzer: they must
// never panic, and every line must be accounted for.
//
//	go test ./collectors/gclog -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		// Seed with each log's head: enough records of every shape
		// without making each fuzz iteration slow.
		if len(data) > 4096 {
			data = data[:4096]
		}
		f.Add(data)
	}
	f.Add([]byte("0,294: [GC 0,294: [ParNew: 104960K->13042K(118016K), 0,0284337 secs] 104960K->34501K(249088K), 0,0285898 secs]\n"))
	f.Add([]byte("[0.2s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 25M->3M(256M) 3.5ms\n"))
	// Holes: NUL bytes inside, before and after lines.
	f.Add([]byte("\x00\x00[0.2s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 25M->3M(256M) 3.5ms\x00\n\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := &Parser{}
		a := NewAnalyzer(0)
		a.Attach(p)
		if err := p.Parse(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		p.Flush()
		s := a.Summary(p.Stats)
		if s.Parse.Bytes != int64(len(data)) {
			t.Fatalf("read %d of %d bytes", s.Parse.Bytes, len(data))
		}
		// Lines as an editor numbers them: NULs do not start one.
		lines := int64(bytes.Count(data, []byte("\n")))
		if k := bytes.LastIndexByte(data, '\n'); k < len(data)-1 {
			lines++
		}
		if s.Parse.Lines != lines {
			t.Fatalf("%d lines, want %d", s.Parse.Lines, lines)
		}
		if s.All.Count < 0 || len(s.Series) > MaxPoints {
			t.Fatalf("bad summary %+v", s.All)
		}
	})
}
