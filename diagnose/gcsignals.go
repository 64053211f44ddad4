package diagnose

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// GC-log rules beyond the pauses themselves: unreadable records,
// safepoints, the CPU of pauses, reference processing, the live set over
// time, concurrent cycles.

const (
	// ttspWarn: threads taking this long to reach a safepoint hold every
	// other thread stopped meanwhile (capped by half the pause goal).
	ttspWarn = 100 * time.Millisecond
	// stoppedShareWarn: stops GC does not explain taking this share of the
	// window are worth a look.
	stoppedShareWarn = 0.01
	// oddCPUShare: sys-heavy or starved pauses making up this share of the
	// pause time point at the machine, not the collector.
	oddCPUShare = 0.10
	// refProcShare: reference processing taking this share of the pauses
	// that logged it.
	refProcShare = 0.10
	// backToBackShare: concurrent cycles running this share of the window
	// leave the collector no slack.
	backToBackShare = 0.8
)

func pauseGoal(g evidence.GC) time.Duration {
	if g.Goals.PauseGoalNs > 0 {
		return time.Duration(g.Goals.PauseGoalNs)
	}
	return DefaultPauseGoal
}

// stopImpact ranks stops by their share of the window, or by the longest
// one against the pause goal (a stop ten times the goal counts as much as
// stopping the whole window).
func stopImpact(frac float64, longestNs int64, goal time.Duration) float64 {
	return math.Min(1, math.Max(frac, share(float64(longestNs), float64(goal))/10))
}

func share(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return part / whole
}

func checkUnreadableRecords(g evidence.GC) *Finding {
	n := g.UnreadableRecords
	if n == 0 {
		return nil
	}
	frac := share(float64(n), float64(n)+float64(g.AllPauses.Count))
	sev := Warn
	if frac >= 0.1 {
		sev = Crit
	}
	ev := []string{fmt.Sprintf("%d of %d records that look like GC pauses could not be read (%.0f%%)", n, n+int64(g.AllPauses.Count), 100*frac)}
	if len(g.UnreadableAt) > 0 {
		ev = append(ev, "first at "+strings.Join(g.UnreadableAt, ", "))
	}
	return &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("%d GC records could not be read", n),
		Evidence: ev,
		Impact:   math.Max(0.3, frac),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "perfscope counts the records it cannot read instead of skipping them: the pause statistics, throughput and findings here miss these records' pauses.",
			Apply:    []string{"look at the named lines: a record cut by the start or end of the file (a rotated or copied fragment) loses only that record; anything else, report the lines (with the JVM version and -Xlog / -XX:+Print* flags) so perfscope learns the format"},
			Revert:   []string{"nothing to revert"},
			Expected: "no unreadable records on a complete log",
		},
	}
}

// safepointEvidence names the top operations.
func safepointEvidence(sp *evidence.SafepointStats, gcOnly bool) []string {
	var ops []string
	for _, op := range sp.Operations {
		if op.GC && !gcOnly || len(ops) == 4 {
			continue
		}
		ops = append(ops, fmt.Sprintf("%s ×%d, %s (longest %s)", op.Name, op.Count, ms(float64(op.StoppedNs)), ms(float64(op.MaxNs))))
	}
	return ops
}

func checkTimeToSafepoint(g evidence.GC, t Thresholds) *Finding {
	sp := g.Safepoints
	if sp == nil || sp.TTSPCount == 0 {
		return nil
	}
	goal := pauseGoal(g)
	warn := min(time.Duration(t.Get(GCThresholds.TTSP)*float64(time.Second)), goal/2)
	frac := share(float64(sp.TTSPNs)/1e9, g.WindowSeconds)
	if time.Duration(sp.TTSPMaxNs) < warn && frac < t.Get(GCThresholds.StoppedShare) {
		return nil
	}
	sev := Warn
	if time.Duration(sp.TTSPMaxNs) >= goal {
		sev = Crit
	}
	at := fmt.Sprintf("at %.1fs", sp.TTSPMaxAt)
	if sp.TTSPMaxOp != "" {
		at += ", before " + sp.TTSPMaxOp
	}
	ev := []string{
		fmt.Sprintf("the longest wait for all threads to stop took %s (%s)", ms(float64(sp.TTSPMaxNs)), at),
		fmt.Sprintf("%s waiting over %d stops (%.1f%% of the %.0fs window); every thread already stopped waits too", ms(float64(sp.TTSPNs)), sp.TTSPCount, 100*frac, g.WindowSeconds),
	}
	return &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("threads took up to %s to reach a safepoint", ms(float64(sp.TTSPMaxNs))),
		Evidence: ev,
		Impact:   stopImpact(frac, sp.TTSPMaxNs, goal),
		Recommendation: Recommendation{
			Kind: KindAdvice,
			Why:  "Before any pause the JVM waits until every running thread reaches a safepoint poll; a thread in a long counted loop without polls, a large array copy, a JNI critical section or a page fault (swapped or memory-mapped memory) keeps all the others stopped. GC logs do not count this wait in the pause.",
			Apply: []string{
				"restart the JVM with -XX:+UnlockDiagnosticVMOptions -XX:+SafepointTimeout -XX:SafepointTimeoutDelay=" + fmt.Sprint(max(warn.Milliseconds(), 1)) + " to log the threads that are late",
				"profile time to safepoint: async-profiler's --ttsp mode shows the code the late threads run",
			},
			Revert:   []string{"restart the JVM without the diagnostic flags"},
			Caveats:  []string{"JDK 8 removes safepoint polls from int-counted loops: -XX:+UseCountedLoopSafepoints puts them back (JDK 10+ strip-mines loops by default)"},
			Expected: fmt.Sprintf("time to safepoint under %s", ms(float64(warn))),
		},
	}
}

// nonGCAdvice is what to do about the operation that stops the
// application most.
func nonGCAdvice(name string) string {
	switch {
	case strings.Contains(name, "RevokeBias"), strings.Contains(name, "BiasedLocking"):
		return "restart the JVM with -XX:-UseBiasedLocking (bias revocation stops every thread; JDK 15+ has it off by default)"
	case strings.Contains(name, "ThreadDump"), strings.Contains(name, "PrintThreads"), strings.Contains(name, "GetAllStackTraces"),
		strings.Contains(name, "FindDeadlocks"), strings.Contains(name, "GetThreadListStackTraces"):
		return "find what takes thread dumps (a monitoring agent, jstack in a cron job, Thread.getAllStackTraces() in the application) and make it less frequent"
	case strings.Contains(name, "Redefine"), strings.Contains(name, "Retransform"), strings.Contains(name, "JvmtiEventsMode"):
		return "find the Java agent redefining classes (APM, hot reload, instrumentation) and limit what it retransforms"
	case strings.Contains(name, "HeapInspection"), strings.Contains(name, "HeapDumper"):
		return "find what runs heap histograms or dumps (jmap -histo, jcmd GC.class_histogram, a monitoring agent)"
	case strings.Contains(name, "ICBufferFull"):
		return "restart the JVM with a larger inline cache buffer (-XX:+UnlockDiagnosticVMOptions -XX:InlineCacheBufferSize=…) or a larger -XX:ReservedCodeCacheSize if the code cache churns"
	case name == "Cleanup":
		return "the periodic \"Cleanup\" safepoint is short by itself: long ones are time to safepoint (see that finding); -XX:GuaranteedSafepointInterval=0 (diagnostic) turns them off"
	case strings.Contains(name, "Deoptimize"):
		return "look for deoptimization storms (-Xlog:deoptimization): class loading late in the run or megamorphic call sites"
	}
	return "name the operations with -Xlog:safepoint (JDK 9+) or -XX:+PrintSafepointStatistics (JDK 8) and look for the tool or code that triggers them"
}

func checkNonGCStops(g evidence.GC, t Thresholds) *Finding {
	sp := g.Safepoints
	if sp == nil || sp.NonGCNs == 0 {
		return nil
	}
	goal := pauseGoal(g)
	frac := share(float64(sp.NonGCNs)/1e9, g.WindowSeconds)
	if frac < t.Get(GCThresholds.StoppedShare) && time.Duration(sp.NonGCMaxNs) < goal {
		return nil
	}
	sev := Warn
	if frac >= 0.05 || time.Duration(sp.NonGCMaxNs) >= 5*goal {
		sev = Crit
	}
	ev := []string{fmt.Sprintf("%s of stops that GC pauses do not explain (%.1f%% of the %.0fs window), the longest %s", ms(float64(sp.NonGCNs)), 100*frac, g.WindowSeconds, ms(float64(sp.NonGCMaxNs)))}
	ev = append(ev, safepointEvidence(sp, false)...)
	advice := nonGCAdvice("")
	for _, op := range sp.Operations {
		if !op.GC {
			advice = nonGCAdvice(op.Name)
			break
		}
	}
	if g.ThroughputKnown && g.Throughput > 0.99 {
		ev = append(ev, fmt.Sprintf("GC throughput alone is %.1f%%: the application stops for other reasons", 100*g.Throughput))
	}
	return &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("the application was stopped for %s outside GC pauses", ms(float64(sp.NonGCNs))),
		Evidence: ev,
		Impact:   stopImpact(frac, sp.NonGCMaxNs, goal),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "Every safepoint stops all application threads, GC or not: bias revocation, class redefinition by agents, thread dumps, heap inspections and code-cache housekeeping are pauses the GC statistics do not show.",
			Apply:    []string{advice},
			Revert:   []string{"restart the JVM with its previous flags / re-enable the tool"},
			Expected: "stops outside GC under 1% of the time",
		},
	}
}

func checkPauseCPU(g evidence.GC, t Thresholds) *Finding {
	c := g.PauseCPU
	if c == nil || c.SysHeavy+c.Starved == 0 {
		return nil
	}
	odd := math.Min(float64(c.SysHeavyRealNs+c.StarvedRealNs), float64(c.RealNs))
	goal := pauseGoal(g)
	if share(odd, float64(c.RealNs)) < t.Get(GCThresholds.OddCPU) && time.Duration(c.WorstRealNs) < goal {
		return nil
	}
	sev := Warn
	if time.Duration(c.WorstRealNs) >= 5*goal {
		sev = Crit
	}
	ev := []string{fmt.Sprintf("%d pauses logged CPU times: user %s, sys %s, real %s", c.Pauses, ms(float64(c.UserNs)), ms(float64(c.SysNs)), ms(float64(c.RealNs)))}
	var apply []string
	if c.SysHeavy > 0 {
		ev = append(ev, fmt.Sprintf("%d pauses spent more CPU in the kernel than in the JVM (sys > user), %s of pause time", c.SysHeavy, ms(float64(c.SysHeavyRealNs))))
		apply = append(apply, "check transparent huge pages (cat /sys/kernel/mm/transparent_hugepage/enabled: 'always' makes page faults compact memory — set madvise) and swapping (vmstat 1: si/so); restart the JVM with -XX:+AlwaysPreTouch so the heap is faulted in at start")
	}
	if c.Starved > 0 {
		ev = append(ev, fmt.Sprintf("%d pauses took longer than the CPU their threads got (real > user + sys), %s of pause time", c.Starved, ms(float64(c.StarvedRealNs))))
		apply = append(apply, "check CPU throttling (a container's cpu.stat nr_throttled), steal time (vmstat 'st'), swapping and the GC log's disk (a slow write blocks the pause: JDK 17+ -Xlog:async); keep -XX:ParallelGCThreads at or below the CPUs the JVM really gets")
	}
	ev = append(ev, fmt.Sprintf("worst: a %s pause at %.1fs, user %s sys %s real %s", c.WorstKind, c.WorstAtSeconds, ms(float64(c.WorstUserNs)), ms(float64(c.WorstSysNs)), ms(float64(c.WorstRealNs))))
	return &Finding{
		Severity: sev,
		Title:    "GC pauses wait on the operating system, not on the collector",
		Evidence: ev,
		Impact:   math.Min(1, share(odd, float64(c.RealNs))),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "A pause whose kernel time exceeds its user time is page faults, swapping or huge-page compaction; one whose wall time exceeds its CPU time waited for a CPU or for I/O. Neither is fixed by GC tuning.",
			Apply:    apply,
			Revert:   []string{"undo the system change (THP mode, CPU limit) or restart the JVM without -XX:+AlwaysPreTouch"},
			Expected: "sys below user and real at or below user + sys for GC pauses",
		},
	}
}

func checkReferenceProcessing(g evidence.GC, t Thresholds) *Finding {
	r := g.RefProc
	if r == nil || r.TotalNs == 0 {
		return nil
	}
	goal := pauseGoal(g)
	frac := share(float64(r.TotalNs), float64(r.PauseTotalNs))
	if frac < t.Get(GCThresholds.RefProc) || time.Duration(r.MaxNs) < goal/10 {
		return nil
	}
	sev := Warn
	if time.Duration(r.MaxNs) >= goal {
		sev = Crit
	}
	return &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("reference processing takes %.0f%% of GC pause time", 100*frac),
		Evidence: []string{
			fmt.Sprintf("%s processing Soft/Weak/Final/Phantom references in %d pauses of %s, the longest %s", ms(float64(r.TotalNs)), r.Pauses, ms(float64(r.PauseTotalNs)), ms(float64(r.MaxNs))),
		},
		Impact: math.Min(1, frac),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "References are processed inside the pause, single-threaded unless told otherwise; many FinalReferences (classes with finalize(), unclosed streams and sockets) or SoftReference caches make it long.",
			Apply:    []string{"restart the JVM with -XX:+ParallelRefProcEnabled (off by default before JDK 17 for most collectors)", "find the finalizable objects and caches: -XX:+PrintReferenceGC (JDK 8) or -Xlog:gc+ref=debug shows which kind dominates"},
			Revert:   []string{"restart the JVM without -XX:+ParallelRefProcEnabled"},
			Expected: "reference processing a small share of each pause",
		},
	}
}

func checkLiveSetGrowth(g evidence.GC) *Finding {
	ls := g.LiveSet
	if ls.Verdict != "rising" || len(ls.Samples) < 2 {
		return nil
	}
	first, last := ls.Samples[0], ls.Samples[len(ls.Samples)-1]
	ev := []string{
		fmt.Sprintf("heap after %s rose from %s at %.0fs to %s at %.0fs: %s per hour (fit R² %.2f over %d points)",
			ls.Basis, mib(float64(first.Bytes)), first.T, mib(float64(last.Bytes)), last.T, mib(ls.SlopeBytesPerHour), ls.R2, len(ls.Samples)),
	}
	sev := Warn
	impact := 0.2
	if g.HeapBytes > float64(last.Bytes) && ls.SlopeBytesPerHour > 0 {
		hours := (g.HeapBytes - float64(last.Bytes)) / ls.SlopeBytesPerHour
		when := fmt.Sprintf("%.1f hours", hours)
		if hours < 1 {
			when = fmt.Sprintf("%.0f minutes", hours*60)
		}
		ev = append(ev, fmt.Sprintf("at that rate the %s heap is full in %s", mib(g.HeapBytes), when))
		if hours < 24 {
			sev, impact = Crit, 0.6
		}
	}
	return &Finding{
		Severity: sev,
		Title:    "the live set keeps growing: a memory leak or an unbounded cache",
		Evidence: ev,
		Impact:   impact,
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "What survives collection should level off once the application is warm; a floor that keeps rising ends in back-to-back full GCs and OutOfMemoryError, and more heap only delays it.",
			Apply:    []string{"compare two class histograms taken an hour apart: jcmd <pid> GC.class_histogram | head -30; or take a heap dump (jcmd <pid> GC.heap_dump) and look at the dominators"},
			Revert:   []string{"nothing to revert"},
			Code:     []CodeSketch{{Lang: "shell", Code: "jcmd <pid> GC.class_histogram > h1.txt; sleep 3600; jcmd <pid> GC.class_histogram > h2.txt\ndiff <(head -40 h1.txt) <(head -40 h2.txt)"}},
			Caveats:  []string{"a cache that fills up and then stays flat looks like this early on: check over a longer log"},
			Expected: "a flat live set after warm-up",
		},
	}
}

func checkBackToBackCycles(g evidence.GC, t Thresholds) *Finding {
	c := g.Cycles
	if c == nil || c.Count < minYoungGCs || g.WindowSeconds <= 0 {
		return nil
	}
	frac := share(float64(c.TotalNs)/1e9, g.WindowSeconds)
	if frac < t.Get(GCThresholds.BackToBack) {
		return nil
	}
	apply := "give the heap more room for what is allocated during a cycle (a larger -Xmx), or more concurrent threads (-XX:ConcGCThreads)"
	if size := heapSizing(g, 0); size.Grow {
		apply = fmt.Sprintf("restart the JVM with %s (%s), or more concurrent threads (-XX:ConcGCThreads)", size.Flag(), size.Arithmetic())
	}
	return &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("concurrent GC cycles run %.0f%% of the time", 100*math.Min(frac, 1)),
		Evidence: []string{fmt.Sprintf("%d concurrent cycles, mean %s, longest %s, %d cut short, over a %.0fs window", c.Count, ms(float64(c.MeanNs)), ms(float64(c.MaxNs)), c.Unfinished, g.WindowSeconds)},
		Impact:   math.Min(1, frac/4),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "A concurrent collector that starts a new cycle as soon as the last ends has no slack: the next allocation burst ends in a stall, a degenerated or a full GC, and its threads take CPU from the application all the time.",
			Apply:    []string{apply},
			Revert:   []string{"restart the JVM with its previous flags"},
			Expected: "idle time between concurrent cycles",
		},
	}
}
