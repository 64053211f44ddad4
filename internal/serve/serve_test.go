package serve

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/internal/udpflood"
	"github.com/perfscope/perfscope/recipes"
)

// udp-rx served on loopback under a flood into a tiny receive buffer: the
// probes attach once (the same program ids every window), the counters
// grow window after window, the scrape shows the port's drops and socket
// lock wait and the receive-buffer finding, and shutdown leaves no BPF
// object behind.
func TestServeUDPRXOnLoopback(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.Conn.SetReadBuffer(4096)
	port := int(sink.AddrPort().Port())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: 20 * time.Second, Rate: 200000})

	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	windows := make(chan Window, 16)
	addr := make(chan string, 1)
	srv, err := Open(recipes.Live(), Options{Recipe: "udp-rx", Params: Params{"iface": "lo", "port": strconv.Itoa(port)},
		Listen: "127.0.0.1:0", Interval: time.Second,
		OnListen: func(a string) { addr <- a }, OnWindow: func(w Window) { windows <- w }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	base := "http://" + <-addr
	var attached map[uint32]bool
	for i := 0; i < 3; i++ {
		select {
		case <-windows:
		case err := <-done:
			t.Fatalf("serve ended: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("no window in 20s")
		}
		now := testutil.BPFProgramIDs(t)
		if attached == nil {
			attached = now
			continue
		}
		for id := range attached {
			if !now[id] {
				t.Fatalf("window %d: program %d was unloaded: probes must stay attached across windows", i, id)
			}
		}
	}
	fams := scrape(t, srv.Handler(), "application/openmetrics-text; version=1.0.0")
	p := strconv.Itoa(port)
	if v, ok := value(fams["perfscope_udp_drops_total"], "port", p, "reason", "kfree_skb:SOCKET_RCVBUFF"); !ok || v == 0 {
		t.Errorf("drops on port %s: %v %v", p, v, ok)
	}
	if v, ok := value(fams["perfscope_socket_lock_wait_seconds_total"], "port", p, "protocol", "udp"); !ok || v == 0 {
		t.Errorf("socket lock wait on port %s: %v %v", p, v, ok)
	}
	if v, _ := value(fams["perfscope_finding"], "id", "net.udp-rcvbuf"); v != 1 {
		t.Error("no net.udp-rcvbuf finding")
	}
	if v, _ := value(fams["perfscope_windows_total"]); v < 3 {
		t.Errorf("windows_total = %v", v)
	}
	if v, ok := value(fams["perfscope_process_resident_memory_bytes"]); !ok || v == 0 {
		t.Error("perfscope's own RSS is not exported")
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop within 15s of cancel")
	}
	if _, err := http.Get(base + "/metrics"); err == nil {
		t.Error("the HTTP server still answers after shutdown")
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}
