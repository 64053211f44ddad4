package cli

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

// outputRecipe measures lo's counters for a moment (no BPF) and writes
// its JSON report into the directory ${out}.
const outputRecipe = `version: 1
name: output-dir
description: lo's counters, the report written into a directory
parameters:
  out:
    type: dir
    description: where the report goes
collectors:
  - netcounters:
      interface: lo
window:
  duration: 2s
outputs:
  - {format: json, dir: "${out}", name: report.json}
`

func writeOutputRecipe(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "output-dir.yaml")
	if err := os.WriteFile(p, []byte(outputRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// oneSentence fails t unless the run exited 2 with one line on stderr.
func oneSentence(t *testing.T, args []string, stderr string, code int) {
	t.Helper()
	if code != ExitUsage || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("%v: exit %d, stderr %q; want exit 2 and one sentence", args, code, stderr)
	}
}

// Output paths through what another user planted (a link to a root
// directory, a link to a /root-like one, a directory others can write
// without the sticky bit) are refused, exit 2, and nothing is written
// outside: `udp --flame`, `profile --out`, `jvm --flame` and `--folded`,
// `flame --out`, recipes' output directories and --revert-dir. (Each is refused before a measurement: no
// BPF is loaded; --duration bounds what a build without the check runs.)
func TestOutputPathsRefuseNeighboursPlants(t *testing.T) {
	h := testutil.NewNeighbourhood(t)
	h.Run(t, `ln -s "$2" "$1/cron" && ln -s "$3" "$1/sub" && ln -s "$2/file" "$1/out.svg" && ln -s "$2/file" "$4/out.svg"`, h.Home, h.Target, h.RootLike, h.Sticky)
	in := filepath.Join(t.TempDir(), "in.folded")
	os.WriteFile(in, []byte("a;b 3\n"), 0o644)
	recipe := writeOutputRecipe(t)
	for _, args := range [][]string{
		{"udp", "--iface", "lo", "--duration", "1s", "--flame", filepath.Join(h.Home, "cron")},
		{"udp", "--iface", "lo", "--duration", "1s", "--flame", filepath.Join(h.Home, "sub", "sub2")},
		{"udp", "--iface", "lo", "--duration", "1s", "--flame", filepath.Join(h.Open, "flames")},
		{"profile", "--duration", "1s", "-o", "svg", "--out", filepath.Join(h.Home, "cron", "x.svg")},
		{"jvm", "--pid", "1", "--flame", filepath.Join(h.Home, "cron", "x.svg")},
		{"jvm", "--pid", "1", "--folded", filepath.Join(h.Sticky, "out.svg")},
		{"flame", in, "--out", filepath.Join(h.Home, "cron", "x.svg")},
		{"flame", in, "--out", filepath.Join(h.Home, "sub", "x.svg")},
		{"flame", in, "--out", filepath.Join(h.Home, "out.svg")},
		{"flame", in, "--out", filepath.Join(h.Sticky, "out.svg")},
		{"flame", in, "--out", filepath.Join(h.Open, "x.svg")},
		{"recipe", "run", recipe, "--set", "out=" + filepath.Join(h.Home, "cron")},
		{"recipe", "run", recipe, "--set", "out=" + filepath.Join(h.Home, "sub", "sub2")},
		{"recipe", "run", recipe, "--set", "out=" + filepath.Join(h.Open, "flames")},
		{"udp", "--iface", "lo", "--apply", "net.rp-filter", "--revert-dir", filepath.Join(h.Home, "cron")},
	} {
		_, stderr, code := execute(t, args...)
		oneSentence(t, args, stderr, code)
		if !strings.Contains(stderr, "not by root or you") && !strings.Contains(stderr, "without the sticky bit") {
			t.Errorf("%v: %q does not say who could redirect the path", args, stderr)
		}
	}
	testutil.Untouched(t, h.Target)
	testutil.Untouched(t, h.RootLike)
	testutil.Untouched(t, h.Open)
}

// A recipe's output directory is held from the check before the window to
// the writing after it: the user who owns its parent moving it away and
// linking a root directory in its place during the window redirects
// nothing. (Anyone but root and the invoking user is refused such a
// parent outright; under sudo, SUDO_UID is the invoking user.)
func TestOutputDirSwappedDuringRunCannotRedirect(t *testing.T) {
	h := testutil.NewNeighbourhood(t)
	recipe := writeOutputRecipe(t)
	flames := filepath.Join(h.Home, "flames")
	args := []string{"recipe", "run", recipe, "--set", "out=" + flames, "-o", "json"}

	_, stderr, code := execute(t, args...)
	oneSentence(t, args, stderr, code)
	if !strings.Contains(stderr, h.Home+" is owned by uid "+strconv.Itoa(int(h.UID))) {
		t.Errorf("not under sudo: %q, want the neighbour's directory refused", stderr)
	}

	t.Setenv("SUDO_UID", strconv.Itoa(int(h.UID)))
	done := make(chan int, 1)
	var errb strings.Builder
	go func() { done <- Execute(context.Background(), args, new(strings.Builder), &errb) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(flames); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never created %s: %s", flames, errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.Run(t, `mv "$1/flames" "$1/moved" && ln -s "$2" "$1/flames"`, h.Home, h.Target)
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	testutil.Untouched(t, h.Target)
	if _, err := os.Stat(filepath.Join(h.Home, "moved", "report.json")); err != nil {
		t.Errorf("the report is not in the directory that was checked: %v", err)
	}
}

// A revert file an --apply killed at its creation left empty is reported
// as such, exit 2, not as malformed JSON.
func TestRevertEmptyFileSaysTheApplyWasKilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perfscope-revert-20260102T030405Z-00000000.json")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"udp", "--revert", path}
	_, stderr, code := execute(t, args...)
	oneSentence(t, args, stderr, code)
	if !strings.Contains(stderr, "empty: the --apply that created it was killed before it recorded anything") || strings.Contains(stderr, "JSON") {
		t.Errorf("stderr %q", stderr)
	}
}

// `--flame /proc/self`: a directory no file can be created in is bad
// input (exit 2), found before the run, not a failure after it (exit 4).
func TestFlameDirInProcIsBadInput(t *testing.T) {
	recipe := writeOutputRecipe(t)
	for _, args := range [][]string{
		{"udp", "--iface", "lo", "--duration", "1s", "--flame", "/proc/self"},
		{"recipe", "run", recipe, "--set", "out=/proc/self"},
	} {
		_, stderr, code := execute(t, args...)
		oneSentence(t, args, stderr, code)
		if !strings.Contains(stderr, "no file can be created in /proc/self") {
			t.Errorf("%v: %q", args, stderr)
		}
	}
}
