package diagnose

import (
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

// level builds a fixture level: concurrency, requests/s, p99 in ms, the
// machine's busy share and, when waits are given, the service's threads.
func level(c int, rps, p99ms, busy float64, th *evidence.LoadThreads) evidence.LoadLevel {
	return evidence.LoadLevel{Concurrency: c, RPS: rps, P99Ns: int64(p99ms * 1e6), CPUBusy: busy, ServiceCPU: 0.2, Requests: int64(rps * 5), Threads: th}
}

func threads(runnable float64, waits ...evidence.LoadWait) *evidence.LoadThreads {
	return &evidence.LoadThreads{Threads: 4, RunnableThreads: runnable, RunnableShare: runnable / 4, CPUWaitShare: runnable / (runnable + 0.2), OnCPUShare: 0.05, BlockedShare: 0.9, Waits: waits}
}

func wait(reason, site string, n float64) evidence.LoadWait {
	return evidence.LoadWait{Reason: reason, Site: site, Threads: n}
}

func TestLoadKnee(t *testing.T) {
	lockLevels := []evidence.LoadLevel{
		level(1, 95, 11, 0.2, threads(0, wait("sleep", "hold_lock", 0.95), wait("socket-read", "read_request", 0.05))),
		level(2, 98, 21, 0.2, threads(0, wait("sleep", "hold_lock", 0.98), wait("lock", "wait_for_lock", 0.97))),
		level(4, 99, 42, 0.2, threads(0, wait("lock", "wait_for_lock", 2.9), wait("sleep", "hold_lock", 0.99))),
	}
	for _, c := range []struct {
		name         string
		levels       []evidence.LoadLevel
		knee, flat   int
		reason, site string
		severity     Severity
	}{
		{name: "a lock serializes requests", levels: lockLevels, knee: 1, flat: 2, reason: KneeLock, site: "wait_for_lock", severity: Warn},
		{name: "CPU saturated: runnable threads grow", levels: []evidence.LoadLevel{
			level(1, 1000, 2, 0.55, threads(0.1, wait("poll", "epoll_wait", 0.8))),
			level(2, 1900, 2.2, 0.97, threads(0.3, wait("poll", "epoll_wait", 0.5))),
			level(4, 1950, 4.5, 0.99, threads(1.9, wait("poll", "epoll_wait", 0.2))),
		}, knee: 2, flat: 4, reason: KneeCPU, severity: Info},
		{name: "CPU saturated, seen only in /proc/stat", levels: []evidence.LoadLevel{
			level(4, 1000, 2, 0.9, nil), level(8, 1020, 5, 0.99, nil),
		}, knee: 4, flat: 8, reason: KneeCPU, severity: Info},
		{name: "a pool: nothing grew, few runnable", levels: []evidence.LoadLevel{
			level(2, 200, 10, 0.1, threads(0, wait("sleep", "call_backend", 1.9))),
			level(4, 400, 10, 0.1, threads(0, wait("sleep", "call_backend", 3.9))),
			level(8, 405, 21, 0.1, threads(0, wait("sleep", "call_backend", 3.95))),
		}, knee: 4, flat: 8, reason: KneePool, severity: Warn},
		{name: "a downstream socket", levels: []evidence.LoadLevel{
			level(4, 400, 10, 0.1, threads(0, wait("socket-read", "query_db", 1))),
			level(8, 410, 20, 0.1, threads(0, wait("socket-read", "query_db", 5))),
		}, knee: 4, flat: 8, reason: KneeNetwork, site: "query_db", severity: Warn},
		{name: "still scaling", levels: []evidence.LoadLevel{level(1, 100, 10, 0.1, nil), level(2, 190, 10.5, 0.2, nil), level(4, 370, 11, 0.4, nil)}},
		// Steps of 20 %: a 15 % gain is three quarters of the added concurrency.
		{name: "small steps that scale", levels: []evidence.LoadLevel{level(10, 100, 10, 0.1, nil), level(12, 115, 13, 0.1, nil)}},
		// Flat throughput without a p99 rise: the client, not the service.
		{name: "a plateau without latency", levels: []evidence.LoadLevel{level(1, 100, 10, 0.1, nil), level(2, 101, 10.2, 0.1, nil)}},
		{name: "one level", levels: []evidence.LoadLevel{level(1, 100, 10, 0.1, nil)}},
	} {
		ev := evidence.Load{CPUs: 2, Levels: c.levels}
		k := LoadKnee(ev, nil)
		fs := Run(LoadRules, ev)
		if c.knee == 0 {
			if k != nil || len(fs) != 0 {
				t.Errorf("%s: knee %+v, findings %+v; want none", c.name, k, fs)
			}
			continue
		}
		if k == nil || len(fs) != 1 {
			t.Errorf("%s: knee %+v, %d findings; want a knee at %d", c.name, k, len(fs), c.knee)
			continue
		}
		if k.Concurrency != c.knee || k.Flat != c.flat || k.Reason != c.reason || k.Site != c.site {
			t.Errorf("%s: knee at %d (flat %d), reason %s at %q; want %d (%d), %s at %q — %s", c.name, k.Concurrency, k.Flat, k.Reason, k.Site,
				c.knee, c.flat, c.reason, c.site, k.Why)
		}
		f := fs[0]
		if f.ID != "load.knee" || f.Severity != c.severity || !strings.Contains(f.Title, "concurrency") || f.Recommendation.Why == "" {
			t.Errorf("%s: finding %s %s %q", c.name, f.ID, f.Severity, f.Title)
		}
	}
	// The gain threshold is tunable: at 2 % the lock's levels scale.
	if k := LoadKnee(evidence.Load{Levels: lockLevels}, Thresholds{"knee_gain": 0.02}); k == nil || k.Concurrency != 2 {
		t.Errorf("gain 2 %%: knee %+v, want 2 (4 gains 1 %%)", k)
	}
}
