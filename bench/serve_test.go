package bench

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/serve"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/measure"
)

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkServeMetricsSoak adds windows the way hours of serve do — each
// with its own ports (a scan), lock classes and findings — and scrapes
// every tenth: 100,000 windows are 35 days at --interval 30s. It reports
// the heap after the first 1,000 windows and at the end: flat means the
// series bound holds.
func BenchmarkServeMetricsSoak(b *testing.B) {
	const windows = 100000
	for i := 0; i < b.N; i++ {
		m := serve.NewMetrics("udp-rx")
		var at1k uint64
		for w := 0; w < windows; w++ {
			port := 1024 + w%60000
			m.Add(serve.Window{Begin: time.Unix(int64(w)*30, 0), End: time.Unix(int64(w+1)*30, 0),
				Softirq: &evidence.SoftirqEvidence{CPUs: []evidence.SoftirqCPU{{CPU: w % 64, Vectors: map[string]evidence.SoftirqVector{"NET_RX": {Count: 10, TimeNs: 1000}}}}},
				Locks: &evidence.LockSection{ByClass: map[string]uint64{"socket-wakeup": 100},
					Sockets: []evidence.SocketContention{{Socket: evidence.SocketRef{Port: port, Protocol: "udp"}, Count: 1, TotalNs: 100}}},
				Drops:    &evidence.DropSection{ByPort: []evidence.PortDrops{{Port: port, Reason: "kfree_skb:SOCKET_RCVBUFF", Count: 3}}},
				Findings: []diagnose.Finding{{ID: "net.udp-rcvbuf", Severity: diagnose.Crit, Impact: 0.3}},
				Overhead: &evidence.Overhead{Programs: []evidence.ProgramCost{{Program: "skb:kfree_skb", RunCount: 3, RunTimeNs: 300}}}})
			if w%10 == 0 {
				collect(m)
			}
			if w == 1000 {
				at1k = heapInUse()
			}
		}
		end := heapInUse()
		b.ReportMetric(float64(at1k)/1024, "heap-KiB-at-1k-windows")
		b.ReportMetric(float64(end)/1024, "heap-KiB-at-100k-windows")
	}
}

func collect(m *serve.Metrics) {
	mc := make(chan prometheus.Metric, 4096)
	go func() { m.Collect(mc); close(mc) }()
	for range mc {
	}
}

// BenchmarkServeLive serves the udp-rx recipe as written (its CPU profile
// on at 99 Hz) on loopback under a paced flood, with --interval 1s, for
// PERFSCOPE_SOAK (default 60s), and reports perfscope's heap after the
// first 10 windows, at half time and after the last, the windows done and
// the events the probes lost (the profile's samples among them).
func BenchmarkServeLive(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	soak := 60 * time.Second
	if s := os.Getenv("PERFSCOPE_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		soak = d
	}
	for i := 0; i < b.N; i++ {
		sink, err := udpflood.Listen("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), soak)
		go udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 1, Duration: soak, Rate: 50000})
		var n int
		var at10, mid, last, lost uint64
		start := time.Now()
		srv, err := serve.Open(measure.Live(), serve.Options{Recipe: "udp-rx", Listen: "127.0.0.1:0", Interval: time.Second,
			Params: map[string]string{"iface": "lo", "port": strconv.Itoa(int(sink.AddrPort().Port()))},
			OnWindow: func(w serve.Window) {
				n++
				if w.Overhead != nil {
					lost += w.Overhead.EventsLost
				}
				last = heapInUse()
				if n == 10 {
					at10 = last
				}
				if mid == 0 && time.Since(start) >= soak/2 {
					mid = last
				}
			}})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Run(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		sink.Close()
		b.ReportMetric(float64(n), "windows")
		b.ReportMetric(float64(at10)/1024, "heap-KiB-at-10-windows")
		b.ReportMetric(float64(mid)/1024, "heap-KiB-at-half-time")
		b.ReportMetric(float64(last)/1024, "heap-KiB-at-last-window")
		b.ReportMetric(float64(lost), "events-lost")
	}
}
