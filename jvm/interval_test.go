package jvm

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/hsperf"
)

// The interval chosen from the allocation rate gives the window about
// AutoAllocSamples samples — a ±4 % bound — at any rate: a Spring Boot
// service allocating 7.6 MB/s gets 29 KiB over the default 10 s (at
// async-profiler's 512 KiB it had about 145 samples, ±17 %), a JVM
// allocating a gigabyte a second gets megabytes, and a quiet one the
// floor.
func TestAutoAllocInterval(t *testing.T) {
	for _, c := range []struct {
		rate   float64
		window time.Duration
		want   int64
	}{
		{7.6e6, 10 * time.Second, 29 << 10},
		{1e9, 10 * time.Second, 3906 << 10},
		{1e9, 60 * time.Second, 23437 << 10},
		{1e5, 10 * time.Second, MinAutoAllocInterval},
		{0, 10 * time.Second, MinAutoAllocInterval},
	} {
		got := AutoAllocInterval(c.rate, c.window)
		if got != c.want {
			t.Errorf("%.0f B/s over %v: %d, want %d", c.rate, c.window, got, c.want)
		}
		if samples := c.rate * c.window.Seconds() / float64(got); got > MinAutoAllocInterval && math.Abs(samples/AutoAllocSamples-1) > 0.05 {
			t.Errorf("%.0f B/s over %v: %.0f samples", c.rate, c.window, samples)
		}
	}
}

// The rate before the window, from a JDK 17 G1 recording taken 4.31 s
// after its last young GC with 53.5 MB in Eden: a recording does not grow,
// so after waiting perfscope takes the span since that GC, 12.4 MB/s.
// A JDK 25 Serial recording says nothing usable: that JDK no longer
// samples its counters, so Serial's Eden use reads 0 between GCs, and no
// GC comes while perfscope waits: the default interval stays.
func TestAllocRateBefore(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"jdk17-g1.hsperf", "jdk25-serial.hsperf"} {
		b, err := os.ReadFile(filepath.Join("..", "collectors", "hsperf", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := hsperf.FS{}
	path := filepath.Join(dir, "jdk17-g1.hsperf")
	first, err := heapNow(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := allocRateBefore(context.Background(), fs, path, first)
	if !ok || math.Abs(r.BytesPerSecond-53477376/4.310290039) > 1 || r.Over != 4310290039*time.Nanosecond || r.How != "Eden's use since the last young GC" {
		t.Errorf("jdk17: %+v, %v", r, ok)
	}
	path = filepath.Join(dir, "jdk25-serial.hsperf")
	first, err = heapNow(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := allocRateBefore(context.Background(), fs, path, first); ok {
		t.Errorf("jdk25 Serial with Eden's use at 0 and no GC: %+v", r)
	}
}

// Eden's growth across a young GC is the cycle's allocation the JVM
// published at it, less what Eden held before, plus what it holds after —
// not the capacity left to fill, which G1 does not fill before collecting.
func TestEdenGrowthAcrossAGC(t *testing.T) {
	const mb = 1 << 20
	var g edenGrowth
	g.add(hsperf.Heap{YoungGCs: 5, EdenUsed: 40 * mb, EdenCapacity: 130 * mb, HasCycle: true, CycleAllocated: 120 * mb})
	g.add(hsperf.Heap{YoungGCs: 5, EdenUsed: 60 * mb, EdenCapacity: 130 * mb, HasCycle: true, CycleAllocated: 120 * mb})
	// G1 collected at 123 MB of its 130: 63 MB more before it, 10 after.
	g.add(hsperf.Heap{YoungGCs: 6, EdenUsed: 10 * mb, EdenCapacity: 130 * mb, HasCycle: true, CycleAllocated: 123 * mb})
	if want := int64((20 + 63 + 10) * mb); g.bytes != want {
		t.Errorf("grew %d MB, want %d (the capacity would say %d)", g.bytes/mb, want/mb, (20 + 70 + 10))
	}
}
