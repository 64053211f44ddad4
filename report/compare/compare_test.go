package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/perfscope/perfscope/report"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

func load(t *testing.T, name string) Run {
	t.Helper()
	r, err := Load(context.Background(), filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func metric(t *testing.T, c Comparison, key string) Metric {
	t.Helper()
	for _, m := range c.Metrics {
		if m.Key == key {
			return m
		}
	}
	t.Fatalf("no metric %q in %+v", key, c.Metrics)
	return Metric{}
}

func near(a *float64, want float64) bool {
	return a != nil && math.Abs(*a-want) < 1e-9*math.Max(1, math.Abs(want))
}

func TestCompareFixtures(t *testing.T) {
	c := Compare(load(t, "before.json"), load(t, "after.json"))
	if c.Before.PacketSource != "sockets" || c.After.DurationNs != 5e9 {
		t.Fatalf("run info: %+v / %+v", c.Before, c.After)
	}
	tests := []struct {
		key           string
		before, after float64
		better        bool
	}{
		// 2.7M in 10 s vs 2.9M + 3.1M in 5 s.
		{"packets_per_s", 270000, 1200000, true},
		{"packets_per_s.port.9000", 270000, 1200000, true},
		{"net_rx.max_share", 0.9, 0.5, true},
		{"net_rx.max_over_mean", 0.9 / 0.46, 0.5 / 0.475, true},
		{"net_rx.active_cpus", 1, 2, true},
		{"lock_wait_ns_per_s", 4e8, 1.6e6, true},
		{"lock_wait_ns_per_s.class.socket-receive-queue", 3e8, 1.6e6, true},
		// A class gone after the fix reads as zero, not as unmeasured.
		{"lock_wait_ns_per_s.class.socket-wakeup", 1e8, 0, true},
		{"drops_per_s", 150000, 0, true},
		{"drops_per_s.port.9000", 150000, 0, true},
		{"snmp.rcvbuf_errors_per_s", 150000, 0, true},
		// NET_RX time / packets: 9.2 s / 2.7M vs 4.75 s / 6M.
		{"net_rx.ns_per_packet", 9.2e9 / 2.7e6, 4.75e9 / 6e6, true},
		{"profile.share.gro", 0.049, 0, true},
	}
	for _, tt := range tests {
		m := metric(t, c, tt.key)
		if !near(m.Before, tt.before) || !near(m.After, tt.after) {
			t.Errorf("%s: before %v after %v, want %v %v", tt.key, deref(m.Before), deref(m.After), tt.before, tt.after)
		}
		if m.Better == nil || *m.Better != tt.better {
			t.Errorf("%s: better = %v, want %v", tt.key, m.Better, tt.better)
		}
	}
	if m := metric(t, c, "net_rx.mean_share"); !near(m.Before, 0.46) || m.Better != nil {
		t.Errorf("mean share is neither better nor worse: %+v", m)
	}
	if m := metric(t, c, "packets_per_s"); !near(m.Change, 1200000.0/270000-1) {
		t.Errorf("packets change = %v", deref(m.Change))
	}
	if m := metric(t, c, "drops_per_s"); !near(m.Change, -1) {
		t.Errorf("drops change = %v", deref(m.Change))
	}
	if len(c.NetRX) != 2 || !near(c.NetRX[1].Before, 0.02) || !near(c.NetRX[1].After, 0.5) {
		t.Errorf("per-CPU NET_RX = %+v", c.NetRX)
	}
	ids := func(refs []FindingRef) string {
		var s []string
		for _, r := range refs {
			s = append(s, r.ID)
		}
		return strings.Join(s, ",")
	}
	if ids(c.Lost) != "net.socket-lock-contention" || ids(c.Gained) != "net.thread-pinning" || ids(c.Kept) != "net.udp-rcvbuf" {
		t.Errorf("lost %s gained %s kept %s", ids(c.Lost), ids(c.Gained), ids(c.Kept))
	}
	// The kept finding shows its after-run severity.
	if c.Kept[0].Severity.String() != "info" {
		t.Errorf("kept severity %v", c.Kept[0].Severity)
	}
	if _, err := json.Marshal(c); err != nil {
		t.Fatal(err)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestPacketSourceFallbacks(t *testing.T) {
	run := func(e evidence.NetEvidence) Run { return Run{Schema: report.Schema, Command: "udp", Data: e} }
	snmp := evidence.NetEvidence{DurationNs: 2e9, Drops: evidence.DropSection{UDPSNMP: &evidence.UDPSNMP{UDP: evidence.UDPCounters{InDatagrams: 100}, UDP6: evidence.UDPCounters{InDatagrams: 100}, UDP6Known: true}}}
	queues := evidence.NetEvidence{DurationNs: 2e9, Queues: evidence.QueueSection{RX: []evidence.QueueRow{{PerS: 30}, {PerS: 20}}}}
	none := evidence.NetEvidence{DurationNs: 2e9}
	c := Compare(run(snmp), run(queues))
	if m := metric(t, c, "packets_per_s"); !near(m.Before, 100) || !near(m.After, 50) || c.Before.PacketSource != "snmp" || c.After.PacketSource != "queues" {
		t.Errorf("snmp→queues: %+v %v %v", c.Before, deref(m.Before), deref(m.After))
	}
	quiet := evidence.NetEvidence{DurationNs: 2e9, Profile: evidence.ProfileSection{Samples: 10, Groups: []evidence.FunctionShare{{Group: "gro"}}}}
	for _, m := range Compare(run(quiet), run(quiet)).Metrics {
		if m.Key == "profile.share.gro" {
			t.Errorf("a group at 0%% in both runs is listed: %+v", m)
		}
	}
	c = Compare(run(none), run(none))
	if m := metric(t, c, "packets_per_s"); m.Before != nil || m.Change != nil || m.Better != nil {
		t.Errorf("no source: %+v", m)
	}
	var buf bytes.Buffer
	WriteText(&buf, c)
	if !strings.Contains(buf.String(), "No findings in either run.") {
		t.Errorf("text:\n%s", buf.String())
	}
}

func TestDecodeRejectsOtherReports(t *testing.T) {
	for _, in := range []string{`{"schema":"perfscope/v1","command":"softirq","data":{}}`, `{"schema":"other"}`, `not json`, ``} {
		if _, err := Decode(strings.NewReader(in)); !errors.Is(err, ErrNotUDPReport) {
			t.Errorf("%q: err = %v", in, err)
		}
	}
}

func TestWriteText(t *testing.T) {
	var buf bytes.Buffer
	WriteText(&buf, Compare(load(t, "before.json"), load(t, "after.json")))
	out := buf.String()
	for _, want := range []string{"packets/s received", "270.0k", "1.20M", "+344.4%", "better", "lost (fixed)", "net.socket-lock-contention", "gained (new)", "NET_RX share of each CPU's time", "90.0%", "400.00ms/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestSharedTXQueues(t *testing.T) {
	run := func(perCPU ...map[int]uint64) Run {
		r := Run{Data: evidence.NetEvidence{DurationNs: 1e9}}
		for cpu, q := range perCPU {
			r.Data.TX.PerCPU = append(r.Data.TX.PerCPU, evidence.TXCPU{CPU: cpu, Queues: q})
		}
		return r
	}
	// Before XPS both CPUs sent on queues 1 and 3; after, one queue each.
	c := Compare(run(map[int]uint64{1: 10, 3: 5}, map[int]uint64{1: 7, 3: 9}), run(map[int]uint64{0: 10}, map[int]uint64{1: 9}))
	for _, m := range c.Metrics {
		if m.Key == "tx.shared_queues" {
			if *m.Before != 2 || *m.After != 0 || m.Better == nil || !*m.Better {
				t.Errorf("%+v", m)
			}
			return
		}
	}
	t.Fatal("no tx.shared_queues metric")
}

// An estimated run compares with an exact one: each number says how it
// was obtained, a difference inside the bounds is not called better or
// worse, and a real change still is.
func TestCompareExactWithEstimated(t *testing.T) {
	exact := load(t, "before.json")
	est := load(t, "before.json")
	rel := 0.05
	e := &evidence.Estimate{Windows: 10, Coverage: 0.1, SampledEvents: 27000, Scale: 10, RelError: &rel}
	est.Data.Sockets.Estimate = e
	for i := range est.Data.Sockets.Sockets {
		if n := est.Data.Sockets.Sockets[i].ReceivedPkt; n != nil {
			v := *n * 103 / 100 // 3 % off: inside ±5 %
			est.Data.Sockets.Sockets[i].ReceivedPkt = &v
		}
	}
	c := Compare(exact, est)
	m := metric(t, c, "packets_per_s")
	if m.BeforeEstimate != nil || m.AfterEstimate == nil || !m.WithinError || m.Better != nil {
		t.Errorf("exact vs estimated 3 %% apart under ±5 %%: %+v", m)
	}
	if l := metric(t, c, "lock_wait_ns_per_s"); l.WithinError || l.AfterEstimate != nil {
		t.Errorf("exact lock wait in both: %+v", l)
	}
	var buf bytes.Buffer
	WriteText(&buf, c)
	if !strings.Contains(buf.String(), "±5%") || !strings.Contains(buf.String(), "within error") {
		t.Errorf("text does not say the number is estimated:\n%s", buf.String())
	}
	// The real change of the fixtures (270k → 1.2M packets/s) is better
	// whatever the bounds.
	after := load(t, "after.json")
	after.Data.Sockets.Estimate = e
	if m := metric(t, Compare(exact, after), "packets_per_s"); m.WithinError || m.Better == nil || !*m.Better {
		t.Errorf("a fourfold rise under ±5 %%: %+v", m)
	}
	// An unknown bound decides nothing.
	e2 := *e
	e2.RelError = nil
	est.Data.Sockets.Estimate = &e2
	if m := metric(t, Compare(exact, est), "packets_per_s"); m.WithinError || m.Better == nil {
		t.Errorf("unknown bound: %+v", m)
	}
}

// lab udp's data counts what finished and what did not prove its fix, and
// names what --keep kept.
func TestLabUDPDataCountsAndKept(t *testing.T) {
	d := LabUDPData{{Namespaces: []string{"a1", "a2"}}, {Namespaces: []string{"b1"}, Problem: "no finding"}}
	if d.Finished() != 2 || d.Failed() != 1 {
		t.Errorf("Finished() = %d, Failed() = %d, want 2 and 1", d.Finished(), d.Failed())
	}
	var b bytes.Buffer
	d.WriteKept(&b, "/tmp/lab")
	if want := "Kept: reports in /tmp/lab; namespaces: a1 a2 b1\n(remove with: ip netns del NAME; look around with: ip netns exec NAME perfscope udp --iface vb)\n"; b.String() != want {
		t.Errorf("WriteKept: %q, want %q", b.String(), want)
	}
}
