package diagnose

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/evidence"
)

// steeredBase is tcpBase with two RX queues, RFS off, and one busy
// connection fed by CPU 0's softirq and read on CPU 1.
func steeredBase() TCPInput {
	in := tcpBase()
	in.Config.Interface = netdev.Interface{Name: "eth0", RX: []netdev.RXQueue{{Index: 0}, {Index: 1}}}
	in.Config.Core.RPSSockFlowEntries = i64(0)
	in.Evidence.Connections.Rows = []evidence.TCPConnection{
		{Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("10.0.0.2:40000"), State: "ESTABLISHED",
			Steering: &evidence.TCPSteering{FedByCPU: map[int]uint64{0: 950, 1: 50}, ReadOnCPU: map[int]uint64{1: 400},
				FedCPU: 0, FedShare: 0.95, ReadCPU: 1, ReadShare: 1}},
	}
	return in
}

func TestTCPCrossCPUSteering(t *testing.T) {
	f := runTCPRule(t, "tcp.cross-cpu-steering", steeredBase())
	if f == nil {
		t.Fatal("silent on a connection fed by CPU 0 and read on CPU 1 with RFS off")
	}
	want := []Change{SysctlChange("net.core.rps_sock_flow_entries", "0", "32768"),
		RPSFlowCntChange("eth0", 0, 0, 16384), RPSFlowCntChange("eth0", 1, 0, 16384)}
	if r := f.Recommendation; r.Kind != KindSetting || !slices.EqualFunc(r.Changes, want, Change.Equal) || len(r.Code) == 0 {
		t.Errorf("kind %v changes %+v code %d", r.Kind, r.Changes, len(r.Code))
	}
	contains(t, "evidence", f.Evidence, "95.0% of its segments delivered by CPU 0's softirq, 100.0% of its reads on CPU 1")

	// Inside a namespace the per-queue tables only; the host-wide sysctl
	// is a caveat.
	in := steeredBase()
	in.Config.Core.RPSSockFlowEntries, in.Config.Core.HostOnly = nil, true
	if f := runTCPRule(t, "tcp.cross-cpu-steering", in); f == nil || len(f.Recommendation.Changes) != 2 || f.Recommendation.Changes[0].Kind != ChangeSysfs {
		t.Errorf("namespace view: %+v", f)
	} else {
		contains(t, "caveats", f.Recommendation.Caveats, "check it on the host (sysctl -w net.core.rps_sock_flow_entries=32768)")
	}

	for name, edit := range map[string]func(*TCPInput){
		"RFS on, through RPS": func(in *TCPInput) {
			in.Config.Core.RPSSockFlowEntries = i64(32768)
			in.Config.Interface.RX[0].RPSFlowCnt = 16384
			in.Config.Interface.RX[1].RPSCPUs = cpuset.Of(0, 1)
		},
		"RFS on, accelerated": func(in *TCPInput) {
			in.Config.Core.RPSSockFlowEntries = i64(32768)
			in.Config.Interface.RX[0].RPSFlowCnt = 16384
			in.Config.Offloads.NTuple = boolp(true)
		},
		"read where fed": func(in *TCPInput) {
			s := in.Evidence.Connections.Rows[0].Steering
			s.ReadOnCPU, s.ReadCPU = map[int]uint64{0: 400}, 0
		},
		"fed by every CPU": func(in *TCPInput) {
			s := in.Evidence.Connections.Rows[0].Steering
			s.FedByCPU, s.FedShare = map[int]uint64{0: 500, 1: 500}, 0.5
		},
		"too few reads": func(in *TCPInput) {
			in.Evidence.Connections.Rows[0].Steering.ReadOnCPU = map[int]uint64{1: 20}
		},
		"not measured": func(in *TCPInput) { in.Evidence.Connections.Rows[0].Steering = nil },
	} {
		in := steeredBase()
		edit(&in)
		if f := runTCPRule(t, "tcp.cross-cpu-steering", in); f != nil {
			t.Errorf("%s: fired: %s", name, f.Title)
		}
	}
}

func boolp(b bool) *bool { return &b }

// RFS's tables set, but neither RPS nor ntuple filters to move a flow:
// the finding turns ntuple on where the device can, else sets rps_cpus.
func TestTCPCrossCPURFSStuck(t *testing.T) {
	stuck := func() TCPInput {
		in := steeredBase()
		in.Config.Core.RPSSockFlowEntries = i64(32768)
		in.Config.Interface.RX[0].RPSFlowCnt, in.Config.Interface.RX[1].RPSFlowCnt = 16384, 16384
		in.Config.Topology.Online = cpuset.Of(0, 1)
		return in
	}
	in := stuck()
	in.Config.Offloads.NTuple = boolp(false)
	f := runTCPRule(t, "tcp.cross-cpu-steering", in)
	if f == nil {
		t.Fatal("silent with RFS's tables set and nothing to steer by them")
	}
	want := []Change{EthtoolFeatureChange("eth0", "rx-ntuple-filter", false, true)}
	if r := f.Recommendation; r.Kind != KindSetting || !slices.EqualFunc(r.Changes, want, Change.Equal) {
		t.Errorf("ntuple off: kind %v changes %+v", r.Kind, r.Changes)
	}
	contains(t, "evidence", f.Evidence, "rps_cpus empty on all of them; rx-ntuple-filter off")

	// Fixed off, or not listed (veth): RPS over the online CPUs.
	for name, nt := range map[string]*bool{"fixed": boolp(false), "not listed": nil} {
		in := stuck()
		in.Config.Offloads.NTuple, in.Config.Offloads.NTupleFixed = nt, nt != nil
		f := runTCPRule(t, "tcp.cross-cpu-steering", in)
		if f == nil {
			t.Fatalf("%s: silent", name)
		}
		want := []Change{QueueMaskChange("eth0", "rx", 0, cpuset.Set{}, cpuset.Of(0, 1), 2), QueueMaskChange("eth0", "rx", 1, cpuset.Set{}, cpuset.Of(0, 1), 2)}
		if r := f.Recommendation; r.Kind != KindSetting || !slices.EqualFunc(r.Changes, want, Change.Equal) {
			t.Errorf("%s: kind %v changes %+v", name, r.Kind, r.Changes)
		}
	}
}

// A port served by an SO_REUSEPORT group: the evidence names the group and
// the first caveat says the group can steer by CPU itself.
func TestTCPCrossCPUReuseportGroup(t *testing.T) {
	in := steeredBase()
	in.Evidence.Listeners.Rows = []evidence.TCPListener{
		{Local: netip.MustParseAddrPort("0.0.0.0:8080"), ReusePort: 4},
		{Local: netip.MustParseAddrPort("0.0.0.0:9090"), ReusePort: 2}, // another port
		{Local: netip.MustParseAddrPort("0.0.0.0:8081"), ReusePort: 1},
	}
	f := runTCPRule(t, "tcp.cross-cpu-steering", in)
	if f == nil {
		t.Fatal("silent")
	}
	contains(t, "evidence", f.Evidence, "SO_REUSEPORT group: 0.0.0.0:8080 (4 listeners)")
	if c := f.Recommendation.Caveats; len(c) == 0 || !strings.Contains(c[0], "SO_INCOMING_CPU on each listener") {
		t.Errorf("caveats %q", c)
	}
	for _, e := range f.Evidence {
		if strings.Contains(e, "9090") {
			t.Errorf("a group on another port in the evidence: %q", e)
		}
	}
	// No group: no such line.
	if f := runTCPRule(t, "tcp.cross-cpu-steering", steeredBase()); f != nil {
		for _, e := range f.Evidence {
			if strings.Contains(e, "SO_REUSEPORT") {
				t.Errorf("no group, yet %q", e)
			}
		}
	}
}
