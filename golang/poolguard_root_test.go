package golang

import (
	"context"
	"math"
	"testing"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/goapp"
	"github.com/perfscope/perfscope/probes/goalloc"
)

// The pool hooks' cost guard on a real program: the lab service in
// "pooled" mode calls its pool 8 times a request (Get and Put each) under
// a fixed-rate load, which costs the program far more than the budget
// with every call trapped. The guard must take the hooks off for most of
// the window (their programs ran for a fraction of the program's calls),
// say the counts are estimates, and the estimate's bound must cover what
// the service itself counted.
func TestPoolGuardOnTheLabService(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	progs := testutil.BPFProgramIDs(t)
	path := buildFixture(t, cur, goapp.Variant{Stripped: true})
	ctx := context.Background()
	const count = 8
	srv, err := goapp.Start(ctx, path, goapp.Config{Mode: "pooled", Count: count, Size: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if _, err := httpload.Run(ctx, httpload.Spec{URL: srv.URL("/work"), Requests: 500, Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	before, err := srv.Truth()
	if err != nil {
		t.Fatal(err)
	}
	load := httpload.Spec{URL: srv.URL("/work"), Requests: 6000, Concurrency: 4, Rate: 1500}
	res, err := Measure(ctx, Options{PID: srv.PID, Load: &load})
	if err != nil {
		t.Fatal(err)
	}
	after, err := srv.Truth()
	if err != nil {
		t.Fatal(err)
	}
	e := res.Evidence
	s := e.PoolSampling
	if s == nil || s.Mode != "sampled" || s.OnFraction >= 0.5 || s.CostShare <= s.BudgetShare {
		t.Fatalf("pool sampling %+v: want sampled, attached under half the window, because the hooks cost over the budget", s)
	}
	var pool *evidence.GoPool
	for i := range e.Pools {
		if e.Pools[i].HasNew != nil && *e.Pools[i].HasNew && (pool == nil || e.Pools[i].Gets > pool.Gets) {
			pool = &e.Pools[i]
		}
	}
	gets, puts := after.PoolGets-before.PoolGets, after.PoolPuts-before.PoolPuts
	if pool == nil || pool.GetsError == nil || pool.PutsError == nil {
		t.Fatalf("no estimated pool in %+v (%s)", e.Pools, e.PoolsUnknown)
	}
	t.Logf("attached %.1f %% of %.1fs in %d stretches (cost %.1f %% of the program's CPU, %.0f ns a call); main.pool Gets %d ± %.0f, Puts %d ± %.0f (scaled by %s); the service counted %d and %d",
		100*s.OnFraction, float64(e.WindowNs)/1e9, s.Periods, 100*s.CostShare, s.CostPerCallNs, pool.Gets, *pool.GetsError, pool.Puts, *pool.PutsError, s.ScaledBy, gets, puts)
	if math.Abs(float64(pool.Gets-gets)) > *pool.GetsError || math.Abs(float64(pool.Puts-puts)) > *pool.PutsError {
		t.Errorf("the bounds do not cover the service's own counts")
	}
	// The hooks really were off: their programs ran for a fraction of
	// the calls (all pools' Gets: net/http's too).
	for _, c := range res.Costs {
		if c.Program == goalloc.HookPoolGet && float64(c.RunCount) > 0.6*float64(gets) {
			t.Errorf("the Get hook ran %d times for the service's %d Gets of its own pool alone", c.RunCount, gets)
		}
	}
	if !hasWarning(e.Warnings, "sync.Pool counts are estimates") {
		t.Errorf("no warning that the pool counts are estimates: %q", e.Warnings)
	}
	srv.Stop()
	assertNoProbeLeft(t, progs)
}

func hasWarning(ws []string, prefix string) bool {
	for _, w := range ws {
		if len(w) >= len(prefix) && w[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

// The uprobe traps' cost is measured on the machine: uprobes in
// perfscope's own (here the test's) binary, found through its function
// table, fire and cost something, on a stepped instruction and on a push;
// the push's hook lands where sync.Pool's Get and Put hooks do.
func TestMeasureUprobeTrap(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	times, err := measureUprobeTraps()
	if err != nil {
		t.Fatal(err)
	}
	if times.stepped <= 0 {
		t.Fatalf("a stepped uprobe hit timed at %.0f ns: the probe did not fire", times.stepped)
	}
	if times.emulated <= 0 {
		t.Fatalf("a uprobe hit on trapFramed's push timed at %.0f ns: its body does not start with a push, or the probe did not fire", times.emulated)
	}
	t.Logf("a uprobe hit costs %.2f µs stepped, %.2f µs on a push", times.stepped/1e3, times.emulated/1e3)
}
