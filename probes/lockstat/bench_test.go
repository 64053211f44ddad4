package lockstat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/probes"
)

// BenchmarkContentionFlood attaches the probe during a loopback flood (2
// senders → 1 reading socket, Makita's contention) and reports the mean
// bpf_stats cost of each handler, with a stack for every contention and for
// 1 in DefaultStackEvery and 2×DefaultStackEvery: contention_end runs with
// the lock held, so its cost lengthens the contended critical section, and
// contention_begin's unwind is what stack sampling saves.
//
// Run it alone on the machine: flock /tmp/perfscope-bench.lock go test ...
func BenchmarkContentionFlood(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	for _, every := range []int{1, DefaultStackEvery, 2 * DefaultStackEvery, MaxStackEvery} {
		b.Run(fmt.Sprintf("stack-1-in-%d", every), func(b *testing.B) { benchContentionFlood(b, every) })
	}
}

func benchContentionFlood(b *testing.B, every int) {
	for i := 0; i < b.N; i++ {
		stats, err := probes.EnableStats()
		if err != nil {
			b.Fatal(err)
		}
		p, err := Open(Options{StackEvery: every})
		if err != nil {
			stats.Close()
			b.Fatal(err)
		}
		sink, err := udpflood.Listen("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		res, err := udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: 2 * time.Second})
		received := sink.Received()
		sink.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range p.Costs() {
			b.ReportMetric(float64(c.PerRun().Nanoseconds()), c.Program+"-ns/run")
			b.ReportMetric(float64(c.RunCount)/res.Elapsed.Seconds(), c.Program+"-runs/s")
		}
		b.ReportMetric(float64(received)/res.Elapsed.Seconds(), "received/s")
		snap, err := p.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(snap.Locks)), "locks")
		b.ReportMetric(float64(len(snap.Owners)), "socket-locks")
		p.Close()
		stats.Close()
	}
}

// BenchmarkContentionEndPaths times the contention_end handler alone, run
// through BPF_PROG_TEST_RUN (bpf_stats counts those runs), on each path:
// "hit" is a lock already in the per-lock map (every contention but the
// first on a lock); "first-seen" paths insert the lock and look for its
// owner — a socket's receive-queue lock (found on the first candidate), its
// wait-queue lock (the last candidate) and a lock that is no socket's
// (every candidate tried and rejected). The addresses are real locks
// contended during a short loopback flood, whose sink stays open.
func BenchmarkContentionEndPaths(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	fl := contendedLocks(b)
	defer fl.sink.Close()
	r := newEndRunner(b)
	defer r.Close()
	for _, c := range []struct {
		name      string
		lock      uint64
		firstSeen bool
	}{
		{"hit", fl.receiveQueue, false},
		{"first-seen-receive-queue", fl.receiveQueue, true},
		{"first-seen-wait-queue", fl.waitQueue, true},
		{"first-seen-not-a-socket", fl.other, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.lock == 0 {
				b.Skip("no such lock contended during the flood")
			}
			stats, err := probes.EnableStats()
			if err != nil {
				b.Fatal(err)
			}
			defer stats.Close()
			before, err := r.End.Stats()
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				r.end(b, c.lock, c.firstSeen)
			}
			after, err := r.End.Stats()
			if err != nil {
				b.Fatal(err)
			}
			if n := after.RunCount - before.RunCount; n > 0 {
				b.ReportMetric(float64((after.Runtime-before.Runtime).Nanoseconds())/float64(n), "bpf-ns/run")
			}
		})
	}
}
