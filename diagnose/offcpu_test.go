package diagnose

import (
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

// offCPURun is a 2-CPU box serving with a 16-thread pool: CPU 0 saturated
// (run-queue p99 ~6 ms), CPU 1 half idle, and a lock that serializes the
// pool.
func offCPURun() evidence.OffCPU {
	hot := evidence.NewLatencyHist(slots(map[int]uint64{12: 400, 22: 95, 23: 2}), 0) // p99 in [4 ms, 8 ms)
	cool := evidence.NewLatencyHist(slots(map[int]uint64{10: 500, 13: 5}), 0)
	return evidence.OffCPU{
		Target: "pid", PID: 100, Comm: "server", DurationNs: 10e9, CPUs: 2, StackEvery: 1,
		CPUBusy: []evidence.CPUBusy{{CPU: 0, BusyShare: 0.97}, {CPU: 1, BusyShare: 0.55}},
		Totals:  evidence.OffCPUTotals{OnCPUNs: 40e9, RunnableNs: 60e9, BlockedNs: 60e9},
		RunQueue: evidence.RunQueue{PerCPU: []evidence.CPURunQueue{
			{CPU: 0, All: hot}, {CPU: 1, All: cool},
		}},
		Pools: []evidence.ThreadPool{
			{PID: 100, Process: "server", Name: "http-nio-8080-e", Threads: 16, SeenNs: 160e9, OnCPUNs: 40e9, RunnableNs: 60e9, BlockedNs: 60e9,
				OnCPUShare: 0.25, RunnableShare: 0.375, BlockedShare: 0.375, RunnableWaits: 12000, MeanRunnableNs: 5e6,
				TopSite: "Cache.get_[j]", TopSiteReason: "lock", TopSiteNs: 45e9, TopSiteShare: 0.75, TopSiteThreads: 16,
				TopSiteWaker: "http-nio-8080-e (Cache.put_[j] → futex_wake_[k])"},
			{PID: 100, Process: "server", Name: "main", Threads: 1, SeenNs: 10e9, BlockedNs: 10e9, BlockedShare: 1,
				TopSite: "main", TopSiteReason: "lock", TopSiteNs: 10e9, TopSiteShare: 1, TopSiteThreads: 1},
		},
	}
}

func slots(m map[int]uint64) []uint64 {
	s := make([]uint64, 40)
	for i, n := range m {
		s[i] = n
	}
	return s
}

func offCPURule(t *testing.T, id string) Rule[evidence.OffCPU] {
	t.Helper()
	for _, r := range OffCPURules {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no rule %s", id)
	return Rule[evidence.OffCPU]{}
}

type offCPUCase struct {
	name       string
	edit       func(*evidence.OffCPU)
	thresholds Thresholds
	silent     bool
	want       func(*testing.T, *Finding)
}

func runOffCPUCases(t *testing.T, id string, cases []offCPUCase) {
	t.Helper()
	r := offCPURule(t, id)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := offCPURun()
			if tc.edit != nil {
				tc.edit(&ev)
			}
			f := r.check(ev, tc.thresholds)
			if tc.silent {
				if f != nil {
					t.Fatalf("fired: %s %v", f.Title, f.Evidence)
				}
				return
			}
			if f == nil {
				t.Fatal("silent")
			}
			if f.Recommendation.Reference == "" || f.Recommendation.Why == "" || f.Impact <= 0 || f.Impact > 1 {
				t.Errorf("recommendation %+v impact %v", f.Recommendation, f.Impact)
			}
			tc.want(t, f)
		})
	}
}

func TestCPUSaturation(t *testing.T) {
	runOffCPUCases(t, "offcpu.cpu-saturation", []offCPUCase{
		{name: "one CPU saturated", want: func(t *testing.T, f *Finding) {
			if f.Severity != Warn || !strings.HasPrefix(f.Title, "1 of 2 CPUs saturated") || f.Impact != 60.0/160 {
				t.Errorf("%v %q %v", f.Severity, f.Title, f.Impact)
			}
			contains(t, "evidence", f.Evidence, "CPU 0: 97.0% busy, run-queue p99", "497 waits", "runnable but waiting for a CPU 37.5%", "http-nio-8080-e of server (16 threads)")
			if !strings.Contains(f.Recommendation.Reference, "runqlat") || !strings.Contains(f.Recommendation.Reference, "8,500-9,000") {
				t.Errorf("reference %q", f.Recommendation.Reference)
			}
		}},
		{name: "both CPUs, critical", edit: func(ev *evidence.OffCPU) {
			ev.CPUBusy[1].BusyShare = 0.99
			ev.RunQueue.PerCPU[1].All = evidence.NewLatencyHist(slots(map[int]uint64{12: 100, 24: 100}), 0) // p99 in [16 ms, 32 ms)
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Crit || !strings.HasPrefix(f.Title, "2 of 2 CPUs") || !strings.HasPrefix(f.Evidence[0], "CPU 1") {
				t.Errorf("%v %q %v", f.Severity, f.Title, f.Evidence)
			}
		}},
		{name: "a long tail on an idle CPU is not saturation", silent: true, edit: func(ev *evidence.OffCPU) {
			ev.CPUBusy[0].BusyShare = 0.5
		}},
		{name: "busy CPUs with a short run queue", silent: true, edit: func(ev *evidence.OffCPU) {
			ev.RunQueue.PerCPU[0].All = evidence.NewLatencyHist(slots(map[int]uint64{12: 500}), 0)
		}},
		{name: "too few waits to judge", silent: true, edit: func(ev *evidence.OffCPU) {
			ev.RunQueue.PerCPU[0].All = evidence.NewLatencyHist(slots(map[int]uint64{23: 10}), 0)
		}},
		{name: "busy unknown", silent: true, edit: func(ev *evidence.OffCPU) { ev.CPUBusy = nil }},
		{name: "a recipe's higher threshold", silent: true, thresholds: Thresholds{"runq_p99_ms": 20}},
	})
}

func TestLockSerializesPool(t *testing.T) {
	runOffCPUCases(t, "offcpu.lock-serializes-pool", []offCPUCase{
		{name: "three quarters of the pool's blocked time at one lock", want: func(t *testing.T, f *Finding) {
			// 45 s of the pool's 160 s: 28 %, a warning.
			if f.Severity != Warn || f.Impact != 45.0/160 || f.Recommendation.Kind != KindCode ||
				!strings.Contains(f.Title, "http-nio-8080-e pool of server: 75.0% of its blocked time is at Cache.get_[j]") {
				t.Errorf("%v %v %v %q", f.Severity, f.Impact, f.Recommendation.Kind, f.Title)
			}
			contains(t, "evidence", f.Evidence, "16 threads): 16 of them waited", "Cache.put_[j] → futex_wake_[k]")
			if !strings.Contains(f.Recommendation.Reference, "Off-CPU Analysis") {
				t.Errorf("reference %q", f.Recommendation.Reference)
			}
		}},
		{name: "a pool waiting for work is idle, not serialized", silent: true, edit: func(ev *evidence.OffCPU) {
			ev.Pools[0].TopSiteReason = "idle"
		}},
		{name: "one thread is no pool", silent: true, edit: func(ev *evidence.OffCPU) { ev.Pools = ev.Pools[1:] }},
		{name: "one thread of the pool waiting (a main thread joining the others)", silent: true, edit: func(ev *evidence.OffCPU) {
			ev.Pools[0].TopSiteThreads = 1
		}},
		{name: "the lock is a small part of the pool's blocked time", silent: true, edit: func(ev *evidence.OffCPU) {
			ev.Pools[0].TopSiteShare = 0.3
		}},
		{name: "the lock is a small part of the pool's time", silent: true, edit: func(ev *evidence.OffCPU) {
			ev.Pools[0].TopSiteNs = 5e9
		}},
		{name: "most of the pool's time: critical, and estimates said", edit: func(ev *evidence.OffCPU) {
			ev.Pools[0].TopSiteNs, ev.StackEvery = 90e9, 4
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Crit {
				t.Errorf("%v", f.Severity)
			}
			contains(t, "evidence", f.Evidence, "1 in 4 switches")
		}},
	})
}

func TestPoolTooLarge(t *testing.T) {
	runOffCPUCases(t, "offcpu.pool-too-large", []offCPUCase{
		{name: "sixteen threads on two CPUs", want: func(t *testing.T, f *Finding) {
			if f.Severity != Warn || f.Impact != 0.375 || !strings.Contains(f.Title, "16 threads on 2 CPUs waited for one 37.5% of their time") {
				t.Errorf("%v %v %q", f.Severity, f.Impact, f.Title)
			}
			contains(t, "evidence", f.Evidence, "12000 waits for a CPU, 5ms each", "waited for one 60.0%", "would wait 87.5%")
			if !strings.Contains(f.Recommendation.Reference, "more concurrency is not better") || len(f.Recommendation.Caveats) == 0 {
				t.Errorf("recommendation %+v", f.Recommendation)
			}
		}},
		{name: "fewer threads than CPUs", silent: true, edit: func(ev *evidence.OffCPU) { ev.CPUs = 16 }},
		{name: "a large pool that rarely waits for a CPU", silent: true, edit: func(ev *evidence.OffCPU) { ev.Pools[0].RunnableShare = 0.05 }},
		{name: "critical", edit: func(ev *evidence.OffCPU) { ev.Pools[0].RunnableShare = 0.6 }, want: func(t *testing.T, f *Finding) {
			if f.Severity != Crit {
				t.Errorf("%v", f.Severity)
			}
		}},
		{name: "CPUs unknown", silent: true, edit: func(ev *evidence.OffCPU) { ev.CPUs = 0 }},
	})
}

// Every threshold the rules read is declared in their Tunables, with its
// default inside its range.
func TestOffCPUTunables(t *testing.T) {
	for _, r := range OffCPURules {
		if len(r.Tunables) == 0 || r.CheckTuned == nil {
			t.Errorf("%s: no tunables", r.ID)
		}
		for _, th := range r.Tunables {
			if th.Default < th.Min || th.Default > th.Max || th.Doc == "" {
				t.Errorf("%s: %+v", r.ID, th)
			}
		}
	}
}
