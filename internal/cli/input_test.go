package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sevenPausesLog is a unified G1 log of seven young pauses whose last line
// has no newline.
func sevenPausesLog() string {
	var b strings.Builder
	b.WriteString("[0.010s][info][gc] Using G1")
	for i := range 7 {
		b.WriteString("\n[" + string(rune('1'+i)) + ".000s][info][gc] GC(" + string(rune('0'+i)) + ") Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.000ms")
	}
	return b.String()
}

type gclogParseJSON struct {
	Data struct {
		Parse struct {
			Events         int64    `json:"events"`
			NULBytes       int64    `json:"nul_bytes"`
			OverlongLines  int64    `json:"overlong_lines"`
			Unrecognised   int64    `json:"unrecognised_records"`
			EndsInsideLine []string `json:"ends_inside_line"`
			Partial        bool     `json:"partial"`
		} `json:"parse"`
		GC struct {
			AllPauses struct {
				Count int `json:"count"`
			} `json:"all_pauses"`
		} `json:"gc"`
	} `json:"data"`
	Findings []struct{ ID, Severity string }
}

func gclogJSON(t *testing.T, args ...string) (gclogParseJSON, int) {
	t.Helper()
	stdout, stderr, code := execute(t, append([]string{"gclog", "--no-rotated", "-o", "json"}, args...)...)
	var r gclogParseJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("exit %d, stderr %q: %v", code, stderr, err)
	}
	return r, code
}

// The case the hostile-input probe found: a log whose last line has no
// newline, followed by a 3 GiB sparse tail (nothing is written: the hole
// is made with truncate, and gclog does not read it either), lost its
// seventh pause and exited 0.
func TestGCLogLastLineBefore3GiBHole(t *testing.T) {
	log := filepath.Join(t.TempDir(), "gc.log")
	if err := os.WriteFile(log, []byte(sevenPausesLog()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(log, int64(len(sevenPausesLog()))+3<<30); err != nil {
		t.Fatal(err)
	}
	r, code := gclogJSON(t, log)
	if code != ExitOK || r.Data.GC.AllPauses.Count != 7 || r.Data.Parse.NULBytes != 3<<30 || r.Data.Parse.Partial {
		t.Errorf("exit %d, %d pauses, parse %+v; want 0, 7 pauses, 3 GiB of NULs, complete", code, r.Data.GC.AllPauses.Count, r.Data.Parse)
	}
}

// A long line in the middle is an unrecognised record and the result
// partial; a file ending inside one says so first in the text, marks the
// JSON partial, raises the unreadable-records finding (so --fail-on warn
// exits 1) and otherwise exits 0 with the analysis of what was read.
func TestGCLogOverlongLinesArePartial(t *testing.T) {
	dir := t.TempDir()
	lines := strings.SplitAfter(sevenPausesLog(), "\n")
	mid := filepath.Join(dir, "mid.log")
	os.WriteFile(mid, []byte(strings.Join(lines[:4], "")+strings.Repeat("x", 20<<20)+"\n"+strings.Join(lines[4:], "")), 0o600)
	r, code := gclogJSON(t, mid)
	if code != ExitOK || r.Data.GC.AllPauses.Count != 7 || r.Data.Parse.OverlongLines != 1 || r.Data.Parse.Unrecognised != 1 || !r.Data.Parse.Partial {
		t.Errorf("20 MiB line: exit %d, %d pauses, parse %+v", code, r.Data.GC.AllPauses.Count, r.Data.Parse)
	}

	cut := filepath.Join(dir, "cut.log")
	os.WriteFile(cut, []byte(sevenPausesLog()+"\n"+strings.Repeat("y", 3<<20)), 0o600)
	r, code = gclogJSON(t, cut)
	if code != ExitOK || r.Data.GC.AllPauses.Count != 7 || !r.Data.Parse.Partial || len(r.Data.Parse.EndsInsideLine) != 1 {
		t.Errorf("cut: exit %d, %d pauses, parse %+v", code, r.Data.GC.AllPauses.Count, r.Data.Parse)
	}
	if len(r.Findings) == 0 || !strings.Contains(findingIDs(r.Findings), "gc.log.unreadable-records") {
		t.Errorf("cut: findings %+v", r.Findings)
	}
	stdout, _, code := execute(t, "gclog", "--no-rotated", cut)
	first := strings.SplitN(stdout, "\n", 4)
	if code != ExitOK || len(first) < 4 || !strings.HasPrefix(first[1], "WARNING: partial result: 1 line longer than 256 KiB") ||
		!strings.HasPrefix(first[2], "WARNING: "+cut+" ends inside a line longer than 256 KiB with no newline") {
		t.Errorf("text, exit %d:\n%s", code, stdout)
	}
	if _, _, code := execute(t, "gclog", "--no-rotated", "--fail-on", "warn", cut); code != ExitFindings {
		t.Errorf("--fail-on warn on a partial result: exit %d, want 1", code)
	}

	// Nothing but an over-long line: not a GC log at all.
	junk := filepath.Join(dir, "junk.log")
	os.WriteFile(junk, bytes.Repeat([]byte("q"), 2<<20), 0o600)
	_, stderr, code := execute(t, "gclog", "--no-rotated", junk)
	if code != ExitUsage || !strings.Contains(stderr, "no GC events in "+junk+" (1 lines, 0 unrecognised, 1 longer than 256 KiB)") {
		t.Errorf("junk: exit %d, %q", code, stderr)
	}
}

func findingIDs(fs []struct{ ID, Severity string }) string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	return strings.Join(ids, " ")
}

// A negative or zero --pid says the pid is invalid, in every command that
// takes one; only a missing one is "required".
func TestInvalidPIDSaysSo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jvm", "--pid", "-5"}, `--pid -5: want a process id, got "-5"`},
		{[]string{"jvm", "--pid=-5"}, `--pid -5: want a process id, got "-5"`},
		{[]string{"jvm", "-p", "0"}, `--pid 0: want a process id, got "0"`},
		{[]string{"jvm"}, "--pid is required"},
		{[]string{"go", "-p", "0"}, `--pid 0: want a process id, got "0"`},
		{[]string{"go"}, "--pid is required"},
		{[]string{"udp", "--iface", "lo", "--pid", "-5"}, `--pid -5: want a process id (0: none), got "-5"`},
		{[]string{"profile", "--pid", "-5"}, `--pid -5: want a process id (0: none), got "-5"`},
		{[]string{"recipe", "run", "jvm-alloc", "--set", "pid=-5"}, `--set pid=-5: want a process id, got "-5"`},
		{[]string{"recipe", "run", "cpu-profile", "--set", "pid=-5"}, `--set pid=-5: want a process id (0: none), got "-5"`},
	} {
		_, stderr, code := execute(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, stderr, tc.want)
		}
	}
}

// --cgroup, --container and --pod: one at a time, not with --pid, an
// argument that can name something, and something that matches — else
// exit 2 in one sentence, before anything loads. serve's --top-workloads
// is bounded.
func TestWorkloadFiltersRefuse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"udp", "--iface", "lo", "--pod", "a/b", "--container", "abc"}, "--cgroup, --container and --pod exclude each other"},
		{[]string{"udp", "--iface", "lo", "--pid", "1", "--pod", "a/b"}, "--pid and --cgroup, --container or --pod exclude each other"},
		{[]string{"profile", "--pod", "Not_A_Pod"}, `--pod "Not_A_Pod": want NAMESPACE/NAME`},
		{[]string{"profile", "--cgroup", "kubepods.slice"}, `--cgroup "kubepods.slice": want an absolute path`},
		{[]string{"profile", "--per-container", "--per-cpu"}, "--per-process, --per-thread, --per-cpu, --per-container and --no-comm exclude each other"},
		{[]string{"udp", "--iface", "lo", "--pod", "00000000-0000-4000-8000-000000000000"}, "--pod 00000000-0000-4000-8000-000000000000: no process on this host is in that pod"},
		{[]string{"profile", "--container", "ffffffffffffffffffff"}, "no container running on this host has that id or name"},
		{[]string{"recipe", "run", "cpu-profile", "--cgroup", "/perfscope-no-such.slice"}, "--cgroup /perfscope-no-such.slice: no process is in that cgroup or below it"},
		{[]string{"jvm", "--pid", "1", "--pod", "a/b"}, "--pid and --cgroup, --container or --pod exclude each other"},
		{[]string{"go", "--pid", "1", "--pod", "a/b"}, "--pid and --cgroup, --container or --pod exclude each other"},
		{[]string{"go", "--cgroup", "/perfscope-no-such.slice"}, "--cgroup /perfscope-no-such.slice: no process is in that cgroup or below it"},
		{[]string{"serve", "--recipe", "udp-rx", "--top-workloads", "0"}, "--top-workloads must be between 1 and 500, got 0"},
	} {
		_, stderr, code := execute(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q in one line", tc.args, code, stderr, tc.want)
		}
	}
}
