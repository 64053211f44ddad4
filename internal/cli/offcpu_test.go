package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/offcpu"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

func TestOffCPUFlagsReachRun(t *testing.T) {
	g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
	var got *offcpuOptions
	cmd := offcpuCmd(g, &offcpuOptions{src: measure.Live(),
		run: func(_ context.Context, o *offcpuOptions, _ *Globals) error { got = o; return nil }})
	cmd.SetArgs([]string{"-a", "-d", "3s", "--min-block", "50us", "--stacks", "kernel", "--stack-every", "8", "--no-waker-stacks",
		"--top", "5", "--attach-method", "raw_tp", "--exact", "--fail-on", "warn", "-o", "folded"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	v := got.plan.Values
	if got == nil || !got.All || got.plan.Window().Duration != 3*time.Second || v["min_block"] != 50*time.Microsecond || v["stacks"] != "kernel" ||
		v["stack_every"] != int64(8) || v["waker_stacks"] != false || v["top"] != int64(5) || v["attach_method"] != "raw_tp" || got.budget.budget.On() || got.report.format != "folded" {
		t.Fatalf("options = %+v, values %v", got, v)
	}
	// The defaults: every process, 10 s, the probe's minimum block, the
	// overhead budget on.
	got = nil
	cmd = offcpuCmd(g, &offcpuOptions{src: measure.Live(),
		run: func(_ context.Context, o *offcpuOptions, _ *Globals) error { got = o; return nil }})
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	v = got.plan.Values
	if v["pid"] != int64(0) || got.plan.Window().Duration != 10*time.Second || v["min_block"] != probe.DefaultMinBlock || !got.budget.budget.On() || got.report.format != "text" {
		t.Fatalf("defaults = %+v, values %v", got, v)
	}
}

// Every bad flag is exit 2 with one sentence, before anything loads.
func TestOffCPUUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pid", "1", "--all"}, "exclude each other"},
		{[]string{"--pid", "-3"}, "--pid -3: want a process id"},
		{[]string{"--pid", "999999999"}, "no such process"},
		{[]string{"--duration", "0s"}, "--duration 0s: want a duration"},
		{[]string{"--min-block", "-1us"}, "--min-block"},
		{[]string{"--min-block", "2s"}, "--min-block"},
		{[]string{"--stacks", "both"}, "--stacks"},
		{[]string{"--stack-every", "0"}, "--stack-every"},
		{[]string{"--stack-every", "2000"}, "--stack-every"},
		{[]string{"--top", "0"}, "--top"},
		{[]string{"--attach-method", "kprobe"}, "kprobe"},
		{[]string{"--exact", "--overhead-budget", "2"}, "--exact"},
		{[]string{"--overhead-budget", "-1"}, "--overhead-budget"},
		{[]string{"--fail-on", "loud"}, "--fail-on"},
		{[]string{"-o", "xml"}, "xml"},
		{[]string{"--out", filepath.Join(dir, "missing", "x.svg")}, "--out"},
	} {
		_, stderr, code := execute(t, append([]string{"offcpu"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, ExitUsage, c.want)
		}
		if strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%v: want one sentence (plus a usage hint), got %q", c.args, stderr)
		}
	}
}

// A process that exits between the flag check and the probe's open is
// bad input (2), as a --pid that was never there.
func TestOffCPUProcessGoneIsExit2(t *testing.T) {
	if got := CodeOf(fmt.Errorf("pid 4: %w", offcpu.ErrNoProcess)); got != ExitUsage {
		t.Errorf("exit %d, want %d", got, ExitUsage)
	}
	// And the fixture's pid check names the flag.
	err := measure.CheckProcess(procfs.FS{Root: t.TempDir()}, "--pid", 4)
	if CodeOf(err) != ExitUsage || !strings.Contains(err.Error(), "--pid 4") {
		t.Errorf("missing pid: %v (exit %d)", err, CodeOf(err))
	}
}

// profile --off-cpu: the flag reaches the run; a graph format, which
// would draw the on-CPU profile only, and a workload filter, which the
// off-CPU probe does not take, are refused.
func TestProfileOffCPUFlag(t *testing.T) {
	g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
	var got *profileOptions
	cmd := profileCmd(g, &profileOptions{src: measure.Live(),
		run: func(_ context.Context, o *profileOptions, _ *Globals) error { got = o; return nil }})
	cmd.SetArgs([]string{"--off-cpu", "-o", "json", "-d", "1s"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.plan.Values["off_cpu"] != true {
		t.Fatalf("options = %+v", got)
	}
	for _, args := range [][]string{{"--off-cpu", "-o", "folded"}, {"--off-cpu", "--cgroup", "/"}} {
		_, stderr, code := execute(t, append([]string{"profile"}, args...)...)
		if code != ExitUsage || !strings.Contains(stderr, "--off-cpu") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
