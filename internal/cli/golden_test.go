package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/report"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// checkGolden compares got with testdata/golden/name: the text of each
// command is held byte for byte, so moving a renderer cannot change it.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s changed:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// renderText renders data as a command's text through the one renderer.
func renderText(t *testing.T, command string, data any) string {
	t.Helper()
	r := report.New(command, "test", time.Unix(0, 0))
	r.Meta.Host, r.Meta.Kernel, r.Meta.CPUs = "host", "6.18.0", 2
	r.Data = data
	var b bytes.Buffer
	if err := report.Render(&b, r, report.Text); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func goldenJVMData(e evidence.JVM) any {
	d := newJVMData(&jvm.Result{Evidence: e, Load: &httpload.Result{Completed: 15000, RPS: 500, P50Ns: 2e6, P99Ns: 9e6}})
	d.profile = asprof.Options{Event: asprof.Alloc, AllocInterval: 512 << 10}
	return d
}

// runCPU is the run's own CPU time, which differs on every run.
var runCPU = regexp.MustCompile(`[0-9.]+(ms|µs|s) of CPU time`)

func TestGoldenText(t *testing.T) {
	checkGolden(t, "jvm.txt", renderText(t, "jvm", goldenJVMData(productionEvidence())))
	unknown := productionEvidence()
	unknown.Requests, unknown.RequestRate, unknown.BytesPerRequest, unknown.BytesPerRequestEden, unknown.Endpoints, unknown.Threads = nil, nil, nil, nil, nil, nil
	unknown.RequestsUnknown = "no request count: the passive HTTP count saw no HTTP/1.x response"
	unknown.BytesPerRequestUnknown = unknown.RequestsUnknown
	checkGolden(t, "jvm-unknown.txt", renderText(t, "jvm", goldenJVMData(unknown)))
	checkGolden(t, "jvm-stop.txt", renderText(t, "jvm", jvmStopData{PID: 42, Stopped: true, RanForNs: 90e9, OwnerPIDs: []int{7}, Removed: []string{"/tmp/perfscope-asprof-7"}, ForeignLibraries: []string{"/opt/ap/libasyncProfiler.so"}}))
	checkGolden(t, "jvm-stop-nothing.txt", renderText(t, "jvm", jvmStopData{PID: 42}))

	lab := labJVMData{ExtraBytesExpected: 256 << 10, ExtraBytesMeasured: 250 << 10, ExtraError: -0.023}
	for _, ep := range []string{"/alloc?kb=0", "/alloc?kb=256", "/log"} {
		d := goldenJVMData(productionEvidence()).(jvmData)
		lab.Scenarios = append(lab.Scenarios, labScenario{Endpoint: ep, Load: *d.Load, Data: d, Findings: diagnose.Run(diagnose.JVMRules, d.JVM)})
	}
	var b bytes.Buffer
	writeLabJVMText(&b, &labJVMOptions{Requests: 3000, Concurrency: 4, KB: 256, TargetRPS: 500, Heap: "256m"}, lab)
	checkGolden(t, "lab-jvm.txt", b.String())

	measure := func(context.Context, golang.Options) (*golang.Result, error) {
		return &golang.Result{Evidence: sampleGoEvidence(), AttachNs: 15e6, Load: &httpload.Result{Completed: 1000, RPS: 250, P50Ns: 2e6},
			Costs: []evidence.ProgramCost{{Program: "malloc", RunCount: 2000, RunTimeNs: 2e6, PerRunNs: 1000, PerRunFrom: "self-timed"}}}, nil
	}
	out, _, _ := runGoCmd(t, measure, "--pid", "42")
	checkGolden(t, "go.txt", runCPU.ReplaceAllString(out, "CPU"))
	out, _, _ = runGoCmd(t, func(context.Context, golang.Options) (*golang.Result, error) {
		return &golang.Result{Evidence: exitedEvidence()}, nil
	}, "--pid", "42")
	checkGolden(t, "go-exited.txt", runCPU.ReplaceAllString(out, "CPU"))

	for _, log := range []string{"SampleSun1_6_0CMS.txt", "SampleSun1_8_0G1HumongousMixed.txt", "Sample-ujl-shenandoah-jdk17.txt"} {
		out, _, _ := execute(t, "gclog", "--no-rotated", gclogFixture(log), "--requests", "9463", "--target-rps", "200")
		checkGolden(t, "gclog-"+strings.TrimSuffix(log, ".txt")+".txt", out)
	}
	for _, args := range [][]string{{"recipe", "list"}, {"recipe", "catalog"}} {
		out, _, _ := execute(t, args...)
		checkGolden(t, strings.Join(args, "-")+".txt", out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nname: s\nprobes: [softirq]\nwindow: {duration: 1s, interval: 2s}\nbogus: 1\n"), 0o644)
	out, _, _ = execute(t, "recipe", "validate", bad)
	checkGolden(t, "recipe-validate.txt", strings.ReplaceAll(out, dir, "DIR"))
}
