package goalloc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/goapp"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/goalloc"
)

// The probe on a running lab service that samples every allocation
// (MemProfileRate 1) and allocates a known number of 5000-byte buffers per
// request: every buffer is reported, with a stack, every object the
// runtime counts is a sample, the pool hooks count each Get and Put of the
// service's pool exactly, the GC cycles match the runtime's own count, and
// Close leaves nothing attached.
//
// What the runtime counts and what the probe counts: at MemProfileRate 1
// every heap object the runtime allocates, a tiny block (16 bytes that
// pointer-free allocations under 16 bytes share) counted once, is one call
// of runtime.mProf_Malloc; the tiny allocations that fit into the current
// block return before the profiling check and are in neither count
// (mallocgcTiny in runtime/malloc.go). But /gc/heap/allocs:objects counts
// a small object only when its span leaves the P's cache (mcache.refill
// when the span is full, mcache.releaseAll at a GC cycle's end), so a
// reading lags by the objects in the Ps' cached spans: about 2,000 here.
// The difference of two readings is off by the difference of their lags:
// the start's lag (everything since the service started) is counted
// inside the window, the end's is not, and when a GC cycle ended just
// before the window closed the end's lag was near zero and the probe's
// count 94 % of the difference. /truth flushes the caches first
// (ReadMemStats), so its counts are exact. The probe's snapshots are
// taken outside the two /truth requests, so it sees every object they
// count, plus what the first request allocates after its reading and the
// second before its reading: at most two requests' allocations, measured.
func TestProbeCountsKnownAllocations(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	// "pooled-one-by-one": the pool hooks attached one by one, as on
	// kernels without uprobe_multi links.
	for _, name := range []string{"plain", "pooled", "pooled-one-by-one"} {
		mode := strings.TrimSuffix(name, "-one-by-one")
		t.Run(name, func(t *testing.T) {
			const n, count, size = 1500, 3, 5000
			ctx := context.Background()
			srv, proc, o := startLabService(t, goapp.Config{Mode: mode, Count: count, Size: size, MemProfileRate: 1})
			o.PID, o.Executable, o.PoolsOneByOne = srv.PID, proc.Exe, name != mode
			before := testutil.BPFProgramIDs(t)
			p, err := goalloc.Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if len(p.Missing()) != 0 {
				t.Fatalf("pool hooks missing: %v", p.Missing())
			}
			time.Sleep(200 * time.Millisecond)
			truthCost := between(t, p, func() {
				if _, err := srv.Truth(); err != nil {
					t.Fatal(err)
				}
			}).SampleCount
			var truth0, truth1 goapp.Truth
			d := between(t, p, func() {
				if truth0, err = srv.Truth(); err != nil {
					t.Fatal(err)
				}
				if err := srv.Work(ctx, n, 2); err != nil {
					t.Fatal(err)
				}
				// Let a GC cycle the load started finish inside the window.
				time.Sleep(time.Second)
				if truth1, err = srv.Truth(); err != nil {
					t.Fatal(err)
				}
			})
			truth := truth1.Sub(truth0)
			var buffers, withStack uint64
			for _, s := range d.Samples {
				// The size is the request's or its size class's.
				if s.Size >= size && s.Size <= 5376 {
					buffers += s.Count
					if len(s.Stack) > 0 {
						withStack += s.Count
					}
				}
			}
			want := uint64(n * count)
			if mode == "pooled" {
				want = 0
			}
			t.Logf("%s: %d samples (%d bytes), the runtime %d objects and %d tiny allocations (its unflushed count lagged by %d and %d); a /truth request %d samples; %d buffers (%d with a stack), %d GC cycles (runtime %d), lost %+v, pools %v",
				mode, d.SampleCount, d.SampleBytes, truth.AllocObjects, truth.TinyAllocs, truth0.UnflushedObjects, truth1.UnflushedObjects, truthCost,
				buffers, withStack, d.GCCycles, truth.GCCycles, d.Lost, d.Pools)
			// Pooled: the pool's New may run after a GC empties it; at most
			// a few buffers per cycle.
			if mode == "plain" && (buffers < want || buffers > want+want/100) {
				t.Errorf("%d buffers of %d bytes reported, the service allocated %d", buffers, size, want)
			}
			if mode == "plain" && withStack < buffers*99/100 {
				t.Errorf("only %d of %d buffers have a stack", withStack, buffers)
			}
			if mode == "pooled" && buffers > uint64(count*4)*(d.GCCycles+1) {
				t.Errorf("%d buffers allocated by a pool that is used well", buffers)
			}
			if d.SampleCount < truth.AllocObjects || d.SampleCount > truth.AllocObjects+2*truthCost {
				t.Errorf("%d samples at MemProfileRate 1, the runtime allocated %d objects (and the two /truth requests at most %d more)",
					d.SampleCount, truth.AllocObjects, 2*truthCost)
			}
			if d.GCCycles != truth.GCCycles {
				t.Errorf("%d GC cycles, the runtime counted %d", d.GCCycles, truth.GCCycles)
			}
			if mode == "pooled" {
				var pool *goalloc.PoolCounts
				for _, c := range d.Pools {
					if c.Gets >= uint64(n*count) && c.Gets < uint64(n*count)+uint64(n*count)/100 {
						c := c
						pool = &c
					}
				}
				if pool == nil || pool.Puts != pool.Gets {
					t.Errorf("pools %v: want one with %d Gets and as many Puts", d.Pools, n*count)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			noUprobeLeft(t, before)
			if !srv.Alive() {
				t.Error("the service died under the probe")
			}
		})
	}
}

// between is what the probe counted while do ran.
func between(t *testing.T, p *goalloc.Probe, do func()) goalloc.Snapshot {
	t.Helper()
	first, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	do()
	last, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return last.Sub(first)
}

// noUprobeLeft fails when a uprobe program loaded since before is still
// alive (other engineers' tests load their own programs on this machine).
func noUprobeLeft(t *testing.T, before map[uint32]bool) {
	t.Helper()
	var left []string
	for i := 0; i < 50; i++ {
		left = nil
		all, err := probes.LoadedPrograms()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range all {
			if !before[p.ID] && strings.HasPrefix(p.Name, "uprobe_") {
				left = append(left, fmt.Sprintf("%d %s", p.ID, p.Name))
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left attached after Close: %v", left)
}
