package tcplab

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/lab/netlab"
)

func TestScenariosAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Scenarios {
		if seen[s.Name] {
			t.Errorf("scenario %s twice", s.Name)
		}
		seen[s.Name] = true
		if s.Name == "" || s.Fault == "" {
			t.Errorf("%+v: no name or fault", s)
		}
		if s.Skip != "" {
			continue
		}
		// The fix is the finding's typed change: the rule must declare one.
		i := slices.IndexFunc(diagnose.TCPRules, func(r diagnose.Rule[diagnose.TCPInput]) bool { return r.ID == s.Finding })
		if i < 0 {
			t.Errorf("%s: finding %q is no rule of diagnose.TCPRules", s.Name, s.Finding)
		} else if len(diagnose.TCPRules[i].Changes) == 0 {
			t.Errorf("%s: %s declares no change for --apply", s.Name, s.Finding)
		}
		if s.FixText == "" || s.Workload.Clients <= 0 || len(s.Rows) == 0 {
			t.Errorf("%s: incomplete %+v", s.Name, s)
		}
		for _, k := range s.Rows {
			if _, ok := rowDefs[k]; !ok {
				t.Errorf("%s: row %q is not defined", s.Name, k)
			}
		}
	}
	// Issue's list: each is run or says why not.
	for _, name := range []string{"backlog-overflow", "accept-contention", "rmem-bdp", "rfs-off", "gro-off"} {
		if _, ok := Lookup(name); !ok {
			t.Errorf("no scenario %s", name)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup found an unknown name")
	}
}

func TestAppliedCommands(t *testing.T) {
	stderr := "revert file: /tmp/x/perfscope-revert-1.json (undo with: perfscope tcp --revert /tmp/x/perfscope-revert-1.json)\n" +
		"applied [tcp.accept-overflow]: sysctl -w net.core.somaxconn=4096\n"
	if got := netlab.AppliedCommands(stderr); !slices.Equal(got, []string{"sysctl -w net.core.somaxconn=4096"}) {
		t.Errorf("appliedCommands = %q", got)
	}
	if got := netlab.AppliedCommands("perfscope: --apply: \"tcp.x\" is not a finding of this run\n"); len(got) != 0 {
		t.Errorf("a refused --apply applied %q", got)
	}
}

// phaseWith is a phase of a 2 s perfscope window and a 4 s lab span.
func phaseWith(w evidence.TCPCounters, listeners []evidence.TCPListener, netRXNs uint64, c Counts) phase {
	p := phase{counts: c, elapsed: 4 * time.Second}
	p.run.Data.TCP = &evidence.TCPEvidence{DurationNs: int64(2 * time.Second)}
	p.run.Data.TCP.Counters.Window = &w
	p.run.Data.TCP.Listeners.Rows = listeners
	p.run.Data.Softirq = evidence.SoftirqEvidence{DurationNs: int64(2 * time.Second), CPUs: []evidence.SoftirqCPU{
		{CPU: 0, Vectors: map[string]evidence.SoftirqVector{"NET_RX": {TimeNs: netRXNs / 2}}},
		{CPU: 1, Vectors: map[string]evidence.SoftirqVector{"NET_RX": {TimeNs: netRXNs / 2}}},
	}}
	return p
}

func TestRows(t *testing.T) {
	before := phaseWith(evidence.TCPCounters{ListenOverflows: 200, PassiveOpens: 1000, InSegs: 4000},
		[]evidence.TCPListener{{Backlog: 16, QueuePeak: 17, FullSamples: 5}}, 400_000_000, Counts{Connects: 2000, SlowConnects: 40, BytesReceived: 8e8})
	after := phaseWith(evidence.TCPCounters{PassiveOpens: 1200}, []evidence.TCPListener{{Backlog: 4096, QueuePeak: 60}, {Backlog: 4096, QueuePeak: 70}},
		100_000_000, Counts{Connects: 2400, BytesReceived: 1.6e9})
	got := map[string][2]*float64{}
	for _, r := range rows([]string{RowOverflows, RowConnects, RowSlowConnects, RowBacklog, RowQueuePeak, RowFullSamples, RowNetRXShare, RowNetRXPerMB, RowBytes, "unknown"}, before, after) {
		got[r.Key] = [2]*float64{r.Before, r.After}
	}
	want := map[string][2]float64{
		RowOverflows:    {100, 0},   // 200 in 2 s
		RowConnects:     {500, 600}, // 2000 in 4 s
		RowSlowConnects: {10, 0},
		RowBacklog:      {16, 4096},
		RowQueuePeak:    {17, 70}, // the fullest listener
		RowFullSamples:  {5, 0},
		RowNetRXShare:   {0.1, 0.025}, // 0.4 s of 2 CPUs × 2 s
		RowBytes:        {2e8, 4e8},
		RowNetRXPerMB:   {1e6, 125_000}, // 0.2 s/s over 200 MB/s
	}
	if len(got) != len(want) {
		t.Errorf("rows %v, want the %d defined ones", got, len(want))
	}
	for k, w := range want {
		g := got[k]
		if g[0] == nil || g[1] == nil || *g[0] != w[0] || *g[1] != w[1] {
			t.Errorf("%s = %v/%v, want %v", k, g[0], g[1], w)
		}
	}
	// A run without the TCP section or softirq has no number, not zero.
	var empty phase
	for _, r := range rows([]string{RowOverflows, RowQueuePeak, RowNetRXShare, RowNetRXPerMB, RowConnects}, empty, empty) {
		if r.Before != nil {
			t.Errorf("%s: %v from an empty run", r.Key, *r.Before)
		}
	}
}

// The connection rows are means over the server's connections on Port
// that carried data; the delay line's drops are per second of the span.
func TestConnectionRows(t *testing.T) {
	u32 := func(v uint32) *uint32 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	p := phaseWith(evidence.TCPCounters{}, nil, 0, Counts{})
	p.run.Data.TCP.Connections.Rows = []evidence.TCPConnection{
		{Local: netip.MustParseAddrPort("198.18.0.2:9000"), BytesWindow: u64(5e6), RcvWnd: u32(40000), Rcvbuf: 65536, RcvRTTUs: u32(30000)},
		{Local: netip.MustParseAddrPort("198.18.0.2:9000"), BytesWindow: u64(4e6), RcvWnd: u32(38000), Rcvbuf: 65536, RcvRTTUs: u32(32000)},
		// Idle, and another port's: left out.
		{Local: netip.MustParseAddrPort("198.18.0.2:9000"), BytesWindow: u64(0), RcvWnd: u32(1), Rcvbuf: 1},
		{Local: netip.MustParseAddrPort("198.18.0.2:22"), BytesWindow: u64(9e9), RcvWnd: u32(1), Rcvbuf: 1},
	}
	p.delay = &netlab.DelayStats{DroppedFull: 8}
	want := map[string]float64{RowRcvWnd: 39000, RowRcvbuf: 65536, RowRcvRTT: 31, RowDelayDrops: 2}
	for _, r := range rows([]string{RowRcvWnd, RowRcvbuf, RowRcvRTT, RowDelayDrops}, p, phase{}) {
		if r.Before == nil || *r.Before != want[r.Key] {
			t.Errorf("%s = %v, want %v", r.Key, r.Before, want[r.Key])
		}
		if r.After != nil {
			t.Errorf("%s: %v from an empty run", r.Key, *r.After)
		}
	}
}
