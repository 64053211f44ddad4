package bench

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/httpcount"
)

// BenchmarkHTTPCountSyscallCost measures what the passive request count of
// `perfscope jvm` and `perfscope go` costs every other process on the
// machine. On the syscall path (kernels before 6.3) its programs run on
// every syscall entry and exit (raw_syscalls), and return after one
// comparison unless the caller is the target; on the socket path
// (sock:sock_send_length/sock_recv_length) they run only on socket sends
// and receives. The benchmark times a tight loop of cheap syscalls
// (getppid) in this process without and with the probe attached for
// another process (a sleeping child standing in for the service), for each
// path and attach method, and reports the added nanoseconds per syscall
// next to the programs' own run time from bpf_stats.
//
//	go test -run '^$' -bench HTTPCountSyscallCost -benchtime 1x ./bench/   (root)
func BenchmarkHTTPCountSyscallCost(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	const n = 2_000_000
	loop := func() time.Duration {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			unix.Getppid()
		}
		return time.Since(t0)
	}
	perSyscall := func() float64 {
		var v []float64
		for r := 0; r < 5; r++ {
			v = append(v, float64(loop())/n)
		}
		return median(v)
	}
	for _, path := range []httpcount.Path{httpcount.PathSocket, httpcount.PathSyscall} {
		for _, m := range probes.Methods {
			httpCountSyscallCost(b, path, m, sleeper.Process.Pid, n, loop, perSyscall)
		}
	}
}

func httpCountSyscallCost(b *testing.B, path httpcount.Path, m probes.AttachMethod, pid, n int, loop func() time.Duration, perSyscall func() float64) {
	{
		b.Run(string(path)+"/"+string(m), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				without := perSyscall()
				p, err := httpcount.Open(httpcount.Options{Method: m, Path: path, TGID: pid, Ports: []uint16{8080}})
				if err != nil {
					b.Fatal(err)
				}
				with := perSyscall()
				stats, err := probes.EnableStats()
				if err != nil {
					p.Close()
					b.Fatal(err)
				}
				before := p.Costs()
				loop()
				after := p.Costs()
				stats.Close()
				p.Close()
				var runs uint64
				var ns time.Duration
				for _, c := range after {
					runs += c.RunCount
					ns += c.RunTime
				}
				for _, c := range before {
					runs -= c.RunCount
					ns -= c.RunTime
				}
				b.ReportMetric(without, "ns/syscall-without")
				b.ReportMetric(with, "ns/syscall-with")
				b.ReportMetric(with-without, "ns/syscall-added")
				if runs > 0 {
					b.ReportMetric(float64(ns)/float64(runs), "bpf-ns/run")
					b.ReportMetric(float64(runs)/float64(n), "runs/syscall")
				}
			}
		})
	}
}
