package goalloc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/goapp"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/goalloc"
)

// The probe on a running lab service that samples every allocation
// (MemProfileRate 1) and allocates a known number of 5000-byte buffers per
// request: every buffer is reported, with a stack, the pool hooks count
// each Get and Put of the service's pool exactly, the GC cycles match the
// runtime's own count, and Close leaves nothing attached.
func TestProbeCountsKnownAllocations(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := goapp.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"plain", "pooled"} {
		t.Run(mode, func(t *testing.T) {
			path, err := goapp.Build(context.Background(), cur, goapp.Variant{Stripped: true, PIE: true}, dir)
			if err != nil {
				t.Fatal(err)
			}
			const n, count, size = 1500, 3, 5000
			ctx := context.Background()
			srv, err := goapp.Start(ctx, path, goapp.Config{Mode: mode, Count: count, Size: size, MemProfileRate: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			// Warm up, so that the pool and the connections' buffers exist.
			if _, err := httpload.Run(ctx, httpload.Spec{URL: srv.URL("/work"), Requests: 100, Concurrency: 2}); err != nil {
				t.Fatal(err)
			}
			proc, err := golang.OpenProcess(golang.FS{}, srv.PID)
			if err != nil {
				t.Fatal(err)
			}
			defer proc.Close()
			targets, err := golang.FindTargets(proc.Binary)
			if err != nil {
				t.Fatal(err)
			}
			o := targets.Options
			o.PID, o.Executable = srv.PID, proc.Exe
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
			truth0, err := srv.Truth()
			if err != nil {
				t.Fatal(err)
			}
			first, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := httpload.Run(ctx, httpload.Spec{URL: srv.URL("/work"), Requests: n, Concurrency: 2}); err != nil {
				t.Fatal(err)
			}
			// Let a GC cycle the load started finish inside the window.
			time.Sleep(time.Second)
			last, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			truth1, err := srv.Truth()
			if err != nil {
				t.Fatal(err)
			}
			d := last.Sub(first)
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
			t.Logf("%s: %d samples (%d bytes), %d buffers (%d with a stack), %d GC cycles (runtime %d), lost %+v, pools %v",
				mode, d.SampleCount, d.SampleBytes, buffers, withStack, d.GCCycles, truth1.GCCycles-truth0.GCCycles, d.Lost, d.Pools)
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
			// Each tiny allocation is a call to mProf_Malloc, but the
			// runtime counts only their shared blocks as objects.
			objs, tiny := truth1.AllocObjects-truth0.AllocObjects, truth1.TinyAllocs-truth0.TinyAllocs
			if d.SampleCount < objs*95/100 || d.SampleCount > (objs+tiny)*105/100 {
				t.Errorf("%d samples at MemProfileRate 1, the runtime allocated %d objects and %d tiny allocations", d.SampleCount, objs, tiny)
			}
			if d.GCCycles != truth1.GCCycles-truth0.GCCycles {
				t.Errorf("%d GC cycles, the runtime counted %d", d.GCCycles, truth1.GCCycles-truth0.GCCycles)
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
