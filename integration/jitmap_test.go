package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/internal/testutil"
)

// `perfscope profile --jit-map` on a JVM that never wrote a perf map: perfscope
// asks the JVM for one through the attach protocol when the window ends, so
// compiled frames of the sample app get their Java names, and the map it
// caused to exist is gone afterwards.
func TestProfileJITMapAsksTheJVM(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSample(t, []string{"-XX:+PreserveFramePointer"})
	mapPath := fmt.Sprintf("/proc/%d/root/tmp/perf-%d.map", app.PID, app.PID)
	if _, err := os.Stat(mapPath); err == nil {
		t.Fatalf("%s exists before the profile: the test would prove nothing", mapPath)
	}
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)

	// Keep the handler compiled and on CPU through the window.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loadDone := make(chan error, 1)
	go func() {
		_, err := httpload.Run(ctx, httpload.Spec{URL: app.URL("/alloc?kb=16"), Requests: 400000, Concurrency: 4})
		loadDone <- err
	}()
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), "profile", "--pid", fmt.Sprint(app.PID), "--jit-map", "--duration", "3s", "--freq", "499", "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	cancel()
	<-loadDone
	if err != nil {
		t.Fatalf("profile --jit-map: %v: %s", err, stderr.String())
	}
	var r struct {
		Data struct {
			Folded []struct {
				Stack string `json:"stack"`
			} `json:"folded"`
			Warnings []string `json:"warnings"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out.String())
	}
	var java, sampleApp []string
	for _, f := range r.Data.Folded {
		for _, frame := range strings.Split(f.Stack, ";") {
			name, ok := strings.CutSuffix(frame, "_[j]")
			if !ok || !strings.Contains(name, "(") {
				continue // stubs and the interpreter have no signature
			}
			java = append(java, name)
			if strings.Contains(name, "SampleApp") {
				sampleApp = append(sampleApp, name)
			}
		}
	}
	if len(java) == 0 || len(sampleApp) == 0 {
		t.Errorf("no compiled Java frame named (%d named, %d of SampleApp); warnings %q", len(java), len(sampleApp), r.Data.Warnings)
	} else {
		t.Logf("%d compiled frames named, e.g. %s", len(java), sampleApp[0])
	}
	if _, err := os.Stat(mapPath); err == nil {
		t.Errorf("%s left behind", mapPath)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
	if !app.Healthy() {
		t.Error("the JVM stopped answering")
	}
}

// A JVM that does not handle SIGQUIT (-Xrs) opens its attach socket at
// start-up: --jit-map uses it without any signal. With the socket gone,
// the signal would kill it: --jit-map is refused with exit 3 before
// anything is sent, and the JVM keeps serving.
func TestProfileJITMapRefusesXrsJVM(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSample(t, []string{"-Xrs"})
	cmd := exec.Command(Perfscope(t), "profile", "--pid", fmt.Sprint(app.PID), "--jit-map", "--duration", "1s")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("-Xrs with its attach socket open: %v: %s", err, out)
	}
	if err := os.Remove(fmt.Sprintf("/proc/%d/root/tmp/.java_pid%d", app.PID, app.PID)); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(Perfscope(t), "profile", "--pid", fmt.Sprint(app.PID), "--jit-map", "--duration", "1s")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 3 || !strings.Contains(string(out), "-Xrs") {
		t.Errorf("exit %d, want 3 naming -Xrs: %s", code, out)
	}
	if !app.Running() || !app.Healthy() {
		t.Fatal("the -Xrs JVM no longer runs or answers")
	}
}
