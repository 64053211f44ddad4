package serve

import (
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/perfscope/perfscope/evidence"
)

// tcpWindow is a window of the tcp-rx recipe: two listeners, one of them
// an SO_REUSEPORT group of two, the namespace's counters and the probe's
// events.
func tcpWindow(i int, fullA, fullB int) Window {
	begin := time.Unix(1700000000+int64(i)*30, 0)
	a, b := netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("[::]:443")
	mem := [3]int64{100, 200, 300}
	return Window{Begin: begin, End: begin.Add(30 * time.Second), TCP: &evidence.TCPEvidence{
		Counters: evidence.TCPCounterSection{Window: &evidence.TCPCounters{ListenOverflows: 30, ListenDrops: 31, TCPReqQFullDrop: 2,
			SyncookiesSent: 5, SyncookiesRecv: 4, SyncookiesFailed: 1, RetransSegs: 12, TCPBacklogDrop: 7, InSegs: 1000, OutSegs: 900,
			PruneCalled: 3, TCPRcvCollapsed: 2, TCPMemoryPressures: 1, TCPMemoryPressuresChrono: 250}},
		Settings: evidence.TCPSettings{Mem: &mem},
		Sockstat: &evidence.TCPSockstat{MemPages: 42},
		Listeners: evidence.ListenerSection{Rows: []evidence.TCPListener{
			{Local: a, Backlog: 8, QueueLast: 9, QueuePeak: 9, FullSamples: fullA, Samples: 10, SynQueuePeak: 3, SynFullSamples: 1, SynSamples: 4},
			{Local: b, Backlog: 128, QueueLast: 1, QueuePeak: 5, FullSamples: fullB, Samples: 10, SynQueuePeak: 2},
			{Local: b, Backlog: 128, QueueLast: 2, QueuePeak: 4, FullSamples: 0, Samples: 10, SynQueuePeak: 2},
		}},
		Events: evidence.TCPEventSection{
			RetransmitKinds:   map[string]evidence.TCPEventCount{"rto": {Events: 4, Segs: 4}, "fast": {Events: 6, Segs: 7}, "tlp": {}, "syn": {Events: 1, Segs: 1}, "other": {}},
			SynAckRetransmits: evidence.TCPEventCount{Events: 2, Segs: 2},
			ResetsSent:        evidence.TCPEventCount{Events: 3}, ResetsReceived: evidence.TCPEventCount{Events: 8}},
	}}
}

// The tcp part's evidence as counters (each window's delta added) and
// gauges (the last window's): overflows on the one listener seen full,
// "unattributed" when two were, SO_REUSEPORT members added up.
func TestMetricsTCP(t *testing.T) {
	m := NewMetrics("tcp-rx")
	m.Add(tcpWindow(0, 4, 0)) // only 127.0.0.1:8080 seen full
	m.Add(tcpWindow(1, 4, 1)) // both: the kernel's count is per namespace
	srv := &Server{metrics: m, opts: Options{Recipe: "tcp-rx", Interval: 30 * time.Second}}
	srv.reg = newRegistry(m)
	for _, accept := range []string{"application/openmetrics-text; version=1.0.0", ""} {
		fams := scrape(t, srv.Handler(), accept)
		for _, c := range []struct {
			family string
			labels []string
			want   float64
		}{
			{"perfscope_tcp_listen_overflows_total", []string{"listener", "127.0.0.1:8080"}, 30},
			{"perfscope_tcp_listen_overflows_total", []string{"listener", "unattributed"}, 30},
			{"perfscope_tcp_listen_drops_total", []string{"listener", "127.0.0.1:8080"}, 31},
			{"perfscope_tcp_listener_full_samples_total", []string{"listener", "127.0.0.1:8080"}, 8},
			{"perfscope_tcp_listener_full_samples_total", []string{"listener", "[::]:443"}, 1},
			{"perfscope_tcp_listener_samples_total", []string{"listener", "[::]:443"}, 20},
			{"perfscope_tcp_listener_syn_full_samples_total", []string{"listener", "127.0.0.1:8080"}, 2},
			{"perfscope_tcp_listener_syn_samples_total", []string{"listener", "127.0.0.1:8080"}, 8},
			{"perfscope_tcp_listener_accept_queue", []string{"listener", "[::]:443"}, 3},
			{"perfscope_tcp_listener_accept_queue_peak", []string{"listener", "[::]:443"}, 5},
			{"perfscope_tcp_listener_backlog", []string{"listener", "[::]:443"}, 256},
			{"perfscope_tcp_listener_syn_queue_peak", []string{"listener", "127.0.0.1:8080"}, 3},
			{"perfscope_tcp_syn_queue_drops_total", nil, 4},
			{"perfscope_tcp_syncookies_total", []string{"direction", "sent"}, 10},
			{"perfscope_tcp_syncookies_total", []string{"direction", "failed"}, 2},
			{"perfscope_tcp_retransmits_total", []string{"kind", "fast"}, 12},
			{"perfscope_tcp_retransmits_total", []string{"kind", "synack"}, 4},
			{"perfscope_tcp_retransmitted_segments_total", nil, 24},
			{"perfscope_tcp_resets_total", []string{"direction", "received"}, 16},
			{"perfscope_tcp_backlog_drops_total", nil, 14},
			{"perfscope_tcp_segments_total", []string{"direction", "in"}, 2000},
			{"perfscope_tcp_receive_queue_events_total", []string{"event", "rcv_collapsed"}, 4},
			{"perfscope_tcp_memory_pressures_total", nil, 2},
			{"perfscope_tcp_memory_pressure_seconds_total", nil, 0.5},
			{"perfscope_tcp_memory_pages", nil, 42},
			{"perfscope_tcp_memory_limit_pages", []string{"threshold", "pressure"}, 200},
		} {
			got, ok := value(fams[c.family], c.labels...)
			if !ok || fmt.Sprintf("%.6g", got) != fmt.Sprintf("%.6g", c.want) {
				t.Errorf("%q: %s%v = %v (found %v), want %v", accept, c.family, c.labels, got, ok, c.want)
			}
		}
		if typ := fams["perfscope_tcp_listen_overflows_total"].GetType(); typ != dto.MetricType_COUNTER {
			t.Errorf("listen_overflows_total is %v, want a counter", typ)
		}
	}
	// A window whose probe was missing: its section is unavailable, the
	// counters it did read still add up.
	w := tcpWindow(2, 0, 0)
	w.TCP.Events = evidence.TCPEventSection{Section: evidence.Section{Unavailable: "retransmits and resets per connection: no BTF"}}
	m.Add(w)
	fams := scrape(t, srv.Handler(), "")
	if v, _ := value(fams["perfscope_section_unavailable"], "section", "tcp_events"); v != 1 {
		t.Error("tcp_events not marked unavailable")
	}
	if v, _ := value(fams["perfscope_tcp_listen_overflows_total"], "listener", "unattributed"); v != 60 {
		t.Errorf("unattributed overflows %v, want 60", v)
	}
}

// Listeners come from the host: past MaxSeries listening addresses the
// rest add up in listener="other", and the gauges list the fullest
// MaxSeries.
func TestMetricsTCPListenersBounded(t *testing.T) {
	m := NewMetrics("tcp-rx")
	var rows []evidence.TCPListener
	for p := 0; p < MaxSeries+100; p++ {
		rows = append(rows, evidence.TCPListener{Local: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(1000+p)), Samples: 3, FullSamples: p % 2})
	}
	m.Add(Window{TCP: &evidence.TCPEvidence{Listeners: evidence.ListenerSection{Rows: rows}}})
	srv := &Server{metrics: m, opts: Options{Recipe: "tcp-rx", Interval: time.Second}}
	srv.reg = newRegistry(m)
	fams := scrape(t, srv.Handler(), "")
	if n := len(fams["perfscope_tcp_listener_samples_total"].Metric); n != MaxSeries+1 {
		t.Errorf("%d listener series, want %d", n, MaxSeries+1)
	}
	if v := sum(fams["perfscope_tcp_listener_samples_total"]); v != float64(3*len(rows)) {
		t.Errorf("samples add up to %v, want %d", v, 3*len(rows))
	}
	if n := len(fams["perfscope_tcp_listener_accept_queue"].Metric); n != MaxSeries {
		t.Errorf("%d accept-queue gauges, want %d", n, MaxSeries)
	}
}

// Every TCP metric serve exports is documented in docs/serve.md.
func TestTCPMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	m := newTCPMetrics()
	var names []string
	for _, f := range m.families() {
		names = append(names, f.desc.String())
	}
	for _, d := range m.descs() {
		names = append(names, d.String())
	}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, s := range names {
		name := re.FindStringSubmatch(s)[1]
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is not in docs/serve.md", name)
		}
	}
}
