package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/internal/testutil"
)

// gcLogOfSize writes a log of at least size bytes by replicating the real
// GC logs (the GCViewer samples in ../shared/gclogs-corpus: every JDK and
// collector) back to back, and returns its path. Without the corpus the
// benchmark skips (fails under PERFSCOPE_REQUIRE_CORPUS=1) rather than
// measure other input than BENCHMARKS.md records.
func gcLogOfSize(b *testing.B, size int64) string {
	b.Helper()
	dir := testutil.GCLogCorpus(b)
	srcs, _ := filepath.Glob(filepath.Join(dir, "gcviewer", "openjdk", "*.txt"))
	more, _ := filepath.Glob(filepath.Join(dir, "gcviewer", "openjdk", "unified-jvm-logging", "*.txt"))
	srcs = append(srcs, more...)
	if len(srcs) == 0 {
		b.Fatalf("no GCViewer samples under %s", dir)
	}
	var corpus []byte
	for _, s := range srcs {
		data, err := os.ReadFile(s)
		if err != nil {
			b.Fatal(err)
		}
		corpus = append(corpus, data...)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			corpus = append(corpus, '\n')
		}
	}
	path := filepath.Join(b.TempDir(), "gc.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for written := int64(0); written < size; written += int64(len(corpus)) {
		w.Write(corpus)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return path
}

// peakHeap samples the live heap while fn runs.
func peakHeap(fn func()) uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(done)
	return peak.Load()
}

// BenchmarkGCLogParse measures `perfscope gclog`'s parse+analysis
// throughput on replicated real logs of 20 MB and 200 MB; equal peak heaps
// show memory does not grow with the log.
//
//	go test ./bench -run '^$' -bench GCLogParse -benchtime 3x
func BenchmarkGCLogParse(b *testing.B) {
	for _, mb := range []int64{20, 200} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			path := gcLogOfSize(b, mb<<20)
			st, _ := os.Stat(path)
			b.SetBytes(st.Size())
			runtime.GC()
			b.ResetTimer()
			var peak uint64
			var events int64
			for i := 0; i < b.N; i++ {
				p := peakHeap(func() {
					s, err := gclog.AnalyzeFiles(context.Background(), []string{path}, 200*time.Millisecond)
					if err != nil {
						b.Fatal(err)
					}
					events = s.Parse.Events
				})
				peak = max(peak, p)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(events), "events")
		})
	}
}
