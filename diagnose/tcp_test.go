package diagnose

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/evidence"
)

// The evidence types mirror the collector's field for field, so the runner
// converts them; this stops compiling if they drift apart.
var (
	_ = evidence.TCPCounters(netstat.TCPCounters{})
	_ = evidence.TCPSettings(netstat.TCPSettings{})
	_ = evidence.TCPSockstat(netstat.TCPSockstat{})
)

func i64(v int64) *int64   { return &v }
func u32(v uint32) *uint32 { return &v }

// tcpBase is a quiet 10 s window on a host with default settings: no rule
// may fire on it.
func tcpBase() TCPInput {
	on := true
	return TCPInput{
		Evidence: evidence.TCPEvidence{
			DurationNs: 10e9,
			Counters: evidence.TCPCounterSection{Window: &evidence.TCPCounters{
				PassiveOpens: 50000, InSegs: 2_000_000, OutSegs: 1_800_000, RetransSegs: 90,
			}},
			Settings: evidence.TCPSettings{
				Somaxconn: i64(4096), MaxSynBacklog: i64(2048), Syncookies: i64(1), AbortOnOverflow: i64(0),
				Rmem: &[3]int64{4096, 131072, 6291456}, Wmem: &[3]int64{4096, 16384, 4194304},
				Mem: &[3]int64{188232, 250976, 376464}, WindowScaling: i64(1), ModerateRcvbuf: i64(1),
			},
			Sockstat: &evidence.TCPSockstat{InUse: 900, MemPages: 12000},
			Listeners: evidence.ListenerSection{Rows: []evidence.TCPListener{
				{Local: netip.MustParseAddrPort("0.0.0.0:8080"), Backlog: 511, QueuePeak: 3, Samples: 10, PIDs: []int{42}, Comm: "nginx"},
			}},
		},
		Config: &netconfig.NetConfig{Offloads: netconfig.Offloads{GRO: &on}},
	}
}

func runTCPRule(t *testing.T, id string, in TCPInput) *Finding {
	t.Helper()
	for _, r := range TCPRules {
		if r.ID != id {
			continue
		}
		f := r.check(in, nil)
		if f != nil {
			iface := ""
			if in.Config != nil {
				iface = in.Config.Interface.Name
			}
			checkShapes(t, r.ID, r.Changes, iface, f.Recommendation.Changes)
			if f.Recommendation.Why == "" || f.Recommendation.Reference == "" || f.Title == "" || len(f.Evidence) == 0 {
				t.Errorf("%s: incomplete finding %+v", id, f)
			}
			for _, text := range append([]string{f.Title, f.Recommendation.Why, f.Recommendation.Reference}, f.Evidence...) {
				if low := strings.ToLower(text); strings.Contains(low, "seed") || strings.Contains(low, "issue ") {
					t.Errorf("%s: product text names an internal source: %q", id, text)
				}
			}
		}
		return f
	}
	t.Fatalf("no rule %s", id)
	return nil
}

// Every TCP rule stays silent on a healthy window, and on a run whose
// counters could not be read.
func TestTCPRulesSilent(t *testing.T) {
	for _, in := range []TCPInput{tcpBase(), {}, {Evidence: evidence.TCPEvidence{Counters: evidence.TCPCounterSection{Section: evidence.Section{Unavailable: "no /proc/net/netstat"}}}}} {
		for _, f := range RunTuned(TCPRules, in, nil) {
			t.Errorf("fired on a quiet window: %s %q", f.ID, f.Title)
		}
	}
	seen := map[string]bool{}
	for _, r := range TCPRules {
		if seen[r.ID] || !strings.HasPrefix(r.ID, "tcp.") {
			t.Errorf("rule ID %q duplicated or outside tcp.*", r.ID)
		}
		seen[r.ID] = true
		if _, ok := TCPChangeShapes(r.ID); !ok {
			t.Errorf("%s has no shapes entry", r.ID)
		}
	}
	if _, ok := TCPChangeShapes("tcp.nope"); ok {
		t.Error("unknown rule has shapes")
	}
}

func TestAcceptOverflow(t *testing.T) {
	// An application backlog below somaxconn: the fix is the application's.
	in := tcpBase()
	in.Evidence.Counters.Window.ListenOverflows = 40
	in.Evidence.Counters.Window.ListenDrops = 40
	in.Evidence.Listeners.Rows[0].FullSamples = 4
	f := runTCPRule(t, "tcp.accept-overflow", in)
	if f == nil || f.Severity != Warn || f.Recommendation.Kind != KindCode || len(f.Recommendation.Code) == 0 {
		t.Fatalf("small app backlog: %+v", f)
	}
	if !strings.Contains(strings.Join(f.Evidence, "\n"), "0.0.0.0:8080 (nginx pid [42]): accept queue backlog 511") {
		t.Errorf("evidence does not name the listener: %q", f.Evidence)
	}
	// The backlog is somaxconn's cap, and overflows are 2% of handshakes:
	// critical, and somaxconn is raised by a typed change.
	in.Evidence.Counters.Window.ListenOverflows = 1100
	in.Evidence.Listeners.Rows[0].Backlog = 4096
	f = runTCPRule(t, "tcp.accept-overflow", in)
	if f == nil || f.Severity != Crit || !f.Recommendation.Applicable() || f.Recommendation.Changes[0].New != "16384" || f.Recommendation.Changes[0].Old != "4096" {
		t.Fatalf("capped by somaxconn: %+v", f)
	}
	// An old kernel's somaxconn of 128 is raised even if no listener was
	// caught full.
	in.Evidence.Settings.Somaxconn = i64(128)
	in.Evidence.Listeners.Rows[0].FullSamples = 0
	f = runTCPRule(t, "tcp.accept-overflow", in)
	if f == nil || !f.Recommendation.Applicable() || f.Recommendation.Changes[0].New != "4096" ||
		!strings.Contains(strings.Join(f.Evidence, "\n"), "no listener was seen full") {
		t.Fatalf("somaxconn 128: %+v", f)
	}
	// somaxconn unreadable: advice.
	in.Evidence.Settings.Somaxconn = nil
	if f = runTCPRule(t, "tcp.accept-overflow", in); f == nil || f.Recommendation.Kind != KindAdvice {
		t.Fatalf("somaxconn unknown: %+v", f)
	}
}

func TestSYNQueueOverflow(t *testing.T) {
	in := tcpBase()
	in.Evidence.Counters.Window.SyncookiesSent = 30
	in.Evidence.Counters.Window.TCPReqQFullDoCookies = 30
	f := runTCPRule(t, "tcp.syn-queue-overflow", in)
	if f == nil || f.Severity != Info || f.Recommendation.Kind != KindCode {
		t.Fatalf("cookies: %+v", f)
	}
	in.Evidence.Counters.Window.TCPReqQFullDrop = 500
	// The listener whose SYN queue the samples saw full is named; one
	// that never held a half-open connection is not.
	in.Evidence.Listeners.Rows = []evidence.TCPListener{
		{Local: netip.MustParseAddrPort("0.0.0.0:8080"), PIDs: []int{812}, Comm: "nginx", Backlog: 511, SynQueuePeak: 511, SynFullSamples: 7, Samples: 40},
		{Local: netip.MustParseAddrPort("0.0.0.0:22"), Backlog: 128, Samples: 40},
	}
	f = runTCPRule(t, "tcp.syn-queue-overflow", in)
	if f == nil || f.Severity != Warn || !f.Recommendation.Applicable() || f.Recommendation.Changes[0].New != "8192" {
		t.Fatalf("drops: %+v", f)
	}
	contains(t, "evidence", f.Evidence, "listener 0.0.0.0:8080 (nginx pid [812]): SYN queue peaked at 511 half-open of backlog 511, full at 7 of 40 samples")
	if strings.Contains(strings.Join(f.Evidence, "\n"), "0.0.0.0:22") {
		t.Errorf("a listener without half-open connections is named: %q", f.Evidence)
	}
}

func TestBacklogDrop(t *testing.T) {
	in := tcpBase()
	in.Evidence.Counters.Window.TCPBacklogDrop = 250
	in.Evidence.Connections.Rows = []evidence.TCPConnection{
		{Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("10.0.0.9:50000"), Drops: u32(200), Rcvbuf: 65536},
		{Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("10.0.0.9:50001"), Drops: u32(0)},
		{Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("10.0.0.9:50002")},
	}
	f := runTCPRule(t, "tcp.backlog-drop", in)
	if f == nil || len(f.Evidence) != 2 || !strings.Contains(f.Evidence[1], "10.0.0.9:50000: 200 segments") {
		t.Fatalf("%+v", f)
	}
}

func TestRcvbufPrune(t *testing.T) {
	in := tcpBase()
	in.Evidence.Counters.Window.PruneCalled = 12
	in.Evidence.Counters.Window.TCPRcvCollapsed = 300
	f := runTCPRule(t, "tcp.rcvbuf-prune", in)
	if f == nil || f.Severity != Info || !f.Recommendation.Applicable() || f.Recommendation.Changes[0].New != "4096 131072 16777216" {
		t.Fatalf("collapse only: %+v", f)
	}
	in.Evidence.Counters.Window.RcvPruned = 7
	in.Evidence.Counters.Window.Missing = []string{"TcpExt.TCPRcvQDrop"}
	in.Evidence.Settings.Rmem = nil
	f = runTCPRule(t, "tcp.rcvbuf-prune", in)
	if f == nil || f.Severity != Warn || f.Recommendation.Kind != KindAdvice || !strings.Contains(strings.Join(f.Evidence, "\n"), "does not count TCPRcvQDrop") {
		t.Fatalf("pruned, old kernel: %+v", f)
	}
}

func TestTCPMemoryPressure(t *testing.T) {
	in := tcpBase()
	in.Evidence.Counters.Window.TCPMemoryPressures = 3
	in.Evidence.Sockstat.MemPages = 260000
	f := runTCPRule(t, "tcp.memory-pressure", in)
	if f == nil || f.Severity != Warn || !f.Recommendation.Applicable() {
		t.Fatalf("%+v", f)
	}
	// 2 × 260000 / 250976 → factor 3.
	if got := f.Recommendation.Changes[0].New; got != "564696 752928 1129392" {
		t.Errorf("tcp_mem → %q", got)
	}
	// Over the threshold without an entry counted: info. Inside a
	// container's namespace tcp_mem is hidden: advice with the host note.
	in.Evidence.Counters.Window.TCPMemoryPressures = 0
	if f = runTCPRule(t, "tcp.memory-pressure", in); f == nil || f.Severity != Info {
		t.Fatalf("over pressure: %+v", f)
	}
	in.Evidence.Counters.Window.TCPMemoryPressures = 1
	in.Evidence.Settings.Mem = nil
	if f = runTCPRule(t, "tcp.memory-pressure", in); f == nil || f.Recommendation.Kind != KindAdvice || !strings.Contains(strings.Join(f.Recommendation.Caveats, " "), "host-wide") {
		t.Fatalf("tcp_mem hidden: %+v", f)
	}
}

func TestRetransmits(t *testing.T) {
	in := tcpBase()
	w := in.Evidence.Counters.Window
	w.RetransSegs = 36000 // 2% of OutSegs
	w.TCPTimeouts = 20000
	in.Evidence.Events = evidence.TCPEventSection{
		Retransmits:     evidence.TCPEventCount{Events: 36000, Segs: 36000},
		RetransmitKinds: map[string]evidence.TCPEventCount{"rto": {Events: 30000, Segs: 30000}, "fast": {Events: 6000, Segs: 6000}},
		Top: []evidence.TCPConnEvents{
			{Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("10.0.0.9:50000"), Event: "retransmit", Kind: "rto", State: "ESTABLISHED", Events: 900, Segs: 900},
			{Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("10.0.0.9:50003"), Event: "reset_sent", Kind: "NO_SOCKET", Events: 1, Segs: 1},
		},
	}
	f := runTCPRule(t, "tcp.retransmits", in)
	if f == nil || f.Severity != Warn || f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Caveats) != 1 {
		t.Fatalf("%+v", f)
	}
	joined := strings.Join(f.Evidence, "\n")
	if !strings.Contains(joined, "rto 30000, fast 6000") || !strings.Contains(joined, "10.0.0.9:50000: 900 segments retransmitted (rto, ESTABLISHED)") || strings.Contains(joined, "50003") {
		t.Errorf("evidence %q", joined)
	}
	// 0.5%: info; the threshold is tunable.
	w.RetransSegs = 9000
	if f = runTCPRule(t, "tcp.retransmits", in); f == nil || f.Severity != Info {
		t.Fatalf("0.5%%: %+v", f)
	}
	r := TCPRules[ruleIndex("tcp.retransmits")]
	if f := r.CheckTuned(in, Thresholds{"tcp_retrans_info_share": 0.01}); f != nil {
		t.Errorf("a raised threshold still fired: %+v", f)
	}
}

func TestWindowScalingAndGRO(t *testing.T) {
	in := tcpBase()
	in.Evidence.Settings.WindowScaling = i64(0)
	f := runTCPRule(t, "tcp.window-scaling-off", in)
	if f == nil || !f.Recommendation.Applicable() || f.Recommendation.Changes[0].New != "1" {
		t.Fatalf("window scaling: %+v", f)
	}
	in = tcpBase()
	off := false
	in.Config.Interface.Name = "eth0"
	in.Config.Offloads.GRO = &off
	f = runTCPRule(t, "tcp.gro-off", in)
	if f == nil || !f.Recommendation.Applicable() || f.Recommendation.Changes[0].Iface != "eth0" || f.Recommendation.Changes[0].New != "on" {
		t.Fatalf("gro off: %+v", f)
	}
	// No TCP received, or GRO unknown: silent.
	in.Evidence.Counters.Window.InSegs = 0
	if f = runTCPRule(t, "tcp.gro-off", in); f != nil {
		t.Errorf("no TCP: %+v", f)
	}
	in = tcpBase()
	in.Config.Offloads.GRO = nil
	if f = runTCPRule(t, "tcp.gro-off", in); f != nil {
		t.Errorf("GRO unknown: %+v", f)
	}
}

// NO_SOCKET drops on a port no listener holds fire; on a port with a
// listener, below the minimum (a scan's knock), on port 0 or without the
// drop section the rule is silent.
func TestNoListener(t *testing.T) {
	in := tcpBase()
	in.Evidence.Drops.ByPort = []evidence.PortDrops{
		{Port: 9090, Reason: "NO_SOCKET", Count: 400}, {Port: 8080, Reason: "NO_SOCKET", Count: 300},
		{Port: 22, Reason: "NO_SOCKET", Count: 2}, {Port: 0, Reason: "NO_SOCKET", Count: 50}, {Port: 9090, Reason: "TCP_OFO_DROP", Count: 70},
	}
	f := runTCPRule(t, "tcp.no-listener", in)
	if f == nil || f.Severity != Warn || len(f.Evidence) != 1 || !strings.Contains(f.Title, "400 TCP packets to port 9090") {
		t.Fatalf("%+v", f)
	}
	contains(t, "evidence", f.Evidence, "port 9090: 400 in 10.0 s (40.0/s) dropped with NO_SOCKET (skb:kfree_skb), no listener on it over the window")
	// perfscope tcp --port 9090 with nothing listening: the listener
	// section says "no listener", and the rule fires.
	in.Evidence.Listeners = evidence.ListenerSection{Section: evidence.Section{Unavailable: "no listener on port 9090"}}
	if f := runTCPRule(t, "tcp.no-listener", in); f == nil || !strings.Contains(f.Title, "port 9090, 8080") {
		t.Errorf("no listener at all: %+v", f)
	}

	for name, change := range map[string]func(*TCPInput){
		"listener":          func(in *TCPInput) { in.Evidence.Drops.ByPort = in.Evidence.Drops.ByPort[1:] },
		"unavailable":       func(in *TCPInput) { in.Evidence.Drops.Unavailable = "drop probe unavailable" },
		"listeners unknown": func(in *TCPInput) { in.Evidence.Listeners.Unavailable = "sock_diag refused" },
		"scan":              func(in *TCPInput) { in.Evidence.Drops.ByPort[0].Count = 9 },
	} {
		in := tcpBase()
		in.Evidence.Drops.ByPort = []evidence.PortDrops{{Port: 9090, Reason: "NO_SOCKET", Count: 400}, {Port: 8080, Reason: "NO_SOCKET", Count: 300}}
		change(&in)
		if f := runTCPRule(t, "tcp.no-listener", in); f != nil {
			t.Errorf("%s: fired %+v", name, f)
		}
	}
}
