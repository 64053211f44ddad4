package diagnose

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/netstat"
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
		UDPSNMP:  &netstat.UDPSNMP{UDP: netstat.UDPCounters{InDatagrams: 2_700_000, RcvbufErrors: 980_000, InErrors: 980_000}},
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
			f := r.Check(in)
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
			if rec.Why == "" || rec.Expected == "" || !strings.Contains(rec.Reference, "Boost UDP Transaction Performance") {
				t.Errorf("recommendation lacks why/expected/reference: %+v", rec)
			}
			if rec.Kind == KindSetting && (len(rec.Apply) == 0 || len(rec.Revert) == 0) {
				t.Errorf("setting without apply and revert: %+v", rec)
			}
			if rec.Kind == KindCode && len(rec.Code) == 0 {
				t.Errorf("code change without sketch")
			}
			if tc.want != nil {
				tc.want(t, f)
			}
		})
	}
}

func TestSoftirqConcentrated(t *testing.T) {
	runNetCases(t, "net.softirq-concentrated", []netCase{
		{name: "node 0 only", want: func(t *testing.T, f *Finding) {
			if f.Severity != Crit || !strings.Contains(f.Title, "NUMA node 0") {
				t.Errorf("%v %q", f.Severity, f.Title)
			}
			contains(t, "evidence", f.Evidence, "CPU 0 spends 85.0%", "CPUs 0-4,10-14 do receive work", "CPUs 5-9,15-19 are idle")
		}},
		{name: "without config still fires, no NUMA claim", edit: func(in *NetInput) { in.Config = nil }, want: func(t *testing.T, f *Finding) {
			if strings.Contains(f.Title, "NUMA") {
				t.Errorf("NUMA claimed without topology: %q", f.Title)
			}
		}},
		{name: "even spread is silent", silent: true, edit: func(in *NetInput) {
			for i := range in.Evidence.Softirq.CPUs {
				in.Evidence.Softirq.CPUs[i].Vectors["NET_RX"] = evidence.SoftirqVector{Share: 0.5}
			}
		}},
		{name: "light load is silent", silent: true, edit: func(in *NetInput) {
			for i := range in.Evidence.Softirq.CPUs {
				in.Evidence.Softirq.CPUs[i].Vectors["NET_RX"] = evidence.SoftirqVector{Share: 0.1 * float64(i%2)}
			}
		}},
	})
}

func TestIRQAffinityIgnoresHint(t *testing.T) {
	runNetCases(t, "net.irq-affinity-ignores-hint", []netCase{
		{name: "irqbalance packs node 0", want: func(t *testing.T, f *Finding) {
			if f.Severity != Crit || !strings.Contains(f.Title, "20 of 20") {
				t.Errorf("%v %q", f.Severity, f.Title)
			}
			r := f.Recommendation
			// Stop irqbalance first; queue 16's hint is CPU 16 (bit 16 of 40).
			if r.Apply[0] != "systemctl stop irqbalance" || !slices.Contains(r.Apply, "echo 00,00010000 > /proc/irq/81/smp_affinity") {
				t.Errorf("apply %q", r.Apply)
			}
			if !slices.Contains(r.Revert, "echo 00,00007c1f > /proc/irq/81/smp_affinity") || r.Revert[len(r.Revert)-1] != "systemctl start irqbalance" {
				t.Errorf("revert %q", r.Revert)
			}
			contains(t, "evidence", f.Evidence, "IRQ 65 (ens1f0-TxRx-0, queue 0): smp_affinity 0-4,10-14, affinity_hint 0", "one NUMA node")
		}},
		{name: "affinity follows hint", silent: true, edit: func(in *NetInput) {
			for _, q := range in.Config.IRQs {
				if q.Affinity != nil {
					q.Affinity.SMPAffinity = q.Affinity.Hint
				}
			}
		}},
		{name: "no config", silent: true, edit: func(in *NetInput) { in.Config = nil }},
	})
}

func TestRSSIndirectionNarrow(t *testing.T) {
	runNetCases(t, "net.rss-indirection-narrow", []netCase{
		{name: "16 of 20", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Apply[0] != "ethtool -X ens1f0 equal 20" || r.Revert[0] != "ethtool -X ens1f0 equal 16" {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "128-entry indirection table points at queues 0-15", "queues 16-19 receive nothing", "queue 16: 0 packets/s")
		}},
		{name: "uneven table reverts by weight", edit: func(in *NetInput) {
			in.Config.RSS.Indirection = []uint32{0, 0, 1, 2}
		}, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Revert[0] != "ethtool -X ens1f0 weight 2 1 1" {
				t.Errorf("revert %q", f.Recommendation.Revert)
			}
		}},
		{name: "table covers all queues", silent: true, edit: func(in *NetInput) {
			for i := range in.Config.RSS.Indirection {
				in.Config.RSS.Indirection[i] = uint32(i % 20)
			}
		}},
		{name: "RSS unknown", silent: true, edit: func(in *NetInput) { in.Config.RSS = nil }},
	})
}

func TestDeadRXQueues(t *testing.T) {
	runNetCases(t, "net.dead-rx-queues", []netCase{
		{name: "explained by RSS table", silent: true},
		{name: "RSS unknown", edit: func(in *NetInput) { in.Config.RSS = nil }, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || !strings.Contains(f.Title, "4 of 20") {
				t.Errorf("%q %v", f.Title, f.Recommendation.Kind)
			}
			contains(t, "evidence", f.Evidence, "dead queues 16-19 (driver counters)", "3680000 packets")
			contains(t, "apply", f.Recommendation.Apply, "ethtool -N ens1f0 rx-flow-hash udp4 sdfn")
		}},
		{name: "all queues alive", silent: true, edit: func(in *NetInput) {
			in.Config.RSS = nil
			in.Evidence.Queues.RXBalance.Dead = nil
		}},
	})
}

func TestRPSNeeded(t *testing.T) {
	// After the hint fix: queue q's softirq on CPU q, RSS on 0-15, so
	// CPUs 16-19 (node 1) idle. Makita's talk spread them over queues 6-9.
	afterHint := func(in *NetInput) {
		// The recorded host already has Makita's RPS on rx-6..9: clear it.
		for i := range in.Config.Interface.RX {
			in.Config.Interface.RX[i].RPSCPUs = cpuset.Set{}
		}
		e := &in.Evidence
		e.QueueCPU.Cells = nil
		for q := 0; q < 20; q++ {
			share := 0.0
			if q < 16 {
				share = 0.9
				e.QueueCPU.Cells = append(e.QueueCPU.Cells, evidence.QueueCPUCell{Queue: q, CPU: q, Work: 230_000})
			}
			e.Softirq.CPUs[q].Vectors["NET_RX"] = evidence.SoftirqVector{Share: share}
		}
	}
	runNetCases(t, "net.rps-needed", []netCase{
		{name: "16 queues, 20 CPUs", edit: afterHint, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			want := []string{
				"echo 00,00010020 > /sys/class/net/ens1f0/queues/rx-5/rps_cpus",
				"echo 00,00020040 > /sys/class/net/ens1f0/queues/rx-6/rps_cpus",
				"echo 00,00040080 > /sys/class/net/ens1f0/queues/rx-7/rps_cpus",
				"echo 00,00080100 > /sys/class/net/ens1f0/queues/rx-8/rps_cpus",
			}
			if !slices.Equal(r.Apply, want) {
				t.Errorf("apply\n%q\nwant\n%q", r.Apply, want)
			}
			if r.Revert[0] != "echo 0 > /sys/class/net/ens1f0/queues/rx-5/rps_cpus" {
				t.Errorf("revert %q", r.Revert)
			}
			// One socket: spreading alone made Makita's server slower.
			if f.Severity != Info {
				t.Errorf("severity %v with one socket", f.Severity)
			}
			contains(t, "evidence", f.Evidence, "queue 5 (softirq on CPU 5, node 1) → RPS CPUs 5,16", "only one socket")
			contains(t, "caveats", f.Recommendation.Caveats, "270k → 17k")
		}},
		{name: "RPS already set", silent: true, edit: func(in *NetInput) {
			afterHint(in)
			in.Config.Interface.RX[0].RPSCPUs = cpuset.Of(0, 16)
		}},
		{name: "as many queues as CPUs busy", silent: true, edit: func(in *NetInput) {
			afterHint(in)
			for q := 16; q < 20; q++ {
				in.Evidence.Softirq.CPUs[q].Vectors["NET_RX"] = evidence.SoftirqVector{Share: 0.9}
			}
			in.Evidence.Queues.RXBalance.Dead = nil
		}},
		{name: "no config", silent: true, edit: func(in *NetInput) { afterHint(in); in.Config = nil }},
	})
}

func TestRPSMasksStayOnNode(t *testing.T) {
	topo := map[int]int{0: 0, 1: 0, 2: 1, 3: 1, 4: 1}
	masks, left := RPSMasks([]int{0}, map[int]int{0: 0}, cpuset.Range(0, 4), func(c int) int { return topo[c] })
	if masks[0].List() != "0-1" || left.List() != "2-4" {
		t.Fatalf("masks %v left %v", masks, left)
	}
}

func TestSocketLockContention(t *testing.T) {
	runNetCases(t, "net.socket-lock-contention", []netCase{
		{name: "one socket, 10 CPUs", want: func(t *testing.T, f *Finding) {
			// 50 s of wait over 10 s on 10 NET_RX CPUs: half their time.
			if f.Severity != Crit || f.Impact != 0.5 || f.Recommendation.Kind != KindCode {
				t.Errorf("%v %v %v", f.Severity, f.Impact, f.Recommendation.Kind)
			}
			contains(t, "evidence", f.Evidence, "50000.0 ms of wait over 10.0s on 10 NET_RX CPUs", "socket 10.0.0.1:9000 (inode 5555, pid 4242 echo)", "__udp_enqueue_schedule_skb", "980000 drops on port 9000", "one socket and no SO_REUSEPORT")
			langs := []string{f.Recommendation.Code[0].Lang, f.Recommendation.Code[1].Lang}
			if !slices.Equal(langs, []string{"c", "go"}) || !strings.Contains(f.Recommendation.Code[1].Code, "SO_REUSEPORT") {
				t.Errorf("sketches %v", f.Recommendation.Code)
			}
		}},
		{name: "already a reuseport group", silent: true, edit: func(in *NetInput) {
			in.Evidence.Sockets.Groups = []evidence.ReusePortGroup{{Local: "10.0.0.1:9000", Port: 9000, Size: 4}}
		}},
		{name: "little contention", silent: true, edit: func(in *NetInput) {
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-receive-queue": 1e6}
		}},
		{name: "some contention on a socket that drops", edit: func(in *NetInput) {
			// 0.5 % of 10 CPUs' 10 s waiting, but the socket is saturated:
			// the 2-CPU lab's single socket looks like this.
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-wakeup": 5e8}
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Warn || !strings.Contains(f.Title, "one UDP socket is the bottleneck") {
				t.Errorf("%v %q", f.Severity, f.Title)
			}
			contains(t, "evidence", f.Evidence, "980000 drops on port 9000")
		}},
		{name: "no measurable wait, but two CPUs feed the saturated socket", edit: func(in *NetInput) {
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-wakeup": 1e6}
			cpus := netRXCPUs(in.Evidence).CPUs()
			in.Evidence.Sockets.Sockets[0].WakeupsByCPU = map[int]uint64{cpus[0]: 600, cpus[1]: 400}
		}, want: func(t *testing.T, f *Finding) {
			if !strings.Contains(f.Title, "one UDP socket is the bottleneck") {
				t.Errorf("title %q", f.Title)
			}
			contains(t, "evidence", f.Evidence, "all queue into it (60.0%, 40.0% of its wakeups)")
		}},
		{name: "one CPU feeds the saturated socket, no wait", silent: true, edit: func(in *NetInput) {
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-wakeup": 1e6}
			cpus := netRXCPUs(in.Evidence).CPUs()
			in.Evidence.Sockets.Sockets[0].WakeupsByCPU = map[int]uint64{cpus[0]: 1000}
		}},
		{name: "some contention, no drops", silent: true, edit: func(in *NetInput) {
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-wakeup": 5e8}
			in.Evidence.Drops.ByPort = nil
		}},
		{name: "locks not measured", silent: true, edit: func(in *NetInput) { in.Evidence.Locks.Unavailable = "lock tracepoints missing" }},
	})
}

func TestReuseportSteering(t *testing.T) {
	group := func(in *NetInput) {
		e := &in.Evidence
		e.Sockets.Groups = []evidence.ReusePortGroup{{Local: "10.0.0.1:9000", Port: 9000, Size: 2, Inodes: []uint64{1, 2}}}
		e.Sockets.Sockets = []evidence.UDPSocket{
			{Local: "10.0.0.1:9000", Port: 9000, Inode: 1, ReceivedPkt: u64(3_000_000)},
			{Local: "10.0.0.1:9000", Port: 9000, Inode: 2, ReceivedPkt: u64(1_000_000)},
		}
		e.Locks.ByClass = map[string]uint64{"socket-receive-queue": 2e9}
	}
	runNetCases(t, "net.reuseport-steering", []netCase{
		{name: "contention and skew remain", edit: group, want: func(t *testing.T, f *Finding) {
			contains(t, "evidence", f.Evidence, "= 2.0% of the NET_RX CPUs' time, with 2 sockets", "1.50× the group mean of 2000000")
			if !strings.Contains(f.Recommendation.Code[0].Code, "SKF_AD_CPU") || !strings.Contains(f.Recommendation.Code[1].Code, "SO_ATTACH_REUSEPORT_CBPF") {
				t.Errorf("sketches %v", f.Recommendation.Code)
			}
		}},
		{name: "balanced and quiet", silent: true, edit: func(in *NetInput) {
			group(in)
			in.Evidence.Sockets.Sockets[1].ReceivedPkt = u64(3_000_000)
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-receive-queue": 1e6}
		}},
		{name: "balanced and quiet, but every socket fed by two CPUs", edit: func(in *NetInput) {
			group(in)
			in.Evidence.Sockets.Sockets[1].ReceivedPkt = u64(3_000_000)
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-receive-queue": 1e6}
			cpus := netRXCPUs(in.Evidence).CPUs()
			in.Evidence.Sockets.Sockets[0].WakeupsByCPU = map[int]uint64{cpus[0]: 550, cpus[1]: 450}
			in.Evidence.Sockets.Sockets[1].WakeupsByCPU = map[int]uint64{cpus[0]: 300, cpus[1]: 700}
		}, want: func(t *testing.T, f *Finding) {
			contains(t, "evidence", f.Evidence, "socket inode 1 was fed by CPUs", "(55.0%, 45.0% of its wakeups)", "socket inode 2 was fed by CPUs")
		}},
		{name: "steered: one CPU per socket", silent: true, edit: func(in *NetInput) {
			group(in)
			in.Evidence.Sockets.Sockets[1].ReceivedPkt = u64(3_000_000)
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-receive-queue": 1e6}
			cpus := netRXCPUs(in.Evidence).CPUs()
			in.Evidence.Sockets.Sockets[0].WakeupsByCPU = map[int]uint64{cpus[0]: 1000, cpus[1]: 3}
			in.Evidence.Sockets.Sockets[1].WakeupsByCPU = map[int]uint64{cpus[1]: 1000}
		}},
		{name: "no group", silent: true},
	})
}

func TestThreadPinning(t *testing.T) {
	runNetCases(t, "net.thread-pinning", []netCase{
		{name: "two threads on node 1", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			want := []string{"taskset -p -c 0 4300", "taskset -p -c 1 4301", "taskset -p -c 2 4302", "taskset -p -c 3 4303"}
			if !slices.Equal(r.Apply, want) || r.Revert[0] != "taskset -p -c 0-19 4300" {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "thread 4302 (echo) last ran on CPU 6, allowed 0-19", "4302→2")
			if !strings.Contains(f.Title, "2 of 4") {
				t.Errorf("title %q", f.Title)
			}
		}},
		{name: "already on NET_RX CPUs", silent: true, edit: func(in *NetInput) {
			for i := range in.Evidence.Sockets.Threads {
				in.Evidence.Sockets.Threads[i].LastCPU = i
			}
		}},
		{name: "pinned by the owner", silent: true, edit: func(in *NetInput) {
			for i := range in.Evidence.Sockets.Threads {
				in.Evidence.Sockets.Threads[i].AllowedCPUs = "7"
			}
		}},
		{name: "a thread pool, not receivers", silent: true, edit: func(in *NetInput) {
			for i := 0; i < 100; i++ {
				in.Evidence.Sockets.Threads = append(in.Evidence.Sockets.Threads, evidence.ThreadCPU{TID: 9000 + i, LastCPU: 6, AllowedCPUs: "0-19"})
			}
		}},
	})
}

func TestXPSUnset(t *testing.T) {
	// The recorded ixgbe sets XPS itself; Makita's talk measured the cost of
	// turning it off (echo 0 > xps_cpus).
	xpsOff := func(in *NetInput) {
		for i := range in.Config.Interface.TX {
			if i > 0 {
				in.Config.Interface.TX[i].XPSCPUs = cpuset.Set{}
			}
		}
	}
	runNetCases(t, "net.xps-unset", []netCase{
		{name: "ixgbe's own XPS", silent: true},
		{name: "CPUs share TX queue 3", edit: xpsOff, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if len(r.Apply) != 20 || r.Apply[3] != "echo 00,00000008 > /sys/class/net/ens1f0/queues/tx-3/xps_cpus" {
				t.Errorf("apply %q", r.Apply)
			}
			// tx-0 kept xps_cpus 1: the revert restores it.
			if r.Revert[0] != "echo 00,00000001 > /sys/class/net/ens1f0/queues/tx-0/xps_cpus" || r.Revert[1] != "echo 0 > /sys/class/net/ens1f0/queues/tx-1/xps_cpus" {
				t.Errorf("revert %q", r.Revert[:2])
			}
			contains(t, "evidence", f.Evidence, "TX queue 3 carried 190000 packets from CPUs 0-1", "qdisc/TX queue lock wait 2000.0 ms")
		}},
		{name: "without config: masks from the measured CPUs, reverts from evidence", edit: func(in *NetInput) {
			in.Config = nil
			in.Evidence.Interface.TXQueues = 2
		}, want: func(t *testing.T, f *Finding) {
			// 20 CPUs dealt over 2 queues.
			if f.Recommendation.Apply[0] != "echo 55555 > /sys/class/net/ens1f0/queues/tx-0/xps_cpus" || f.Recommendation.Revert[0] != "echo 0 > /sys/class/net/ens1f0/queues/tx-0/xps_cpus" {
				t.Errorf("apply %q revert %q", f.Recommendation.Apply, f.Recommendation.Revert)
			}
		}},
		{name: "XPS set", silent: true, edit: func(in *NetInput) { in.Evidence.TX.XPSSet = true }},
		{name: "no sharing, no qdisc wait", silent: true, edit: func(in *NetInput) {
			xpsOff(in)
			in.Evidence.TX.PerCPU = []evidence.TXCPU{{CPU: 0, Queues: map[int]uint64{0: 5}}, {CPU: 1, Queues: map[int]uint64{1: 5}}}
			delete(in.Evidence.Locks.ByClass, "qdisc-root-lock")
		}},
		{name: "single TX queue", silent: true, edit: func(in *NetInput) {
			in.Config = nil
			in.Evidence.Interface.TXQueues = 1
		}},
	})
}

func TestGROUDP(t *testing.T) {
	runNetCases(t, "net.gro-udp", []netCase{
		{name: "Makita's 4.9%", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if f.Severity != Warn || r.Apply[0] != "ethtool -K ens1f0 gro off" || r.Revert[0] != "ethtool -K ens1f0 gro on" {
				t.Errorf("%v %q %q", f.Severity, r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "3680000 UDP datagrams of 3680000 packets")
			contains(t, "caveats", r.Caveats, "TCP receivers", "VM hosts")
		}},
		{name: "TCP traffic too", silent: true, edit: func(in *NetInput) { in.Evidence.Drops.UDPSNMP.UDP.InDatagrams = 100 }},
		{name: "GRO off", silent: true, edit: func(in *NetInput) { off := false; in.Config.Offloads.GRO = &off }},
		{name: "GRO cheap", silent: true, edit: func(in *NetInput) { in.Evidence.Profile.Groups[0].Share = 0.002 }},
	})
}

func TestNetfilterUnused(t *testing.T) {
	runNetCases(t, "net.netfilter-unused", []netCase{
		{name: "empty filter table, nat in use", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// ip_tables stays: the nat table has a rule.
			if !slices.Equal(r.Apply, []string{"modprobe -r iptable_filter"}) || !slices.Equal(r.Revert, []string{"modprobe iptable_filter"}) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "tables without a rule: ipv4/filter")
		}},
		{name: "only an empty filter table", edit: func(in *NetInput) {
			in.Config.Netfilter.RuleCounts = map[string]int{"ipv4/filter": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if !slices.Equal(r.Apply, []string{"modprobe -r iptable_filter", "modprobe -r ip_tables"}) || !slices.Equal(r.Revert, []string{"modprobe ip_tables", "modprobe iptable_filter"}) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
		}},
		{name: "empty nftables table", edit: func(in *NetInput) {
			in.Config.Netfilter.RuleCounts = map[string]int{"nft/ip/filter": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Apply[0] != "nft list table ip filter > /var/tmp/perfscope-nft-ip-filter.nft && nft delete table ip filter" || r.Revert[0] != "nft -f /var/tmp/perfscope-nft-ip-filter.nft" {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
		}},
		{name: "built-in module cannot go", silent: true, edit: func(in *NetInput) {
			in.Config.Netfilter.Modules["iptable_filter"] = netconfig.ModuleBuiltin
		}},
		{name: "filter table has rules", silent: true, edit: func(in *NetInput) { in.Config.Netfilter.RuleCounts["ipv4/filter"] = 3 }},
		{name: "rule counts unknown", silent: true, edit: func(in *NetInput) { in.Config.Netfilter.RuleCounts = nil }},
		{name: "cost below what the profile resolves", silent: true, edit: func(in *NetInput) {
			for i, g := range in.Evidence.Profile.Groups {
				if g.Group == "netfilter" {
					in.Evidence.Profile.Groups[i].Share, in.Evidence.Profile.Groups[i].Samples = 0.02, 4
				}
			}
		}},
	})
}

func TestRPFilter(t *testing.T) {
	runNetCases(t, "net.rp-filter", []netCase{
		{name: "strict via all", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// ens1f0 is already 0: only "all" (effective = max) changes.
			wantApply := []string{"sysctl -w net.ipv4.conf.all.rp_filter=0", "sysctl -w net.ipv4.conf.all.accept_local=1"}
			wantRevert := []string{"sysctl -w net.ipv4.conf.all.rp_filter=1", "sysctl -w net.ipv4.conf.all.accept_local=0"}
			if !slices.Equal(r.Apply, wantApply) || !slices.Equal(r.Revert, wantRevert) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "caveats", r.Caveats, "Security trade-off", "spoofed source")
		}},
		{name: "loose on the interface too", edit: func(in *NetInput) { in.Config.RPFilter.RPFilter["ens1f0"] = 2 }, want: func(t *testing.T, f *Finding) {
			if !slices.Contains(f.Recommendation.Revert, "sysctl -w net.ipv4.conf.ens1f0.rp_filter=2") {
				t.Errorf("revert %q", f.Recommendation.Revert)
			}
		}},
		{name: "rp_filter off", silent: true, edit: func(in *NetInput) { zero := int64(0); in.Config.RPFilter.EffectiveRPFilter = &zero }},
		{name: "no CPU in fib validation", silent: true, edit: func(in *NetInput) { in.Evidence.Profile.Groups[2].Share = 0 }},
	})
}

func TestAudit(t *testing.T) {
	runNetCases(t, "net.audit", []netCase{
		{name: "enabled", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindSetting || r.Apply[0] != "auditctl -e 0" || r.Revert[0] != "auditctl -e 1" {
				t.Errorf("%+v", r)
			}
		}},
		{name: "locked until reboot is advice", edit: func(in *NetInput) { two := uint32(2); in.Config.Audit.Enabled = &two }, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Revert) != 0 {
				t.Errorf("%+v", f.Recommendation)
			}
		}},
		{name: "disabled", silent: true, edit: func(in *NetInput) { zero := uint32(0); in.Config.Audit.Enabled = &zero }},
		{name: "status unknown", silent: true, edit: func(in *NetInput) { in.Config.Audit.Enabled = nil }},
	})
}

func TestIPIdent(t *testing.T) {
	runNetCases(t, "net.ip-ident", []netCase{
		{name: "4.82%", want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindCode || !strings.Contains(f.Recommendation.Code[0].Code, "IP_PMTUDISC_DO") {
				t.Errorf("%+v", f.Recommendation)
			}
			contains(t, "caveats", f.Recommendation.Caveats, "EMSGSIZE")
		}},
		{name: "not in the profile", silent: true, edit: func(in *NetInput) { in.Evidence.Profile.Groups = in.Evidence.Profile.Groups[:4] }},
		{name: "no profile", silent: true, edit: func(in *NetInput) {
			in.Evidence.Profile = evidence.ProfileSection{Section: evidence.Section{Unavailable: "perf_event refused"}}
		}},
	})
}

func TestSMTOff(t *testing.T) {
	runNetCases(t, "net.smt-off", []netCase{
		{name: "available, off, saturated", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if f.Severity != Warn || r.Apply[0] != "echo on > /sys/devices/system/cpu/smt/control" || r.Revert[0] != "echo off > /sys/devices/system/cpu/smt/control" {
				t.Errorf("%v %+v", f.Severity, r)
			}
		}},
		{name: "forced off", silent: true, edit: func(in *NetInput) { in.Config.Topology.SMT.Control = "forceoff" }},
		{name: "on", silent: true, edit: func(in *NetInput) { in.Config.Topology.SMT = cpuset.SMT{Known: true, Active: true, Control: "on"} }},
		{name: "not supported", silent: true, edit: func(in *NetInput) { in.Config.Topology.SMT = cpuset.SMT{Known: true, Control: "notsupported"} }},
	})
}

func TestUDPRcvbuf(t *testing.T) {
	runNetCases(t, "net.udp-rcvbuf", []netCase{
		{name: "26.6% dropped", want: func(t *testing.T, f *Finding) {
			// 3.68M arrivals in 10 s on one socket: 368k/s × 10 ms × 2 KiB
			// = 7.5 MB → 8 MiB.
			r := f.Recommendation
			if f.Severity != Crit || r.Kind != KindSetting {
				t.Errorf("%v %v", f.Severity, r.Kind)
			}
			wantApply := []string{"sysctl -w net.core.rmem_max=8388608", "sysctl -w net.core.rmem_default=8388608"}
			wantRevert := []string{"sysctl -w net.core.rmem_max=212992", "sysctl -w net.core.rmem_default=212992"}
			if !slices.Equal(r.Apply, wantApply) || !slices.Equal(r.Revert, wantRevert) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "980000 receive-buffer drops and 2700000 datagrams delivered", "368000 datagrams/s per socket × 10 ms stall × 2048 B truesize = 7536640 B per socket → 8388608 B (8 MiB)")
		}},
		{name: "reuseport group shares the rate", edit: func(in *NetInput) {
			s := in.Evidence.Sockets.Sockets[0]
			s.ReceivedPkt = u64(1_350_000)
			in.Evidence.Sockets.Sockets = []evidence.UDPSocket{s, s}
		}, want: func(t *testing.T, f *Finding) {
			if !slices.Contains(f.Recommendation.Apply, "sysctl -w net.core.rmem_max=4194304") {
				t.Errorf("apply %q", f.Recommendation.Apply)
			}
		}},
		{name: "buffers already large: advice", edit: func(in *NetInput) {
			big := int64(64 << 20)
			in.Config.Core.RmemMax, in.Config.Core.RmemDefault = &big, &big
		}, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Apply) != 0 {
				t.Errorf("%+v", f.Recommendation)
			}
		}},
		{name: "in a network namespace: the socket option", edit: func(in *NetInput) {
			ro := false
			in.Config.Core.RmemWritable = &ro
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindCode || len(r.Apply) != 0 || r.Parameters["so_rcvbuf_bytes"] != 8388608 {
				t.Errorf("%+v", r)
			}
			contains(t, "evidence", f.Evidence, "read-only in this network namespace")
			contains(t, "caveats", r.Caveats, "SO_RCVBUFFORCE")
		}},
		{name: "no config: advice without revert", edit: func(in *NetInput) { in.Config = nil }, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Revert) != 0 || len(f.Recommendation.Apply) != 2 {
				t.Errorf("%+v", f.Recommendation)
			}
		}},
		{name: "no drops", silent: true, edit: func(in *NetInput) {
			in.Evidence.Drops = evidence.DropSection{UDPSNMP: &netstat.UDPSNMP{UDP: netstat.UDPCounters{InDatagrams: 2_700_000}}}
		}},
		{name: "a handful of drops", silent: true, edit: func(in *NetInput) {
			in.Evidence.Drops.ByPort[0].Count = 10
		}},
	})
}

func TestRcvbufSize(t *testing.T) {
	for _, tt := range []struct {
		rate float64
		want int64
	}{{0, 1 << 20}, {51_200, 1 << 20}, {51_201, 2 << 20}, {1e9, RcvbufMaxBytes}} {
		if got := RcvbufSize(tt.rate); got != tt.want {
			t.Errorf("RcvbufSize(%v) = %d, want %d", tt.rate, got, tt.want)
		}
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
	e.Drops = evidence.DropSection{UDPSNMP: &netstat.UDPSNMP{UDP: netstat.UDPCounters{InDatagrams: 70_000_000}}}
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
	if want := []string{"net.irq-affinity-ignores-hint", "net.rss-indirection-narrow", "net.smt-off"}; !slices.Equal(ids, want) {
		t.Errorf("findings %v, want %v", ids, want)
	}
}

func TestDropsOnPortCountsADropOnce(t *testing.T) {
	e := evidence.NetEvidence{}
	e.Drops.ByPort = []evidence.PortDrops{
		{Port: 9000, Reason: "udp_fail_queue_rcv_skb:ENOMEM", Count: 100},
		{Port: 9000, Reason: "kfree_skb:SOCKET_RCVBUFF", Count: 100},
		{Port: 9000, Reason: "kfree_skb:NO_SOCKET", Count: 5},
		{Port: 53, Reason: "kfree_skb:SOCKET_RCVBUFF", Count: 7},
	}
	n, reasons := dropsOnPort(e, 9000)
	// Two tracepoints saw the same 100 drops; kfree_skb saw 5 more.
	if n != 105 || len(reasons) != 3 {
		t.Errorf("dropsOnPort = %d %q, want 105 from 3 reasons", n, reasons)
	}
}
