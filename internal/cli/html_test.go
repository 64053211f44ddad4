package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

// -o html is accepted wherever a report is: each command below gets past
// its format check with html (and fails on the bad value after it), and
// refuses a format it does not know.
func TestHTMLOutputAccepted(t *testing.T) {
	for _, args := range [][]string{
		{"udp", "--duration", "-1s"},
		{"softirq", "--duration", "-1s"},
		{"jvm"},
		{"profile", "--duration", "-1s"},
		{"recipe", "run", "no-such-recipe"},
		{"gclog", "/nonexistent/gc.log"},
		{"lab", "udp", "--duration", "0s"},
	} {
		_, stderr, code := execute(t, append(args, "-o", "html")...)
		if code != ExitUsage || strings.Contains(stderr, "unknown output format") {
			t.Errorf("%v -o html: exit %d, %s", args, code, stderr)
		}
		if _, stderr, _ := execute(t, append(args, "-o", "bogus")...); !strings.Contains(stderr, `unknown output format "bogus"`) || !strings.Contains(stderr, "html") {
			t.Errorf("%v -o bogus: %s", args, stderr)
		}
	}
}

// udp --compare -o html draws the two recorded runs side by side.
func TestCompareHTML(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(), "report", "compare", "testdata")
	stdout, stderr, code := execute(t, "udp", "--compare", filepath.Join(dir, "before.json")+","+filepath.Join(dir, "after.json"), "-o", "html")
	if code != ExitOK || !strings.HasPrefix(stdout, "<!DOCTYPE html>") || !strings.Contains(stdout, `id="compare-metrics"`) ||
		!strings.Contains(stdout, "<td>net.socket-lock-contention</td>") || !strings.Contains(stdout, "within error") && !strings.Contains(stdout, "better") {
		t.Errorf("exit %d, %s\n%.300s", code, stderr, stdout)
	}
}

// gclog -o html of a real log (JDK 8 G1), loaded in headless chromium:
// no console message, its charts and findings in the DOM.
func TestGCLogPageInChromium(t *testing.T) {
	testutil.Chromium(t)
	stdout, stderr, code := execute(t, "gclog", gclogFixture("SampleSun1_8_0G1PrintGCID.txt"), "-o", "html")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	path := filepath.Join(t.TempDir(), "gc.html")
	if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	got := testutil.LoadInChromium(t, path, "gclog", 1200, 2000)
	if len(got.Console) > 0 {
		t.Errorf("console:\n%s", strings.Join(got.Console, "\n"))
	}
	for _, want := range []string{`data-ready="1"`, `id="gc"`, "Heap before and after each collection", "GC pauses over time", "Pauses by kind"} {
		if !strings.Contains(got.DOM, want) {
			t.Errorf("%s missing from the DOM", want)
		}
	}
	for _, id := range regexp.MustCompile(`data-finding="([^"]+)"`).FindAllStringSubmatch(stdout, -1) {
		if !strings.Contains(got.DOM, id[0]) {
			t.Errorf("finding %s missing from the DOM", id[1])
		}
	}
}
