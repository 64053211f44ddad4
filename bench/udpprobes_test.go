package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// floodRate floods a loopback sink with two senders for d and returns the
// datagrams per second the sink received.
func floodRate(b *testing.B, sink *udpflood.Sink, d time.Duration) float64 {
	b.Helper()
	before := sink.Received()
	res, err := udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: d})
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	return float64(sink.Received()-before) / res.Elapsed.Seconds()
}

func newSink(b *testing.B) *udpflood.Sink {
	b.Helper()
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return sink
}

type costly interface {
	Costs() []probes.ProgramCost
	Close() error
}

// probeOpeners open each probe as `perfscope udp --iface lo --port P`
// does, for the sink's port.
var probeOpeners = map[string]func(port uint16) (costly, error){
	"netqueue": func(uint16) (costly, error) { return netqueue.Open(netqueue.Options{Ifindex: 1}) },
	"lockstat": func(uint16) (costly, error) { return lockstat.Open(lockstat.Options{}) },
	"udpdrop":  func(port uint16) (costly, error) { return udpdrop.Open(udpdrop.Options{Port: port}) },
	"udpsock":  func(port uint16) (costly, error) { return udpsock.Open(udpsock.Options{Port: port}) },
}

// BenchmarkUDPProbesOverhead alternates loopback floods (2 senders → 1
// reading socket) without and with udp probes attached (netqueue on lo,
// lockstat, udpdrop, udpsock; all, then each alone), and reports the
// received datagrams/s of each, the loss in %, and each probe's mean BPF
// cost per event from bpf_stats. BenchmarkUDPCommandOverhead measures the
// whole command.
func BenchmarkUDPProbesOverhead(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	for _, set := range [][]string{{"netqueue", "lockstat", "udpdrop", "udpsock"}, {"netqueue"}, {"lockstat"}, {"udpdrop"}, {"udpsock"}} {
		name := strings.Join(set, "+")
		b.Run(name, func(b *testing.B) { benchProbes(b, set) })
	}
}

func benchProbes(b *testing.B, set []string) {
	const rounds, window = 6, time.Second
	for i := 0; i < b.N; i++ {
		var without, with float64
		cost := map[string][2]uint64{}
		for r := 0; r < rounds; r++ {
			sink := newSink(b)
			without += floodRate(b, sink, window)
			sink.Close()

			stats, err := probes.EnableStats()
			if err != nil {
				b.Fatal(err)
			}
			sink = newSink(b)
			open := map[string]costly{}
			for _, name := range set {
				p, err := probeOpeners[name](sink.AddrPort().Port())
				if err != nil {
					b.Fatal(err)
				}
				open[name] = p
			}
			with += floodRate(b, sink, window)
			sink.Close()
			for name, p := range open {
				c := cost[name]
				for _, pc := range p.Costs() {
					c[0] += pc.RunCount
					c[1] += uint64(pc.RunTime)
				}
				cost[name] = c
				p.Close()
			}
			stats.Close()
		}
		b.ReportMetric(without/rounds, "pps-without")
		b.ReportMetric(with/rounds, "pps-with")
		b.ReportMetric(100*(without-with)/without, "loss-%")
		for name, c := range cost {
			if c[0] > 0 {
				b.ReportMetric(float64(c[1])/float64(c[0]), name+"-ns/event")
			}
		}
	}
}
