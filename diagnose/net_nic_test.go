package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/evidence"
)

func TestNICRingDrops(t *testing.T) {
	missed := func(in *NetInput, n uint64) {
		in.Evidence.Queues.NICMissed = &n
		in.Evidence.Queues.NICMissedCounters = []string{"rx_missed_errors"}
	}
	runNetCases(t, "net.nic-ring-drops", []netCase{
		// The fixture's ixgbe ring: 512 of 4096; 23 000 packets/s per queue.
		{name: "ixgbe ring of 512 overflows", edit: func(in *NetInput) { missed(in, 36_800) }, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if f.Severity != Warn || !slices.Equal(r.Apply, []string{"ethtool -G ens1f0 rx 1024"}) || !slices.Equal(r.Revert, []string{"ethtool -G ens1f0 rx 512"}) {
				t.Errorf("%v apply %q revert %q", f.Severity, r.Apply, r.Revert)
			}
			// Only the rx ring, found at 512, set to 1024.
			if c := r.Changes; len(c) != 1 || c[0].Kind != ChangeEthtoolRing || c[0].Iface != "ens1f0" || c[0].Old != "rx=512" || c[0].New != "rx=1024" {
				t.Errorf("changes %+v", c)
			}
			contains(t, "evidence", f.Evidence, "36800 missed ([rx_missed_errors])", "RX ring 512 descriptors of 4096 possible")
		}},
		{name: "ring at its maximum: advice", edit: func(in *NetInput) {
			missed(in, 36_800)
			in.Config.Rings = &ethtool.Rings{RX: 4096, RXMax: 4096}
		}, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Changes) != 0 || !strings.Contains(f.Recommendation.Apply[0], "maximum") {
				t.Errorf("%+v", f.Recommendation)
			}
		}},
		{name: "rings unknown: advice with the interface quoted", edit: func(in *NetInput) {
			missed(in, 36_800)
			in.Config.Rings = nil
			in.Evidence.Interface.Name = "v$(x)"
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindAdvice || len(r.Changes) != 0 || !strings.Contains(r.Apply[0], "ethtool -g 'v$(x)'") {
				t.Errorf("%v apply %q changes %+v", r.Kind, r.Apply, r.Changes)
			}
		}},
		{name: "a handful missed", silent: true, edit: func(in *NetInput) { missed(in, 30) }},
		{name: "driver has no missed counter", silent: true},
	})
}

func TestIRQCoalescing(t *testing.T) {
	perPacket := func(in *NetInput) { in.Config.Coalesce = &ethtool.Coalesce{RXUsecs: 0, RXFrames: 1} }
	runNetCases(t, "net.irq-coalescing", []netCase{
		{name: "an interrupt per packet at 20k/s", edit: func(in *NetInput) {
			perPacket(in)
			in.Evidence.IRQs.IRQs = append(in.Evidence.IRQs.IRQs, irqWithCount(65, 200_000))
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// Only rx-usecs changes; rx-frames stays as the driver has it.
			if f.Severity != Warn || r.Apply[0] != "ethtool -C ens1f0 rx-usecs 50" || r.Revert[0] != "ethtool -C ens1f0 rx-usecs 0" {
				t.Errorf("%v apply %q revert %q", f.Severity, r.Apply, r.Revert)
			}
			if c := r.Changes; len(c) != 1 || c[0].Kind != ChangeEthtoolCoalesce || c[0].Old != "rx-usecs=0" || c[0].New != "rx-usecs=50" {
				t.Errorf("changes %+v", c)
			}
		}},
		{name: "ixgbe's dynamic moderation (rx-usecs 1)", silent: true, edit: func(in *NetInput) {
			in.Evidence.IRQs.IRQs = append(in.Evidence.IRQs.IRQs, irqWithCount(65, 200_000))
		}},
		{name: "few interrupts", silent: true, edit: func(in *NetInput) {
			perPacket(in)
			in.Evidence.IRQs.IRQs = append(in.Evidence.IRQs.IRQs, irqWithCount(65, 5_000))
		}},
	})
}

func TestRFSOff(t *testing.T) {
	runNetCases(t, "net.rfs-off", []netCase{
		{name: "RPS on queues 6-9, RFS off", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// 32768 / 20 queues = 1638, rounded up to the 2048 the kernel
			// would make of it (and reads back).
			want := []Change{SysctlChange("net.core.rps_sock_flow_entries", "0", "32768")}
			for q := 6; q <= 9; q++ {
				want = append(want, RPSFlowCntChange("ens1f0", q, 0, 2048))
			}
			if !slices.EqualFunc(r.Changes, want, Change.Equal) || r.Parameters["rps_flow_cnt"] != 2048 {
				t.Errorf("changes %+v parameters %v", r.Changes, r.Parameters)
			}
			if r.Apply[0] != "sysctl -w net.core.rps_sock_flow_entries=32768" || r.Apply[1] != "echo 2048 > /sys/class/net/ens1f0/queues/rx-6/rps_flow_cnt" {
				t.Errorf("apply %q", r.Apply)
			}
			if r.Revert[len(r.Revert)-1] != "sysctl -w net.core.rps_sock_flow_entries=0" || r.Revert[0] != "echo 0 > /sys/class/net/ens1f0/queues/rx-9/rps_flow_cnt" {
				t.Errorf("revert %q", r.Revert)
			}
		}},
		{name: "inside a namespace: the per-queue tables only", edit: func(in *NetInput) {
			in.Config.Core.RPSSockFlowEntries, in.Config.Core.HostOnly = nil, true
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindSetting || len(r.Changes) != 4 || r.Changes[0].Kind != ChangeSysfs {
				t.Errorf("%v changes %+v", r.Kind, r.Changes)
			}
			contains(t, "caveats", r.Caveats, "check it on the host (sysctl -w net.core.rps_sock_flow_entries=32768)")
		}},
		{name: "RPS off", silent: true, edit: func(in *NetInput) {
			for i := range in.Config.Interface.RX {
				in.Config.Interface.RX[i].RPSCPUs = in.Config.Interface.RX[0].RPSCPUs
			}
		}},
		{name: "RFS on", silent: true, edit: func(in *NetInput) {
			n := int64(32768)
			in.Config.Core.RPSSockFlowEntries = &n
			for i := range in.Config.Interface.RX {
				in.Config.Interface.RX[i].RPSFlowCnt = 2048
			}
		}},
	})
}

func TestUDPMemPressure(t *testing.T) {
	runNetCases(t, "net.udp-mem-pressure", []netCase{
		{name: "MemErrors at udp_mem's max", edit: func(in *NetInput) {
			in.Evidence.Drops.UDPSNMP.UDP.MemErrors = 50_000
			in.Evidence.Drops.UDPSockstat = &evidence.UDPSockstat{InUse: 12, MemPages: 3_080_900}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// 2 × 3 080 900 / 2 053 929 = 3.00003 → factor 4.
			if f.Severity != Warn || r.Apply[0] != "sysctl -w 'net.ipv4.udp_mem=6161784 8215716 12323568'" || r.Revert[0] != "sysctl -w 'net.ipv4.udp_mem=1540446 2053929 3080892'" {
				t.Errorf("%v apply %q revert %q", f.Severity, r.Apply, r.Revert)
			}
			if len(r.Changes) != 1 || !r.Changes[0].Equal(SysctlChange("net.ipv4.udp_mem", "1540446\t2053929\t3080892", "6161784 8215716 12323568")) {
				t.Errorf("changes %+v", r.Changes)
			}
		}},
		{name: "under pressure, no drops yet: info", edit: func(in *NetInput) {
			in.Evidence.Drops.UDPSockstat = &evidence.UDPSockstat{InUse: 12, MemPages: 2_100_000}
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Info {
				t.Errorf("%v", f.Severity)
			}
		}},
		{name: "udp_mem hidden in a namespace: advice", edit: func(in *NetInput) {
			in.Evidence.Drops.UDPSNMP.UDP.MemErrors = 50_000
			in.Config.Core.UDPMem, in.Config.Core.HostOnly = nil, true
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindAdvice || len(r.Changes) != 0 {
				t.Errorf("%v changes %+v", r.Kind, r.Changes)
			}
			contains(t, "caveats", r.Caveats, "initial network namespace")
		}},
		{name: "plenty of room", silent: true, edit: func(in *NetInput) {
			in.Evidence.Drops.UDPSockstat = &evidence.UDPSockstat{InUse: 12, MemPages: 389}
		}},
	})
}

func irqWithCount(irq int, n uint64) evidence.QueueIRQ {
	return evidence.QueueIRQ{IRQ: irq, Name: "ens1f0-TxRx-0", CountByCPU: map[int]uint64{0: n}}
}
