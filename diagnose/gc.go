package diagnose

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// Thresholds of the GC-log rules.
const (
	// DefaultPauseGoal is what a latency-sensitive service tolerates by
	// default: G1's own default -XX:MaxGCPauseMillis.
	DefaultPauseGoal = 200 * time.Millisecond
	// minYoungGCs: fewer young collections say nothing about frequency.
	minYoungGCs = 3
	// promotedShareWarn: more than this share of allocation reaching the
	// old generation means objects are promoted before they die.
	promotedShareWarn = 0.10
	// promotedShareLowThreshold applies when the JVM also dropped the
	// tenuring threshold to 1: survivors overflowed.
	promotedShareLowThreshold = 0.02
	// g1MaxRegion is the largest -XX:G1HeapRegionSize before JDK 18 (and
	// the largest ergonomics picks on any JDK).
	g1MaxRegion = 32 << 20
)

// GCThresholds are the GC-log rules' thresholds a recipe may override;
// their defaults are the constants here and in gcsignals.go. The pause
// goal and the young-GC interval goal are the gclog collector's
// pause_goal and young_interval, not thresholds.
var GCThresholds = struct {
	PromotedShare, PromotedShareOverflow, TTSP, StoppedShare, OddCPU, RefProc, BackToBack Threshold
}{
	PromotedShare: Threshold{Name: "promoted_share", Default: promotedShareWarn, Min: 0, Max: 1,
		Doc: "allocation reaching the old generation that counts as premature promotion"},
	PromotedShareOverflow: Threshold{Name: "promoted_share_overflow", Default: promotedShareLowThreshold, Min: 0, Max: 1,
		Doc: "the same when survivors overflowed (tenuring threshold dropped to 1)"},
	TTSP: Threshold{Name: "ttsp_seconds", Default: ttspWarn.Seconds(), Min: 0, Max: 3600,
		Doc: "time to safepoint worth a finding (capped by half the pause goal)"},
	StoppedShare: Threshold{Name: "stopped_share", Default: stoppedShareWarn, Min: 0, Max: 1,
		Doc: "the window's share stopped at safepoints (outside GC, or waiting to reach them) worth a finding"},
	OddCPU: Threshold{Name: "odd_cpu_share", Default: oddCPUShare, Min: 0, Max: 1,
		Doc: "sys-heavy or CPU-starved pauses' share of pause time that points at the machine"},
	RefProc: Threshold{Name: "ref_proc_share", Default: refProcShare, Min: 0, Max: 1,
		Doc: "reference processing's share of the pauses that logged it"},
	BackToBack: Threshold{Name: "back_to_back_share", Default: backToBackShare, Min: 0, Max: 1,
		Doc: "the window's share in concurrent cycles that leaves the collector no slack"},
}

// GCRules are the rules of `perfscope gclog`.
var GCRules = []Rule[evidence.GC]{
	{ID: "gc.log.unreadable-records", Check: checkUnreadableRecords},
	{ID: "gc.young-gc-frequency", Check: checkGCYoungFrequency},
	{ID: "gc.premature-promotion", Tunables: []Threshold{GCThresholds.PromotedShare, GCThresholds.PromotedShareOverflow}, CheckTuned: checkGCPrematurePromotion},
	{ID: "gc.full-gc.system-gc", Check: checkFullGCSystem},
	{ID: "gc.full-gc.metadata", Check: checkFullGCMetadata},
	{ID: "gc.full-gc.allocation-failure", Check: checkFullGCAllocation},
	{ID: "gc.concurrent-mode-failure", Check: checkConcurrentModeFailure},
	{ID: "gc.pause-over-goal", Check: checkPauseGoal},
	{ID: "gc.humongous-allocation", Check: checkHumongous},
	{ID: "gc.to-space-exhausted", Check: checkToSpaceExhausted},
	{ID: "gc.allocation-stall", Check: checkAllocationStall},
	{ID: "gc.safepoint.time-to-safepoint", Tunables: []Threshold{GCThresholds.TTSP, GCThresholds.StoppedShare}, CheckTuned: checkTimeToSafepoint},
	{ID: "gc.safepoint.non-gc-stops", Tunables: []Threshold{GCThresholds.StoppedShare}, CheckTuned: checkNonGCStops},
	{ID: "gc.pause-cpu", Tunables: []Threshold{GCThresholds.OddCPU}, CheckTuned: checkPauseCPU},
	{ID: "gc.reference-processing", Tunables: []Threshold{GCThresholds.RefProc}, CheckTuned: checkReferenceProcessing},
	{ID: "gc.live-set-growth", Check: checkLiveSetGrowth},
	{ID: "gc.concurrent-cycles-back-to-back", Tunables: []Threshold{GCThresholds.BackToBack}, CheckTuned: checkBackToBackCycles},
}

// GCModelFor applies the allocation → young-GC model to a GC log: the request rate during
// the log (rps, or requests over the log's window) turns the allocation
// rate into bytes per request, and targetRPS (default: rps) into predicted
// young collections per minute with the log's Eden. Nil when no request
// rate is known or the log gives no allocation rate.
func GCModelFor(g *evidence.GC, rps, requests, targetRPS float64) *evidence.GCModel {
	if rps <= 0 && requests > 0 && g.WindowSeconds > 0 {
		rps = requests / g.WindowSeconds
	}
	if rps <= 0 || g.AllocRate <= 0 {
		return nil
	}
	if targetRPS <= 0 {
		targetRPS = rps
	}
	m := &evidence.GCModel{RPS: rps, TargetRPS: targetRPS, BytesPerRequest: g.AllocRate / rps, EdenBytes: g.EdenBytes}
	if m.EdenBytes <= 0 && g.YoungGCs > 1 {
		// Eden not logged: what one young cycle absorbed is its effective
		// size.
		m.EdenBytes = g.AllocatedBytes / float64(g.YoungGCs-1)
	}
	m.PredictedYoungGCsPerMinute = YoungGCsPerMinute(AllocRate(m.BytesPerRequest, targetRPS), m.EdenBytes)
	if g.YoungIntervalSeconds > 0 {
		m.ObservedYoungGCsPerMinute = 60 / g.YoungIntervalSeconds
	}
	return m
}

func ms(ns float64) string { return fmt.Sprintf("%.1f ms", ns/1e6) }

func isG1(g evidence.GC) bool { return g.Collector == "G1" }

func checkGCYoungFrequency(g evidence.GC) *Finding {
	if g.YoungGCs < minYoungGCs || g.YoungIntervalSeconds <= 0 || g.AllocRate <= 0 {
		return nil
	}
	interval := time.Duration(g.Goals.YoungIntervalNs)
	if interval <= 0 {
		interval = DefaultTargetGCInterval
	}
	allowed := time.Minute.Seconds() / interval.Seconds()
	perMin := 60 / g.YoungIntervalSeconds
	rate := g.AllocRate
	basis := fmt.Sprintf("observed: %d young GCs, one every %.2fs", g.YoungGCs, g.YoungIntervalSeconds)
	if m := g.Model; m != nil && m.TargetRPS != m.RPS && m.PredictedYoungGCsPerMinute > 0 {
		perMin = m.PredictedYoungGCsPerMinute
		rate = AllocRate(m.BytesPerRequest, m.TargetRPS)
		basis = fmt.Sprintf("predicted at %.0f requests/s: %s per request × %.0f/s with a %s Eden", m.TargetRPS, kib(m.BytesPerRequest), m.TargetRPS, mib(m.EdenBytes))
	}
	if perMin <= allowed {
		return nil
	}
	need := EdenForInterval(rate, interval)
	if g.RegionBytes > 0 {
		need = RoundUpToRegion(need, g.RegionBytes)
	}
	sev := Warn
	if perMin > 4*allowed {
		sev = Crit
	}
	ev := []string{
		basis,
		fmt.Sprintf("allocation rate %s/s (from %s occupancy before each GC minus after the previous one)", mib(rate), g.AllocSource),
		fmt.Sprintf("an Eden of %s gives one young GC per %v at that rate", mib(need), interval),
	}
	if g.EdenBytes > 0 {
		ev = append(ev, fmt.Sprintf("Eden is %s now", mib(g.EdenBytes)))
	}
	if m := g.Model; m != nil {
		ev = append(ev, fmt.Sprintf("%s allocated per request at %.0f requests/s during the log", kib(m.BytesPerRequest), m.RPS))
	}
	r := Recommendation{
		Kind:      KindAdvice,
		Why:       "Young collections happen when Eden fills, so their frequency is allocation rate over Eden size (the allocation → young-GC model): allocate less per request, or give Eden room for the target interval.",
		Expected:  fmt.Sprintf("one young GC every %v at %s/s", interval, mib(rate)),
		Reference: "Allocation per request (a Spring Boot measurement): 0.5 MB/request × 500 rps = 15 GB/min, several young GCs a minute even with a 5 GB Eden",
		Revert:    []string{"restart the JVM with its previous heap flags"},
	}
	size := heapSizing(g, need)
	if isG1(g) {
		r.Apply = []string{fmt.Sprintf("restart the JVM with %s so that G1's young part can reach %s: %s", size.Flag(), mib(need), size.Arithmetic())}
		r.Caveats = []string{"G1 sizes Eden to meet -XX:MaxGCPauseMillis; a bigger Eden can mean longer young pauses, and -Xmn switches that adaptation off."}
	} else {
		r.Apply = []string{fmt.Sprintf("restart the JVM with -Xmn%dm %s (Eden plus two survivor spaces at the default SurvivorRatio=8; the heap: %s)", int(math.Ceil(size.Xmn/(1<<20))), size.Flag(), size.Arithmetic())}
		r.Caveats = []string{"a bigger young generation takes heap from the old generation; the heap above keeps the old generation's size"}
	}
	r.Parameters = map[string]int64{"xmx_bytes": int64(size.Xmx), "eden_bytes": int64(need)}
	return &Finding{
		Severity:       sev,
		Title:          fmt.Sprintf("%.1f young GCs per minute (target: one per %v)", perMin, interval),
		Evidence:       ev,
		Impact:         1 - allowed/perMin,
		Recommendation: r,
	}
}

func checkGCPrematurePromotion(g evidence.GC, t Thresholds) *Finding {
	if !g.PromotionKnown || g.AllocatedBytes <= 0 || g.YoungGCs < minYoungGCs {
		return nil
	}
	share := g.PromotedBytes / g.AllocatedBytes
	overflow := g.TenuringThresholdMin == 1 && g.TenuringThresholdMax > 1 ||
		g.Tenuring != nil && g.Tenuring.Tables >= minYoungGCs && 5*g.Tenuring.Overflows >= g.Tenuring.Tables
	if share < t.Get(GCThresholds.PromotedShare) && !(overflow && share >= t.Get(GCThresholds.PromotedShareOverflow)) {
		return nil
	}
	ev := []string{
		fmt.Sprintf("%s promoted by %d young GCs: %.0f%% of the %s allocated", mib(g.PromotedBytes), g.YoungGCs, 100*share, mib(g.AllocatedBytes)),
		fmt.Sprintf("promotion rate %s/s", mib(g.PromotionRate)),
	}
	if g.TenuringThresholdMax > 0 {
		ev = append(ev, fmt.Sprintf("tenuring threshold fell to %d (max %d): survivor spaces overflowed", g.TenuringThresholdMin, g.TenuringThresholdMax))
	}
	if tn := g.Tenuring; tn != nil && tn.Overflows > 0 {
		ev = append(ev, fmt.Sprintf("%d of %d tenuring distributions held more than the desired survivor size", tn.Overflows, tn.Tables))
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%.0f%% of allocation is promoted to the old generation", 100*share),
		Evidence: ev,
		Impact:   math.Min(1, share),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "Request-scoped objects that overflow the survivor spaces are promoted and die in the old generation, where only mixed, concurrent or full collections reclaim them.",
			Apply:    []string{"restart the JVM with larger survivor spaces (-XX:SurvivorRatio=6, or a larger young generation) and check -XX:MaxTenuringThreshold"},
			Revert:   []string{"restart the JVM with its previous flags"},
			Expected: "old-generation growth between young GCs falls to the truly long-lived objects",
		},
	}
	if isG1(g) {
		f.Recommendation.Apply = []string{"restart the JVM with -XX:TargetSurvivorRatio=80 (G1 sizes survivors from it) and, if young GCs are also frequent, a larger heap"}
	}
	return f
}

// fullGCs returns the full-GC causes matching any of names: a name
// matches a cause containing it, or, prefixed with "=", a cause equal to
// it.
func fullGCs(g evidence.GC, names ...string) (count int, totalNs int64, causes []string) {
	for _, c := range g.FullGCCauses {
		for _, n := range names {
			exact, isExact := strings.CutPrefix(n, "=")
			if isExact && c.Cause == exact || !isExact && strings.Contains(strings.ToLower(c.Cause), strings.ToLower(n)) {
				count += c.Count
				totalNs += c.TotalNs
				causes = append(causes, fmt.Sprintf("%q ×%d", c.Cause, c.Count))
				break
			}
		}
	}
	return count, totalNs, causes
}

// fullGCImpact is the share of the window spent in those full GCs, at
// least a little: any full GC is worth a look.
func fullGCImpact(g evidence.GC, totalNs int64) float64 {
	if g.WindowSeconds <= 0 {
		return 0.05
	}
	return math.Min(1, math.Max(0.05, float64(totalNs)/1e9/g.WindowSeconds))
}

func fullGCEvidence(g evidence.GC, n int, totalNs int64, causes []string) []string {
	ev := []string{fmt.Sprintf("%d full GCs (%s) stopped the application for %s in total", n, strings.Join(causes, ", "), ms(float64(totalNs)))}
	if g.WindowSeconds > 0 {
		ev = append(ev, fmt.Sprintf("one every %.0fs over %.0fs of log", g.WindowSeconds/float64(n), g.WindowSeconds))
	}
	return ev
}

func checkFullGCSystem(g evidence.GC) *Finding {
	// JDK 6/7 write the cause as "System".
	n, total, causes := fullGCs(g, "System.gc()", "=System")
	if n == 0 {
		return nil
	}
	apply := "restart the JVM with -XX:+ExplicitGCInvokesConcurrent (System.gc() then starts a concurrent cycle instead of a full GC)"
	if g.Collector == "Parallel" || g.Collector == "Serial" {
		apply = "restart the JVM with -XX:+DisableExplicitGC, or find and remove the System.gc() callers"
	}
	return &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d full GCs requested by System.gc()", n),
		Evidence: fullGCEvidence(g, n, total, causes),
		Impact:   fullGCImpact(g, total),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "Something calls System.gc() (application code, RMI's distributed GC every hour, a monitoring agent, or a direct-buffer limit), and each call stops the whole application for a full collection.",
			Apply:    []string{apply},
			Revert:   []string{"restart the JVM without the flag"},
			Code:     []CodeSketch{{Lang: "shell", Code: "# find the caller while the JVM runs:\njcmd <pid> Thread.print | grep -B2 -A8 'System.gc'\n# RMI: -Dsun.rmi.dgc.client.gcInterval=3600000 -Dsun.rmi.dgc.server.gcInterval=3600000"}},
			Caveats:  []string{"NIO direct buffers rely on System.gc() to free native memory when -XX:MaxDirectMemorySize is reached: with -XX:+DisableExplicitGC they can fail with OutOfMemoryError: Direct buffer memory."},
			Expected: "no explicit full GCs",
		},
	}
}

func checkFullGCMetadata(g evidence.GC) *Finding {
	n, total, causes := fullGCs(g, "Metadata GC Threshold", "Last ditch collection", "Perm")
	if n == 0 {
		return nil
	}
	size := "at least the steady-state Metaspace use (jcmd <pid> VM.metaspace)"
	if g.MetaspaceBytes > 0 {
		size = fmt.Sprintf("-XX:MetaspaceSize=%dm (1.5 × the %s in use)", int(math.Ceil(1.5*g.MetaspaceBytes/(1<<20))), mib(g.MetaspaceBytes))
	}
	return &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d full GCs triggered by Metaspace filling", n),
		Evidence: fullGCEvidence(g, n, total, causes),
		Impact:   fullGCImpact(g, total),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "Metaspace starts with a low high-water mark (-XX:MetaspaceSize, ~21 MB) and every time class loading crosses it the JVM collects the whole heap to unload classes; repeated ones late in the run point at a class-loader leak (proxies, scripting, redeploys).",
			Apply:    []string{"restart the JVM with " + size},
			Revert:   []string{"restart the JVM without -XX:MetaspaceSize"},
			Caveats:  []string{"if Metaspace keeps growing, a larger threshold only delays the full GCs: look for a class-loader leak (jcmd <pid> VM.classloader_stats)"},
			Expected: "no Metaspace-triggered full GCs after start-up",
		},
	}
}

func checkFullGCAllocation(g evidence.GC) *Finding {
	n, total, causes := fullGCs(g, "Allocation Failure", "Ergonomics", "promotion failed", "G1 Evacuation Pause", "G1 Humongous Allocation", "unknown")
	if n == 0 {
		return nil
	}
	ev := fullGCEvidence(g, n, total, causes)
	apply := "restart the JVM with a larger heap (-Xmx), after checking the live set for a leak"
	size := heapSizing(g, 0)
	if g.LiveAfterFullBytes > 0 {
		ev = append(ev, fmt.Sprintf("live set after full GC up to %s of a %s heap (%.0f%%)", mib(g.LiveAfterFullBytes), mib(g.HeapBytes), 100*g.LiveAfterFullBytes/math.Max(g.HeapBytes, 1)))
	}
	switch {
	case size.Grow:
		apply = fmt.Sprintf("restart the JVM with %s after checking the live set for a leak: %s", size.Flag(), size.Arithmetic())
	case g.LiveAfterFullBytes > 0 && g.HeapBytes > 0:
		// The heap already holds the live set several times over: more of
		// it only spaces the full GCs out.
		apply = fmt.Sprintf("keep -Xmx (the %s heap is %.1f× the %s live set): find what fills the old generation between collections — the promotion rate, humongous objects — and, for CMS or G1, start the concurrent cycle earlier", mib(g.HeapBytes), g.HeapBytes/g.LiveAfterFullBytes, mib(g.LiveAfterFullBytes))
	}
	sev := Warn
	if g.WindowSeconds > 0 && float64(n)/g.WindowSeconds*3600 > 10 {
		sev = Crit
	}
	return &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("%d full GCs because the heap ran out of room", n),
		Evidence: ev,
		Impact:   fullGCImpact(g, total),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "The old generation filled before a young or concurrent collection could make room, so the JVM stopped everything for a full compaction: the heap is too small for the live set plus the garbage created while marking, or something leaks.",
			Apply:    []string{apply},
			Revert:   []string{"restart the JVM with its previous -Xmx"},
			Code:     []CodeSketch{{Lang: "shell", Code: "# what stays live (run twice, minutes apart, and compare):\njcmd <pid> GC.class_histogram | head -30"}},
			Caveats:  []string{"a heap that keeps growing after each full GC is a leak; more heap only delays the next one"},
			Expected: "no allocation-failure full GCs",
		},
	}
}

func checkConcurrentModeFailure(g evidence.GC) *Finding {
	if g.ConcurrentModeFailures == 0 {
		return nil
	}
	var total int64
	for _, c := range g.FullGCCauses {
		if c.Cause == "concurrent mode failure" {
			total += c.TotalNs
		}
	}
	return &Finding{
		Severity: Crit,
		Title:    fmt.Sprintf("%d CMS concurrent mode failures fell back to stop-the-world full GCs", g.ConcurrentModeFailures),
		Evidence: fullGCEvidence(g, g.ConcurrentModeFailures, total, []string{"concurrent mode failure"}),
		Impact:   fullGCImpact(g, total),
		Recommendation: Recommendation{
			Kind:   KindAdvice,
			Why:    "CMS started its concurrent cycle too late: the old generation filled before the cycle finished, and CMS fell back to a single-threaded full collection.",
			Apply:  []string{"restart the JVM with -XX:CMSInitiatingOccupancyFraction=60 -XX:+UseCMSInitiatingOccupancyOnly (start the cycle earlier), or a larger old generation"},
			Revert: []string{"restart the JVM with its previous CMS flags"},
			Caveats: []string{
				"CMS was removed in JDK 14: moving to G1 (-XX:+UseG1GC) removes this failure mode and is the long-term fix.",
				"starting cycles earlier costs more concurrent CPU",
			},
			Expected: "no concurrent mode failures",
		},
	}
}

func checkPauseGoal(g evidence.GC) *Finding {
	goal := g.Goals.PauseGoalNs
	if goal <= 0 || g.AllPauses.OverGoal == 0 {
		return nil
	}
	var worst evidence.PauseStats
	var kinds []string
	for _, p := range g.Pauses {
		if p.OverGoal > 0 {
			kinds = append(kinds, fmt.Sprintf("%s: %d of %d (p99 %s, max %s)", p.Kind, p.OverGoal, p.Count, ms(float64(p.P99Ns)), ms(float64(p.MaxNs))))
			if p.OverGoal > worst.OverGoal {
				worst = p
			}
		}
	}
	share := float64(g.AllPauses.OverGoal) / float64(max(g.AllPauses.Count, 1))
	sev := Warn
	if g.AllPauses.MaxNs > 5*goal || share > 0.05 {
		sev = Crit
	}
	apply := fmt.Sprintf("restart the JVM with -XX:MaxGCPauseMillis=%d (G1 shrinks Eden and old-region batches to meet it)", max(goal/1e6, 1))
	switch {
	case worst.Kind == "full":
		apply = "remove the full GCs first (see the full-GC findings); they dominate the pauses over the goal"
	case goal < 10e6:
		apply = "restart the JVM with -XX:+UseZGC (generational by default from JDK 23; pauses stay under a millisecond)"
	case !isG1(g) && g.Collector != "ZGC" && g.Collector != "Shenandoah":
		apply = fmt.Sprintf("restart the JVM with -XX:+UseG1GC -XX:MaxGCPauseMillis=%d", max(goal/1e6, 1))
	}
	return &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("%d GC pauses longer than the %s goal", g.AllPauses.OverGoal, ms(float64(goal))),
		Evidence: append(kinds, fmt.Sprintf("all pauses: p50 %s, p99 %s, max %s", ms(float64(g.AllPauses.P50Ns)), ms(float64(g.AllPauses.P99Ns)), ms(float64(g.AllPauses.MaxNs)))),
		Impact:   math.Min(1, share),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      fmt.Sprintf("Every pause stops all application threads; requests in flight wait for it. Most of the long pauses are %s pauses.", worst.Kind),
			Apply:    []string{apply},
			Revert:   []string{"restart the JVM with its previous GC flags"},
			Caveats:  []string{"a lower pause goal trades throughput (more, shorter collections) for latency"},
			Expected: fmt.Sprintf("pauses under %s", ms(float64(goal))),
		},
	}
}

// suggestedRegion doubles the region size (so objects up to the old size
// are no longer humongous), from the logged size or G1's ergonomic one
// (heap / 2048, a power of two in 1–32 MB).
func suggestedRegion(g evidence.GC) (cur, next float64) {
	cur = g.RegionBytes
	if cur <= 0 && g.HeapBytes > 0 {
		cur = math.Pow(2, math.Floor(math.Log2(g.HeapBytes/2048)))
		cur = math.Min(math.Max(cur, 1<<20), g1MaxRegion)
	}
	if cur <= 0 {
		return 0, 0
	}
	return cur, math.Min(2*cur, g1MaxRegion)
}

func checkHumongous(g evidence.GC) *Finding {
	if g.HumongousGCs == 0 && g.HumongousRegionsMax == 0 {
		return nil
	}
	var ev []string
	if g.HumongousGCs > 0 {
		ev = append(ev, fmt.Sprintf("%d pauses caused by humongous allocations", g.HumongousGCs))
	}
	if g.HumongousRegionsMax > 0 {
		ev = append(ev, fmt.Sprintf("up to %d humongous regions live", g.HumongousRegionsMax))
	}
	if c := g.Cycles; c != nil && c.HumongousMax > 0 {
		ev = append(ev, fmt.Sprintf("up to %d humongous-allocation pauses between two concurrent cycles", c.HumongousMax))
	}
	apply := "restart the JVM with a larger -XX:G1HeapRegionSize (objects of half a region or more are humongous)"
	cur, next := suggestedRegion(g)
	if next > cur {
		ev = append(ev, fmt.Sprintf("region size %s: objects of %s or more are humongous", mib(cur), kib(cur/2)))
		apply = fmt.Sprintf("restart the JVM with -XX:G1HeapRegionSize=%dm (objects under %s are then ordinary)", int(next/(1<<20)), kib(next/2))
	}
	impact := 0.1
	if g.YoungGCs > 0 {
		impact = math.Min(1, float64(g.HumongousGCs)/float64(g.YoungGCs))
	}
	return &Finding{
		Severity: Warn,
		Title:    "humongous allocations trigger G1 collections",
		Evidence: ev,
		Impact:   impact,
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "G1 allocates objects of half a region or more straight into contiguous old regions, and each such allocation can start a collection; large short-lived buffers (byte[] for I/O, big collections) then cost pauses and fragment the heap.",
			Apply:    []string{apply},
			Revert:   []string{"restart the JVM without -XX:G1HeapRegionSize"},
			Code:     []CodeSketch{{Lang: "java", Code: "// reuse or chunk large buffers instead of allocating one per request:\nprivate static final ThreadLocal<byte[]> BUF = ThreadLocal.withInitial(() -> new byte[256 * 1024]);"}},
			Caveats:  []string{"larger regions mean fewer of them (G1 wants about 2048): on a small heap prefer fixing the allocation"},
			Expected: "no humongous-allocation pauses for objects under half the new region size",
		},
	}
}

func checkToSpaceExhausted(g evidence.GC) *Finding {
	if g.ToSpaceExhausted == 0 {
		return nil
	}
	apply := "restart the JVM with -XX:G1ReservePercent=20 (default 10) and a larger -Xmx, or start marking earlier with -XX:InitiatingHeapOccupancyPercent=35"
	if size := heapSizing(g, 0); size.Grow {
		apply = fmt.Sprintf("restart the JVM with -XX:G1ReservePercent=20 (default 10) and %s (%s), or start marking earlier with -XX:InitiatingHeapOccupancyPercent=35", size.Flag(), size.Arithmetic())
	}
	ev := []string{
		fmt.Sprintf("%d evacuation failures; each makes the pause much longer and often ends in a full GC", g.ToSpaceExhausted),
		fmt.Sprintf("heap %s", mib(g.HeapBytes)),
	}
	if c := g.Cycles; c != nil && c.ToSpaceExhaustedMax > 1 {
		ev = append(ev, fmt.Sprintf("up to %d between two concurrent cycles", c.ToSpaceExhaustedMax))
	}
	return &Finding{
		Severity: Crit,
		Title:    fmt.Sprintf("%d G1 pauses ran out of space to evacuate into (to-space exhausted)", g.ToSpaceExhausted),
		Evidence: ev,
		Impact:   math.Min(1, 0.2+float64(g.ToSpaceExhausted)/float64(max(g.AllPauses.Count, 1))),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "G1 copies live objects out of the regions it collects; when no free regions are left it has to keep objects in place, fix up references and usually follow with a full GC.",
			Apply:    []string{apply},
			Revert:   []string{"restart the JVM with its previous G1 flags"},
			Caveats:  []string{"humongous allocations and premature promotion fill the reserve too: fix those findings first"},
			Expected: "no to-space exhausted pauses",
		},
	}
}

func checkAllocationStall(g evidence.GC) *Finding {
	if g.AllocationStalls == 0 {
		return nil
	}
	apply := "restart the JVM with a larger -Xmx (headroom for allocation during a cycle), or more -XX:ConcGCThreads"
	if size := heapSizing(g, 0); size.Grow {
		apply = fmt.Sprintf("restart the JVM with %s (%s), or more -XX:ConcGCThreads", size.Flag(), size.Arithmetic())
	}
	return &Finding{
		Severity: Crit,
		Title:    fmt.Sprintf("%d application threads stalled waiting for ZGC to free memory", g.AllocationStalls),
		Evidence: []string{fmt.Sprintf("%d allocation stalls, %s in total", g.AllocationStalls, ms(float64(g.AllocationStallsNs)))},
		Impact:   math.Min(1, math.Max(0.1, float64(g.AllocationStallsNs)/1e9/math.Max(g.WindowSeconds, 1))),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "ZGC collects concurrently, but when the application allocates faster than a cycle frees memory, allocating threads block until it does: a pause in all but name.",
			Apply:    []string{apply},
			Revert:   []string{"restart the JVM with its previous flags"},
			Expected: "no allocation stalls",
		},
	}
}
