package golang

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/goapp"
	"github.com/perfscope/perfscope/probes"
)

// measured runs Measure on a lab service over a window of the given
// length, within which it drives a bounded load of n requests, and
// returns the evidence with the runtime's own counts over the same
// window. The window outlasts the load so that a GC cycle the load set
// off ends inside it: the runtime's count and the probe's then cover the
// same cycles.
func measured(t *testing.T, path string, c goapp.Config, n int, window time.Duration, o Options) (*Result, goapp.Truth) {
	t.Helper()
	ctx := context.Background()
	srv, err := goapp.Start(ctx, path, c)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if err := srv.WarmUp(ctx, 200, 4); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	var before goapp.Truth
	loaded := make(chan error, 1)
	o.PID, o.Duration, o.Requests = srv.PID, window, int64(n)
	o.Started = func() {
		if before, err = srv.Truth(); err != nil {
			t.Error(err)
		}
		go func() { loaded <- srv.Work(ctx, n, 4) }()
	}
	res, err := Measure(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-loaded:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("the load of %d requests outlasted the %v window", n, window)
	}
	after, err := srv.Truth()
	if err != nil {
		t.Fatal(err)
	}
	return res, after.Sub(before)
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if want == 0 || math.Abs(got-want)/want > tol {
		t.Errorf("%s = %.0f, the runtime says %.0f (off by %.1f%%, tolerance %.0f%%)", what, got, want, 100*(got-want)/want, 100*tol)
	}
}

// checkAgainstTruth asserts the measurement matches the runtime's own
// counts: bytes per request within tol, GC cycles exactly, requests
// exactly.
func checkAgainstTruth(t *testing.T, e evidence.Go, truth goapp.Truth, tol float64) {
	t.Helper()
	if e.Requests == nil || *e.Requests != truth.Requests {
		t.Fatalf("requests %v, the service served %d", e.Requests, truth.Requests)
	}
	if e.BytesPerRequest == nil {
		t.Fatalf("no bytes per request: %s", e.BytesPerRequestUnknown)
	}
	want := float64(truth.AllocBytes) / float64(truth.Requests)
	t.Logf("%s: %.0f ± %.0f bytes/request from %d samples at rate %d (%s), runtime %.0f; %d GC cycles (runtime %d)",
		truth.GoVersion, *e.BytesPerRequest, *e.BytesPerRequestError, e.Sampling.Samples, e.Sampling.MemProfileRate, e.Sampling.RateSource, want, e.GCCycles, truth.GCCycles)
	within(t, "bytes per request", *e.BytesPerRequest, want, tol)
	if uint64(e.GCCycles) != truth.GCCycles {
		t.Errorf("GC cycles %d, the runtime counted %d", e.GCCycles, truth.GCCycles)
	}
	if int64(truth.MemProfileRate) != e.Sampling.MemProfileRate {
		t.Errorf("MemProfileRate %d (%s), the runtime says %d", e.Sampling.MemProfileRate, e.Sampling.RateSource, truth.MemProfileRate)
	}
}

// The probe against the runtime's own counts, on Debian's Go 1.19 and the
// current release, stripped and not, PIE and not, static and cgo: bytes
// per request within 5 %, GC cycles exact, the allocating line found.
func TestMeasureMatchesRuntimeMetrics(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	deb, ok := goapp.Debian()
	if !ok {
		t.Fatalf("Debian's Go 1.19 is not at %s: run scripts/deps.sh test", goapp.DebianGo)
	}
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	progs := testutil.BPFProgramIDs(t)
	for _, tc := range []struct {
		tc goapp.Toolchain
		v  goapp.Variant
	}{
		{deb, goapp.Variant{}},
		{deb, goapp.Variant{Stripped: true, PIE: true, Cgo: true}},
		{cur, goapp.Variant{Stripped: true}},
		{cur, goapp.Variant{PIE: true}},
	} {
		t.Run(tc.tc.Version+"/"+tc.v.String(), func(t *testing.T) {
			path := buildFixture(t, tc.tc, tc.v)
			res, truth := measured(t, path, goapp.Config{Mode: "plain", Count: 4, Size: 4096, MemProfileRate: 4096}, 3000, 6*time.Second, Options{})
			e := res.Evidence
			checkAgainstTruth(t, e, truth, 0.05)
			if len(e.Sites) == 0 || e.Sites[0].Function != "main.work" || e.Sites[0].Size != 4096 {
				t.Fatalf("top site %+v, want main.work allocating 4096-byte buffers", e.Sites)
			}
			within(t, "main.work's objects per request", *e.Sites[0].ObjectsPerRequest, 4, 0.05)
			if e.Binary.Stripped != tc.v.Stripped || e.Binary.PIE != tc.v.PIE {
				t.Errorf("binary %+v", e.Binary)
			}
		})
	}
	assertNoProbeLeft(t, progs)
}

// At the runtime's default rate (one sample per 512 KiB) a service
// allocating 256 KiB per request gives a few thousand samples over 8000
// requests: enough for 5 %.
func TestMeasureAtDefaultRate(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	path := buildFixture(t, cur, goapp.Variant{Stripped: true})
	res, truth := measured(t, path, goapp.Config{Mode: "plain", Count: 4, Size: 64 << 10}, 8000, 15*time.Second, Options{NoPools: true})
	e := res.Evidence
	if e.Sampling.MemProfileRate != DefaultMemProfileRate || e.Sampling.RateSource != "memory" {
		t.Errorf("sampling %+v: the rate should be read from the stripped program's memory", e.Sampling)
	}
	checkAgainstTruth(t, e, truth, 0.05)
	if want := float64(truth.AllocBytes) / float64(truth.Requests); math.Abs(*e.BytesPerRequest-want) > 1.5**e.BytesPerRequestError {
		t.Errorf("the runtime's %.0f bytes/request is outside 1.5× the reported bound %.0f ± %.0f", want, *e.BytesPerRequest, *e.BytesPerRequestError)
	}
}

// Pools, counted exactly (--exact-pools: the hooks stay attached whatever
// they cost; TestPoolGuardOnTheLabService has the guard): a pool used well (every Get put back), and one
// leaking its objects (Gets without Puts: every Get misses and calls New).
func TestMeasurePools(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	deb, _ := goapp.Debian()
	const n, count = 2000, 3
	for _, tc := range []struct {
		tc goapp.Toolchain
		v  goapp.Variant
	}{{cur, goapp.Variant{}}, {deb, goapp.Variant{Stripped: true, PIE: true}}} {
		for _, mode := range []string{"pooled", "leaky"} {
			t.Run(tc.tc.Version+"/"+tc.v.String()+"/"+mode, func(t *testing.T) {
				path := buildFixture(t, tc.tc, tc.v)
				res, _ := measured(t, path, goapp.Config{Mode: mode, Count: count, Size: 8192, MemProfileRate: 8192}, n, 5*time.Second, Options{ExactPools: true})
				e := res.Evidence
				if e.PoolSampling == nil || e.PoolSampling.Mode != "exact" {
					t.Errorf("pool sampling %+v, want exact", e.PoolSampling)
				}
				var pool *evidence.GoPool
				for i := range e.Pools {
					if e.Pools[i].Gets == n*count {
						pool = &e.Pools[i]
					}
				}
				if pool == nil {
					t.Fatalf("no pool with %d Gets in %+v (%s)", n*count, e.Pools, e.PoolsUnknown)
				}
				if !tc.v.Stripped && pool.Name != "main.pool" {
					t.Errorf("pool named %q, want main.pool", pool.Name)
				}
				if pool.HasNew == nil || !*pool.HasNew {
					t.Errorf("pool's New not seen: %+v", pool)
				}
				switch mode {
				case "pooled":
					if pool.Puts != pool.Gets || pool.HitRate == nil || *pool.HitRate < 0.9 {
						t.Errorf("a pool used well: %+v", *pool)
					}
				case "leaky":
					if pool.Puts != 0 || pool.News != pool.Gets || pool.HitRate == nil || *pool.HitRate != 0 {
						t.Errorf("a leaking pool: %+v", *pool)
					}
				}
			})
		}
	}
}

// A program that never reads a memory profile has sampling turned off by
// the linker: no number for bytes per request, and the reason, while GC
// cycles are still counted exactly.
func TestMeasureWithSamplingOff(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	path := buildFixture(t, cur, goapp.Variant{Stripped: true, NoProfile: true})
	res, truth := measured(t, path, goapp.Config{Mode: "plain", Count: 4, Size: 64 << 10}, 2000, 6*time.Second, Options{NoPools: true})
	e := res.Evidence
	if e.BytesPerRequest != nil || e.AllocBytes != nil || e.Sampling.MemProfileRate != 0 || e.BytesPerRequestUnknown == "" {
		t.Errorf("sampling is off, yet: bytes/request %v, sampling %+v, unknown %q", e.BytesPerRequest, e.Sampling, e.BytesPerRequestUnknown)
	}
	if uint64(e.GCCycles) != truth.GCCycles || truth.GCCycles == 0 {
		t.Errorf("GC cycles %d, the runtime counted %d", e.GCCycles, truth.GCCycles)
	}
}

// The program dying mid-window ends the measurement at once with what was
// measured, and leaves nothing attached.
func TestMeasureTargetDies(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	path := buildFixture(t, cur, goapp.Variant{Stripped: true})
	srv, err := goapp.Start(context.Background(), path, goapp.Config{Count: 1, Size: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	progs := testutil.BPFProgramIDs(t)
	start := time.Now()
	res, err := Measure(context.Background(), Options{PID: srv.PID, Duration: time.Minute, Requests: 10,
		Started: func() { time.AfterFunc(500*time.Millisecond, srv.Kill) }})
	if !errors.Is(err, ErrTargetExited) || res == nil {
		t.Fatalf("Measure = %v, %v; want the evidence and ErrTargetExited", res, err)
	}
	t.Logf("Measure returned %v after it started", time.Since(start))
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Measure took %v after the program died", took)
	}
	assertNoProbeLeft(t, progs)
}

// Bad pids: one sentence, the right sentinel.
func TestOpenProcessRejects(t *testing.T) {
	if _, err := OpenProcess(FS{}, 1<<30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("a pid that does not exist: %v", err)
	}
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	_, err := OpenProcess(FS{}, sleep.Process.Pid)
	if !errors.Is(err, ErrNotGo) {
		t.Errorf("a C program: %v", err)
	}
	t.Log(err)
}

// assertNoProbeLeft fails when a goalloc program loaded since progs is
// still alive. Only goalloc's programs are looked at: other engineers'
// root tests load their own on this shared machine.
func assertNoProbeLeft(t *testing.T, progs map[uint32]bool) {
	t.Helper()
	var left []string
	for i := 0; i < 50; i++ {
		left = nil
		all, err := probes.LoadedPrograms()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range all {
			if !progs[p.ID] && strings.HasPrefix(p.Name, "uprobe_") {
				left = append(left, fmt.Sprintf("%d %s", p.ID, p.Name))
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left behind: %v", left)
}

// Ctrl-C (ctx cancelled) ends the window early: the evidence of what was
// measured, no error, and nothing attached.
func TestMeasureInterrupted(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	path := buildFixture(t, cur, goapp.Variant{Stripped: true})
	srv, err := goapp.Start(context.Background(), path, goapp.Config{Count: 1, Size: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	progs := testutil.BPFProgramIDs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Measure(ctx, Options{PID: srv.PID, Duration: time.Minute, Requests: 10,
		Started: func() { time.AfterFunc(500*time.Millisecond, cancel) }})
	if err != nil || res == nil || !res.Interrupted {
		t.Fatalf("Measure = %+v, %v; want an interrupted result", res, err)
	}
	if w := time.Duration(res.Evidence.WindowNs); w > 5*time.Second {
		t.Errorf("window %v after a cancel at 500ms", w)
	}
	if !srv.Alive() {
		t.Error("the program did not survive the measurement")
	}
	assertNoProbeLeft(t, progs)
}
