package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/report"
)

// runProfileFlags parses args with the profiling replaced, returning the
// options run would have received and the error.
func runProfileFlags(t *testing.T, args ...string) (*profileOptions, error) {
	t.Helper()
	g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
	var got *profileOptions
	cmd := profileCmd(g, &profileOptions{src: measure.Live(),
		run: func(_ context.Context, o *profileOptions, _ *Globals) error { got = o; return nil }})
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	return got, cmd.Execute()
}

func TestProfileFlagsReachRun(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	o, err := runProfileFlags(t, "--pid", self, "--duration", "3s", "--freq", "49", "--kernel-only", "--per-cpu", "-o", "svg", "--out", "x.svg", "--title", "T", "-e", "cpu-clock")
	if err != nil {
		t.Fatal(err)
	}
	v := o.plan.Values
	if v["pid"] != int64(os.Getpid()) || o.plan.Window().Duration != 3*time.Second || v["freq"] != int64(49) || v["stacks"] != "kernel" || v["event"] != "cpu-clock" ||
		v["root"] != "cpu" || o.report.format != report.SVG || o.report.out != "x.svg" || o.Title != "T" {
		t.Errorf("options = %+v, values %v", o, v)
	}
	o, err = runProfileFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	v = o.plan.Values
	if v["pid"] != int64(0) || v["freq"] != int64(cpuprofile.DefaultFrequency) || v["stacks"] != "kernel+user" || v["root"] != "comm" || o.report.format != "text" || v["event"] != "auto" {
		t.Errorf("defaults = %+v, values %v", o, v)
	}
}

func TestProfileBadInputExit2(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	thread := otherThreadOf(t)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--pid", self, "--all"}, "exclude each other"},
		{[]string{"--pid", strconv.Itoa(dead.Process.Pid)}, "not running"},
		{[]string{"--pid", thread}, "is a thread of process " + self},
		{[]string{"--pid", "-3"}, "--pid -3: want a process id"},
		{[]string{"--kernel-only", "--user-only"}, "exclude each other"},
		{[]string{"--per-thread", "--per-cpu"}, "exclude each other"},
		{[]string{"-o", "png"}, "unknown output format"},
		{[]string{"--freq", "0"}, "--freq 0: want an integer 1–10000"},
		{[]string{"--freq", "100000000"}, "want an integer 1–10000"},
		{[]string{"--duration", "0s"}, "--duration 0s: want a duration 10ms–24h"},
		{[]string{"--top", "0"}, "positive"},
		{[]string{"--stack-map-size", "10"}, "1024–1048576"},
		{[]string{"--jit-map"}, "needs --pid"},
		{[]string{"-o", "svg", "--out", "/nonexistent/cpu.svg"}, "cannot write /nonexistent/cpu.svg"},
		{[]string{"--jit-map", "--pid", self}, "is not a HotSpot JVM"},
	} {
		_, err := runProfileFlags(t, c.args...)
		if CodeOf(err) != ExitUsage {
			t.Errorf("%v: exit %d (%v), want %d", c.args, CodeOf(err), err, ExitUsage)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: error %q does not say %q", c.args, err, c.says)
		}
	}
}

// otherThreadOf returns a thread id of this process that is not its pid.
func otherThreadOf(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != strconv.Itoa(os.Getpid()) {
			return e.Name()
		}
	}
	t.Fatal("test process has a single thread")
	return ""
}

// The command end to end: a busy loop in a known C function is the top
// function of its process's profile in the JSON report, and the report
// carries the probe's own measured cost.
func TestProfileCommandFindsBusyLoop(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	spinner := testutil.StartSpinner(t, 60) // killed at cleanup: two profiles run against it, however slow the machine
	time.Sleep(100 * time.Millisecond)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)

	stdout, stderr, code := execute(t, "profile", "--pid", strconv.Itoa(spinner.Process.Pid), "--duration", "1500ms", "--freq", "199", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Data     evidence.Profile
		Overhead struct {
			Programs []struct {
				RunCount uint64 `json:"run_count"`
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("parse JSON: %v\n%s", err, stdout)
	}
	if len(r.Data.TopFunctions) == 0 || r.Data.TopFunctions[0].Function != testutil.SpinFunction {
		t.Fatalf("top functions = %+v, want %s first", r.Data.TopFunctions, testutil.SpinFunction)
	}
	if len(r.Overhead.Programs) != 1 || r.Overhead.Programs[0].RunCount == 0 {
		t.Errorf("overhead programs = %+v, want the sampling program with runs", r.Overhead.Programs)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)

	// The same profile as a flame graph file.
	out := filepath.Join(t.TempDir(), "cpu.svg")
	if _, stderr, code := execute(t, "profile", "--pid", strconv.Itoa(spinner.Process.Pid), "--duration", "300ms", "-o", "svg", "--out", out); code != ExitOK {
		t.Fatalf("svg: exit %d: %s", code, stderr)
	}
	svg, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(svg, []byte(testutil.SpinFunction)) {
		t.Errorf("svg (%v) does not name %s", err, testutil.SpinFunction)
	}
}
