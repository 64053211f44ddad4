package udpflood

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestSendStopsAtMaxPackets(t *testing.T) {
	sink, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	res, err := Send(context.Background(), Config{Target: sink.AddrPort(), Senders: 2, Duration: 5 * time.Second, MaxPackets: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// Each sender checks the shared count before sending, so the two can
	// overshoot by at most one datagram each.
	if res.Sent < 1000 || res.Sent > 1002 {
		t.Errorf("sent %d, want 1000 (+ at most one per sender)", res.Sent)
	}
}

func TestSendHoldsRate(t *testing.T) {
	sink, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	const rate = 2000
	res, err := Send(context.Background(), Config{Target: sink.AddrPort(), Senders: 2, Duration: 500 * time.Millisecond, Rate: rate})
	if err != nil {
		t.Fatal(err)
	}
	// Unpaced, loopback takes hundreds of thousands per second; paced,
	// never more than the budget of the elapsed time (+1 per sender).
	// How close it gets depends on scheduling, which is not asserted.
	limit := uint64(rate*res.Elapsed.Seconds()) + 2
	if res.Sent > limit || res.Sent == 0 {
		t.Errorf("sent %d in %v at --rate %d, want some and at most %d", res.Sent, res.Elapsed, rate, limit)
	}
}

func TestSendRefusesNonLoopback(t *testing.T) {
	_, err := Send(context.Background(), Config{Target: netip.MustParseAddrPort("192.0.2.1:9"), Duration: time.Second})
	if err == nil {
		t.Fatal("a flood to a non-loopback address without AllowNonLoopback was accepted")
	}
}

// Flows spreads the senders over that many sockets: the receiver sees that
// many source ports, each sending its share, cycled datagram by datagram.
func TestSendFlowsUseDistinctSourcePorts(t *testing.T) {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadBuffer(1 << 20)
	target := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	const flows, packets = 8, 400
	res, err := Send(context.Background(), Config{Target: target, Senders: 2, Flows: flows, Duration: 5 * time.Second, MaxPackets: packets, Rate: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	ports := map[uint16]int{}
	buf := make([]byte, 2048)
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	for got := uint64(0); got < res.Sent; got++ {
		_, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			break // a datagram lost on loopback is not what this checks
		}
		ports[from.Port()]++
	}
	if len(ports) != flows {
		t.Fatalf("%d source ports (%v), want %d flows", len(ports), ports, flows)
	}
	for p, n := range ports {
		if n < packets/flows/2 {
			t.Errorf("flow from port %d sent %d of %d datagrams: flows are not cycled", p, n, res.Sent)
		}
	}
	if err := (Config{Target: target, Senders: 4, Flows: 2, Duration: time.Second}).Validate(); err == nil {
		t.Error("fewer flows than senders was accepted")
	}
}
