package compare

import (
	"bytes"
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/report"
)

func comparePage(t *testing.T) (string, Comparison) {
	t.Helper()
	c := Compare(load(t, "before.json"), load(t, "after.json"))
	r := report.New("udp compare", "test", time.Now())
	r.Data = c
	var b bytes.Buffer
	if err := report.Render(&b, r, report.HTML); err != nil {
		t.Fatal(err)
	}
	return b.String(), c
}

// The comparison's page draws every metric before and after, says which
// changed within error, and names every finding fixed, new and kept.
func TestComparePage(t *testing.T) {
	page, c := comparePage(t)
	for _, id := range []string{"compare-runs", "compare-metrics", "compare-netrx", "compare-findings"} {
		if !strings.Contains(page, `id="`+id+`"`) {
			t.Errorf("section %s missing", id)
		}
	}
	for _, m := range c.Metrics {
		if !strings.Contains(page, "<title id=") || !strings.Contains(page, ">"+template.HTMLEscapeString(m.Label)) {
			t.Errorf("metric %q has no chart", m.Label)
		}
	}
	for _, group := range [][]FindingRef{c.Gained, c.Lost, c.Kept} {
		for _, f := range group {
			if !strings.Contains(page, "<td>"+f.ID+"</td>") {
				t.Errorf("finding %s missing", f.ID)
			}
		}
	}
	if len(c.Gained)+len(c.Lost)+len(c.Kept) == 0 {
		t.Fatal("the fixtures have no findings: the test would prove nothing")
	}
}

func TestComparePageInChromium(t *testing.T) {
	testutil.Chromium(t)
	page, _ := comparePage(t)
	path := filepath.Join(t.TempDir(), "compare.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	got := testutil.LoadInChromium(t, path, "report-udp-compare", 1200, 2400)
	if len(got.Console) > 0 {
		t.Errorf("console:\n%s", strings.Join(got.Console, "\n"))
	}
	if !strings.Contains(got.DOM, `data-ready="1"`) || !strings.Contains(got.DOM, `id="compare-metrics"`) {
		t.Error("the page's script did not run, or its sections are missing from the DOM")
	}
}
