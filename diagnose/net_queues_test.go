package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/evidence"
)

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
			// Ban the IRQs in irqbalance's file first (perfscope never
			// stops or restarts services); queue 16's hint is CPU 16 (bit 16
			// of 40).
			ban := r.Changes[0]
			if ban.Kind != ChangeIrqbalanceBan || ban.Path != "/etc/sysconfig/irqbalance" || len(ban.IRQs) != 20 || ban.IRQs[0] != 65 {
				t.Errorf("first change %+v", ban)
			}
			if !slices.ContainsFunc(r.Changes, IRQAffinityChange(81, cpuset.MustParseList("0-4,10-14"), cpuset.Of(16), 40).Equal) {
				t.Errorf("changes %+v", r.Changes)
			}
			if !slices.Contains(r.Apply, "echo 00,00010000 > /proc/irq/81/smp_affinity") {
				t.Errorf("apply %q", r.Apply)
			}
			if !slices.Contains(r.Revert, "echo 00,00007c1f > /proc/irq/81/smp_affinity") || !strings.HasPrefix(r.Revert[len(r.Revert)-1], "# perfscope udp --revert restores /etc/sysconfig/irqbalance") {
				t.Errorf("revert %q", r.Revert)
			}
			contains(t, "caveats", r.Caveats, "perfscope does not restart services")
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
			if c := r.Changes[0]; c.Kind != ChangeEthtoolRSS || len(strings.Fields(c.New)) != 128 || !strings.HasPrefix(c.New, "0 1 2 ") || !strings.HasPrefix(c.Old, "0 1 2 ") {
				t.Errorf("change %+v", c)
			}
			contains(t, "evidence", f.Evidence, "128-entry indirection table points at queues 0-15", "queues 16-19 receive nothing", "queue 16: 0 packets/s")
		}},
		{name: "uneven table reverts by weight", edit: func(in *NetInput) {
			in.Config.RSS.Indirection = []uint32{0, 0, 1, 2}
		}, want: func(t *testing.T, f *Finding) {
			// The command shows the spread; the typed change restores the
			// exact table.
			r := f.Recommendation
			if !strings.HasPrefix(r.Revert[0], "ethtool -X ens1f0 weight 2 1 1 ") || r.Changes[0].Old != "0 0 1 2" || r.Changes[0].New != "0 1 2 3" {
				t.Errorf("revert %q changes %+v", r.Revert, r.Changes)
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
		{name: "a hostile interface name is quoted in the advice", edit: func(in *NetInput) {
			in.Config.RSS = nil
			in.Evidence.Interface.Name = "v$(>pwned)"
		}, want: func(t *testing.T, f *Finding) {
			contains(t, "apply", f.Recommendation.Apply, "ethtool -N 'v$(>pwned)' rx-flow-hash udp4 sdfn")
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
			if r.Revert[len(r.Revert)-1] != "echo 0 > /sys/class/net/ens1f0/queues/rx-5/rps_cpus" {
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
			// tx-0 kept xps_cpus 1: the revert restores it (last, as it
			// undoes the first change).
			n := len(r.Revert)
			if r.Revert[n-1] != "echo 00,00000001 > /sys/class/net/ens1f0/queues/tx-0/xps_cpus" || r.Revert[n-2] != "echo 0 > /sys/class/net/ens1f0/queues/tx-1/xps_cpus" {
				t.Errorf("revert %q", r.Revert[n-2:])
			}
			contains(t, "evidence", f.Evidence, "TX queue 3 carried 190000 packets from CPUs 0-1", "qdisc/TX queue lock wait 2000.0 ms")
		}},
		{name: "without config: masks from the measured CPUs, reverts from evidence", edit: func(in *NetInput) {
			in.Config = nil
			in.Evidence.Interface.TXQueues = 2
		}, want: func(t *testing.T, f *Finding) {
			// 20 CPUs dealt over 2 queues.
			if f.Recommendation.Apply[0] != "echo 55555 > /sys/class/net/ens1f0/queues/tx-0/xps_cpus" || f.Recommendation.Revert[1] != "echo 0 > /sys/class/net/ens1f0/queues/tx-0/xps_cpus" {
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
