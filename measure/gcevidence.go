package measure

import (
	"fmt"
	"math"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/evidence"
)

// GCEvidence turns what gclog read from a log into the evidence the GC
// rules judge: nanoseconds and bytes, kinds by name, the window's
// throughput, the parse's unreadable records.
func GCEvidence(s gclog.Summary) evidence.GC {
	g := evidence.GC{
		Collector:        s.Collector,
		WindowSeconds:    s.Window.Seconds,
		Segments:         s.Window.Segments,
		TimeJumps:        s.Window.JumpCount,
		EscalatedFullGCs: s.Escalated,
		Pauses:           []evidence.PauseStats{},
		AllPauses:        pauseEvidence(s.All, "all"),
		YoungGCs:         s.YoungGCs,

		YoungIntervalSeconds: s.YoungInterval.Seconds(),
		AllocRate:            s.Allocation.Rate,
		AllocSource:          s.Allocation.Source,
		AllocatedBytes:       s.Allocation.Allocated,
		PromotionRate:        s.Allocation.PromotionRate,
		PromotedBytes:        s.Allocation.Promoted,
		PromotionKnown:       s.Allocation.PromotionKnown,

		EdenBytes:           s.Sizes.Eden,
		HeapBytes:           s.Sizes.Heap,
		RegionBytes:         s.Sizes.Region,
		LiveAfterFullBytes:  s.Sizes.LiveAfterFull,
		MetaspaceBytes:      s.Sizes.Metaspace,
		MetaspaceFirstBytes: s.Sizes.MetaspaceFirst,
		MetaspaceLastBytes:  s.Sizes.MetaspaceLast,

		TenuringThresholdMin: s.Tenure.ThresholdMin,
		TenuringThresholdMax: s.Tenure.ThresholdMax,
		FullGCCauses:         []evidence.CauseStats{},

		ConcurrentModeFailures: s.Failures.ConcurrentModeFailures,
		PromotionFailures:      s.Failures.PromotionFailures,
		ToSpaceExhausted:       s.Failures.ToSpaceExhausted,
		HumongousGCs:           s.Failures.HumongousGCs,
		HumongousRegionsMax:    s.Failures.HumongousRegionsMax,
		AllocationStalls:       s.Failures.AllocationStalls,
		AllocationStallsNs:     int64(s.Failures.AllocationStallTime),

		UnreadableRecords: s.Parse.UnrecognisedRecords,
		Goals:             evidence.GCGoals{PauseGoalNs: int64(s.PauseGoal)},
	}
	for _, p := range s.Pauses {
		g.Pauses = append(g.Pauses, pauseEvidence(p, p.Kind.String()))
	}
	// Throughput needs a window that holds more than the pauses: a log of
	// one record says nothing about the time between collections.
	if pauses := s.All.Total.Seconds(); s.Window.Seconds > pauses+1e-3 {
		g.Throughput, g.ThroughputKnown = max(0, 1-pauses/s.Window.Seconds), true
	}
	for _, r := range s.Parse.UnrecognisedSamples {
		g.UnreadableAt = append(g.UnreadableAt, fmt.Sprintf("%s:%d", r.File, r.Line))
	}
	for _, c := range s.FullGCCauses {
		g.FullGCCauses = append(g.FullGCCauses, evidence.CauseStats{Cause: c.Cause, Count: c.Count, TotalNs: int64(c.Total)})
	}
	g.LiveSet = evidence.LiveSetTrend{Basis: s.LiveSet.Basis, SlopeBytesPerHour: s.LiveSet.SlopeBytesPerHour, R2: s.LiveSet.R2, Verdict: s.LiveSet.Verdict, Samples: []evidence.HeapSample{}}
	for _, f := range s.LiveSet.Samples {
		g.LiveSet.Samples = append(g.LiveSet.Samples, evidence.HeapSample(f))
	}
	if t := s.Tenure; t.Tables > 0 {
		g.Tenuring = &evidence.TenuringStats{Tables: t.Tables, Overflows: t.Overflows, AgeBytes: t.AgeBytes}
	}
	if sp := s.Safepoints; sp.Count > 0 {
		e := &evidence.SafepointStats{Count: sp.Count, StoppedNs: int64(sp.Stopped), MaxNs: int64(sp.Max),
			TTSPCount: sp.TTSPCount, TTSPNs: int64(sp.TTSP), TTSPMaxNs: int64(sp.TTSPMax), TTSPMaxAt: sp.TTSPMaxAt, TTSPMaxOp: sp.TTSPMaxOp,
			NonGCNs: int64(sp.NonGC), NonGCMaxNs: int64(sp.NonGCMax)}
		if s.Window.Seconds > 0 {
			e.StoppedShare = math.Min(1, sp.Stopped.Seconds()/s.Window.Seconds)
		}
		for _, op := range sp.Operations {
			e.Operations = append(e.Operations, evidence.SafepointOperation{Name: op.Name, GC: op.GC, Count: op.Count,
				StoppedNs: int64(op.Stopped), MaxNs: int64(op.Max), TTSPMaxNs: int64(op.TTSPMax)})
		}
		g.Safepoints = e
	}
	if c := s.CPU; c.Pauses > 0 {
		g.PauseCPU = &evidence.PauseCPUStats{Pauses: c.Pauses, UserNs: int64(c.User), SysNs: int64(c.Sys), RealNs: int64(c.Real),
			SysHeavy: c.SysHeavy, SysHeavyRealNs: int64(c.SysHeavyReal), Starved: c.Starved, StarvedRealNs: int64(c.StarvedReal),
			WorstAtSeconds: c.Worst.At, WorstUserNs: int64(c.Worst.User), WorstSysNs: int64(c.Worst.Sys), WorstRealNs: int64(c.Worst.Real)}
		if c.Worst.Real > 0 {
			g.PauseCPU.WorstKind = c.Worst.Kind.String()
		}
	}
	if c := s.Cycles; c.Count > 0 {
		g.Cycles = &evidence.CycleStats{Count: c.Count, TotalNs: int64(c.Total), MeanNs: int64(c.Mean), MaxNs: int64(c.Max),
			Unfinished: c.Unfinished, ToSpaceExhaustedMax: c.ToSpaceMax, HumongousMax: c.HumongousMax}
	}
	for _, ph := range s.Phases {
		g.Phases = append(g.Phases, evidence.PhaseTime{Name: ph.Name, Count: ph.Count, TotalNs: int64(ph.Total), MaxNs: int64(ph.Max)})
	}
	if r := s.RefProc; r.Pauses > 0 {
		g.RefProc = &evidence.RefProcStats{Pauses: r.Pauses, TotalNs: int64(r.Total), MaxNs: int64(r.Max), PauseTotalNs: int64(r.PauseTotal)}
	}
	return g
}

func pauseEvidence(p gclog.PauseStats, kind string) evidence.PauseStats {
	return evidence.PauseStats{Kind: kind, Count: p.Count, TotalNs: int64(p.Total), MeanNs: float64(p.Mean),
		P50Ns: int64(p.P50), P95Ns: int64(p.P95), P99Ns: int64(p.P99), MaxNs: int64(p.Max), OverGoal: p.OverGoal}
}
