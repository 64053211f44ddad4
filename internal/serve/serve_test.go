package serve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/measure"
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
	// The flood outlasts every window the test may wait for (3 + 10 + the
	// page's): it ended at 20 s once, under the 25 s a busy CI machine
	// took, and the latest window's page had no drops to show. cancel()
	// stops it when the test ends.
	go udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: 60 * time.Second, Rate: 200000})

	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	windows := make(chan Window, 16)
	addr := make(chan string, 1)
	srv, err := Open(measure.Live(), Options{Recipe: "udp-rx", Params: map[string]string{"iface": "lo", "port": strconv.Itoa(port)},
		Listen: "127.0.0.1:0", Interval: time.Second,
		OnListen: func(a string) { addr <- a }, OnWindow: offer(windows)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	base := "http://" + <-addr
	awaitWindows(t, windows, done, 3, nil)
	p := strconv.Itoa(port)
	// Socket lock contention needs both senders' packets on the socket at
	// once; while other tests keep a CPU busy a window can see none, so
	// the counter may start later: up to 10 more windows for it to appear.
	// It must then be above 0, as before.
	fams := scrape(t, srv.Handler(), "application/openmetrics-text; version=1.0.0")
	for extra := 0; extra < 10; extra++ {
		if v, ok := value(fams["perfscope_socket_lock_wait_seconds_total"], "port", p, "protocol", "udp"); ok && v > 0 {
			break
		}
		awaitWindows(t, windows, done, 1, nil)
		fams = scrape(t, srv.Handler(), "application/openmetrics-text; version=1.0.0")
	}
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
	// The latest window's page: its findings and the port's drops (by
	// reason, or by the socket's counter when the budget sampled the drop
	// probe out of that window).
	if resp, err = http.Get(base + "/report"); err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		!bytes.Contains(page, []byte(`data-finding="net.udp-rcvbuf"`)) || !bytes.Contains(page, []byte("<td>"+p+"</td><td>")) {
		t.Errorf("/report: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(page))
	}
	cancel()
	stopping := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		t.Logf("stopped %v after cancel", time.Since(stopping).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		// Where it waits is the defect to find: say it.
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatal("serve did not stop within 15s of cancel")
	}
	if _, err := http.Get(base + "/metrics"); err == nil {
		t.Error("the HTTP server still answers after shutdown")
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}

// A user's recipe file, served: softirq and lock contention system-wide
// on a timeline (its interval shorter than serve's window), the recipe's
// own rules, the same program ids every window, nothing left behind.
func TestServeUserRecipeFile(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	file := filepath.Join(t.TempDir(), "softirq-locks.yaml")
	err := os.WriteFile(file, []byte(`version: 1
name: softirq-locks
description: softirq per CPU and kernel lock contention, served
probes:
  - softirq:
      latency: false
  - lockstat:
      stacks_every: 16
rules:
  - family: locks
  - id: net.softirq-concentrated
window:
  duration: 10s
  interval: 250ms
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	go udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: 10 * time.Second, Rate: 50000})
	windows := make(chan Window, 16)
	srv, err := Open(measure.Live(), Options{Recipe: file, Listen: "127.0.0.1:0", Interval: time.Second,
		OnWindow: offer(windows)})
	if err != nil {
		t.Fatal(err)
	}
	if srv.RecipeName() != "softirq-locks" {
		t.Errorf("recipe name %q", srv.RecipeName())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	awaitWindows(t, windows, done, 2, func(i int, w Window) {
		if w.Softirq == nil || w.Locks == nil || w.Queues != nil || w.Drops != nil {
			t.Fatalf("window %d: sections softirq %v locks %v queues %v drops %v", i, w.Softirq != nil, w.Locks != nil, w.Queues != nil, w.Drops != nil)
		}
		if len(w.Softirq.CPUs) == 0 || w.Overhead == nil || len(w.Overhead.Programs) == 0 {
			t.Errorf("window %d: no softirq CPUs or no BPF cost: %+v", i, w.Overhead)
		}
	})
	fams := scrape(t, srv.Handler(), "application/openmetrics-text; version=1.0.0")
	if v := sum(fams["perfscope_softirq_total"], "vector", "NET_RX"); v == 0 {
		t.Error("no NET_RX softirqs under a loopback flood")
	}
	if _, ok := value(fams["perfscope_recipe_info"], "recipe", "softirq-locks"); !ok {
		t.Error("recipe_info does not name the file's recipe")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}

// awaitWindows waits for n windows, checking each, and that the programs
// loaded by the first stay loaded: probes attach once, not per window.
func awaitWindows(t *testing.T, windows <-chan Window, done <-chan error, n int, check func(int, Window)) {
	t.Helper()
	var attached map[uint32]bool
	for i := 0; i < n; i++ {
		select {
		case w := <-windows:
			if check != nil {
				check(i, w)
			}
		case err := <-done:
			t.Fatalf("serve ended: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("no window in 20s")
		}
		// Not the entry cost's empty program (probes.MeasureEntryCost):
		// when its measurement failed on a busy machine, the next window
		// measures it again, loading and unloading that program as the
		// test lists them (CI: "window 1: program 55866 was unloaded").
		now := testutil.BPFProgramIDs(t, "entry_cost")
		if attached == nil {
			attached = now
		}
		for id := range attached {
			if !now[id] {
				t.Fatalf("window %d: program %d was unloaded: probes must stay attached across windows", i, id)
			}
		}
	}
}

// offer hands windows to the test without ever blocking serve: a full
// channel drops the window (the test has plenty unread). A blocking send
// once held serve's loop in OnWindow after the test had stopped reading,
// and cancel could not stop it.
func offer(windows chan<- Window) func(Window) {
	return func(w Window) {
		select {
		case windows <- w:
		default:
		}
	}
}
