package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
)

// recordedNetReport decodes a `perfscope udp -o json` run recorded on a
// real host (the comparison's fixtures) into the report it was written
// from.
func recordedNetReport(t *testing.T, name string) *Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("compare", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Report
		Data NetData `json:"data"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r := rec.Report
	r.Data = rec.Data
	return &r
}

func renderPage(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, r, HTML); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// findingIDs are the findings' ids in the report's JSON.
func findingIDs(t *testing.T, r *Report) []string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, r, JSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Findings []struct {
			ID string `json:"id"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range doc.Findings {
		ids = append(ids, f.ID)
	}
	return ids
}

// external matches anything a browser would fetch: the page must open
// offline, so no src, href or url() leaves it.
var external = regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//|url\(\s*['"]?(https?:)?//|@import`)

func TestPageOfRecordedUDPRuns(t *testing.T) {
	for _, name := range []string{"before.json", "after.json"} {
		t.Run(name, func(t *testing.T) {
			r := recordedNetReport(t, name)
			page := renderPage(t, r)
			ids := findingIDs(t, r)
			if len(ids) == 0 {
				t.Fatal("the recording has no findings: the test would prove nothing")
			}
			for _, id := range ids {
				if !strings.Contains(page, `data-finding="`+id+`"`) {
					t.Errorf("finding %s of the JSON is not on the page", id)
				}
			}
			for _, id := range []string{"header", "findings", "softirq", "queues", "queue-irq-cpu", "locks", "drops", "sockets", "obtained", "text"} {
				if !strings.Contains(page, `id="`+id+`"`) {
					t.Errorf("section %q missing", id)
				}
			}
			if m := external.FindString(page); m != "" {
				t.Errorf("the page fetches from the network: %q", m)
			}
			// Six charts (softirq, queues, locks by class and by socket,
			// drops by port and by reason): drawn, or a sentence saying
			// nothing was measured; the queue × CPU map when NAPI polls
			// were seen.
			want := 6
			if len(r.Data.(NetData).QueueCPU.Cells) > 0 {
				want++
			}
			if n := strings.Count(page, "<svg class=\"chart\"") + strings.Count(page, "nothing was measured."); n != want {
				t.Errorf("%d charts, want %d", n, want)
			}
			// Every chart has an accessible name and description.
			if strings.Count(page, "<svg class=\"chart\"") != strings.Count(page, "<desc id=") {
				t.Error("a chart lacks its <desc>")
			}
			// The interface and host are in the header as recorded.
			if !strings.Contains(page, r.Meta.Host) {
				t.Errorf("host %q missing", r.Meta.Host)
			}
		})
	}
}

// Names from the system (comms, interfaces, frames, finding text) are
// escaped wherever the page shows them: in HTML text, attributes, SVG
// labels and the embedded flame graph.
func TestPageEscapesHostileNames(t *testing.T) {
	const evil = `</script><script>alert(1)</script><img src=x onerror=alert(2)>"'&`
	ev := evidence.NetEvidence{Interface: evidence.NetInterface{Name: evil}}
	ev.Softirq.CPUs = []evidence.SoftirqCPU{{CPU: 0, Share: 0.5, Vectors: map[string]evidence.SoftirqVector{"NET_RX": {Share: 0.4}}}}
	ev.Locks.ByClass = map[string]uint64{evil: 1000}
	ev.Locks.Sockets = []evidence.SocketContention{{Socket: evidence.SocketRef{Local: evil, Comm: evil, PID: 7}, TotalNs: 10}}
	ev.Drops.ByPort = []evidence.PortDrops{{Port: 9, Reason: evil, Count: 3}}
	ev.Sockets.Threads = []evidence.ThreadCPU{{TID: 1, Comm: evil}}
	r := New("udp", "v", time.Unix(0, 0))
	r.Meta.Host = evil
	r.Data = NetData{NetEvidence: ev}
	r.Findings = []diagnose.Finding{{ID: "net.test", Severity: diagnose.Warn, Title: evil, Evidence: []string{evil},
		Recommendation: diagnose.Recommendation{Why: evil, Apply: []string{"sysctl -w x=" + evil}, Reference: evil}}}
	fp := flame.New(flame.Samples)
	fp.Add([]string{"main", evil}, 3)
	r.FlameSets = []FlameSet{{Title: evil, Profile: fp}}
	page := renderPage(t, r)
	for _, bad := range []string{"<script>alert(1)", "<img src=x", `"'&<`} {
		if strings.Contains(page, bad) {
			t.Errorf("hostile markup %q reached the page unescaped", bad)
		}
	}
	if !strings.Contains(page, "&lt;/script&gt;&lt;script&gt;alert(1)") {
		t.Error("the hostile name is not shown escaped")
	}
	// The page's own script, and the flame graph's inside its srcdoc,
	// are the only scripts; the srcdoc attribute ends where it should.
	srcdoc := regexp.MustCompile(`srcdoc='[^']*'`)
	if n := len(srcdoc.FindAllString(page, -1)); n != 1 {
		t.Fatalf("%d srcdoc attributes, want 1", n)
	}
	top := srcdoc.ReplaceAllString(page, "")
	if n := strings.Count(top, "<script>"); n != 1 {
		t.Errorf("%d <script> elements at the page's top level, want 1", n)
	}
	// Escaped by the flame graph (&lt;), then as attribute text (&amp;).
	if !strings.Contains(srcdoc.FindString(page), "&amp;lt;/script&amp;gt;&amp;lt;script&amp;gt;alert(1)") {
		t.Errorf("the hostile frame is not escaped inside the flame graph:\n%s", srcdoc.FindString(page))
	}
}

// A report with nothing measured still draws: no charts, sentences.
func TestPageOfEmptyReports(t *testing.T) {
	for _, data := range []any{NetData{}, evidence.SoftirqEvidence{}, evidence.LockSection{}, evidence.Profile{}, RecipeData{}, GCPage{}} {
		r := New("test", "v", time.Now())
		r.Data = data
		page := renderPage(t, r)
		if !strings.Contains(page, "No findings.") || !strings.HasSuffix(strings.TrimSpace(page), "</html>") {
			t.Errorf("%T: page incomplete", data)
		}
	}
}

// The flame command's HTML stays the flame graph's own page; every
// other report's is the report page with its graph embedded.
func TestHTMLIsThePageButForTheFlameCommand(t *testing.T) {
	fp := flame.New(flame.Samples)
	fp.Add([]string{"main", "work"}, 5)
	r := New("flame", "v", time.Now())
	r.Data, r.Flame = FlameSummary{Unit: flame.Samples, Total: 5}, fp
	if page := renderPage(t, r); strings.Contains(page, `id="findings"`) || !strings.Contains(page, `id="flamegraph"`) {
		t.Error("flame -o html is not the flame graph's page")
	}
	r = New("profile", "v", time.Now())
	r.Data, r.Flame = evidence.Profile{Samples: 5}, fp
	page := renderPage(t, r)
	if !strings.Contains(page, `id="findings"`) || !strings.Contains(page, `<iframe id="flame1"`) || !strings.Contains(page, "srcdoc='<!DOCTYPE html>") {
		t.Error("profile -o html is not the report page with the flame graph embedded")
	}
}

// Estimated numbers are drawn with error bars and written with their
// bound; exact ones without.
func TestPageErrorBars(t *testing.T) {
	rel := 0.12
	ev := evidence.LockSection{ByClass: map[string]uint64{"socket-receive-queue": 5000},
		Sockets:  []evidence.SocketContention{{Socket: evidence.SocketRef{Local: "127.0.0.1:9000"}, TotalNs: 4000, RelError: &rel}},
		Estimate: &evidence.Estimate{Windows: 4, Coverage: 0.25, RelError: &rel}}
	r := New("recipe", "v", time.Now())
	r.Data = ev
	page := renderPage(t, r)
	if strings.Count(page, `class="err"`) != 2 || !strings.Contains(page, "±12%") {
		t.Errorf("want 2 error bars and ±12%%:\n%s", page)
	}
	ev.Estimate, ev.Sockets[0].RelError = nil, nil
	r.Data = ev
	if page := renderPage(t, r); strings.Contains(page, `class="err"`) || strings.Contains(page, "±") {
		t.Error("an exact number is drawn with an error bar")
	}
}
