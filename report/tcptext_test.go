package report

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

func tcpReport() *Report {
	w := &evidence.TCPCounters{PassiveOpens: 900, ListenOverflows: 37, ListenDrops: 37, InSegs: 5000, OutSegs: 4000, RetransSegs: 40}
	conns := uint64(52000)
	ev := evidence.NetEvidence{Interface: evidence.NetInterface{Name: "vb"}, DurationNs: int64(2 * time.Second)}
	ev.TCP = &evidence.TCPEvidence{DurationNs: int64(2 * time.Second), Port: 8080,
		Counters: evidence.TCPCounterSection{Window: w},
		Listeners: evidence.ListenerSection{Rows: []evidence.TCPListener{{Local: netip.MustParseAddrPort("10.0.0.1:8080"), PIDs: []int{4242}, Comm: "toyserver",
			Backlog: 4, QueueLast: 5, QueuePeak: 5, FullSamples: 12, Samples: 20, ReusePort: 1, SynQueuePeak: 3, SynFullSamples: 1, SynSamples: 4}}},
		Connections: evidence.ConnectionSection{Total: 1, Rows: []evidence.TCPConnection{{Local: netip.MustParseAddrPort("10.0.0.1:8080"),
			Remote: netip.MustParseAddrPort("10.0.0.2:40000"), State: "ESTABLISHED", RTTUs: 250, BytesWindow: &conns}}},
		Events: evidence.TCPEventSection{Retransmits: evidence.TCPEventCount{Events: 40, Segs: 40},
			RetransmitKinds: map[string]evidence.TCPEventCount{"rto": {Events: 40, Segs: 40}},
			Top:             []evidence.TCPConnEvents{{Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("10.0.0.2:40000"), Event: "retransmit", Kind: "rto", Events: 40, Segs: 40}}},
		Drops: evidence.TCPDropSection{ByPort: []evidence.PortDrops{{Port: 8081, Reason: "NO_SOCKET", Count: 25}, {Port: 0, Reason: "IP_CSUM", Count: 2}}},
	}
	r := New("tcp", "v", time.Unix(0, 0))
	r.Data = NetData{NetEvidence: ev}
	return r
}

// A TCP run's text names itself, shows the accept queues and the
// counters on the first screen, and the connections and events below.
func TestTCPText(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, tcpReport(), Text); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"perfscope tcp — vb", "TCP listeners (accept queues, sampled)", "10.0.0.1:8080", "toyserver 4242", "12 of 20", "1 of 4", synSpacedNote,
		"accept queue full", "37 (18/s)", "40 (1.0% of segments out)", "retransmitted segments by kind: rto 40",
		"TCP connections (busiest by bytes over the window)", "10.0.0.2:40000", "TCP retransmits and resets per connection",
		"TCP drops by local port and reason (skb:kfree_skb)", "8081  NO_SOCKET     25", "unattributed  IP_CSUM        2"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "UDP drops by port") {
		t.Error("a TCP run's text shows the UDP drops section")
	}
}

// The JSON keeps the TCP layer under data.tcp, with the keys docs/tcp.md
// and the README list.
func TestTCPJSONKeys(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, tcpReport(), JSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Data struct {
			TCP map[string]json.RawMessage `json:"tcp"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"duration_ns", "port", "counters", "settings", "sockstat", "listeners", "connections", "events", "drops"} {
		if _, ok := doc.Data.TCP[k]; !ok {
			t.Errorf("data.tcp lacks %q: %s", k, b.String())
		}
	}
	var counters struct {
		Window struct {
			ListenOverflows uint64 `json:"listen_overflows"`
		} `json:"window"`
	}
	if err := json.Unmarshal(doc.Data.TCP["counters"], &counters); err != nil || counters.Window.ListenOverflows != 37 {
		t.Errorf("counters %s", doc.Data.TCP["counters"])
	}
}

// The page draws the TCP section instead of the UDP drops and sockets.
func TestTCPPage(t *testing.T) {
	page := renderPage(t, tcpReport())
	for _, want := range []string{"TCP: listeners, connections, retransmits", "Accept queue per listener", "ListenOverflows", "Busiest connections (1 of 1)", "TCP drops by local port and reason", "NO_SOCKET", "SYN samples", "SYN queues read in fewer samples"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "UDP sockets") {
		t.Error("a TCP run's page shows the UDP sockets table")
	}
}

// What a run could not see is said in the text and on the page: the
// namespace the TCP layer was read in, sysctls not read, events with no
// known owner, and page pools the kernel cannot count.
func TestTCPTextSaysWhatWasNotSeen(t *testing.T) {
	r := tcpReport()
	d := r.Data.(NetData)
	d.TCP.PID, d.TCP.Netns = 4242, "net:[4026532999]"
	d.TCP.SettingsUnavailable = "TCP sysctls in the network namespace of pid 4242 (net:[4026532999]): permission denied"
	d.TCP.Events.Unattributed = 7
	d.TCP.Connections.SteeringLost = 19256
	d.TCP.Connections.Rows[0].Steering = &evidence.TCPSteering{FedCPU: 1, FedShare: 0.75, ReadCPU: 0, ReadShare: 1, FedByBacklog: 3}
	inflight := uint64(3)
	d.Queues.PagePools = []evidence.PagePool{{ID: 9, NAPIID: 8193, Inflight: &inflight, Counters: map[string]uint64{"alloc-slow": 5, "alloc-fast": 0}}}
	d.Queues.PagePoolUnavailable = "no allocation or recycling counters: this kernel was built without CONFIG_PAGE_POOL_STATS"
	r.Data = d
	var b bytes.Buffer
	if err := Render(&b, r, Text); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"TCP read in the network namespace of pid 4242 (net:[4026532999])",
		"unavailable: TCP sysctls in the network namespace of pid 4242", "7 events of connections closed before the end are left out",
		"19256 deliveries and reads are missing from these shares",
		"page pool 9 (NAPI 8193): 3 pages in flight; over the window alloc-slow 5",
		"page_pool_unavailable: no allocation or recycling counters: this kernel was built without CONFIG_PAGE_POOL_STATS"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := Render(&b, r, HTML); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Read in the network namespace of pid 4242") {
		t.Error("the page does not say which namespace the TCP layer was read in")
	}
	if page := b.String(); !strings.Contains(page, "19256 deliveries and reads are missing from these shares") ||
		!strings.Contains(page, "fed by CPU (softirq)") || !strings.Contains(page, "1 (75") {
		t.Error("the page does not show the steering rows and what their shares miss")
	}
}

// A sampled drop probe that saw nothing does not say none were dropped.
func TestTCPDropsNoneSeenWhileSampled(t *testing.T) {
	var b strings.Builder
	writeTCPDrops(&b, evidence.TCPDropSection{Estimate: &evidence.Estimate{Windows: 2, Coverage: 0.038}})
	if out := b.String(); !strings.Contains(out, "none seen in the 2 sampling windows (3.8 % of the run) the drop probe was attached") || strings.Contains(out, "\nnone\n") {
		t.Errorf("sampled, nothing seen:\n%s", out)
	}
	b.Reset()
	writeTCPDrops(&b, evidence.TCPDropSection{})
	if out := b.String(); !strings.Contains(out, "\nnone\n") {
		t.Errorf("exact, nothing dropped:\n%s", out)
	}
}
