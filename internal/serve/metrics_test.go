package serve

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
)

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func window(i int, findings ...diagnose.Finding) Window {
	begin := time.Unix(1700000000+int64(i)*30, 0)
	return Window{
		Begin: begin, End: begin.Add(30 * time.Second),
		Softirq: &evidence.SoftirqEvidence{CPUs: []evidence.SoftirqCPU{
			{CPU: 0, Vectors: map[string]evidence.SoftirqVector{"NET_RX": {Count: 100, TimeNs: 2e6}}},
			{CPU: 1, Vectors: map[string]evidence.SoftirqVector{"NET_RX": {Count: 5, TimeNs: 1e5}}},
		}},
		Queues: &evidence.QueueSection{RX: []evidence.QueueRow{{Queue: 0, KernelPackets: u64(1000), DriverDrops: u64(3)}, {Queue: 1, DriverPackets: u64(10)}}},
		Locks: &evidence.LockSection{ByClass: map[string]uint64{"socket-receive-queue": 4e6},
			Sites:   []evidence.LockSite{{Class: "socket-receive-queue", Count: 40}},
			Sockets: []evidence.SocketContention{{Socket: evidence.SocketRef{Port: 9000, Protocol: "udp"}, Count: 40, TotalNs: 4e6}}},
		Drops: &evidence.DropSection{ByPort: []evidence.PortDrops{{Port: 9000, Reason: "kfree_skb:SOCKET_RCVBUFF", Count: 70}},
			ByReason: map[string]uint64{"SOCKET_RCVBUFF": 70, "NO_SOCKET": 5}},
		JVMPauses: &evidence.JVMPauses{PID: 4242, YoungGCs: 3, OldGCs: 1, GCTimeNs: 25e6, Safepoints: i64(7), SafepointTimeNs: i64(30e6)},
		Findings:  findings,
		Overhead: &evidence.Overhead{Programs: []evidence.ProgramCost{{Program: "irq:softirq_entry", RunCount: 105, RunTimeNs: 10500}},
			EventsLost: 1, BPFTimeShare: 0.001, StatsUnavailable: "enable bpf_stats: operation not permitted",
			ProcessCPUShare: 0.004, Budget: &evidence.BudgetUse{CPUShare: 0.02, TotalShare: 0.013}},
	}
}

var rcvbuf = diagnose.Finding{ID: "net.udp-rcvbuf", Severity: diagnose.Crit, Impact: 0.4,
	Recommendation: diagnose.Recommendation{Parameters: map[string]int64{"so_rcvbuf_bytes": 2097152}}}

// scrape asks the handler for accept and parses what it answers with the
// Prometheus parser of that format.
func scrape(t *testing.T, h http.Handler, accept string) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	format := expfmt.ResponseFormat(resp.Header)
	if accept != "" && format.FormatType() != expfmt.TypeOpenMetrics {
		t.Fatalf("asked for OpenMetrics, got %s", resp.Header.Get("Content-Type"))
	}
	dec := expfmt.NewDecoder(strings.NewReader(string(body)), format)
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s does not parse: %v\n%s", format, err, body)
		}
		out[mf.GetName()] = &mf
	}
	return out
}

// sum adds every series of mf whose labels include labels.
func sum(mf *dto.MetricFamily, labels ...string) float64 {
	var total float64
	if mf == nil {
		return 0
	}
	for _, m := range mf.Metric {
		one := &dto.MetricFamily{Metric: []*dto.Metric{m}}
		v, _ := value(one, labels...)
		total += v
	}
	return total
}

func value(mf *dto.MetricFamily, labels ...string) (float64, bool) {
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// Counters are the sums of the windows' deltas; findings are the last
// window's; both exposition formats parse and agree.
func TestMetricsExposition(t *testing.T) {
	m := NewMetrics("udp-rx")
	m.Add(window(0, rcvbuf))
	m.Add(window(1, rcvbuf))
	srv := &Server{metrics: m, opts: Options{Recipe: "udp-rx", Interval: 30 * time.Second}}
	srv.reg = newRegistry(m)
	for _, accept := range []string{"application/openmetrics-text; version=1.0.0", ""} {
		fams := scrape(t, srv.Handler(), accept)
		// Both decoders name a counter's family with its _total suffix.
		name := func(n string) string { return n }
		for _, c := range []struct {
			family string
			labels []string
			want   float64
		}{
			{"perfscope_softirq_total", []string{"cpu", "0", "vector", "NET_RX"}, 200},
			{"perfscope_softirq_seconds_total", []string{"cpu", "1", "vector", "NET_RX"}, 2e-4},
			{"perfscope_queue_packets_total", []string{"direction", "rx", "queue", "0"}, 2000},
			{"perfscope_queue_packets_total", []string{"direction", "rx", "queue", "1"}, 20},
			{"perfscope_queue_driver_drops_total", []string{"queue", "0"}, 6},
			{"perfscope_lock_wait_seconds_total", []string{"class", "socket-receive-queue"}, 0.008},
			{"perfscope_lock_contentions_total", []string{"class", "socket-receive-queue"}, 80},
			{"perfscope_socket_lock_wait_seconds_total", []string{"port", "9000", "protocol", "udp"}, 0.008},
			{"perfscope_udp_drops_total", []string{"port", "9000", "reason", "kfree_skb:SOCKET_RCVBUFF"}, 140},
			{"perfscope_udp_drops_total", []string{"port", "0", "reason", "kfree_skb:NO_SOCKET"}, 10},
			{"perfscope_bpf_program_runs_total", []string{"program", "irq:softirq_entry"}, 210},
			{"perfscope_jvm_gc_total", []string{"pid", "4242", "generation", "young"}, 6},
			{"perfscope_jvm_gc_total", []string{"pid", "4242", "generation", "old"}, 2},
			{"perfscope_jvm_gc_seconds_total", []string{"pid", "4242"}, 0.05},
			{"perfscope_jvm_safepoints_total", []string{"pid", "4242"}, 14},
			{"perfscope_jvm_safepoint_seconds_total", []string{"pid", "4242"}, 0.06},
			{"perfscope_events_lost_total", nil, 2},
			{"perfscope_windows_total", nil, 2},
			{"perfscope_finding", []string{"id", "net.udp-rcvbuf", "severity", "crit"}, 1},
			{"perfscope_finding_parameter", []string{"id", "net.udp-rcvbuf", "name", "so_rcvbuf_bytes"}, 2097152},
			{"perfscope_finding_impact", []string{"id", "net.udp-rcvbuf"}, 0.4},
			{"perfscope_bpf_stats_available", nil, 0},
			{"perfscope_process_cpu_share", nil, 0.004},
			{"perfscope_overhead_budget_share", nil, 0.02},
			{"perfscope_overhead_total_share", nil, 0.013},
			{"perfscope_window_seconds", nil, 30},
		} {
			got, ok := value(fams[name(c.family)], c.labels...)
			if !ok || fmt.Sprintf("%.6g", got) != fmt.Sprintf("%.6g", c.want) {
				t.Errorf("%q: %s%v = %v (found %v), want %v", accept, c.family, c.labels, got, ok, c.want)
			}
		}
		if fams[name("perfscope_softirq_total")].GetType() != dto.MetricType_COUNTER {
			t.Errorf("softirq_total is %v, want a counter", fams[name("perfscope_softirq_total")].GetType())
		}
	}
	// A window without the finding retires its series.
	m.Add(window(2))
	fams := scrape(t, srv.Handler(), "")
	if _, ok := value(fams["perfscope_finding"], "id", "net.udp-rcvbuf"); ok {
		t.Error("a finding the last window did not report is still exported")
	}
	if v, _ := value(fams["perfscope_findings"], "severity", "crit"); v != 0 {
		t.Errorf("findings{crit} = %v after a clean window", v)
	}
}

// Ports come from the traffic: past MaxSeries label sets per family, the
// rest add up in port="other", so a port scan cannot grow memory.
func TestMetricsSeriesBounded(t *testing.T) {
	m := NewMetrics("udp-rx")
	var total uint64
	for i := 0; i < 3*MaxSeries; i++ {
		w := Window{Begin: time.Unix(0, 0), End: time.Unix(1, 0),
			Drops: &evidence.DropSection{ByPort: []evidence.PortDrops{{Port: 1024 + i, Reason: "kfree_skb:SOCKET_RCVBUFF", Count: 2}}}}
		m.Add(w)
		total += 2
	}
	if n := len(m.drops.values); n != MaxSeries+1 {
		t.Fatalf("%d series, want %d", n, MaxSeries+1)
	}
	var sum float64
	for _, s := range m.drops.values {
		sum += s.value
	}
	if uint64(sum) != total {
		t.Errorf("series add up to %v, want %d: a capped port lost its drops", sum, total)
	}
	if other := m.drops.values[seriesKey([]string{"kfree_skb:SOCKET_RCVBUFF", "other"})]; other == nil || other.value != float64(2*2*MaxSeries) {
		t.Errorf("other = %+v", other)
	}
}

func TestReadyz(t *testing.T) {
	m := NewMetrics("softirq-balance")
	srv := &Server{metrics: m, opts: Options{Recipe: "softirq-balance", Interval: time.Second}, reg: newRegistry(m)}
	h := httptest.NewServer(srv.Handler())
	defer h.Close()
	get := func(p string) int {
		resp, err := http.Get(h.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get("/healthz") != 200 || get("/readyz") != 503 {
		t.Error("before the first window: healthy, not ready")
	}
	m.Add(Window{Begin: time.Now().Add(-time.Second), End: time.Now()})
	if get("/readyz") != 200 {
		t.Error("after a window: ready")
	}
	if get("/nope") != 404 {
		t.Error("unknown path")
	}
}

// A served profile says per CPU what its event took against what it
// should have, and which CPUs the last window could not see: counters
// accumulate, the undersampled gauge is the last window's.
func TestMetricsProfileSampling(t *testing.T) {
	m := NewMetrics("cpu-profile")
	srv := &Server{metrics: m, opts: Options{Recipe: "cpu-profile", Interval: 30 * time.Second}, reg: newRegistry(m)}
	prof := func(taken1 uint64, under bool) *WindowProfile {
		return &WindowProfile{ProfileSampling: evidence.ProfileSampling{Event: "cpu-clock", PMU: "absent"},
			CPUs: []evidence.ProfileCPU{
				{CPU: 0, TakenSamples: u64(2970), ExpectedSamples: u64(2970)},
				{CPU: 1, TakenSamples: u64(taken1), ExpectedSamples: u64(2970), Undersampled: under},
				{CPU: 2}, // no verdict: not exported as seen
			}}
	}
	w := window(0)
	w.Profile = prof(21, true)
	m.Add(w)
	w = window(1)
	w.Profile = prof(2900, false)
	m.Add(w)
	fams := scrape(t, srv.Handler(), "")
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"perfscope_profile_samples_taken_total", []string{"cpu", "1"}, 2921},
		{"perfscope_profile_samples_expected_total", []string{"cpu", "1"}, 5940},
		{"perfscope_profile_cpu_undersampled", []string{"cpu", "1"}, 0},
		{"perfscope_profile_cpu_undersampled", []string{"cpu", "0"}, 0},
		{"perfscope_profile_event_info", []string{"event", "cpu-clock", "pmu", "absent"}, 1},
	} {
		if got, ok := value(fams[c.family], c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.family, c.labels, got, ok, c.want)
		}
	}
	if _, ok := value(fams["perfscope_profile_cpu_undersampled"], "cpu", "2"); ok {
		t.Error("a CPU without expected samples has an undersampled verdict")
	}
	w = window(2)
	w.Profile = prof(30, true)
	m.Add(w)
	if got, _ := value(scrape(t, srv.Handler(), "")["perfscope_profile_cpu_undersampled"], "cpu", "1"); got != 1 {
		t.Errorf("undersampled{cpu=1} = %v after a window that missed it", got)
	}
}
