package gclog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

// peer is one analyser's pause count and total for a log; ok is false
// when it failed on the log.
type peer struct {
	ok    bool
	count float64
	total float64
}

// expectation is a hand-checked entry of testdata/corpus-expectations.tsv.
type expectation struct {
	pauses     int // -1: not stated (the entry is about unreadable records)
	total      float64
	unreadable int64
	reason     string
	countRE    *regexp.Regexp
	minusRE    *regexp.Regexp
}

func readExpectations(t *testing.T) (map[string]expectation, map[string]string) {
	f, err := os.Open("testdata/corpus-expectations.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exp := map[string]expectation{}
	reasons := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if r, ok := strings.CutPrefix(line, "# reason "); ok {
			key, why, _ := strings.Cut(r, ": ")
			reasons[key] = why
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "log\t") {
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) != 8 {
			t.Fatalf("corpus-expectations.tsv:%d: %d columns, want 8", n, len(c))
		}
		e := expectation{pauses: -1, reason: c[4]}
		if c[1] != "-" {
			if e.pauses, err = strconv.Atoi(c[1]); err != nil {
				t.Fatalf("corpus-expectations.tsv:%d: pauses %q", n, c[1])
			}
			if e.total, err = strconv.ParseFloat(c[2], 64); err != nil {
				t.Fatalf("corpus-expectations.tsv:%d: total %q", n, c[2])
			}
			if c[5] == "" {
				t.Fatalf("corpus-expectations.tsv:%d: a pause count needs the pattern it was counted with", n)
			}
			e.countRE = regexp.MustCompile(c[5])
			if c[6] != "" {
				e.minusRE = regexp.MustCompile(c[6])
			}
		}
		if e.unreadable, err = strconv.ParseInt(c[3], 10, 64); err != nil {
			t.Fatalf("corpus-expectations.tsv:%d: unreadable %q", n, c[3])
		}
		if _, dup := exp[c[0]]; dup {
			t.Fatalf("corpus-expectations.tsv:%d: %s listed twice", n, c[0])
		}
		exp[c[0]] = e
	}
	for log, e := range exp {
		if reasons[e.reason] == "" {
			t.Errorf("corpus-expectations.tsv: %s gives reason %q, which no '# reason' line explains", log, e.reason)
		}
	}
	return exp, reasons
}

// occurrences counts re's matches in a file, as `grep -oE re | wc -l`.
func occurrences(t *testing.T, path string, re *regexp.Regexp) int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return len(re.FindAllIndex(data, -1))
}

func readPeers(t *testing.T, dir string) map[string][2]peer {
	out := map[string][2]peer{}
	readPeersTable(t, dir, func(c []string, col map[string]int) {
		get := func(count, total string) peer {
			n, err1 := strconv.ParseFloat(c[col[count]], 64)
			s, err2 := strconv.ParseFloat(c[col[total]], 64)
			return peer{ok: err1 == nil && err2 == nil, count: n, total: s}
		}
		out[c[col["log"]]] = [2]peer{get("gcv_pauses", "gcv_total_s"), get("gctk_pauses", "gctk_total_s")}
	})
	return out
}

// readPeersTable calls row for each line of PEERS.tsv with its columns
// by name.
func readPeersTable(t *testing.T, dir string, row func(c []string, col map[string]int)) {
	f, err := os.Open(filepath.Join(dir, "PEERS.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var col map[string]int
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if col == nil {
			col = map[string]int{}
			for i, name := range c {
				col[name] = i
			}
			continue
		}
		row(c, col)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// within2 is the agreement: counts and totals within 2% (totals
// within 2 µs too: the peers print six decimals).
func within2(a, b float64) bool {
	return math.Abs(a-b) <= 0.02*math.Max(math.Abs(a), math.Abs(b)) || math.Abs(a-b) <= 2e-6
}

// TestCorpus runs every log of the corpus: no crash; every record counted
// as unreadable has a documented reason; where perfscope disagrees with
// both peers by more than 2% in pause count or total, the expectations
// file holds the hand-checked truth (a pattern whose matches count the
// pauses, checked here) and why the peers are wrong.
func TestCorpus(t *testing.T) {
	dir := testutil.GCLogCorpus(t)
	peers := readPeers(t, dir)
	exp, _ := readExpectations(t)
	var logs []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && !strings.HasSuffix(path, ".md") && !strings.HasSuffix(path, "PEERS.tsv") {
			rel, _ := filepath.Rel(dir, path)
			logs = append(logs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) < 500 {
		t.Fatalf("%d logs in %s, want the whole corpus (over 500)", len(logs), dir)
	}
	used := map[string]bool{}
	for _, log := range logs {
		path := filepath.Join(dir, log)
		s, err := analyzeCorpusLog(path)
		if err != nil {
			if log == "gctoolkit-testdata/gctoolkit-gclogs/preunified/ps/details/tenuring/p_app_02_gc.log.zip" {
				continue // a zip archive, not a log: bad input is fine, a crash is not
			}
			t.Errorf("%s: %v", log, err)
			continue
		}
		e, listed := exp[log]
		used[log] = listed
		if got := s.Parse.UnrecognisedRecords; got > 0 || listed && e.unreadable > 0 {
			if !listed || e.unreadable != got {
				t.Errorf("%s: %d unreadable records %+v; corpus-expectations.tsv must list the count with its reason", log, got, s.Parse.UnrecognisedSamples)
			}
		}
		count, total := float64(s.All.Count), s.All.Total.Seconds()
		if listed && e.pauses >= 0 {
			if s.All.Count != e.pauses || math.Abs(total-e.total) > math.Max(1e-3, 0.005*e.total) {
				t.Errorf("%s: %d pauses, %.6f s; the hand-checked truth is %d, %.6f s", log, s.All.Count, total, e.pauses, e.total)
			}
			n := occurrences(t, path, e.countRE)
			if e.minusRE != nil {
				n -= occurrences(t, path, e.minusRE)
			}
			if n != e.pauses {
				t.Errorf("%s: the pattern counts %d pauses, the entry says %d", log, n, e.pauses)
			}
		}
		p, inPeers := peers[log]
		if !inPeers || !p[0].ok && !p[1].ok {
			continue
		}
		agrees := false
		for _, pr := range p {
			agrees = agrees || pr.ok && within2(count, pr.count) && within2(total, pr.total)
		}
		if !agrees && !(listed && e.pauses >= 0) {
			t.Errorf("%s: %d pauses, %.6f s disagrees with GCViewer (%v %v) and GCToolkit (%v %v); add the hand-checked truth to corpus-expectations.tsv",
				log, s.All.Count, total, p[0].count, p[0].total, p[1].count, p[1].total)
		}
	}
	for log := range exp {
		if _, ok := used[log]; !ok {
			t.Errorf("corpus-expectations.tsv lists %s, which is not in the corpus", log)
		}
	}
}

// analyzeCorpusLog reads one log as `perfscope gclog --no-rotated` does,
// turning a panic into an error.
func analyzeCorpusLog(path string) (s Summary, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return AnalyzeFiles(context.Background(), []string{path}, 200*time.Millisecond)
}

// hiddenPauseLog is a real log whose pauses a line-by-line parser loses or
// counts twice (records split by other output, pauses held inside others),
// with the numbers both peers agree on (or the record's own total where
// they are wrong).
type hiddenPauseLog struct {
	log                string
	pauses, fulls      int
	total, max, maxFul float64 // seconds
	escalated          int
}

func checkHiddenPauseLog(t *testing.T, path string, c hiddenPauseLog) {
	t.Helper()
	s, err := analyzeCorpusLog(path)
	if err != nil {
		t.Fatal(err)
	}
	full := PauseStats{}
	for _, p := range s.Pauses {
		if p.Kind == KindFull {
			full = p
		}
	}
	if s.All.Count != c.pauses || full.Count != c.fulls || math.Abs(s.All.Total.Seconds()-c.total) > 1e-6 ||
		math.Abs(s.All.Max.Seconds()-c.max) > 1e-6 || math.Abs(full.Max.Seconds()-c.maxFul) > 1e-6 || s.Escalated != c.escalated {
		t.Errorf("%s: %d pauses (%d full, %d escalated), %v total, max %v (full %v); want %d (%d, %d), %vs, %vs (%vs)",
			c.log, s.All.Count, full.Count, s.Escalated, s.All.Total, s.All.Max, full.Max, c.pauses, c.fulls, c.escalated, c.total, c.max, c.maxFul)
	}
	if s.Parse.UnrecognisedRecords != 0 {
		t.Errorf("%s: %d unreadable records", c.log, s.Parse.UnrecognisedRecords)
	}
}

// TestHiddenPauseLogs checks the logs where a parser reading one line at a
// time lost pauses without saying so, from their copies in testdata
// (testdata/README.md names each one's JVM, collector and origin), so a
// plain clone runs it.
func TestHiddenPauseLogs(t *testing.T) {
	for _, c := range []hiddenPauseLog{
		// JDK 5-6 Parallel, PrintHeapAtGC "{Heap before gc invocations=N:": 487 pauses,
		// 81.59 s, 14 full GCs (grep -c 'Full GC' = 14) up to 6.95 s.
		{"gc_ccpcc01_late.log.gz", 487, 14, 81.590928, 6.948598, 6.948598, 0},
		// JDK 6-7 CMS, a class histogram inside the full GC a ParNew
		// promotion failure escalated to: one 102.34 s stop.
		{"garbagecat-dataset121.txt", 1, 1, 102.3357902, 102.3357902, 102.3357902, 1},
		// PrintTLAB lines inside ParNew records: 10 stops, the longest the
		// 16.99 s young pause (the CMS remark holds its scavenge).
		{"tlab_broken_gc_locker.log", 10, 0, 64.809824, 16.9862, 0, 0},
		// JDK 8 Shenandoah: "[Pause Full 1589M->1002M(1690M), 4077.274 ms]".
		{"garbagecat-dataset207.txt", 1, 1, 4.077274, 4.077274, 4.077274, 0},
		// JDK 1.4 PrintAdaptiveSizePolicy glued to the records: 6 young and
		// 3 full GCs, GCViewer's 0.197875 s.
		{"SampleSun1_4_0AdaptiveSizePolicy.txt", 9, 3, 0.1978746, 0.0664674, 0.0151668, 0},
		// Unified CMS (JDK 9-13), young pauses holding full GCs in a small log: GC(4) Pause Young
		// 9.590ms holds GC(5) Pause Full 9.509ms, and GC(9) 15.238ms holds
		// GC(10) 15.029ms; grep -c '\] GC([0-9]*) Pause .*ms$' = 12 lines,
		// 10 stops of 62.454 ms (GCToolkit's numbers; GCViewer counts the
		// held full GCs again: 12, 86.992 ms).
		{"sample-ujl-cms-gc-all.txt", 10, 2, 0.062454, 0.015238, 0.015238, 2},
	} {
		t.Run(c.log, func(t *testing.T) { checkHiddenPauseLog(t, filepath.Join("testdata", c.log), c) })
	}
}

// TestHiddenPauseLogsCorpus checks GCToolkit's unified CMS log, which at 2 MB
// stays in the corpus: GC(308) Pause Young 7.425ms holds GC(309) Pause
// Full 4.853ms; the longest stop is 9.070 ms (13 escalations).
func TestHiddenPauseLogsCorpus(t *testing.T) {
	dir := testutil.GCLogCorpus(t)
	c := hiddenPauseLog{"gctoolkit-testdata/gctoolkit-gclogs/unified/cms/gc.log", 3154, 13, 3.864769, 0.00907, 0.00907, 13}
	checkHiddenPauseLog(t, filepath.Join(dir, c.log), c)
}

// TestTestdataLogsAreCorpusCopies checks that every log in testdata is a
// real log nobody here wrote: testdata/README.md names its origin, the
// corpus holds that origin (PEERS.tsv), and the bytes are the corpus
// copy's (the .gz copies once decompressed).
func TestTestdataLogsAreCorpusCopies(t *testing.T) {
	dir := testutil.GCLogCorpus(t)
	byOrigin := map[string]string{}
	readPeersTable(t, dir, func(c []string, col map[string]int) { byOrigin[c[col["origin"]]] = c[col["log"]] })
	readme, err := os.ReadFile("testdata/README.md")
	if err != nil {
		t.Fatal(err)
	}
	origins := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		origins[m[1]] = m[2]
	}
	logs, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range logs {
		name := filepath.Base(p)
		if !strings.HasSuffix(name, ".txt") && !strings.HasSuffix(name, ".log") && !strings.HasSuffix(name, ".gz") {
			continue
		}
		n++
		origin, ok := origins[name]
		if !ok {
			t.Errorf("testdata/%s: no origin in testdata/README.md", name)
			continue
		}
		rel, ok := byOrigin[origin]
		if !ok {
			t.Errorf("testdata/%s: origin %s is not in the corpus's PEERS.tsv", name, origin)
			continue
		}
		want, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		got := readMaybeGzip(t, p)
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/%s differs from its origin %s (%d bytes, want %d)", name, rel, len(got), len(want))
		}
	}
	if n != len(origins) {
		t.Errorf("testdata/README.md names %d logs, testdata holds %d", len(origins), n)
	}
}

func readMaybeGzip(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".gz") {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}
