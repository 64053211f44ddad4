package compare

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/report"
)

// The recorded tcp runs: a python listener on 127.0.0.1:18081 with
// listen backlog 2 accepting every 20 ms under 16 connecting clients
// (before), then with backlog 1024 accepting at once (after), each
// measured by `perfscope tcp --iface lo --port 18081 --duration 4s -o json`.
func tcpRuns(t *testing.T) (Run, Run) {
	return load(t, "tcp-before.json"), load(t, "tcp-after.json")
}

func TestCompareTCPRecorded(t *testing.T) {
	before, after := tcpRuns(t)
	c := Compare(before, after)
	if c.TCP == nil || c.Before.PacketSource != "tcp_in_segs" || c.After.PacketSource != "tcp_in_segs" {
		t.Fatalf("tcp comparison %+v, sources %q %q", c.TCP, c.Before.PacketSource, c.After.PacketSource)
	}
	bs, as := 4.018178530, 4.395762969
	for _, tt := range []struct {
		key           string
		before, after float64
		better        *bool
	}{
		{"packets_per_s", 515 / bs, 45600 / as, ptrBool(true)},
		{"tcp.listen_overflows_per_s", 127 / bs, 0, ptrBool(true)},
		{"tcp.listen_drops_per_s", 127 / bs, 0, ptrBool(true)},
		{"tcp.passive_opens_per_s", 47 / bs, 5674 / as, ptrBool(true)},
		{"tcp.out_rsts_per_s", 0, 1 / as, ptrBool(false)},
		{"tcp.resets_sent_per_s", 0, 1 / as, ptrBool(false)},
		{"tcp.retrans_share", 0, 0, nil},
		// Peak 3 of backlog 2, then 49 of 1024: fuller is worse, the
		// bigger backlog is the fix.
		{"tcp.listener.127.0.0.1:18081.queue_peak_fill", 1.5, 49.0 / 1024, ptrBool(true)},
		{"tcp.listener.127.0.0.1:18081.full_share", 4.0 / 42, 0, ptrBool(true)},
	} {
		m := metric(t, c, tt.key)
		if !near(m.Before, tt.before) || !near(m.After, tt.after) {
			t.Errorf("%s: before %v after %v, want %v %v", tt.key, deref(m.Before), deref(m.After), tt.before, tt.after)
		}
		if (m.Better == nil) != (tt.better == nil) || (m.Better != nil && *m.Better != *tt.better) {
			t.Errorf("%s: better %v, want %v", tt.key, deref2(m.Better), deref2(tt.better))
		}
	}
	// A tcp run has no UDP drops: they are not compared as zeros.
	for _, m := range c.Metrics {
		if strings.HasPrefix(m.Key, "drops_per_s") || m.Key == "snmp.rcvbuf_errors_per_s" {
			t.Errorf("udp metric %s in a tcp comparison", m.Key)
		}
	}
	for _, k := range []string{"tcp.backlog_drop_per_s", "tcp.prune_called_per_s", "tcp.retransmits.kind.rto_per_s", "tcp.memory_pressures_per_s"} {
		if !slices.Contains(c.TCP.ZeroInBoth, k) {
			t.Errorf("%s not in zero_in_both %v", k, c.TCP.ZeroInBoth)
		}
	}
	l := c.TCP.Listeners
	if len(l) != 1 || l[0].Local != netip.MustParseAddrPort("127.0.0.1:18081") || l[0].Before == nil || l[0].After == nil ||
		l[0].Before.Backlog != 2 || l[0].After.Backlog != 1024 || l[0].Before.QueuePeak != 3 || l[0].After.QueuePeak != 49 ||
		l[0].Before.FullSamples != 4 || l[0].Before.Samples != 42 || l[0].Before.Comm != "python3" || len(l[0].Before.PIDs) != 1 {
		t.Errorf("listeners %+v", l)
	}
	if len(c.Lost) != 1 || c.Lost[0].ID != "tcp.accept-overflow" {
		t.Errorf("lost %+v", c.Lost)
	}
	var out bytes.Buffer
	if err := report.WriteJSON(&out, c); err != nil {
		t.Fatal(err)
	}
	var back map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back["tcp"] == nil {
		t.Errorf("json: %v %s", err, out.String()[:200])
	}
}

// The text of the recorded comparison, held byte for byte.
func TestCompareTCPText(t *testing.T) {
	var buf bytes.Buffer
	WriteText(&buf, Compare(tcpRuns(t)))
	testutil.Golden(t, "tcp-compare.txt", buf.String())
}

// Listeners are joined by address and port: a reuseport group's members
// add up, a listener gone after reads 0 there, and a run that could not
// list listeners compares none.
func TestCompareTCPListenersJoin(t *testing.T) {
	a := netip.MustParseAddrPort("0.0.0.0:80")
	b := netip.MustParseAddrPort("[::]:443")
	run := func(unavailable string, rows ...evidence.TCPListener) Run {
		w := evidence.TCPCounters{OutSegs: 100, RetransSegs: 1}
		return Run{Command: "tcp", Data: evidence.NetEvidence{DurationNs: 1e9, TCP: &evidence.TCPEvidence{
			Counters:  evidence.TCPCounterSection{Window: &w},
			Listeners: evidence.ListenerSection{Section: evidence.Section{Unavailable: unavailable}, Rows: rows}}}}
	}
	before := run("", evidence.TCPListener{Local: a, PIDs: []int{2}, Backlog: 8, QueuePeak: 9, FullSamples: 3, Samples: 10},
		evidence.TCPListener{Local: a, PIDs: []int{1}, Backlog: 8, QueuePeak: 4, FullSamples: 1, Samples: 10},
		evidence.TCPListener{Local: b, Backlog: 128, Samples: 10})
	after := run("", evidence.TCPListener{Local: a, PIDs: []int{1}, Backlog: 4096, QueuePeak: 4, Samples: 10})
	c := Compare(before, after)
	if len(c.TCP.Listeners) != 2 {
		t.Fatalf("%+v", c.TCP.Listeners)
	}
	g := c.TCP.Listeners[0].Before
	if c.TCP.Listeners[0].Local != a || g.Members != 2 || g.QueuePeak != 9 || g.FullSamples != 4 || g.Samples != 20 || !slices.Equal(g.PIDs, []int{1, 2}) {
		t.Errorf("reuseport group %+v", g)
	}
	if c.TCP.Listeners[1].After != nil {
		t.Errorf("a listener gone after: %+v", c.TCP.Listeners[1])
	}
	if m := metric(t, c, "tcp.listener.[::]:443.queue_peak_fill"); !near(m.After, 0) {
		t.Errorf("gone listener after = %v, want 0", deref(m.After))
	}
	if m := metric(t, c, "tcp.retrans_share"); !near(m.Before, 0.01) {
		t.Errorf("retrans share %v", deref(m.Before))
	}
	c = Compare(before, run("listeners: sock_diag: permission denied"))
	if c.TCP.ListenersUnavailable[1] == "" {
		t.Errorf("no reason for the after run: %+v", c.TCP)
	}
	if m := metric(t, c, "tcp.listener.0.0.0.0:80.full_share"); m.After != nil || m.Better != nil {
		t.Errorf("a run without listeners compares them: %+v", m)
	}
	var buf bytes.Buffer
	WriteText(&buf, c)
	if !strings.Contains(buf.String(), "after run: listeners: sock_diag: permission denied") {
		t.Errorf("text:\n%s", buf.String())
	}
}

// A counter the kernel lacks is not measured rather than zero; settings
// that differ are listed.
func TestCompareTCPMissingCounterAndSettings(t *testing.T) {
	before, after := tcpRuns(t)
	after.Data.TCP.Counters.Window.Missing = []string{"TcpExt.TCPRcvQDrop"}
	v := int64(8192)
	after.Data.TCP.Settings.Somaxconn = &v
	c := Compare(before, after)
	if m := metric(t, c, "tcp.rcv_q_drop_per_s"); m.After != nil || m.Before == nil {
		t.Errorf("missing counter %+v", m)
	}
	if len(c.TCP.Settings) != 1 || c.TCP.Settings[0].Name != "net.core.somaxconn" || c.TCP.Settings[0].Before != "4096" || c.TCP.Settings[0].After != "8192" {
		t.Errorf("settings %+v", c.TCP.Settings)
	}
	// A tcp run compared with a udp one compares what both have.
	udp := load(t, "before.json")
	if c := Compare(udp, after); c.TCP != nil {
		t.Errorf("udp vs tcp compared the TCP layer")
	}
}

func ptrBool(b bool) *bool { return &b }

func deref2(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}
