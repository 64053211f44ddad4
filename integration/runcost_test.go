package integration

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
)

// Every measuring command reports its whole process's cost, exec to the
// report, beside the window's: the CPU the kernel counted for the process
// bounds it from above (formatting the report and exiting come after the
// stamp), and it holds at least what the report says start-up, attaching
// and the window took. The text says it in one line.
func TestRunCostCoversTheWholeProcess(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	bin := Perfscope(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	for _, args := range [][]string{
		{"udp", "--iface", "lo", "--duration", "2s"},
		{"udp", "--iface", "lo", "--duration", "2s", "--exact"},
		{"softirq", "--duration", "1s"},
		{"profile", "--duration", "1s"},
		{"recipe", "run", "lock-contention", "--set", "duration=1s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, append(args, "-o", "json")...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			// User and system time of the process, as the kernel counted
			// it at exit.
			cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			var r struct {
				Meta struct {
					DurationNs int64 `json:"duration_ns"`
				} `json:"meta"`
				Overhead *evidence.Overhead `json:"overhead"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				t.Fatalf("parse JSON: %v\n%s", err, stdout.String())
			}
			ov := r.Overhead
			if ov == nil || ov.RunCPUNs <= 0 {
				t.Fatalf("no run_cpu_ns in overhead %+v", ov)
			}
			run := time.Duration(ov.RunCPUNs)
			t.Logf("run_cpu_ns %v (attach %v, window %v) over %v; the kernel counted %v", run,
				time.Duration(ov.AttachCPUNs), time.Duration(ov.ProcessCPUNs), time.Duration(ov.RunNs), cpu)
			// getrusage and the kernel's count at exit tick alike; allow
			// one tick each way on top of the order.
			const tick = 10 * time.Millisecond
			if run > cpu+tick {
				t.Errorf("run_cpu_ns %v exceeds the process's whole CPU time %v", run, cpu)
			}
			if ov.AttachCPUNs <= 0 || run+tick < time.Duration(ov.AttachCPUNs+ov.ProcessCPUNs) {
				t.Errorf("run_cpu_ns %v is less than attaching (%v) and the window (%v) together", run, time.Duration(ov.AttachCPUNs), time.Duration(ov.ProcessCPUNs))
			}
			if ov.RunNs < r.Meta.DurationNs || ov.RunCPUShare <= 0 || ov.RunCPUShare != float64(ov.RunCPUNs)/float64(ov.RunNs) {
				t.Errorf("run_ns %d over a %d ns window, run_cpu_share %v", ov.RunNs, r.Meta.DurationNs, ov.RunCPUShare)
			}
		})
	}
	// The text's line.
	out, err := exec.Command(bin, "softirq", "--duration", "1s").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "the whole run, exec to this report: ") {
		t.Errorf("text without the whole run's cost:\n%s", out)
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}
