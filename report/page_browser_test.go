package report

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/internal/testutil"
)

// browserPages are one report of each kind the HTML page draws: a
// recorded udp run with its flame graphs, softirq with a timeline, a
// profile, lock wait, a recipe joining sections on a timeline with a
// JVM, and a real GC log.
func browserPages(t *testing.T) map[string]*Report {
	t.Helper()
	pages := map[string]*Report{}

	udp := recordedNetReport(t, "before.json")
	netrx, other := flame.New(flame.Samples), flame.New(flame.Samples)
	netrx.Add([]string{"ret_from_fork", "__do_softirq", "net_rx_action", "napi_poll", "udp_rcv"}, 40)
	other.Add([]string{"main", "recvmsg", "udp_recvmsg"}, 25)
	udp.FlameSets = []FlameSet{{Title: "CPUs running NET_RX (0)", Profile: netrx}, {Title: "other CPUs", Profile: other}}
	pages["udp"] = udp

	si := udp.Data.(NetData).Softirq
	start := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 10; i++ {
		si.Intervals = append(si.Intervals, evidence.SoftirqInterval{End: start.Add(time.Duration(i) * time.Second),
			NetRXPerS: float64(1000 * i), NetRXShare: 0.05 * float64(i), BusiestCPU: i % 2, BusiestShare: 0.09 * float64(i)})
	}
	sr := New("softirq", "test", start)
	sr.Data = si
	pages["softirq"] = sr

	prof := New("profile", "test", start)
	prof.Data = evidence.Profile{Target: "all CPUs", FrequencyHz: 99, Samples: 65,
		TopFunctions: []evidence.FunctionSamples{{Function: "udp_rcv", Self: 40, Total: 40}, {Function: "udp_recvmsg", Self: 25, Total: 25}}}
	prof.Flame = netrx
	pages["profile"] = prof

	locks := New("recipe", "test", start)
	locks.Data = udp.Data.(NetData).Locks
	pages["locks"] = locks

	share, gcs := 0.3, int64(2)
	rec := New("recipe", "test", start)
	rec.Recipe = &RecipeRef{Name: "jvm-udp", Source: "builtin", Parameters: map[string]string{"port": "9000"}}
	tl := &evidence.Timeline{Port: 9000, PID: 42}
	for i := 0; i < 8; i++ {
		tl.Rows = append(tl.Rows, evidence.TimelineRow{End: start.Add(time.Duration(i) * time.Second), NetRXShare: &share, JVMGCs: &gcs})
	}
	nd := udp.Data.(NetData)
	rec.Data = RecipeData{Net: &nd, Timeline: tl, JVM: &evidence.JVM{PID: 42, Collector: "G1", ProfileEvent: "alloc",
		Sites: []evidence.AllocSite{{Frame: "com.example.Handler.handle", Type: "byte[]", Bytes: 1 << 20, Share: 0.6}}}}
	rec.Findings = udp.Findings
	rec.FlameSets = udp.FlameSets
	pages["recipe"] = rec

	log := filepath.Join("..", "collectors", "gclog", "testdata", "SampleSun1_8_0G1PrintGCID.txt")
	sum, err := gclog.AnalyzeFiles(context.Background(), []string{log}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	gr := New("gclog", "test", start)
	gr.Data = GCPage{Files: sum.Files, Parse: sum.Parse, Series: sum.Series, GC: evidence.GC{Collector: "G1"}}
	gr.Findings = []diagnose.Finding{{ID: "gc.test-finding", Severity: diagnose.Info, Title: "a finding"}}
	pages["gclog"] = gr
	return pages
}

var flameFrames = regexp.MustCompile(`<iframe[^>]*data-frames="(\d+)"`)

// Each page type loads in a real browser (Debian's chromium, headless):
// no console message or uncaught exception, the page's script ran, every
// section and finding is in the DOM, the flame graphs drew their frames,
// and a screenshot is left in the artifact directory.
func TestPagesInChromium(t *testing.T) {
	testutil.Chromium(t)
	dir := t.TempDir()
	for name, r := range browserPages(t) {
		t.Run(name, func(t *testing.T) {
			page := renderPage(t, r)
			path := filepath.Join(dir, name+".html")
			if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
				t.Fatal(err)
			}
			got := testutil.LoadInChromium(t, path, "report-"+name, 1200, 2400)
			if len(got.Console) > 0 {
				t.Errorf("console:\n%s", strings.Join(got.Console, "\n"))
			}
			if !strings.Contains(got.DOM, `data-ready="1"`) {
				t.Error("the page's script did not run to its end")
			}
			for _, id := range append([]string{"header", "findings"}, sectionIDs(r)...) {
				if !strings.Contains(got.DOM, `id="`+id+`"`) {
					t.Errorf("section %s not in the DOM", id)
				}
			}
			for _, f := range r.Findings {
				if !strings.Contains(got.DOM, `data-finding="`+f.ID+`"`) {
					t.Errorf("finding %s not in the DOM", f.ID)
				}
			}
			if strings.Contains(page, "<iframe") {
				m := flameFrames.FindAllStringSubmatch(got.DOM, -1)
				if len(m) != strings.Count(page, "<iframe") {
					t.Fatalf("%d of %d flame graphs loaded", len(m), strings.Count(page, "<iframe"))
				}
				for _, f := range m {
					if f[1] == "0" {
						t.Error("a flame graph drew no frames")
					}
				}
			}
		})
	}
}

func sectionIDs(r *Report) []string {
	var ids []string
	for _, s := range pageSections(r) {
		ids = append(ids, s.ID)
	}
	return ids
}
