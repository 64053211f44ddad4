package gclog

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func analyzeText(t *testing.T, log string) Summary {
	t.Helper()
	p := &Parser{}
	a := NewAnalyzer(200 * time.Millisecond)
	a.Attach(p)
	if err := p.Parse(strings.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	return a.Summary(p.Stats)
}

// Counts checked with grep over the testdata logs.
func TestDetailFromRealLogs(t *testing.T) {
	// grep -c 'Total time for which' = 14; grep -c 'User=' = 13. Every stop
	// follows a collection: none is "not GC".
	s := analyze(t, "testdata/sample-ujl-g1-gc-all.txt")
	if sp := s.Safepoints; sp.Count != 14 || sp.TTSPCount != 14 || sp.NonGC != 0 {
		t.Errorf("safepoints %+v", sp)
	}
	if s.CPU.Pauses != 13 {
		t.Errorf("%d pauses with CPU times, want 13", s.CPU.Pauses)
	}
	// One G1 concurrent cycle, GC(5).
	if s.Cycles.Count != 1 {
		t.Errorf("cycles %+v", s.Cycles)
	}

	// grep -o 'Parallel Time: [0-9.]* ms': 5.2 + 4.9 + 3.7 + 2.0 + 3.6 =
	// 19.4 ms; 'Ref Proc: [0-9.]* ms': 0.7 + 0.8 + 0.5 + 0.3 + 0.2 = 2.5 ms.
	s = analyze(t, "testdata/SampleSun1_8_0G1PrintGCID.txt")
	var par PhaseTime
	for _, ph := range s.Phases {
		if ph.Name == "Parallel Time" {
			par = ph
		}
	}
	if par.Count != 5 || par.Total != 19400*time.Microsecond || par.Max != 5200*time.Microsecond {
		t.Errorf("Parallel Time %+v", par)
	}
	if s.RefProc.Pauses != 5 || s.RefProc.Total != 2500*time.Microsecond {
		t.Errorf("ref proc %+v", s.RefProc)
	}

	// grep -c CMS-initial-mark = 3 cycles; two end in a concurrent mode
	// failure.
	s = analyze(t, "testdata/SampleSun1_6_0CMS.txt")
	if s.Cycles.Count != 3 || s.Cycles.Unfinished != 2 {
		t.Errorf("CMS cycles %+v", s.Cycles)
	}
}

func TestSafepointSources(t *testing.T) {
	// JDK 8 -XX:+PrintSafepointStatistics: sync (the time to safepoint)
	// 150 ms, stopped sync + cleanup + vmop = 150 + 1 + 8 ms; the header's
	// brackets are not a record.
	s := analyzeText(t, "         vmop                    [threads: total initially_running wait_to_block]    [time: spin block sync cleanup vmop] page_trap_count\n"+
		"0.167: RevokeBias                       [       9          0              0    ]      [     0     0   150     1     8    ]  0\n")
	sp := s.Safepoints
	if sp.Count != 1 || sp.TTSPMax != 150*time.Millisecond || sp.Stopped != 159*time.Millisecond || sp.TTSPMaxOp != "RevokeBias" || s.Parse.Unknown != 0 || s.Parse.UnrecognisedRecords != 0 {
		t.Errorf("statistics: %+v, parse %+v", sp, s.Parse)
	}
	// JDK 17+: named, GC or not by the operation.
	s = analyzeText(t, `[1.0s][info][safepoint] Safepoint "G1CollectForAllocation", Time since last: 1000 ns, Reaching safepoint: 2000 ns, At safepoint: 3000 ns, Total: 5000 ns
[2.0s][info][safepoint] Safepoint "ThreadDump", Time since last: 1000 ns, Reaching safepoint: 300000000 ns, At safepoint: 1000000 ns, Total: 301000000 ns
`)
	sp = s.Safepoints
	if sp.Count != 2 || sp.GCStopped != 5000 || sp.NonGC != 301*time.Millisecond || sp.TTSPMax != 300*time.Millisecond || sp.TTSPMaxOp != "ThreadDump" || len(sp.Operations) != 2 {
		t.Errorf("named: %+v", sp)
	}
	// JDK 8 stopped lines: the one after a collection is GC's, the other
	// is not.
	s = analyzeText(t, "1.000: [GC (Allocation Failure) [PSYoungGen: 8192K->1024K(9216K)] 8192K->1100K(29696K), 0.0050000 secs] [Times: user=0.01 sys=0.00, real=0.01 secs]\n"+
		"1.006: Total time for which application threads were stopped: 0.0060000 seconds, Stopping threads took: 0.0001000 seconds\n"+
		"3.000: Total time for which application threads were stopped: 0.4000000 seconds, Stopping threads took: 0.3500000 seconds\n")
	sp = s.Safepoints
	if sp.GCStopped != 6*time.Millisecond || sp.NonGC != 400*time.Millisecond || sp.TTSPMax != 350*time.Millisecond || sp.TTSPMaxAt != 3 {
		t.Errorf("stopped lines: %+v", sp)
	}
}

func TestTenuringAndCPU(t *testing.T) {
	rec := func(t, user, sys, real string) string {
		return t + ": [GC (Allocation Failure) " + t + ": [ParNew\nDesired survivor size 1000 bytes, new threshold 1 (max 15)\n" +
			"- age   1:        800 bytes,        800 total\n- age   2:        400 bytes,       1200 total\n" +
			": 8192K->1024K(9216K), 0.2000000 secs] 8192K->1100K(29696K), 0.2000000 secs] [Times: user=" + user + " sys=" + sys + ", real=" + real + " secs]\n"
	}
	s := analyzeText(t, rec("1.000", "0.10", "0.90", "0.20")+rec("2.000", "0.10", "0.02", "0.60")+rec("3.000", "0.80", "0.05", "0.20"))
	if tn := s.Tenure; tn.Tables != 3 || tn.Overflows != 3 || tn.ThresholdMin != 1 || tn.ThresholdMax != 15 || len(tn.AgeBytes) != 2 || tn.AgeBytes[1] != 400 {
		t.Errorf("tenuring %+v", tn)
	}
	// Pause 1: sys 0.90 > user 0.10. Pause 2: real 0.60 > 1.2 × 0.12 + 0.02.
	// Pause 3: eight threads' worth of CPU in 0.2 s, normal.
	if c := s.CPU; c.Pauses != 3 || c.SysHeavy != 1 || c.Starved != 1 || c.Worst.Real != 600*time.Millisecond {
		t.Errorf("cpu %+v", c)
	}
}

// A heap floor that climbs steadily after warm-up is "rising"; one that
// levels off is "flat".
func TestLiveSetVerdict(t *testing.T) {
	full := func(up float64, afterK int) string {
		a := strconv.Itoa(afterK)
		return strconv.FormatFloat(up, 'f', 3, 64) + ": [Full GC (Ergonomics) [PSYoungGen: 1024K->0K(9216K)] [ParOldGen: 900000K->" + a +
			"K(2000000K)] 901024K->" + a + "K(2009216K), 0.5000000 secs]\n"
	}
	var rising, flat strings.Builder
	for i := 0; i < 20; i++ {
		rising.WriteString(full(float64(60+i*120), 100000+i*20000)) // +20 MB every 2 minutes
		flat.WriteString(full(float64(60+i*120), 300000))
	}
	if ls := analyzeText(t, rising.String()).LiveSet; ls.Verdict != "rising" || ls.Basis != "full GCs" || ls.R2 < 0.99 {
		t.Errorf("rising live set %+v", ls)
	}
	if ls := analyzeText(t, flat.String()).LiveSet; ls.Verdict != "flat" {
		t.Errorf("flat live set %+v", ls)
	}
	// Ten minutes of warm-up growth say nothing.
	var short strings.Builder
	for i := 0; i < 10; i++ {
		short.WriteString(full(float64(10+i*30), 100000+i*20000))
	}
	if ls := analyzeText(t, short.String()).LiveSet; ls.Verdict != "unknown" {
		t.Errorf("short log live set %+v", ls)
	}
}
