package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/report"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/probes"
)

func execute(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Execute(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"softirq", "--duration", "0s"},
		{"softirq", "--duration", "1s", "--interval", "2s"},
		{"softirq", "-o", "xml"},
		{"softirq", "--attach-method", "kprobe"},
		{"softirq", "--cpus", "x-y"},
		{"softirq", "--nope"},
		{"version", "extra"},
	} {
		_, stderr, code := execute(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, ExitUsage, stderr)
		}
		if strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%v: want one sentence (plus a usage hint), got %q", args, stderr)
		}
	}
}

func TestSoftirqFlagsReachRun(t *testing.T) {
	g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
	var got *softirqOptions
	// Replace the measurement: flag handling is tested without the kernel.
	cmd := softirqCmd(g, &softirqOptions{
		fs:  procfs.FS{Root: "../../collectors/procfs/testdata/vm2cpu"},
		run: func(_ context.Context, o *softirqOptions, _ *Globals) error { got = o; return nil },
	})
	cmd.SetArgs([]string{"--duration", "3s", "--interval", "1s", "--cpus", "0", "-o", "json", "--attach-method", "raw_tp"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Duration != 3*time.Second || got.Interval != time.Second || got.format != "json" ||
		got.method != probes.MethodRaw || !got.cpus.Contains(0) {
		t.Fatalf("options = %+v", got)
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{usageError("x"), ExitUsage},
		{unavailableError("x"), ExitUnavailable},
		{probes.ErrPermission, ExitUnavailable},
		{errors.Join(errors.New("ctx"), probes.ErrNotSupported), ExitUnavailable},
		{errors.New("io"), ExitFailure},
		{failOn([]diagnose.Finding{{Severity: diagnose.Warn}}, diagnose.Warn), ExitFindings},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if failOn([]diagnose.Finding{{Severity: diagnose.Info}}, diagnose.Warn) != nil {
		t.Error("info finding must not fail --fail-on warn")
	}
}

func TestDoctorJSONAndVerdict(t *testing.T) {
	g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
	cmd := doctorCmd(g, &doctorOptions{checks: func(procfs.FS) []DoctorCheck {
		return []DoctorCheck{
			{Category: "program types", Name: "raw_tp", Status: statusOK},
			{Category: "privileges", Name: "CAP_BPF + CAP_PERFMON", Status: statusMissing},
		}
	}})
	cmd.SetArgs([]string{"-o", "json"})
	err := cmd.Execute()
	if CodeOf(err) != ExitUnavailable {
		t.Fatalf("missing privilege: exit %d (%v)", CodeOf(err), err)
	}
	var r struct {
		Schema string `json:"schema"`
		Data   struct {
			Checks []DoctorCheck `json:"checks"`
		} `json:"data"`
	}
	if err := json.Unmarshal(g.Out.(*bytes.Buffer).Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != report.Schema || len(r.Data.Checks) != 2 {
		t.Errorf("json = %+v", r)
	}
	if doctorVerdict([]DoctorCheck{{Category: "program types", Name: "tp_btf", Status: statusOK}}) != nil {
		t.Error("attachable kernel with privileges must pass")
	}
}

func TestVersion(t *testing.T) {
	out, _, code := execute(t, "version", "-o", "json")
	if code != 0 || !strings.Contains(out, `"version"`) {
		t.Errorf("version: %d %q", code, out)
	}
}
