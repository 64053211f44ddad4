package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

// Ctrl-C in the middle of a long profile still prints the report of what
// was sampled and leaves no BPF program, map or perf event behind.
func TestProfileInterruptReportsAndLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	bin := Perfscope(t)
	spinner := testutil.StartSpinner(t, 4)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)

	cmd := exec.Command(bin, "profile", "--pid", strconv.Itoa(spinner.Process.Pid), "--duration", "60s", "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("profile after SIGINT: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("profile did not stop within 20 s of SIGINT")
	}
	var r struct {
		Data struct {
			Samples      uint64 `json:"samples"`
			TopFunctions []struct {
				Function string `json:"function"`
			} `json:"top_functions"`
		} `json:"data"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("parse JSON: %v\n%s", err, stdout.String())
	}
	if r.Data.Samples == 0 || len(r.Data.TopFunctions) == 0 || r.Data.TopFunctions[0].Function != testutil.SpinFunction {
		t.Errorf("interrupted profile: %d samples, top %+v; want %s on top", r.Data.Samples, r.Data.TopFunctions, testutil.SpinFunction)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}

// Without privileges the command exits 3 with one sentence naming the way
// out.
func TestProfileUnprivilegedExits3(t *testing.T) {
	testutil.RequireRoot(t) // to switch to nobody
	bin := Perfscope(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop privileges: %v", err)
	}
	cmd := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--inh-caps=-all", bin, "profile", "--duration", "1s")
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit = %v, want 3\n%s", err, out)
	}
	if lines := strings.Count(strings.TrimSpace(string(out)), "\n") + 1; lines > 2 || !strings.Contains(string(out), "root") {
		t.Errorf("want one sentence naming root (plus a hint), got:\n%s", out)
	}
}
