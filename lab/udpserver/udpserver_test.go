package udpserver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/perfscope/perfscope/lab/udpflood"
)

func TestModesReceive(t *testing.T) {
	for _, m := range []Mode{Single, ReusePort, ReusePortCPU} {
		t.Run(string(m), func(t *testing.T) {
			// Port 0 cannot be shared by a reuseport group: pick a port by
			// binding once, then start the group on it.
			probe, err := udpflood.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := probe.AddrPort()
			probe.Close()
			s, err := Start(Config{Listen: addr, Mode: m, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			want := 2
			if m == Single {
				want = 1
			}
			if s.Sockets() != want {
				t.Errorf("sockets = %d, want %d", s.Sockets(), want)
			}
			res, err := udpflood.Send(context.Background(), udpflood.Config{Target: addr, Senders: 2, Duration: 200 * time.Millisecond, MaxPackets: 20000})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(2 * time.Second)
			for s.Received() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if s.Received() == 0 {
				t.Fatalf("received nothing of %d sent", res.Sent)
			}
		})
	}
	if _, err := ParseMode("bogus"); err == nil {
		t.Error("bogus mode accepted")
	}
	if _, err := Start(Config{Listen: netip.AddrPort{}}); err == nil {
		t.Error("no address accepted")
	}
}
