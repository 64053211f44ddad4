package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/report"
)

// runGoCmd runs `perfscope go args` with measure standing in for
// golang.Measure, on a machine where pid 42 runs.
func runGoCmd(t *testing.T, measure func(context.Context, golang.Options) (*golang.Result, error), args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runGoCmdOn(t, fakeProc(t, 42), measure, args...)
}

func runGoCmdOn(t *testing.T, src measure.Sources, measure func(context.Context, golang.Options) (*golang.Result, error), args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	g := &Globals{Out: &out, Err: &errb}
	cmd := goCmd(g, &goOptions{measure: measure, src: src})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(context.Background())
	if err != nil {
		fmt.Fprintln(&errb, err)
	}
	return out.String(), errb.String(), CodeOf(err)
}

func TestGoFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		code  int
		check func(golang.Options) bool
	}{
		{[]string{"--pid", "42"}, ExitOK, func(o golang.Options) bool {
			return o.PID == 42 && o.Duration.Seconds() == 30 && o.Passive == jvm.PassiveAuto && o.TopSites == 20 && !o.NoPools && o.Load == nil
		}},
		{[]string{"--pid", "42", "-d", "5s", "--requests", "900", "--no-pools", "--count", "off", "--top", "7"}, ExitOK, func(o golang.Options) bool {
			return o.Requests == 900 && o.NoPools && o.Passive == jvm.PassiveOff && o.TopSites == 7
		}},
		{[]string{"--pid", "42", "--load", "http://127.0.0.1:8080/x", "-n", "100", "-H", "X-A: b", "--method", "post", "--body", "{}"}, ExitOK, func(o golang.Options) bool {
			return o.Load != nil && o.Load.Requests == 100 && o.Load.Method == "POST" && string(o.Load.Body) == "{}" && o.Load.Header.Get("X-A") == "b" && o.Requests == 0
		}},
		{[]string{"--pid", "42", "--requests-from", "http://127.0.0.1:9090/metrics#http_requests_total", "--http-port", "8080", "--count", "on"}, ExitOK, func(o golang.Options) bool {
			return o.RequestsFrom != nil && o.RequestsFrom.URL == "http://127.0.0.1:9090/metrics" && o.RequestsFrom.Metric == "http_requests_total" &&
				len(o.HTTPPorts) == 1 && o.HTTPPorts[0] == 8080 && o.Passive == jvm.PassiveRequired
		}},
		{[]string{"--pid", "42", "--exact-pools"}, ExitOK, func(o golang.Options) bool { return o.ExactPools && !o.NoPools }},
		{[]string{"--pid", "42", "--exact-pools", "--no-pools"}, ExitUsage, nil},
		{[]string{}, ExitUsage, nil},
		{[]string{"--pid", "0"}, ExitUsage, nil},
		{[]string{"--pid", "-3"}, ExitUsage, nil},
		{[]string{"--pid", "42", "-d", "0s"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--load", "http://127.0.0.1:8080/x"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--load", "127.0.0.1:8080/x", "-n", "5"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--body", "{}"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--flame", "x.png"}, ExitUsage, nil},
		{[]string{"--pid", "42", "-o", "yaml"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--fail-on", "loud"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--count", "maybe"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--http-port", "70000"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--top", "0"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--requests-from", "ftp://x/metrics"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--requests-metric", "x"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--requests-from", "http://x/m#a", "--requests-metric", "b"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--requests-from", "http://x/m", "-n", "5"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--load", "http://x/", "-n", "5", "--requests-from", "http://x/m"}, ExitUsage, nil},
		{[]string{"--pid", "42", "--load", "http://x/", "-n", "5", "--body", "@/nonexistent/body"}, ExitUsage, nil},
	} {
		var got *golang.Options
		measure := func(_ context.Context, o golang.Options) (*golang.Result, error) {
			got = &o
			return &golang.Result{Evidence: sampleGoEvidence()}, nil
		}
		_, stderr, code := runGoCmd(t, measure, tc.args...)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d (%s)", tc.args, code, tc.code, stderr)
			continue
		}
		if tc.code != ExitOK {
			if got != nil {
				t.Errorf("%q: refused but measured", tc.args)
			}
			continue
		}
		if got == nil || !tc.check(*got) {
			t.Errorf("%q: options %+v", tc.args, got)
		}
	}
}

// What goes wrong maps to one sentence and the documented exit code; a
// program that exits mid-window is reported with a warning and exit 0; an
// interrupted window prints its report and exits 0.
func TestGoExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  *golang.Result
		err  error
		code int
		want string
	}{
		{"no process", nil, fmt.Errorf("pid 42: %w", golang.ErrNoProcess), ExitUsage, "pid 42 is not running"},
		{"not Go", nil, fmt.Errorf("pid 42: %w", golang.ErrNotGo), ExitUsage, "is not a Go program"},
		{"unsupported", nil, fmt.Errorf("pid 42: %w: go1.18", golang.ErrUnsupportedGo), ExitUnavailable, "measured nothing rather than guess"},
		{"no uprobes", nil, fmt.Errorf("attach: %w", probes.ErrNotSupported), ExitUnavailable, "perfscope doctor"},
		{"no privilege", nil, fmt.Errorf("load: %w", probes.ErrPermission), ExitUnavailable, "run as root"},
		{"bad source", nil, fmt.Errorf("%w: http://x/m: connection refused", jvm.ErrBadSource), ExitUsage, "nothing was attached"},
		{"exited", &golang.Result{Evidence: exitedEvidence()}, fmt.Errorf("pid 42: %w", golang.ErrTargetExited), ExitOK, "exited 1.0s into the window"},
		{"interrupted", &golang.Result{Evidence: sampleGoEvidence(), Interrupted: true}, nil, ExitOK, "interrupted after"},
	} {
		measure := func(context.Context, golang.Options) (*golang.Result, error) { return tc.res, tc.err }
		stdout, stderr, code := runGoCmd(t, measure, "--pid", "42")
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", tc.name, code, stderr, tc.code, tc.want)
		}
		if tc.res != nil && !strings.Contains(stdout, "Bytes per request") {
			t.Errorf("%s: no report:\n%s", tc.name, stdout)
		}
		// -o json prints one JSON document also when the run failed.
		stdout, _, code = runGoCmd(t, measure, "--pid", "42", "-o", "json")
		var doc struct {
			Command string           `json:"command"`
			Data    json.RawMessage  `json:"data"`
			Error   *report.RunError `json:"error"`
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil || doc.Command != "go" || code != tc.code {
			t.Errorf("%s: -o json exit %d: %v\n%s", tc.name, code, err, stdout)
		}
		if (tc.code != ExitOK) != (doc.Error != nil) {
			t.Errorf("%s: error member %+v", tc.name, doc.Error)
		}
	}
}

// The real measurement refuses a pid that is not running and a process
// that is not a Go program before anything is attached (no privilege
// needed): exit 2 with one sentence.
func TestGoRefusesWithoutAttaching(t *testing.T) {
	cmd := startSleep(t)
	for _, tc := range []struct {
		pid  int
		want string
	}{
		{cmd.Process.Pid, fmt.Sprintf("pid %d is not a Go program", cmd.Process.Pid)},
		{1 << 30, fmt.Sprintf("--pid %d: no such process (not running)", 1<<30)},
	} {
		_, stderr, code := runGoCmdOn(t, measure.Live(), golang.Measure, "--pid", fmt.Sprint(tc.pid), "-d", "1s")
		if code != ExitUsage || !strings.HasPrefix(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("pid %d: exit %d, stderr %q; want exit 2 and one line starting %q", tc.pid, code, stderr, tc.want)
		}
	}
}

// The report's three formats carry the evidence: the text's answer and
// sections, JSON's data fields as the README lists them, the page's
// section; --flame and --folded write the allocation stacks.
func TestGoReport(t *testing.T) {
	measure := func(context.Context, golang.Options) (*golang.Result, error) {
		return &golang.Result{Evidence: sampleGoEvidence(), AttachNs: 15e6, Load: &httpload.Result{Completed: 1000, RPS: 250, P50Ns: 2e6},
			Costs: []evidence.ProgramCost{{Program: "malloc", RunCount: 2000, RunTimeNs: 2e6, PerRunNs: 1000, PerRunFrom: "self-timed"}}}, nil
	}
	stdout, _, code := runGoCmd(t, measure, "--pid", "42")
	for _, want := range []string{"Go program pid 42 (/srv/api), go1.24.13, example.com/api, stripped, PIE", "12.0 KiB ± 600 B per request, 30.0 objects",
		"3 cycles in 10.0s (exact): 18.0 per minute", "GOGC 100 (default), GOMEMLIMIT none", "main.handle (api/main.go:40)", "main.bufPool (0xc000010000)", "50.0%",
		"go.sync-pool-candidate", "Load (perfscope drove it)", "perfscope's own cost", "malloc"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text lacks %q:\n%s", want, stdout)
		}
	}
	if code != ExitOK {
		t.Errorf("exit %d", code)
	}
	stdout, _, _ = runGoCmd(t, measure, "--pid", "42", "-o", "json")
	var doc struct {
		Data     map[string]any `json:"data"`
		Overhead struct {
			AttachMethod string `json:"attach_method"`
			Programs     []any  `json:"programs"`
		} `json:"overhead"`
		Findings []struct {
			ID string `json:"id"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pid", "binary", "requests", "bytes_per_request", "bytes_per_request_error", "gc_cycles", "gc_cycles_per_minute", "gc_settings", "sites", "pools", "sampling", "lost"} {
		if _, ok := doc.Data[k]; !ok {
			t.Errorf("data lacks %s", k)
		}
	}
	if doc.Data["bytes_per_request"] != 12288.0 || doc.Data["gc_cycles"] != 3.0 || doc.Overhead.AttachMethod != "uprobes" || len(doc.Overhead.Programs) != 1 || len(doc.Findings) == 0 {
		t.Errorf("json: %s", stdout)
	}
	stdout, _, _ = runGoCmd(t, measure, "--pid", "42", "-o", "html")
	for _, want := range []string{"<html", "Go program pid 42", "Allocation sites", "main.bufPool", "12.0 KiB"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	dir := t.TempDir()
	folded, svg := filepath.Join(dir, "a.folded"), filepath.Join(dir, "a.svg")
	runGoCmd(t, measure, "--pid", "42", "--folded", folded, "--flame", svg)
	b, err := os.ReadFile(folded)
	if err != nil || !strings.Contains(string(b), "main.main;main.handle 122880") {
		t.Errorf("folded: %v %q", err, b)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("svg: %v", err)
	}
}

func sampleGoEvidence() evidence.Go {
	reqs, rate := int64(1000), 100.0
	gogc := int64(100)
	bpr, bprErr, opr := 12288.0, 600.0, 30.0
	alloc, allocErr, objs, arate := 12288000.0, 600000.0, 30000.0, 1228800.0
	kreq, perCycle := 3.0, 4096000.0
	sitePer, siteObj := 6144.0, 6.0
	hit, gets := 0.5, 2.0
	hasNew := true
	return evidence.Go{
		PID: 42, Executable: "/srv/api", WindowNs: 10e9,
		Binary:   evidence.GoBinary{GoVersion: "go1.24.13", Module: "example.com/api", PIE: true, Stripped: true, FunctionTable: ".gopclntab"},
		Requests: &reqs, RequestsSource: "user", RequestsNote: "--requests, as given", RequestRate: &rate,
		Sampling:   evidence.GoSampling{MemProfileRate: 512 << 10, RateSource: "memory", Samples: 24, SampledBytes: 12 << 20, Weighting: "unbiased", RelativeError: 0.05},
		AllocBytes: &alloc, AllocBytesError: &allocErr, AllocObjects: &objs, AllocRate: &arate,
		BytesPerRequest: &bpr, BytesPerRequestError: &bprErr, ObjectsPerRequest: &opr,
		GCCycles: 3, GCCyclesPerMinute: 18, GCCyclesPerKReq: &kreq, BytesPerGCCycle: &perCycle,
		GC: evidence.GoGCSettings{GOGC: &gogc, GOGCSource: "default"},
		Sites: []evidence.GoAllocSite{{Function: "main.handle", File: "/src/api/main.go", Line: 40, Size: 1024, Bytes: 6144000, Objects: 6000, Samples: 12, Share: 0.5,
			BytesPerRequest: &sitePer, ObjectsPerRequest: &siteObj, Caller: "net/http.HandlerFunc.ServeHTTP"}},
		Stacks: []evidence.GoAllocStack{{Frames: []string{"main.main", "main.handle"}, Bytes: 122880}},
		Pools:  []evidence.GoPool{{Address: "0xc000010000", Name: "main.bufPool", Gets: 2000, Puts: 1990, News: 1000, HitRate: &hit, HasNew: &hasNew, GetsPerRequest: &gets}},
	}
}

func exitedEvidence() evidence.Go {
	e := sampleGoEvidence()
	e.Warnings = []string{"pid 42 exited 1.0s into the window; the report covers what was measured until then"}
	return e
}

// A workload's one Go program is found among its processes (this test is
// one); none, or two, is one sentence and exit 2.
func TestSelectGo(t *testing.T) {
	cmd := startSleep(t)
	self, other := os.Getpid(), cmd.Process.Pid
	if pid, err := measure.SelectGo("pod a/b", []int{other, self}, golang.FS{}); err != nil || pid != self {
		t.Errorf("SelectGo = %d, %v; want %d", pid, err, self)
	}
	if _, err := measure.SelectGo("pod a/b", []int{other}, golang.FS{}); CodeOf(err) != ExitUsage || !strings.Contains(fmt.Sprint(err), "none of its 1 processes is a Go program") {
		t.Errorf("no Go program: %v", err)
	}
	if _, err := measure.SelectGo("pod a/b", []int{self, self}, golang.FS{}); CodeOf(err) != ExitUsage || !strings.Contains(fmt.Sprint(err), "holds 2 Go programs") {
		t.Errorf("two Go programs: %v", err)
	}
}

// startSleep runs sleep(1), a process that is not a Go program, until the
// test ends.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	cmd := exec.Command(sleep, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}
