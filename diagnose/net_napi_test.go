package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/irq"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/evidence"
)

// napiOff sets the device's NAPI deferral to the kernel's defaults (off)
// and lists n instances as netlink would on 6.13+.
func napiOff(n int) func(*NetInput) {
	return func(in *NetInput) {
		zero32, zero64 := uint32(0), uint64(0)
		in.Config.NAPI = netconfig.NAPIConfig{DeferHardIRQs: i64(0), GROFlushTimeoutNs: i64(0), Threaded: i64(0)}
		for i := range n {
			in.Config.NAPI.Instances = append(in.Config.NAPI.Instances, netconfig.NAPIInstance{
				NAPI: netlinkq.NAPI{Ifindex: 4, ID: uint32(8193 + i), IRQ: 65 + i, DeferHardIRQs: &zero32, GROFlushTimeoutNs: &zero64, Threaded: "disabled"}})
		}
	}
}

func TestNAPIDeferIRQs(t *testing.T) {
	storm := func(in *NetInput) {
		in.Evidence.IRQs.IRQs = nil
		// 12 queues at 15k interrupts/s each over the fixture's window.
		for q := range 12 {
			in.Evidence.IRQs.IRQs = append(in.Evidence.IRQs.IRQs, irqWithCount(65+q, uint64(15_000*seconds(in.Evidence.DurationNs))))
		}
	}
	runNetCases(t, "net.napi-defer-irqs", []netCase{
		{name: "12 queues interrupting 180k/s, deferral off", edit: func(in *NetInput) { napiOff(12)(in); storm(in) },
			want: func(t *testing.T, f *Finding) {
				r := f.Recommendation
				want := []Change{NAPIDeferChange("ens1f0", 0, 2), NAPIFlushTimeoutChange("ens1f0", 0, 200000)}
				if !slices.EqualFunc(r.Changes, want, Change.Equal) {
					t.Errorf("changes %+v", r.Changes)
				}
				if r.Apply[0] != "echo 2 > /sys/class/net/ens1f0/napi_defer_hard_irqs" || r.Revert[0] != "echo 0 > /sys/class/net/ens1f0/gro_flush_timeout" {
					t.Errorf("apply %q revert %q", r.Apply, r.Revert)
				}
				for _, c := range r.Changes {
					if err := c.Validate(); err != nil {
						t.Errorf("%+v: %v", c, err)
					}
				}
				contains(t, "evidence", f.Evidence, "napi_defer_hard_irqs 0, gro_flush_timeout 0 ns", "12 NAPI instances")
			}},
		{name: "deferral already on the device", silent: true, edit: func(in *NetInput) {
			napiOff(12)(in)
			storm(in)
			in.Config.NAPI.DeferHardIRQs = i64(2)
		}},
		{name: "deferral on one instance only (napi-set)", silent: true, edit: func(in *NetInput) {
			napiOff(12)(in)
			storm(in)
			two := uint32(2)
			in.Config.NAPI.Instances[3].DeferHardIRQs = &two
		}},
		{name: "a kernel without the sysfs files", silent: true, edit: func(in *NetInput) {
			storm(in)
			in.Config.NAPI = netconfig.NAPIConfig{}
		}},
		{name: "a quiet device", silent: true, edit: func(in *NetInput) {
			napiOff(12)(in)
			in.Evidence.IRQs.IRQs = []evidence.QueueIRQ{irqWithCount(65, 1000)}
		}},
		{name: "3 of 12 queues busy: napi-set on their NAPI instances only", edit: func(in *NetInput) { napiOff(12)(in); busy3(in) },
			want: func(t *testing.T, f *Finding) {
				r := f.Recommendation
				zero := map[string]uint64{"defer-hard-irqs": 0, "gro-flush-timeout": 0}
				set := map[string]uint64{"defer-hard-irqs": 2, "gro-flush-timeout": 200000}
				q0 := 0
				want := []Change{NAPISettingsChange("ens1f0", &q0, 8193, zero, set), NAPISettingsChange("ens1f0", nil, 8194, zero, set), NAPISettingsChange("ens1f0", nil, 8195, zero, set)}
				if !slices.EqualFunc(r.Changes, want, Change.Equal) {
					t.Errorf("changes %+v", r.Changes)
				}
				for _, c := range r.Changes {
					if err := c.Validate(); err != nil {
						t.Errorf("%+v: %v", c, err)
					}
				}
				if r.Apply[0] != `ynl --family netdev --do napi-set --json '{"id": 8193, "defer-hard-irqs": 2, "gro-flush-timeout": 200000}'   # NAPI instance of ens1f0 rx-0` {
					t.Errorf("apply %q", r.Apply[0])
				}
				contains(t, "evidence", f.Evidence, "3 of 12 NAPI instances are busy", "8193 (IRQ 65, 40000/s)", "napi-set defers those only")
				contains(t, "reference", []string{r.Reference}, "napi.rst", "netdev-genl: Support setting per-NAPI config values")
			}},
		{name: "no device-wide files: napi-set on the busy instances", edit: func(in *NetInput) {
			napiOff(12)(in)
			busy3(in)
			in.Config.NAPI.DeferHardIRQs, in.Config.NAPI.GROFlushTimeoutNs = nil, nil
		},
			want: func(t *testing.T, f *Finding) {
				if n := len(f.Recommendation.Changes); n != 3 || f.Recommendation.Changes[0].Kind != ChangeNAPI {
					t.Errorf("changes %+v", f.Recommendation.Changes)
				}
				for _, e := range f.Evidence {
					if strings.Contains(e, "/sys/class/net/ens1f0:") {
						t.Errorf("evidence names device-wide files the device lacks: %q", e)
					}
				}
			}},
		{name: "a kernel without napi-set: device-wide, said plainly", edit: func(in *NetInput) {
			napiOff(12)(in)
			busy3(in)
			for i := range in.Config.NAPI.Instances {
				in.Config.NAPI.Instances[i].DeferHardIRQs, in.Config.NAPI.Instances[i].GROFlushTimeoutNs = nil, nil
			}
		},
			want: func(t *testing.T, f *Finding) {
				want := []Change{NAPIDeferChange("ens1f0", 0, 2), NAPIFlushTimeoutChange("ens1f0", 0, 200000)}
				if !slices.EqualFunc(f.Recommendation.Changes, want, Change.Equal) {
					t.Errorf("changes %+v", f.Recommendation.Changes)
				}
				contains(t, "evidence", f.Evidence, "this kernel reports no per-NAPI settings (napi-set needs Linux 6.13)")
				contains(t, "caveats", f.Recommendation.Caveats, "this kernel has no per-instance settings")
			}},
	})
}

// busy3 makes 3 of the device's 12 queue IRQs (those of NAPI 8193-8195)
// fire 40k times a second and the others not at all; NAPI 8193 polled
// rx-0 in the queue × CPU matrix.
func busy3(in *NetInput) {
	in.Evidence.IRQs.IRQs = nil
	for q := range 12 {
		n := uint64(0)
		if q < 3 {
			n = uint64(40_000 * seconds(in.Evidence.DurationNs))
		}
		in.Evidence.IRQs.IRQs = append(in.Evidence.IRQs.IRQs, irqWithCount(65+q, n))
	}
	in.Evidence.QueueCPU.Cells = []evidence.QueueCPUCell{{Queue: 0, NAPI: 8193, CPU: 0, Polls: 10, Work: 100}, {Queue: -1, NAPI: 8194, CPU: 1, Polls: 1, Work: 1}}
}

func TestNAPIThreadsUnpinned(t *testing.T) {
	threaded := func(in *NetInput) {
		napiOff(2)(in)
		in.Config.NAPI.Threaded = i64(1)
		for i := range in.Config.NAPI.Instances {
			inst := &in.Config.NAPI.Instances[i]
			inst.Threaded, inst.PID, inst.ThreadCPUs = "enabled", 900+i, "0-19"
			last := 4 + i
			inst.ThreadLastCPU = &last
		}
		// IRQ 65 goes to CPU 2 only; IRQ 66's effective affinity is unknown
		// and its allowed set wide: no CPU to pin its thread to.
		in.Config.IRQs = []netconfig.QueueIRQ{
			{QueueIRQ: irq.QueueIRQ{IRQ: 65}, Affinity: &irq.Affinity{IRQ: 65, SMPAffinity: cpuset.Of(2, 3), Effective: cpuset.Of(2), EffectiveKnown: true}},
			{QueueIRQ: irq.QueueIRQ{IRQ: 66}, Affinity: &irq.Affinity{IRQ: 66, SMPAffinity: cpuset.Of(0, 1, 2, 3)}},
		}
		in.Evidence.Sockets.Threads = []evidence.ThreadCPU{{TID: 5000, Comm: "server", LastCPU: 5, AllowedCPUs: "0-19"}}
	}
	runNetCases(t, "net.napi-threads-unpinned", []netCase{
		{name: "two unpinned threads, one beside the server", edit: threaded, want: func(t *testing.T, f *Finding) {
			if f.Severity != Warn {
				t.Errorf("severity %v", f.Severity)
			}
			r := f.Recommendation
			want := []Change{ThreadAffinityChange(900, cpuset.Of(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19), cpuset.Of(2))}
			if !slices.EqualFunc(r.Changes, want, Change.Equal) {
				t.Errorf("changes %+v", r.Changes)
			}
			contains(t, "evidence", f.Evidence, "NAPI 8194: thread 901 may run on CPUs 0-19, last on CPU 5 beside receiving thread 5000", "its IRQ 65 goes to CPU 2", "900→2")
		}},
		{name: "no IRQ with one CPU: advice only", edit: func(in *NetInput) {
			threaded(in)
			in.Config.IRQs = nil
		}, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Changes) != 0 {
				t.Errorf("recommendation %+v", f.Recommendation)
			}
		}},
		{name: "threads pinned", silent: true, edit: func(in *NetInput) {
			threaded(in)
			for i := range in.Config.NAPI.Instances {
				in.Config.NAPI.Instances[i].ThreadCPUs = "2"
			}
		}},
		{name: "not threaded", silent: true, edit: napiOff(2)},
	})
}

func TestBusyPollNothingToPoll(t *testing.T) {
	noNAPI := func(in *NetInput) {
		in.Config.NAPI = netconfig.NAPIConfig{DeferHardIRQs: i64(0), GROFlushTimeoutNs: i64(0), Instances: []netconfig.NAPIInstance{}}
		in.Config.Core.BusyRead, in.Config.Core.BusyPoll = i64(50), i64(0)
	}
	runNetCases(t, "net.busy-poll-nothing-to-poll", []netCase{
		{name: "busy_read 50 on a device without NAPI", edit: noNAPI, want: func(t *testing.T, f *Finding) {
			contains(t, "title", []string{f.Title}, "net.core.busy_read 50 µs", "no NAPI instance")
		}},
		{name: "busy polling off", silent: true, edit: func(in *NetInput) { noNAPI(in); in.Config.Core.BusyRead = i64(0) }},
		{name: "a device with NAPI", silent: true, edit: func(in *NetInput) { noNAPI(in); napiOff(1)(in); in.Config.Core.BusyRead = i64(50) }},
		{name: "netlink unavailable", silent: true, edit: func(in *NetInput) {
			noNAPI(in)
			in.Config.NAPI.Unavailable = "old kernel"
		}},
	})
}

func TestRXAllocFail(t *testing.T) {
	qstats := func(fails uint64) func(*NetInput) {
		return func(in *NetInput) {
			in.Evidence.Queues.QStats = []evidence.QueueStats{
				{Type: "rx", Queue: 0, Counters: map[string]uint64{"rx-packets": 500_000, "rx-alloc-fail": fails}},
				{Type: "rx", Queue: 1, Counters: map[string]uint64{"rx-packets": 500_000, "rx-alloc-fail": 0}},
				{Type: "tx", Queue: 0, Counters: map[string]uint64{"tx-packets": 9}},
			}
		}
	}
	runNetCases(t, "net.rx-alloc-fail", []netCase{
		{name: "2,000 failures in a million packets", edit: qstats(2000), want: func(t *testing.T, f *Finding) {
			if f.Severity != Warn || f.Recommendation.Kind != KindAdvice {
				t.Errorf("severity %v kind %v", f.Severity, f.Recommendation.Kind)
			}
			contains(t, "evidence", f.Evidence, "rx-alloc-fail 2000 against rx-packets 1000000", "rx-0 2000")
		}},
		{name: "a few failures", edit: qstats(3), want: func(t *testing.T, f *Finding) {
			if f.Severity != Info {
				t.Errorf("severity %v", f.Severity)
			}
		}},
		{name: "none", silent: true, edit: qstats(0)},
		{name: "a driver without the counter", silent: true},
	})
}
