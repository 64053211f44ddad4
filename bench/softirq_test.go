// Package bench holds perfscope's performance benchmarks. They measure the
// built binary and its probes on this machine; results and the exact
// commands are recorded in BENCHMARKS.md. They are not tests: nothing here
// asserts a timing.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
)

func buildBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "perfscope")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/perfscope")
	cmd.Dir = testutil.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkSoftirqProbe runs `perfscope softirq` under a bounded loopback
// UDP flood and reports: time from process start to probes attached, peak
// RSS, and the probe's cost per event from bpf_stats (run_time_ns /
// run_cnt over the three programs). Targets: attach < 100 ms, RSS < 40 MB,
// < 150 ns per event.
func BenchmarkSoftirqProbe(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	bin := buildBinary(b)
	statsBefore, _ := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")

	for i := 0; i < b.N; i++ {
		sink, err := udpflood.Listen("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 1, Duration: 8 * time.Second, MaxPackets: 30_000_000})
			close(done)
		}()
		time.Sleep(300 * time.Millisecond)

		var out bytes.Buffer
		cmd := exec.Command(bin, "softirq", "--duration", "3s", "-o", "json")
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		cancel()
		<-done
		sink.Close()

		var r struct {
			Overhead evidence.Overhead `json:"overhead"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			b.Fatal(err)
		}
		var runs, ns uint64
		for _, p := range r.Overhead.Programs {
			runs += p.RunCount
			ns += p.RunTimeNs
		}
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
		b.ReportMetric(float64(r.Overhead.AttachNs)/1e6, "attach-ms")
		b.ReportMetric(float64(rss)/1024, "peak-RSS-MB")
		if runs > 0 {
			b.ReportMetric(float64(ns)/float64(runs), "ns/event")
			b.ReportMetric(float64(runs), "events")
		}
	}
	statsAfter, _ := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	if strings.TrimSpace(string(statsBefore)) != strings.TrimSpace(string(statsAfter)) {
		b.Errorf("kernel.bpf_stats_enabled changed: %q → %q", statsBefore, statsAfter)
	}
}
