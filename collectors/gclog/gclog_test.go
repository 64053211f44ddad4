package gclog

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

func analyze(t *testing.T, files ...string) Summary {
	t.Helper()
	s, err := AnalyzeFiles(context.Background(), files, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func counts(s Summary) map[string]int {
	m := map[string]int{"concurrent": s.Concurrent.Count}
	for _, p := range s.Pauses {
		m[p.Kind.String()] = p.Count
	}
	return m
}

// sharedLog is a log in ../shared/gclogs (CI clones shared/ beside the
// repository); testdata holds copies of the important ones.
func sharedLog(t *testing.T, rel string) string {
	p := filepath.Join(testutil.RepoRoot(), "..", "shared", "gclogs", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared GC logs not present: %v", err)
	}
	return p
}

// The expected counts come from grep over each log; the pattern used is
// in the comment. A "concurrent" count is the phases that end with a
// duration.
var realLogs = []struct {
	file      string
	collector string
	want      map[string]int
}{
	// grep -c '\[ParNew' = 15, two of them end in "(concurrent mode
	// failure)" on the next line, so 13 young + 2 full (escalated); grep -c
	// CMS-initial-mark = 3; grep -c CMS-remark = 1; grep -c
	// 'CMS-concurrent-[a-z-]*: ' = 11.
	{"jdk8/SampleSun1_6_0CMS.txt", "CMS", map[string]int{"young": 13, "full": 2, "initial-mark": 3, "remark": 1, "concurrent": 11}},
	// grep -c '\[ParNew' = 71, 3 of them the scavenge inside "CMS Final
	// Remark" (grep -c 'CMS Final Remark) \[YG' = 3), which is one stop
	// with its remark: 68 young; CMS-initial-mark 3; 'CMS-concurrent-[a-z-]*: ' 15.
	{"jdk8/SampleSun1_8_0Series-Part1.txt", "CMS", map[string]int{"young": 68, "initial-mark": 3, "remark": 3, "concurrent": 15}},
	// '\[ParNew' 8; 'CMS-concurrent-[a-z-]*: ' 4; one initial mark, one remark.
	{"jdk8/SampleSun1_8_0CmsPrintGcId.txt", "CMS", map[string]int{"young": 8, "initial-mark": 1, "remark": 1, "concurrent": 4}},
	// One scavenge nested in the remark record (PrintHeapAtGC and
	// PrintFLSStatistics interleaved): one stop.
	{"jdk8/SampleSun1_8_0CMS_ScavengeBR_HeapAtGC_TenuringDist_PrintFLS.txt", "CMS", map[string]int{"remark": 1}},
	// 'GC pause' 5, 'GC remark' 1, 'GC cleanup' 1, 'concurrent-[a-z-]*-end' 2.
	{"jdk8/SampleSun1_8_0G1PrintGCID.txt", "G1", map[string]int{"young": 5, "remark": 1, "cleanup": 1, "concurrent": 2}},
	// 'GC pause' 2 (the second split by a concurrent-mark-start line).
	{"jdk8/SampleSun1_7_0G1_DateStamp_Detailed-mixedLine2.txt", "G1", map[string]int{"young": 2}},
	// 'GC pause' 1, its record split over 3 lines by concurrent phases;
	// 'concurrent-root-region-scan-end' 1.
	{"jdk8/SampleSun1_8_0G1HumongousMixed.txt", "G1", map[string]int{"young": 1, "concurrent": 1}},
	{"jdk8/SampleSun1_8_0G1PrintHeapAtGc.txt", "G1", map[string]int{"young": 1}},
	// 'GC pause' 2, 'GC remark' 1, 'GC cleanup' 1, '-end, ' 3.
	{"jdk8/SampleSun1_8_0G1_ConcurrentCycle.txt", "G1", map[string]int{"young": 2, "remark": 1, "cleanup": 1, "concurrent": 3}},
	// '\[GC (' 3, 'Full GC' 2.
	{"jdk8/SampleSun1_8_0ParallelPrintGCID.txt", "Parallel", map[string]int{"young": 3, "full": 2}},
	// One PSYoungGen record between heap dumps; the command line claims
	// -XX:+UseSerialGC but the record says PSYoungGen.
	{"jdk8/SampleSun1_8_0ParallelPrintHeapAtGC.txt", "Parallel", map[string]int{"young": 1}},
	// 'PSYoungGen' 5, each after a tenuring distribution line.
	{"jdk8/SampleSun1_8_0Parallel_Tenuring_PrintGCCause.txt", "Parallel", map[string]int{"young": 5}},
	// grep -c '\[gc  *\] GC([0-9]*) Pause Young' = 10, 'Pause Initial' 1
	// (a young pause), Remark 1, Cleanup 1; 'GC([0-9]*) Concurrent.*ms$' 8.
	{"unified/sample-ujl-g1-gc-all,safepoint,os+cpu.txt", "G1", map[string]int{"young": 11, "remark": 1, "cleanup": 1, "concurrent": 8}},
	// Pause Young 5 + Pause Initial Mark 1, Mixed 1, Full 1, Remark 1,
	// Cleanup 1, 'Concurrent Cycle .*ms' 1.
	{"unified/sample-ujl-g1-gc-defaults.txt", "G1", map[string]int{"young": 6, "mixed": 1, "full": 1, "remark": 1, "cleanup": 1, "concurrent": 1}},
	// 'Pause Young' 4 lines of which 3 with a duration ... grep -c
	// '\] GC([0-9]*) Pause .*ms$' = 8: 4 young, 4 full.
	{"unified/sample-ujl-parallel-gc-all,safepoint,os+cpu.txt", "Parallel", map[string]int{"young": 4, "full": 4}},
	// 4 pause lines, but GC(2)'s young pause holds GC(3)'s full GC inside
	// its time: one escalated full pause, 2 young.
	{"unified/sample-ujl-serial-gc-all,safepoint,os+cpu.txt", "Serial", map[string]int{"young": 2, "full": 1}},
	{"unified/sample-ujl-cms-gc-defaults.txt", "CMS", map[string]int{"young": 3, "full": 1, "initial-mark": 1, "remark": 1, "concurrent": 5}},
	// grep -c '\] GC([0-9]*) Pause.*ms$' = 4 (Init Mark, Final Mark, Init
	// Update Refs, Final Update Refs); 'Concurrent.*ms$' 13.
	{"unified/Sample-ujl-shenandoah-jdk17.txt", "Shenandoah", map[string]int{"initial-mark": 1, "remark": 1, "pause": 2, "concurrent": 13}},
	// 'Pause.*ms$' 3; 'Concurrent.*ms$' 6 (the cycle summary "Garbage
	// Collection (Allocation Rate) 3334M(84%)->2230M(56%)" is not a phase).
	// The log never says "Using ZGC"; its "Pause Mark Start" does.
	{"unified/sample-ujl-zgc-gc-other.txt", "ZGC", map[string]int{"initial-mark": 1, "remark": 1, "pause": 1, "concurrent": 6}},
}

func TestRealLogCounts(t *testing.T) {
	for _, c := range realLogs {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			s := analyze(t, sharedLog(t, c.file))
			got := counts(s)
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
				}
			}
			for k, v := range got {
				if _, ok := c.want[k]; !ok && v != 0 {
					t.Errorf("unexpected %d %s events", v, k)
				}
			}
			if s.Parse.Unknown != 0 {
				t.Errorf("%d unknown lines: %q", s.Parse.Unknown, s.Parse.UnknownSamples)
			}
			if s.Parse.UnrecognisedRecords != 0 {
				t.Errorf("%d unreadable records: %+v", s.Parse.UnrecognisedRecords, s.Parse.UnrecognisedSamples)
			}
			if s.Collector != c.collector {
				t.Errorf("collector %q, want %q", s.Collector, c.collector)
			}
		})
	}
}

// TestTestdataCopies runs the copies kept in testdata, so the parser is
// tested without ../shared too.
func TestTestdataCopies(t *testing.T) {
	for _, c := range realLogs {
		name := strings.ReplaceAll(filepath.Base(c.file), ",safepoint,os+cpu", "")
		p := filepath.Join("testdata", name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			got := counts(analyze(t, p))
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s: %d, want %d", k, got[k], v)
				}
			}
		})
	}
}

func pauseStats(s Summary, kind string) (count int, total, max int64) {
	for _, p := range s.Pauses {
		if p.Kind.String() == kind {
			return p.Count, int64(p.Total), int64(p.Max)
		}
	}
	return 0, 0, 0
}

// Numbers checked by hand against the log text.
func TestHandCheckedNumbers(t *testing.T) {
	// SampleSun1_6_0CMS: "0.769: [GC ... (concurrent mode failure):
	// 91890K->20323K(131072K), 0.0186232 secs] 209896K->20323K(249088K),
	// [CMS Perm ...], 0.0187293 secs]" and at 0.969 "... 0.0221375 secs]":
	// two full GCs of 18.7293 + 22.1375 = 40.8668 ms.
	s := analyze(t, "testdata/SampleSun1_6_0CMS.txt")
	if n, total, _ := pauseStats(s, "full"); n != 2 || total != 40866800 {
		t.Errorf("CMS full GCs %d, %dns; want 2, 40866800ns", n, total)
	}
	if s.Failures.ConcurrentModeFailures != 2 || len(s.FullGCCauses) != 1 || s.FullGCCauses[0].Cause != "concurrent mode failure" {
		t.Errorf("causes %+v, cmf %d", s.FullGCCauses, s.Failures.ConcurrentModeFailures)
	}
	if s.Escalated != 2 {
		t.Errorf("%d escalated, want 2 (ParNew records that became CMS full GCs)", s.Escalated)
	}
	// The largest live set after a full GC: 31297K.
	if s.Sizes.LiveAfterFull != 31297*1024 {
		t.Errorf("live after full %v, want %v", s.Sizes.LiveAfterFull, 31297*1024)
	}

	// Series-Part1: grep 'CMS-remark' | grep -o '[0-9.]* secs] \[Times':
	// the three remark records take 23.6219, 21.5244 and 41.6777 ms, each
	// with a ParNew scavenge inside (9.0755, 4.7071, 6.2009 ms) that is
	// part of the same stop.
	s = analyze(t, "testdata/SampleSun1_8_0Series-Part1.txt")
	if n, total, _ := pauseStats(s, "remark"); n != 3 || total != 23621900+21524400+41677700 {
		t.Errorf("remarks %d, %dns", n, total)
	}

	// G1PrintGCID #0: "[Eden: 7168.0K(7168.0K)->0.0B(4096.0K) Survivors:
	// 0.0B->1024.0K Heap: 7168.0K(32768.0K)->6664.5K(32768.0K)]"; between
	// #0 and #1 Eden refilled 4096K (#1 "Eden: 4096.0K(4096.0K)->0.0B").
	s = analyze(t, "testdata/SampleSun1_8_0G1PrintGCID.txt")
	if s.Allocation.Source != "eden" {
		t.Errorf("alloc source %q, want eden", s.Allocation.Source)
	}
	// Eden before each later pause: 4096K, 7168K, 5120K, 13312K.
	if want := float64((4096 + 7168 + 5120 + 13312) * 1024); s.Allocation.Allocated != want {
		t.Errorf("allocated %v, want %v", s.Allocation.Allocated, want)
	}

	// ParallelPrintGCID: young before n+1 minus after n: (3729513-222570)
	// + (98289-98289) + (6687404-0) + (105989-105989) K over 3.117..97.301 s.
	s = analyze(t, "testdata/SampleSun1_8_0ParallelPrintGCID.txt")
	wantAlloc := float64((3729513 - 222570 + 6687404) * 1024)
	if s.Allocation.Allocated != wantAlloc || s.Allocation.Source != "young" {
		t.Errorf("allocated %v from %s, want %v from young", s.Allocation.Allocated, s.Allocation.Source, wantAlloc)
	}
	if rate := wantAlloc / (97.301 - 3.117); abs(s.Allocation.Rate-rate) > 1 {
		t.Errorf("alloc rate %v, want %v", s.Allocation.Rate, rate)
	}
	if len(s.FullGCCauses) != 1 || s.FullGCCauses[0].Cause != "System.gc()" || s.FullGCCauses[0].Count != 2 {
		t.Errorf("full causes %+v", s.FullGCCauses)
	}

	// Unified Serial: GC(2) Pause Young 7.118ms contains GC(3) Pause Full
	// 6.987ms: one escalated full pause of 7.118 ms, its young part 0.131 ms.
	s = analyze(t, "testdata/sample-ujl-serial-gc-all.txt")
	if _, total, _ := pauseStats(s, "young"); total != (9814+10926)*1000 {
		t.Errorf("serial young total %d", total)
	}
	if n, total, max := pauseStats(s, "full"); n != 1 || total != 7118000 || max != 7118000 || s.Escalated != 1 {
		t.Errorf("serial full %d, %dns (max %d), escalated %d", n, total, max, s.Escalated)
	}
	if s.Safepoints.Count != 4 {
		t.Errorf("safepoints %d, want 4 (grep -c 'Total time for which')", s.Safepoints.Count)
	}

	// Unified G1 with gc+heap: "Heap region size: 1M", GC(0) "Eden regions:
	// 14->0(8)": Eden is counted in regions.
	s = analyze(t, "testdata/sample-ujl-g1-gc-all.txt")
	if s.Allocation.Source != "eden" || s.Sizes.Region != 1<<20 {
		t.Errorf("alloc source %q, region %v", s.Allocation.Source, s.Sizes.Region)
	}
	// GC(1) "Eden regions: 8->0(17)": 8 MiB refilled after GC(0).
	if s.Allocation.Allocated < 8<<20 {
		t.Errorf("allocated %v", s.Allocation.Allocated)
	}

	// g1-gc-defaults: 3 "To-space exhausted" lines.
	s = analyze(t, "testdata/sample-ujl-g1-gc-defaults.txt")
	if s.Failures.ToSpaceExhausted != 3 {
		t.Errorf("to-space exhausted %d, want 3", s.Failures.ToSpaceExhausted)
	}
	// ZGC: 7 "Allocation Stall" lines: 0.706 + 29.092 + 11.429 + 11.428 +
	// 11.050 + 10.880 + 10.660 = 85.245 ms.
	s = analyze(t, "testdata/sample-ujl-zgc-gc-other.txt")
	if s.Failures.AllocationStalls != 7 || s.Failures.AllocationStallTime != 85245000 {
		t.Errorf("stalls %d, %v", s.Failures.AllocationStalls, s.Failures.AllocationStallTime)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// A rotated set (one member gzipped, names that sort wrongly) read in
// order gives the same result as the whole log.
func TestRotatedSetOrderAndGzip(t *testing.T) {
	whole, err := os.ReadFile("testdata/SampleSun1_8_0Series-Part1.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(whole), "\n")
	third := len(lines) / 3
	// Cut between records: move each cut to the next line starting with a
	// date stamp.
	cut := func(i int) int {
		for !strings.HasPrefix(lines[i], "2016-") {
			i++
		}
		return i
	}
	a, b := cut(third), cut(2*third)
	dir := t.TempDir()
	// JDK 8 wrapped around: .2 is oldest, then .0, then .1.current.
	parts := []struct {
		name string
		text string
		age  time.Duration
		gz   bool
	}{
		{"gc.log.2", strings.Join(lines[:a], ""), 3 * time.Hour, false},
		{"gc.log.0.gz", strings.Join(lines[a:b], ""), 2 * time.Hour, true},
		{"gc.log.1.current", strings.Join(lines[b:], ""), time.Hour, false},
	}
	now := time.Now()
	for _, p := range parts {
		data := []byte(p.text)
		if p.gz {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(data)
			zw.Close()
			data = buf.Bytes()
		}
		path := filepath.Join(dir, p.name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		mt := now.Add(-p.age)
		os.Chtimes(path, mt, mt)
	}
	os.WriteFile(filepath.Join(dir, "gc.log.bak"), []byte("not a member"), 0o600)
	set, err := RotatedSet(filepath.Join(dir, "gc.log"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range set {
		names = append(names, filepath.Base(s))
	}
	if strings.Join(names, " ") != "gc.log.2 gc.log.0.gz gc.log.1.current" {
		t.Fatalf("order %v", names)
	}
	got, want := analyze(t, set...), analyze(t, "testdata/SampleSun1_8_0Series-Part1.txt")
	if got.All != want.All || got.Allocation.Allocated != want.Allocation.Allocated || got.Window.Seconds != want.Window.Seconds {
		t.Errorf("rotated set differs from the whole log:\n%+v\n%+v", got.All, want.All)
	}
	if _, err := RotatedSet(filepath.Join(dir, "missing.log")); err == nil {
		t.Error("a missing log must be an error")
	}
}

// Temurin 25's Shenandoah prints a bare "Cancelled" for a concurrent cycle
// an allocation failure interrupted (seen in this project's CI, under load);
// the pause that follows is counted, the line is known.
func TestShenandoahCancelledCycle(t *testing.T) {
	log := "[0.401s][info][gc          ] GC(18) Concurrent reset after collect 0.021ms\n" +
		"[0.407s][info][gc          ] GC(18) Cancelled\n" +
		"[0.409s][info][gc          ] GC(18) Pause Degenerated GC (Mark) 60M->20M(64M) 1.987ms\n"
	p := &Parser{}
	a := NewAnalyzer(0)
	a.Attach(p)
	if err := p.Parse(strings.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	s := a.Summary(p.Stats)
	if s.Parse.Unknown != 0 {
		t.Errorf("%d unknown lines: %q", s.Parse.Unknown, s.Parse.UnknownSamples)
	}
	if s.All.Count != 1 {
		t.Errorf("pauses %+v, want the degenerated one", s.All)
	}
}

func TestCommaDecimalsAndDateOnlyStamps(t *testing.T) {
	log := "2014-10-21T22:20:48,668+0200: [GC (Allocation Failure) [PSYoungGen: 24571K->4081K(28672K)] 24571K->22186K(94208K), 0,0199218 secs] [Times: user=0,02 sys=0,02, real=0,02 secs]\n" +
		"2014-10-21T22:20:50,668+0200: [GC (Allocation Failure) [PSYoungGen: 28653K->4000K(28672K)] 46758K->24000K(94208K), 0,0100000 secs]\n"
	p := &Parser{}
	a := NewAnalyzer(0)
	a.Attach(p)
	if err := p.Parse(strings.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	s := a.Summary(p.Stats)
	if s.All.Count != 2 || s.All.Total != 29921800 {
		t.Errorf("pauses %+v", s.All)
	}
	// Date stamps only: the window is the 2 s between the two starts plus
	// the last pause.
	if want := 2.0100000; abs(s.Window.Seconds-want) > 1e-9 {
		t.Errorf("window %v, want %v", s.Window.Seconds, want)
	}
	if s.Allocation.Allocated != (28653-4081)*1024 {
		t.Errorf("allocated %v", s.Allocation.Allocated)
	}
}

func TestPercentilesStayBoundedAndClose(t *testing.T) {
	var a pauseAgg
	// 100k pauses of 1..100000 µs: beyond the exact buffer.
	for i := 1; i <= 100000; i++ {
		a.add(int64(i)*1000, 0)
	}
	if a.exact != nil || len(a.hist) != histBuckets {
		t.Fatal("histogram not used beyond the exact buffer")
	}
	for _, q := range []float64{0.5, 0.95, 0.99} {
		want := q * 100000 * 1000
		if got := float64(a.percentile(q)); abs(got-want)/want > 0.011 {
			t.Errorf("p%v = %v, want %v ±1%%", q*100, got, want)
		}
	}
	var b pauseAgg
	for _, v := range []int64{5, 1, 4, 2, 3} {
		b.add(v*1e6, 3e6)
	}
	if b.percentile(0.5) != 3e6 || b.percentile(0.99) != 5e6 || b.overGoal != 2 {
		t.Errorf("exact p50 %d p99 %d over %d", b.percentile(0.5), b.percentile(0.99), b.overGoal)
	}
}

func TestSeriesIsBounded(t *testing.T) {
	a := NewAnalyzer(0)
	e := &Event{}
	for i := 0; i < 50000; i++ {
		e.reset()
		e.Uptime = float64(i)
		e.Kind = KindYoung
		e.Pause = time.Duration(i%977) * time.Microsecond
		e.Heap = Space{100, 50, 200}
		a.Add(e)
	}
	s := a.Summary(Stats{})
	if len(s.Series) > MaxPoints || len(s.Series) < MaxPoints/2 {
		t.Errorf("series has %d points", len(s.Series))
	}
	var maxPause int64
	for _, p := range s.Series {
		maxPause = max(maxPause, p.PauseNs)
	}
	if maxPause != 976*1000 {
		t.Errorf("downsampling lost the longest pause: %d", maxPause)
	}
}

func TestGarbageNeverFatal(t *testing.T) {
	p := &Parser{}
	var n int
	p.OnEvent = func(*Event) { n++ }
	in := "hello\n[GC [[[[ ]]]] ]]\x00\xff\n[0.1s][info][gc] GC(1) Pause Young (Normal) (x) 1M->0M(2M)\n" + strings.Repeat("[", 10000) + "\n"
	if err := p.Parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	if p.Stats.Unknown == 0 {
		t.Error("garbage not counted as unknown")
	}
}
