package flame

import (
	"io"
	"os"
	"testing"
)

// BenchmarkReadFoldedSVG reads FLAME_BENCH_INPUT (a large folded file, see
// bench/flame.sh) and draws it; skipped without one.
func BenchmarkReadFoldedSVG(b *testing.B) {
	path := os.Getenv("FLAME_BENCH_INPUT")
	if path == "" {
		b.Skip("set FLAME_BENCH_INPUT to a folded file")
	}
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		p, err := ReadFolded(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteSVG(io.Discard, p, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
