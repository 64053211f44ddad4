package diagnose

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

// bulkReceiver is a connection that received rate bytes/s over tcpBase's
// 10 s window, with a window of wnd bytes over a 30.5 ms receiver RTT,
// its buffer at rcvbuf, the application reading as fast as data arrives.
func bulkReceiver(port uint16, rate float64, wnd, rcvbuf uint32) evidence.TCPConnection {
	return evidence.TCPConnection{
		Local: netip.MustParseAddrPort("198.18.0.2:9000"), Remote: netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), port),
		State: "ESTABLISHED", PIDs: []int{77}, RTTUs: 30100,
		BytesReceived: u64(uint64(rate * 60)), BytesAcked: u64(1), BytesWindow: u64(uint64(rate * 10)),
		RcvSpace: wnd, RcvWnd: u32(wnd), RcvSsthresh: wnd, RcvRTTUs: u32(30500), Rcvbuf: rcvbuf,
	}
}

// rmemInput is tcpBase with tcp_rmem "4096 16384 65536" and conns.
func rmemInput(conns ...evidence.TCPConnection) TCPInput {
	in := tcpBase()
	in.Evidence.Settings.Rmem = &[3]int64{4096, 16384, 65536}
	in.Evidence.Connections.Rows = conns
	return in
}

func TestRcvbufLimitedFires(t *testing.T) {
	// 48 KB of window per 30.5 ms is 1.57 MB/s: the connection gets 1.5.
	in := rmemInput(bulkReceiver(40000, 1.5e6, 48000, 65536), bulkReceiver(40001, 1.4e6, 47000, 65536))
	f := runTCPRule(t, "tcp.rcvbuf-limited", in)
	if f == nil || f.Severity != Warn || !f.Recommendation.Applicable() || f.Recommendation.Changes[0].New != "4096 16384 16777216" {
		t.Fatalf("%+v", f)
	}
	joined := strings.Join(f.Evidence, "\n")
	for _, want := range []string{
		"198.18.0.2:9000 ← 198.18.0.1:40000 (pid [77]): received 1.5 MB/s (12.0 Mbit/s); window 48000 bytes / RTT 30.5 ms caps it at 1.6 MB/s",
		"rcvbuf 65536 bytes = tcp_rmem's max",
		"needs a window of 3.8 MB (the bandwidth-delay product) for 1 Gbit/s",
		"net.ipv4.tcp_rmem 4096 16384 65536",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("evidence lacks %q:\n%s", want, joined)
		}
	}
	if !strings.HasPrefix(f.Title, "2 TCP connections receive at the pace of their receive window: 2.9 MB/s") {
		t.Errorf("title %q", f.Title)
	}
	// The window is 48000/65536 of the buffer: 16 MiB allows ~12 MB.
	if !strings.Contains(f.Recommendation.Expected, "about 12.3 MB") {
		t.Errorf("expected %q", f.Recommendation.Expected)
	}

	// Without rcv_rtt the connection's RTT stands in.
	c := bulkReceiver(40000, 1.5e6, 48000, 65536)
	c.RcvRTTUs = nil
	if f := runTCPRule(t, "tcp.rcvbuf-limited", rmemInput(c)); f == nil || !strings.Contains(f.Evidence[0], "RTT 30.1 ms") {
		t.Errorf("rtt fallback: %+v", f)
	}

	// The pace share is tunable: at 100% of the window's pace, 95% is not enough.
	r := TCPRules[ruleIndex("tcp.rcvbuf-limited")]
	if f := r.CheckTuned(in, Thresholds{"tcp_rcvwnd_pace_share": 1}); f != nil {
		t.Errorf("a raised pace share still fired: %+v", f)
	}
}

// A socket with SO_RCVBUF above tcp_rmem's max is not autotuned: the
// sysctl cannot help it, the application's setsockopt can.
func TestRcvbufLimitedLocked(t *testing.T) {
	in := rmemInput(bulkReceiver(40000, 2.9e6, 90000, 131072))
	f := runTCPRule(t, "tcp.rcvbuf-limited", in)
	if f == nil || f.Recommendation.Kind != KindCode || len(f.Recommendation.Changes) != 0 || len(f.Recommendation.Code) == 0 ||
		!strings.Contains(f.Evidence[0], "set with SO_RCVBUF") {
		t.Fatalf("%+v", f)
	}
	// With one autotuned connection too: the sysctl, and the code for the other.
	in.Evidence.Connections.Rows = append(in.Evidence.Connections.Rows, bulkReceiver(40001, 1.5e6, 48000, 65536))
	f = runTCPRule(t, "tcp.rcvbuf-limited", in)
	if f == nil || f.Recommendation.Kind != KindSetting || len(f.Recommendation.Code) == 0 ||
		!strings.Contains(strings.Join(f.Recommendation.Caveats, "\n"), "SO_RCVBUF set") {
		t.Fatalf("mixed: %+v", f)
	}
}

func TestRcvbufLimitedSilent(t *testing.T) {
	// A slow reader: the buffer is full of unread data and the window is
	// what the application frees; received ≈ window/RTT, but raising the
	// buffer would only hold more unread data.
	slow := bulkReceiver(40000, 250e3, 8000, 65536)
	slow.RecvQ = 50000
	// At tcp_rmem's max but far from its window's pace: something else
	// (the sender, the path) sets the rate.
	slowSender := bulkReceiver(40002, 200e3, 48000, 65536)
	// A sender: bytes_window is what the peer acked, not received.
	sender := bulkReceiver(40003, 1.5e6, 48000, 65536)
	sender.BytesAcked = u64(1 << 40)
	// Too little data over the window to judge.
	short := bulkReceiver(40004, 50e3, 1500, 65536)
	for name, c := range map[string]evidence.TCPConnection{"slow reader": slow, "slow sender": slowSender, "a sender": sender, "little data": short} {
		if f := runTCPRule(t, "tcp.rcvbuf-limited", rmemInput(c)); f != nil {
			t.Errorf("%s: %+v", name, f)
		}
	}
	// A bulk connection whose buffer has room to grow under the default
	// tcp_rmem (autotuning is not capped): 100 MB/s with a 3 MB window
	// at 30 ms.
	in := tcpBase()
	in.Evidence.Connections.Rows = []evidence.TCPConnection{bulkReceiver(40001, 100e6, 3_000_000, 4_000_000)}
	if f := runTCPRule(t, "tcp.rcvbuf-limited", in); f != nil {
		t.Errorf("roomy buffer: %+v", f)
	}
	// tcp_rmem unread: whether the buffer is capped cannot be told.
	in = rmemInput(bulkReceiver(40000, 1.5e6, 48000, 65536))
	in.Evidence.Settings.Rmem = nil
	if f := runTCPRule(t, "tcp.rcvbuf-limited", in); f != nil {
		t.Errorf("without tcp_rmem: %+v", f)
	}
}

func ruleIndex(id string) int {
	for i, r := range TCPRules {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// recordedTCP reads the TCP evidence of a `perfscope tcp` run recorded by
// `perfscope lab tcp --scenario rmem-bdp --keep` (data.tcp of its report).
func recordedTCP(t *testing.T, name string) TCPInput {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rmem-bdp", name))
	if err != nil {
		t.Fatal(err)
	}
	var in TCPInput
	if err := json.Unmarshal(b, &in.Evidence); err != nil {
		t.Fatal(err)
	}
	return in
}

// Recorded in the lab: two clients streaming through a 30 ms delay line
// with tcp_rmem's max at 64 KiB (each at 1.28 MB/s, its 39.5 KB window
// per 30 ms), then after --apply raised it to 16 MiB (10 MB windows, the
// connections at ~80 MB/s each: a quarter of the window's pace).
func TestRcvbufLimitedRecorded(t *testing.T) {
	f := runTCPRule(t, "tcp.rcvbuf-limited", recordedTCP(t, "before.json"))
	if f == nil || !f.Recommendation.Applicable() || f.Recommendation.Changes[0].New != "4096 16384 16777216" ||
		!strings.HasPrefix(f.Title, "2 TCP connections") || !strings.Contains(f.Evidence[0], "window 39552 bytes / RTT 30.0 ms") {
		t.Fatalf("before the fix: %+v", f)
	}
	if f := runTCPRule(t, "tcp.rcvbuf-limited", recordedTCP(t, "after.json")); f != nil {
		t.Errorf("after the fix: %+v", f)
	}
}
