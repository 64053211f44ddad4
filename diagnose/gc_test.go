package diagnose

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

// healthyGC is a log no GC rule should flag: young GCs every 30 s, little
// promotion, short pauses, no full GCs.
func healthyGC() evidence.GC {
	return evidence.GC{
		Collector: "G1", WindowSeconds: 600,
		Pauses:               []evidence.PauseStats{{Kind: "young", Count: 20, P50Ns: 8e6, P99Ns: 20e6, MaxNs: 20e6}},
		AllPauses:            evidence.PauseStats{Kind: "all", Count: 20, P50Ns: 8e6, P99Ns: 20e6, MaxNs: 20e6},
		YoungGCs:             20,
		YoungIntervalSeconds: 30,
		AllocRate:            10 << 20,
		AllocSource:          "eden",
		AllocatedBytes:       6000 << 20,
		PromotedBytes:        30 << 20,
		PromotionKnown:       true,
		EdenBytes:            300 << 20,
		HeapBytes:            2 << 30,
		RegionBytes:          1 << 20,
		Goals:                evidence.GCGoals{PauseGoalNs: int64(DefaultPauseGoal)},
	}
}

func TestGCRules(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*evidence.GC)
		want   string // rule ID expected to fire ("" = none)
		sev    Severity
		text   string // substring expected in the finding's Apply
	}{
		{"healthy", func(*evidence.GC) {}, "", 0, ""},
		{"young GCs every 5s at 100 MB/s", func(g *evidence.GC) {
			g.YoungIntervalSeconds, g.AllocRate = 5, 100<<20
		}, "gc.young-gc-frequency", Warn, "-Xmx"},
		{"young GCs every 0.5s, Parallel", func(g *evidence.GC) {
			g.Collector, g.YoungIntervalSeconds, g.AllocRate = "Parallel", 0.5, 400<<20
		}, "gc.young-gc-frequency", Crit, "-Xmn5000m"},
		{"young frequency predicted at 4x target rps", func(g *evidence.GC) {
			g.Model = &evidence.GCModel{RPS: 100, TargetRPS: 400, BytesPerRequest: 512 << 10, EdenBytes: 300 << 20, PredictedYoungGCsPerMinute: YoungGCsPerMinute(AllocRate(512<<10, 400), 300<<20)}
		}, "gc.young-gc-frequency", Crit, "-Xmx"},
		{"promotion 30% of allocation", func(g *evidence.GC) { g.PromotedBytes = 1800 << 20 }, "gc.premature-promotion", Warn, "TargetSurvivorRatio"},
		{"promotion 3% with survivor overflow", func(g *evidence.GC) {
			g.PromotedBytes, g.TenuringThresholdMin, g.TenuringThresholdMax = 200<<20, 1, 15
		}, "gc.premature-promotion", Warn, ""},
		{"System.gc full GCs", func(g *evidence.GC) {
			g.FullGCCauses = []evidence.CauseStats{{Cause: "System.gc()", Count: 2, TotalNs: 900e6}}
		}, "gc.full-gc.system-gc", Warn, "ExplicitGCInvokesConcurrent"},
		{"metadata full GCs", func(g *evidence.GC) {
			g.FullGCCauses = []evidence.CauseStats{{Cause: "Metadata GC Threshold", Count: 3, TotalNs: 300e6}}
			g.MetaspaceBytes = 100 << 20
		}, "gc.full-gc.metadata", Warn, "-XX:MetaspaceSize=150m"},
		{"allocation failure full GCs, heap under 3x the live set", func(g *evidence.GC) {
			g.FullGCCauses = []evidence.CauseStats{{Cause: "Allocation Failure", Count: 4, TotalNs: 2e9}}
			g.LiveAfterFullBytes, g.HeapBytes = 500<<20, 1<<30
		}, "gc.full-gc.allocation-failure", Crit, "-Xmx1500m"},
		{"allocation failure full GCs, heap already 4x the live set: never shrink it", func(g *evidence.GC) {
			g.FullGCCauses = []evidence.CauseStats{{Cause: "Allocation Failure", Count: 4, TotalNs: 2e9}}
			g.LiveAfterFullBytes = 500 << 20
		}, "gc.full-gc.allocation-failure", Crit, "keep -Xmx"},
		{"JDK 6/7 Full GC (System)", func(g *evidence.GC) {
			g.Collector = "Parallel"
			g.FullGCCauses = []evidence.CauseStats{{Cause: "System", Count: 1395, TotalNs: 885e9}}
			g.WindowSeconds = 86400
		}, "gc.full-gc.system-gc", Warn, "DisableExplicitGC"},
		{"unreadable records", func(g *evidence.GC) {
			g.UnreadableRecords, g.UnreadableAt = 1, []string{"gc.log:12"}
		}, "gc.log.unreadable-records", Warn, "named lines"},
		{"time to safepoint 11.7 s", func(g *evidence.GC) {
			g.Safepoints = &evidence.SafepointStats{Count: 14, StoppedNs: 15.4e9, MaxNs: 11.7e9, TTSPCount: 14, TTSPNs: 15.3e9, TTSPMaxNs: 11.7e9, TTSPMaxOp: "Cleanup"}
		}, "gc.safepoint.time-to-safepoint", Crit, "SafepointTimeout"},
		{"bias revocation stops", func(g *evidence.GC) {
			g.Safepoints = &evidence.SafepointStats{Count: 300, StoppedNs: 12e9, MaxNs: 50e6, NonGCNs: 12e9, NonGCMaxNs: 50e6,
				Operations: []evidence.SafepointOperation{{Name: "RevokeBias", Count: 280, StoppedNs: 12e9, MaxNs: 50e6}}}
		}, "gc.safepoint.non-gc-stops", Warn, "-XX:-UseBiasedLocking"},
		{"sys-heavy pauses", func(g *evidence.GC) {
			g.PauseCPU = &evidence.PauseCPUStats{Pauses: 20, UserNs: 4e9, SysNs: 30e9, RealNs: 20e9, SysHeavy: 3, SysHeavyRealNs: 17e9, WorstKind: "young", WorstUserNs: 4.5e9, WorstSysNs: 25e9, WorstRealNs: 17e9}
		}, "gc.pause-cpu", Crit, "transparent_hugepage"},
		{"reference processing", func(g *evidence.GC) {
			g.RefProc = &evidence.RefProcStats{Pauses: 10, TotalNs: 40e9, MaxNs: 8.5e9, PauseTotalNs: 64e9}
		}, "gc.reference-processing", Crit, "ParallelRefProcEnabled"},
		{"rising live set", func(g *evidence.GC) {
			g.LiveSet = evidence.LiveSetTrend{Basis: "full GCs", Verdict: "rising", R2: 0.95, SlopeBytesPerHour: 200 << 20,
				Samples: []evidence.HeapSample{{T: 0, Bytes: 500 << 20}, {T: 3600, Bytes: 700 << 20}, {T: 7200, Bytes: 900 << 20}}}
		}, "gc.live-set-growth", Crit, "GC.class_histogram"}, // full in 5.7 h
		{"back-to-back concurrent cycles", func(g *evidence.GC) {
			g.Cycles = &evidence.CycleStats{Count: 50, TotalNs: 550e9, MeanNs: 11e9, MaxNs: 20e9}
		}, "gc.concurrent-cycles-back-to-back", Warn, "ConcGCThreads"},
		{"concurrent mode failure", func(g *evidence.GC) {
			g.Collector, g.ConcurrentModeFailures = "CMS", 2
			g.FullGCCauses = []evidence.CauseStats{{Cause: "concurrent mode failure", Count: 2, TotalNs: 40e6}}
		}, "gc.concurrent-mode-failure", Crit, "CMSInitiatingOccupancyFraction"},
		{"pauses over goal", func(g *evidence.GC) {
			g.Pauses[0].OverGoal, g.Pauses[0].MaxNs = 1, 300e6
			g.AllPauses.OverGoal, g.AllPauses.MaxNs = 1, 300e6
		}, "gc.pause-over-goal", Warn, "MaxGCPauseMillis=200"},
		{"humongous allocations", func(g *evidence.GC) { g.HumongousGCs = 5 }, "gc.humongous-allocation", Warn, "G1HeapRegionSize=2m"},
		{"to-space exhausted", func(g *evidence.GC) { g.ToSpaceExhausted = 3 }, "gc.to-space-exhausted", Crit, "G1ReservePercent"},
		{"ZGC allocation stalls", func(g *evidence.GC) {
			g.Collector, g.AllocationStalls, g.AllocationStallsNs = "ZGC", 40, 300e6
		}, "gc.allocation-stall", Crit, "-Xmx"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := healthyGC()
			c.mutate(&g)
			fs := Run(GCRules, g)
			if c.want == "" {
				if len(fs) != 0 {
					t.Fatalf("want no findings, got %+v", fs)
				}
				return
			}
			var got *Finding
			for i := range fs {
				if fs[i].ID == c.want {
					got = &fs[i]
				} else {
					t.Errorf("unexpected extra finding %s: %s", fs[i].ID, fs[i].Title)
				}
			}
			if got == nil {
				t.Fatalf("rule %s stayed silent; findings: %+v", c.want, fs)
			}
			if got.Severity != c.sev {
				t.Errorf("severity %s, want %s", got.Severity, c.sev)
			}
			if len(got.Evidence) == 0 || got.Recommendation.Why == "" || len(got.Recommendation.Apply) == 0 || len(got.Recommendation.Revert) == 0 {
				t.Errorf("finding lacks evidence or recommendation: %+v", got)
			}
			if c.text != "" && !strings.Contains(strings.Join(got.Recommendation.Apply, "\n"), c.text) {
				t.Errorf("apply %q lacks %q", got.Recommendation.Apply, c.text)
			}
		})
	}
}

// Every finding that sizes the heap names the same -Xmx, never below the
// heap in use: a 2.2 GB G1 heap with a 137 MB live set, full GCs and
// frequent young GCs.
func TestHeapSizeRecommendationsAgree(t *testing.T) {
	g := healthyGC()
	g.HeapBytes, g.LiveAfterFullBytes = 2253<<20, 137<<20
	g.FullGCCauses = []evidence.CauseStats{{Cause: "G1 Evacuation Pause", Count: 3, TotalNs: 3e9}}
	g.ToSpaceExhausted = 2
	g.YoungIntervalSeconds, g.AllocRate = 2, 200<<20
	fs := Run(GCRules, g)
	re := regexp.MustCompile(`-Xmx(\d+)m`)
	sizes := map[string]bool{}
	for _, f := range fs {
		for _, a := range f.Recommendation.Apply {
			for _, m := range re.FindAllStringSubmatch(a, -1) {
				sizes[m[1]] = true
				if n, _ := strconv.Atoi(m[1]); n < 2253 {
					t.Errorf("%s shrinks the 2253 MB heap: %s", f.ID, a)
				}
			}
		}
	}
	if len(sizes) != 1 {
		t.Errorf("findings recommend different heaps: %v", sizes)
	}
	// 200 MB/s × 10 s = 2000 MB of Eden / 0.6 = 3334 MB, the largest term.
	if !sizes["3334"] {
		t.Errorf("sizes %v, want 3334", sizes)
	}
}

func TestGCModelFor(t *testing.T) {
	g := healthyGC() // 10 MiB/s over 600 s, Eden 300 MiB
	if GCModelFor(&g, 0, 0, 0) != nil {
		t.Fatal("model without a request rate")
	}
	// 6000 requests over the 600 s window = 10 rps → 1 MiB per request.
	m := GCModelFor(&g, 0, 6000, 50)
	if m == nil || m.RPS != 10 || m.BytesPerRequest != 1<<20 {
		t.Fatalf("model %+v", m)
	}
	// 50 rps × 1 MiB = 50 MiB/s into 300 MiB: 10 young GCs a minute.
	if m.PredictedYoungGCsPerMinute != 10 {
		t.Errorf("predicted %v young GCs/min, want 10", m.PredictedYoungGCsPerMinute)
	}
	if m.ObservedYoungGCsPerMinute != 2 {
		t.Errorf("observed %v young GCs/min, want 2", m.ObservedYoungGCsPerMinute)
	}
	// Without Eden, one young cycle's allocation stands in for it.
	g.EdenBytes = 0
	m = GCModelFor(&g, 10, 0, 0)
	if want := g.AllocatedBytes / 19; m.EdenBytes != want {
		t.Errorf("effective Eden %v, want %v", m.EdenBytes, want)
	}
}

func TestSuggestedRegionFromHeap(t *testing.T) {
	g := evidence.GC{HeapBytes: 8 << 30} // G1 ergonomics: 8 GiB / 2048 = 4 MiB
	cur, next := suggestedRegion(g)
	if cur != 4<<20 || next != 8<<20 {
		t.Errorf("region %v → %v, want 4 MiB → 8 MiB", cur, next)
	}
	g.RegionBytes = 32 << 20
	if _, next := suggestedRegion(g); next != 32<<20 {
		t.Errorf("suggestion %v exceeds the 32 MiB maximum", next)
	}
}
