package softirq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/probes"
)

func sum(s Snapshot, vec int) (n uint64, t time.Duration) {
	for _, cpu := range s.PerCPU {
		n += cpu[vec].Count
		t += cpu[vec].Time
	}
	return
}

// Each attach method must load, attach, see NET_RX softirqs caused by a
// loopback flood, and detach leaving no program behind.
func TestProbeSeesLoopbackFlood(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	for _, m := range probes.Methods {
		t.Run(string(m), func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			p, err := Open(Options{Method: m})
			if errors.Is(err, probes.ErrNotSupported) && m == probes.MethodBTF {
				t.Skipf("tp_btf unsupported here: %v", err)
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if p.Method() != m {
				t.Fatalf("method = %s, want %s", p.Method(), m)
			}
			first, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			sink, err := udpflood.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			res, err := udpflood.Send(context.Background(), udpflood.Config{
				Target: sink.AddrPort(), Senders: 1, Duration: 300 * time.Millisecond, MaxPackets: 200000,
			})
			sink.Close()
			if err != nil {
				t.Fatal(err)
			}
			last, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			d := last.Sub(first)
			rx, rxTime := sum(d, NetRX)
			if rx == 0 || rxTime == 0 {
				t.Fatalf("no NET_RX seen after sending %d datagrams: count=%d time=%v", res.Sent, rx, rxTime)
			}
			var lat uint64
			for _, cpu := range d.NetRXLatency {
				for _, n := range cpu {
					lat += n
				}
			}
			if lat == 0 {
				t.Errorf("NET_RX raise→entry histogram is empty after %d NET_RX runs", rx)
			}
			if err := p.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}

// With NoLatency the raise tracepoint is not attached: counts and time
// stay, the histograms stay empty, and there is one program fewer per
// softirq.
func TestNoLatencyKeepsCounts(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	p, err := Open(Options{NoLatency: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if n := len(p.Attached.Programs); n != 2 {
		t.Errorf("%d programs attached, want 2 (entry, exit)", n)
	}
	first, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, err = udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: 1, Duration: 200 * time.Millisecond, MaxPackets: 100000})
	sink.Close()
	if err != nil {
		t.Fatal(err)
	}
	last, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	d := last.Sub(first)
	if rx, rxTime := sum(d, NetRX); rx == 0 || rxTime == 0 {
		t.Errorf("no NET_RX counted: %d in %v", rx, rxTime)
	}
	for _, cpu := range d.NetRXLatency {
		for _, n := range cpu {
			if n != 0 {
				t.Fatalf("latency histogram filled without the raise tracepoint: %v", d.NetRXLatency)
			}
		}
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}
