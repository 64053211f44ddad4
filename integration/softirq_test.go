package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
)

type softirqReport struct {
	Schema   string                   `json:"schema"`
	Data     evidence.SoftirqEvidence `json:"data"`
	Overhead evidence.Overhead        `json:"overhead"`
}

// Under a bounded loopback UDP flood, perfscope softirq must show NET_RX
// work and agree with /proc/softirqs over the same window within 3 %.
func TestSoftirqAgreesWithProcUnderFlood(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	bin := Perfscope(t)

	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	floodDone := make(chan udpflood.Result, 1)
	go func() {
		r, _ := udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: 6 * time.Second, MaxPackets: 20_000_000})
		floodDone <- r
	}()
	time.Sleep(300 * time.Millisecond) // let the flood reach a steady rate

	var out, stderr bytes.Buffer
	// --exact: every run counted, so the probe must agree with the
	// kernel's own counter (the default budget samples a loopback flood,
	// where a softirq runs per packet).
	cmd := exec.Command(bin, "softirq", "--duration", "3s", "--exact", "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("perfscope softirq: %v\n%s", err, stderr.String())
	}
	cancel()
	sent := <-floodDone

	var r softirqReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	var rx evidence.VectorAgreement
	for _, a := range r.Data.Totals {
		if a.Vector == "NET_RX" {
			rx = a
		}
	}
	t.Logf("flood sent %d datagrams; NET_RX probe=%d /proc/softirqs=%d diff=%.3f%%", sent.Sent, rx.Probe, rx.ProcCount, rx.Diff*100)
	if rx.Probe < 1000 {
		t.Fatalf("NET_RX runs = %d under a loopback flood; the probe sees nothing", rx.Probe)
	}
	if math.Abs(rx.Diff) > 0.03 {
		t.Errorf("probe and /proc/softirqs disagree by %.2f%% on NET_RX", rx.Diff*100)
	}
	var share float64
	for _, c := range r.Data.CPUs {
		share += c.Vectors["NET_RX"].Share
	}
	if share <= 0 {
		t.Error("NET_RX time share is zero on every CPU")
	}
	if len(r.Overhead.Programs) != 3 || r.Overhead.Programs[0].RunCount == 0 {
		t.Errorf("overhead programs = %+v", r.Overhead.Programs)
	}
}

// SIGINT mid-run: perfscope prints what it measured, exits 0, and leaves no
// BPF program or map and no tracefs mount behind, whichever attach method.
func TestSoftirqInterruptLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	bin := Perfscope(t)
	for _, method := range []string{"tp_btf", "raw_tp", "tracepoint"} {
		t.Run(method, func(t *testing.T) {
			tracefsBefore := mounted("/sys/kernel/tracing")
			progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			var out, stderr bytes.Buffer
			cmd := exec.Command(bin, "softirq", "--duration", "60s", "--attach-method", method, "-o", "json")
			cmd.Stdout, cmd.Stderr = &out, &stderr
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
					t.Fatalf("exit after SIGINT: %v\n%s", err, stderr.String())
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatal("perfscope did not stop on SIGINT")
			}
			var r softirqReport
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("no report after SIGINT: %v\n%s", err, out.String())
			}
			if d := time.Duration(r.Data.DurationNs); d <= 0 || d > 10*time.Second {
				t.Errorf("reported window %v after an interrupt at ~1.5s", d)
			}
			if r.Overhead.AttachMethod != method {
				t.Errorf("attach method %s, want %s", r.Overhead.AttachMethod, method)
			}
			testutil.AssertNoNewBPF(t, progs, maps)
			if mounted("/sys/kernel/tracing") != tracefsBefore {
				t.Errorf("tracefs mount state changed: before %v", tracefsBefore)
			}
		})
	}
}

func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte(" "+dir+" "))
}
