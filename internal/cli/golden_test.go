package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/internal/testutil"
)

// runCPU is the run's own CPU time, which differs on every run.
var runCPU = regexp.MustCompile(`[0-9.]+(ms|µs|s) of CPU time`)

func TestGoldenText(t *testing.T) {
	measure := func(context.Context, golang.Options) (*golang.Result, error) {
		return &golang.Result{Evidence: sampleGoEvidence(), AttachNs: 15e6, Load: &httpload.Result{Completed: 1000, RPS: 250, P50Ns: 2e6},
			Costs: []evidence.ProgramCost{{Program: "malloc", RunCount: 2000, RunTimeNs: 2e6, PerRunNs: 1000, PerRunFrom: "self-timed"}}}, nil
	}
	out, _, _ := runGoCmd(t, measure, "--pid", "42")
	testutil.Golden(t, "go.txt", runCPU.ReplaceAllString(out, "CPU"))
	out, _, _ = runGoCmd(t, func(context.Context, golang.Options) (*golang.Result, error) {
		return &golang.Result{Evidence: exitedEvidence()}, nil
	}, "--pid", "42")
	testutil.Golden(t, "go-exited.txt", runCPU.ReplaceAllString(out, "CPU"))

	for _, log := range []string{"SampleSun1_6_0CMS.txt", "SampleSun1_8_0G1HumongousMixed.txt", "Sample-ujl-shenandoah-jdk17.txt"} {
		out, _, _ := execute(t, "gclog", "--no-rotated", gclogFixture(log), "--requests", "9463", "--target-rps", "200")
		testutil.Golden(t, "gclog-"+strings.TrimSuffix(log, ".txt")+".txt", out)
	}
	for _, args := range [][]string{{"recipe", "list"}, {"recipe", "catalog"}} {
		out, _, _ := execute(t, args...)
		testutil.Golden(t, strings.Join(args, "-")+".txt", out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nname: s\nprobes: [softirq]\nwindow: {duration: 1s, interval: 2s}\nbogus: 1\n"), 0o644)
	out, _, _ = execute(t, "recipe", "validate", bad)
	testutil.Golden(t, "recipe-validate.txt", strings.ReplaceAll(out, dir, "DIR"))
}
