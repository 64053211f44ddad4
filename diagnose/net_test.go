package diagnose

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
)

// The fixtures are Makita's starting point: the collectors' recorded
// ens1f0 host (20 CPUs on two nodes with SMT off, 20 queues of which RSS
// uses 16, IRQs packed on node 0 against ixgbe's hints, GRO on, an empty
// iptables filter table, rp_filter and audit on) and a 10 s run of an echo
// server with one socket on port 9000.

const referenceRoot = "../collectors/netconfig/testdata/ixgbe-ens1f0"

type fixedRules map[string]int

func (f fixedRules) CountRules() (map[string]int, string, error) { return f, "iptables-save", nil }

func referenceConfig(t *testing.T) *netconfig.NetConfig {
	t.Helper()
	c, err := netconfig.Sources{
		FS:      procfs.FS{Root: referenceRoot},
		Ethtool: ethtool.Recorded{Dir: referenceRoot + "/ethtool"},
		Audit:   func() (netconfig.AuditStatus, error) { return netconfig.AuditStatus{Enabled: 1}, nil },
		Rules:   fixedRules{"ipv4/filter": 0, "ipv4/nat": 1},
	}.Snapshot("ens1f0")
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func u64(v uint64) *uint64 { return &v }

func referenceEvidence() evidence.NetEvidence {
	const dur = 10e9
	e := evidence.NetEvidence{
		Interface:  evidence.NetInterface{Name: "ens1f0", Driver: "ixgbe", RXQueues: 20, TXQueues: 20},
		DurationNs: dur,
		Port:       9000,
		PID:        4242,
	}
	// NET_RX only on node 0's CPUs, where irqbalance put the IRQs.
	node0 := cpuset.MustParseList("0-4,10-14")
	for cpu := 0; cpu < 20; cpu++ {
		share := 0.0
		if node0.Contains(cpu) {
			share = 0.85
		}
		e.Softirq.CPUs = append(e.Softirq.CPUs, evidence.SoftirqCPU{CPU: cpu, Share: share,
			Vectors: map[string]evidence.SoftirqVector{"NET_RX": {TimeNs: uint64(share * dur), Share: share}}})
	}
	// Queues 0-15 carry 230k packets each, 16-19 nothing (RSS table).
	for q := 0; q < 20; q++ {
		n := uint64(230_000)
		if q >= 16 {
			n = 0
		}
		e.Queues.RX = append(e.Queues.RX, evidence.QueueRow{Queue: q, KernelPackets: u64(n), DriverPackets: u64(n), Dead: q >= 16, PerS: float64(n) / 10})
		cpu := node0.CPUs()[q%10]
		e.QueueCPU.Cells = append(e.QueueCPU.Cells, evidence.QueueCPUCell{Queue: q, CPU: cpu, Work: n})
	}
	e.Queues.RXBalance = evidence.QueueBalance{Queues: 20, Total: 16 * 230_000, Mean: 184_000, Max: 230_000, Skew: 1.25, Dead: []int{16, 17, 18, 19}, Source: "driver"}
	sock := evidence.SocketRef{Local: "10.0.0.1:9000", Port: 9000, Inode: 5555, PID: 4242, Comm: "echo", Field: "sk_receive_queue.lock"}
	e.Locks = evidence.LockSection{
		Sites: []evidence.LockSite{
			{Class: "socket-receive-queue", Site: "__udp_enqueue_schedule_skb", Count: 900_000, TotalNs: 40e9, MaxNs: 2e6, Socket: &sock},
			{Class: "socket-wakeup", Site: "sock_def_readable", Count: 300_000, TotalNs: 10e9, MaxNs: 1e6, Socket: &sock},
		},
		Sockets: []evidence.SocketContention{{Socket: sock, Count: 1_200_000, TotalNs: 50e9, MaxNs: 2e6}},
		ByClass: map[string]uint64{"socket-receive-queue": 40e9, "socket-wakeup": 10e9},
		TotalNs: 50e9,
	}
	e.Drops = evidence.DropSection{
		ByPort:   []evidence.PortDrops{{Port: 9000, Reason: "SOCKET_RCVBUFF", Count: 980_000}},
		ByReason: map[string]uint64{"SOCKET_RCVBUFF": 980_000},
		UDPSNMP:  &evidence.UDPSNMP{UDP: evidence.UDPCounters{InDatagrams: 2_700_000, RcvbufErrors: 980_000, InErrors: 980_000}},
	}
	e.Sockets = evidence.SocketSection{
		Sockets: []evidence.UDPSocket{{Local: "10.0.0.1:9000", Port: 9000, Inode: 5555, PID: 4242, RxQueueB: 212_992, DropsDelta: 980_000, ReceivedPkt: u64(2_700_000)}},
	}
	// 4 receiving threads, two of them on node 1 CPUs that run no NET_RX.
	for i, last := range []int{0, 1, 6, 7} {
		e.Sockets.Threads = append(e.Sockets.Threads, evidence.ThreadCPU{TID: 4300 + i, Comm: "echo", LastCPU: last, AllowedCPUs: "0-19"})
	}
	// CPUs 0 and 1 both reply through TX queue 3 (flow hash, no XPS).
	e.TX = evidence.TXSection{
		PerCPU: []evidence.TXCPU{{CPU: 0, Queues: map[int]uint64{3: 100_000}}, {CPU: 1, Queues: map[int]uint64{3: 90_000, 4: 10}}},
		XPSSet: false,
		XPS:    map[int]string{},
	}
	e.Locks.ByClass["qdisc-root-lock"] = 2e9
	e.Profile = evidence.ProfileSection{FrequencyHz: 999, Samples: 200_000, NetRXCPUs: node0.CPUs(), Groups: []evidence.FunctionShare{
		{Group: "gro", Functions: []string{"dev_gro_receive"}, Samples: 9800, Share: 0.049},
		{Group: "netfilter", Functions: []string{"nf_hook_slow", "ipt_do_table"}, Samples: 6000, Share: 0.03},
		{Group: "fib-validation", Functions: []string{"fib_validate_source"}, Samples: 7280, Share: 0.0364},
		{Group: "audit", Functions: []string{"audit_*"}, Samples: 5000, Share: 0.025},
		{Group: "ip-ident", Functions: []string{"__ip_select_ident"}, Samples: 9640, Share: 0.0482},
	}}
	// Every sample of the fixture is on a NET_RX CPU.
	e.Profile.NetRXSamples = e.Profile.Samples
	for i := range e.Profile.Groups {
		g := &e.Profile.Groups[i]
		g.NetRXSamples = g.Samples
		g.ShareLow, g.ShareHigh = evidence.WilsonInterval(g.Samples, e.Profile.Samples)
	}
	return e
}

type netCase struct {
	name string
	// edit changes the seed fixture for this case.
	edit func(*NetInput)
	// silent: the rule must return nil.
	silent bool
	want   func(t *testing.T, f *Finding)
}

func rule(t *testing.T, id string) Rule[NetInput] {
	t.Helper()
	for _, r := range NetRules {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no rule %s", id)
	return Rule[NetInput]{}
}

func contains(t *testing.T, what string, list []string, want ...string) {
	t.Helper()
	joined := strings.Join(list, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, joined)
		}
	}
}

func runNetCases(t *testing.T, id string, cases []netCase) {
	t.Helper()
	r := rule(t, id)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := NetInput{Evidence: referenceEvidence(), Config: referenceConfig(t)}
			if tc.edit != nil {
				tc.edit(&in)
			}
			f := r.check(in, nil)
			if tc.silent {
				if f != nil {
					t.Fatalf("want silence, got %q: %v", f.Title, f.Evidence)
				}
				return
			}
			if f == nil {
				t.Fatal("rule stayed silent")
			}
			if f.Impact <= 0 || f.Impact > 1 || f.Severity == 0 || f.Title == "" || len(f.Evidence) == 0 {
				t.Errorf("incomplete finding: %+v", f)
			}
			rec := f.Recommendation
			// Makita's steps cite his talk; the rest of a receive path cites
			// the kernel documentation or the tool's own.
			if rec.Why == "" || rec.Expected == "" || rec.Reference == "" {
				t.Errorf("recommendation lacks why/expected/reference: %+v", rec)
			}
			if rec.Kind == KindSetting && (!rec.Applicable() || len(rec.Apply) != len(rec.Changes) || len(rec.Revert) != len(rec.Changes)) {
				t.Errorf("setting without typed changes rendered as apply and revert: %+v", rec)
			}
			if rec.Kind != KindSetting && len(rec.Changes) > 0 {
				t.Errorf("%s recommendation carries typed changes", rec.Kind)
			}
			for _, c := range rec.Changes {
				if err := c.Validate(); err != nil {
					t.Errorf("rule emitted an invalid change: %v", err)
				}
			}
			checkDeclared(t, r, in, rec.Changes)
			if rec.Kind == KindCode && len(rec.Code) == 0 {
				t.Errorf("code change without sketch")
			}
			if tc.want != nil {
				tc.want(t, f)
			}
		})
	}
}

// TestReferenceHostRanking runs every rule on the starting point: the socket
// lock dominates, settings come with reverts, and the JSON round-trips.
func TestReferenceHostRanking(t *testing.T) {
	fs := DiagnoseNet(NetInput{Evidence: referenceEvidence(), Config: referenceConfig(t)})
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	if len(fs) < 10 || fs[0].ID != "net.socket-lock-contention" {
		t.Fatalf("ranking %v", ids)
	}
	for _, f := range fs {
		if f.Recommendation.Kind == KindSetting && len(f.Recommendation.Revert) == 0 {
			t.Errorf("%s: setting without revert", f.ID)
		}
		checkDeclared(t, rule(t, f.ID), NetInput{Evidence: referenceEvidence(), Config: referenceConfig(t)}, f.Recommendation.Changes)
	}
	b, err := json.Marshal(fs)
	if err != nil {
		t.Fatal(err)
	}
	var back []Finding
	if err := json.Unmarshal(b, &back); err != nil || len(back) != len(fs) {
		t.Fatalf("round trip: %v", err)
	}
}

// TestTunedIsQuiet: with every fix applied nothing at warn or worse
// remains.
func TestTunedIsQuiet(t *testing.T) {
	e := referenceEvidence()
	c := referenceConfig(t)
	for i := range e.Softirq.CPUs {
		e.Softirq.CPUs[i].Vectors["NET_RX"] = evidence.SoftirqVector{Share: 0.6}
	}
	e.Queues.RXBalance.Dead = nil
	e.Locks = evidence.LockSection{ByClass: map[string]uint64{}}
	e.Drops = evidence.DropSection{UDPSNMP: &evidence.UDPSNMP{UDP: evidence.UDPCounters{InDatagrams: 70_000_000}}}
	e.Sockets.Threads = nil
	e.Profile.Groups = nil
	for _, q := range c.IRQs {
		if q.Affinity != nil {
			q.Affinity.SMPAffinity = q.Affinity.Hint
		}
	}
	for i := range c.RSS.Indirection {
		c.RSS.Indirection[i] = uint32(i % 20)
	}
	c.Topology.SMT = cpuset.SMT{Known: true, Active: true, Control: "on"}
	for _, f := range DiagnoseNet(NetInput{Evidence: e, Config: c}) {
		if f.Severity >= Warn {
			t.Errorf("%s at %v: %s", f.ID, f.Severity, f.Title)
		}
	}
}

// TestNetRulesOnEmptyInput: a run where every section is missing or
// unavailable produces no finding and no panic.
func TestNetRulesOnEmptyInput(t *testing.T) {
	unavailable := evidence.NetEvidence{DurationNs: 5e9}
	unavailable.Locks.Unavailable = "no lock probe"
	unavailable.TX.Unavailable = "no queue probe"
	unavailable.Queues.Unavailable = "no queue probe"
	for name, in := range map[string]NetInput{
		"zero":             {},
		"zero config":      {Config: &netconfig.NetConfig{}},
		"sections missing": {Evidence: unavailable, Config: &netconfig.NetConfig{}},
	} {
		if fs := DiagnoseNet(in); len(fs) != 0 {
			var ids []string
			for _, f := range fs {
				ids = append(ids, f.ID)
			}
			t.Errorf("%s: findings %v", name, ids)
		}
	}
}

// TestStaticConfigWithoutLoad: configuration facts still show without
// traffic, but only as info.
func TestStaticConfigWithoutLoad(t *testing.T) {
	var ids []string
	for _, f := range DiagnoseNet(NetInput{Config: referenceConfig(t)}) {
		ids = append(ids, f.ID)
		if f.Severity != Info {
			t.Errorf("%s at %v without load", f.ID, f.Severity)
		}
	}
	slices.Sort(ids)
	// RPS on queues 6-9 without RFS is a configuration fact too.
	if want := []string{"net.irq-affinity-ignores-hint", "net.rfs-off", "net.rss-indirection-narrow", "net.smt-off"}; !slices.Equal(ids, want) {
		t.Errorf("findings %v, want %v", ids, want)
	}
}
