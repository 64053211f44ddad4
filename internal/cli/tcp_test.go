package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

// The recorded runs report/compare tests with.
var (
	udpRun = filepath.Join("..", "..", "report", "compare", "testdata", "before.json")
	tcpRun = filepath.Join("..", "..", "report", "compare", "testdata", "tcp-before.json")
)

// perfscope tcp's bad input exits 2 with one sentence, as udp's does.
func TestTCPBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"tcp"}, "--iface is required (interfaces here: "},
		{[]string{"tcp", "--iface", "nosuch0"}, "unknown interface nosuch0 (interfaces here: "},
		{[]string{"tcp", "--iface", "lo", "--pid", "999999999"}, "--pid 999999999: no such process"},
		{[]string{"tcp", "--iface", "lo", "--port", "70000"}, "--port 70000: want a port 0–65535"},
		{[]string{"tcp", "--iface", "lo", "--duration", "0s"}, "--duration 0s: want a duration"},
		{[]string{"tcp", "--iface", "lo", "-o", "yaml"}, "unknown output format"},
		{[]string{"tcp", "--iface", "lo", "--top-connections", "0"}, "--top-connections 0: want an integer 1–10000"},
		{[]string{"tcp", "--iface", "lo", "--sample-interval", "1ms"}, "--sample-interval 1ms: want a duration 10ms–10s"},
		{[]string{"tcp", "--iface", "lo", "--fail-on", "loud"}, "--fail-on: "},
		{[]string{"tcp", "--iface", "lo", "--exact", "--overhead-budget", "5"}, "--exact counts every event: it takes no --overhead-budget"},
		{[]string{"tcp", "--compare", "a.json"}, "--compare takes two saved runs"},
		{[]string{"tcp", "--compare", udpRun + "," + udpRun}, "is a perfscope udp run: compare it with perfscope udp --compare"},
		{[]string{"udp", "--compare", tcpRun + "," + tcpRun}, "is a perfscope tcp run: compare it with perfscope tcp --compare"},
		{[]string{"tcp", "--revert", "/nonexistent/perfscope-revert.json"}, "--revert"},
	}
	for _, c := range cases {
		_, stderr, code := execute(t, c.args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%q)", c.args, code, ExitUsage, stderr)
		}
		if !strings.Contains(stderr, c.want) {
			t.Errorf("%v: stderr %q does not say %q", c.args, stderr, c.want)
		}
	}
}

// tcp's own flags are tcp's: udp does not take them.
func TestTCPFlagsAreNotUDPs(t *testing.T) {
	for _, flag := range []string{"--top-connections", "--sample-interval"} {
		_, stderr, code := execute(t, "udp", "--iface", "lo", flag, "5")
		if code != ExitUsage || !strings.Contains(stderr, "unknown flag: "+flag) {
			t.Errorf("udp %s: exit %d, stderr %q", flag, code, stderr)
		}
	}
}

// tcp --compare prints the recorded runs' comparison in every format.
func TestTCPCompare(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(), "report", "compare", "testdata")
	runs := filepath.Join(dir, "tcp-before.json") + "," + filepath.Join(dir, "tcp-after.json")
	stdout, stderr, code := execute(t, "tcp", "--compare", runs, "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Command string
		Data    struct {
			Metrics []struct{ Key string }
			TCP     struct {
				Listeners []struct{ Local string }
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.Command != "tcp compare" || len(r.Data.TCP.Listeners) != 1 || r.Data.TCP.Listeners[0].Local != "127.0.0.1:18081" {
		t.Fatalf("json %v: %+v", err, r)
	}
	stdout, _, code = execute(t, "tcp", "--compare", runs)
	if code != ExitOK || !strings.Contains(stdout, "Listeners before and after") || !strings.Contains(stdout, "accept queue overflows (ListenOverflows)/s") {
		t.Errorf("text (exit %d):\n%s", code, stdout)
	}
	stdout, _, code = execute(t, "tcp", "--compare", runs, "-o", "html")
	if code != ExitOK || !strings.Contains(stdout, `id="compare-tcp"`) {
		t.Errorf("html (exit %d) lacks the listeners section", code)
	}
}

// A run file that is not there is named in one sentence, exit 2.
func TestCompareMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "before.json")
	_, stderr, code := execute(t, "tcp", "--compare", missing+","+missing)
	if code != ExitUsage || !strings.Contains(stderr, "--compare "+missing+": no such file: give the -o json output of two perfscope tcp runs") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
