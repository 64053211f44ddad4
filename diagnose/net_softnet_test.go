package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

// squeezeInput: 10 s, CPU 3 ran NET_RX 40 000 times with mean run rt µs and
// was squeezed sq times; CPU 4 ran it without a squeeze.
func squeezeInput(in *NetInput, sq uint64, rtUs float64) {
	e := &in.Evidence
	e.DurationNs = 10e9
	for i, c := range e.Softirq.CPUs {
		v := c.Vectors["NET_RX"]
		v.Count = 40_000
		v.TimeNs = uint64(40_000 * rtUs * 1e3)
		e.Softirq.CPUs[i].Vectors["NET_RX"] = v
	}
	e.Drops.Softnet = []evidence.SoftnetCPU{{CPU: 3, Processed: 2_000_000, TimeSqueeze: sq}, {CPU: 4, Processed: 1_000_000}}
}

func TestSoftnetSqueeze(t *testing.T) {
	runNetCases(t, "net.softnet-squeeze", []netCase{
		{name: "packet budget ends short runs", edit: func(in *NetInput) { squeezeInput(in, 10_000, 150) }, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// 25 % of runs squeezed: 300 × (1 + 4 × 0.25) = 600.
			if f.Severity != Warn || !slices.Equal(r.Apply, []string{"sysctl -w net.core.netdev_budget=600"}) || !slices.Equal(r.Revert, []string{"sysctl -w net.core.netdev_budget=300"}) {
				t.Errorf("%v apply %q revert %q", f.Severity, r.Apply, r.Revert)
			}
			// The value found and the value set, typed for --apply.
			if len(r.Changes) != 1 || !r.Changes[0].Equal(SysctlChange("net.core.netdev_budget", "300", "600")) {
				t.Errorf("changes %+v", r.Changes)
			}
			contains(t, "evidence", f.Evidence, "CPU 3: 10000 time_squeeze in 40000 NET_RX runs (25.0%")
		}},
		{name: "time limit ends long runs", edit: func(in *NetInput) { squeezeInput(in, 2_400, 1800) }, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// 6 % squeezed: 2000 µs × 1.24 → 2500 µs.
			if f.Severity != Info || !slices.Equal(r.Apply, []string{"sysctl -w net.core.netdev_budget_usecs=2500"}) {
				t.Errorf("%v apply %q", f.Severity, r.Apply)
			}
			if len(r.Changes) != 1 || !r.Changes[0].Equal(SysctlChange("net.core.netdev_budget_usecs", "2000", "2500")) {
				t.Errorf("changes %+v", r.Changes)
			}
		}},
		{name: "inside a namespace: advice", edit: func(in *NetInput) {
			squeezeInput(in, 10_000, 150)
			in.Config.Core.NetdevBudget, in.Config.Core.HostOnly = nil, true
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindAdvice || len(r.Revert) != 0 || len(r.Changes) != 0 || r.Apply[0] != "# on the host: sysctl -w net.core.netdev_budget=600" {
				t.Errorf("%v apply %q revert %q", r.Kind, r.Apply, r.Revert)
			}
			contains(t, "caveats", r.Caveats, "initial network namespace")
		}},
		{name: "rare squeezes", silent: true, edit: func(in *NetInput) { squeezeInput(in, 200, 150) }},
		{name: "no softnet counters", silent: true, edit: func(in *NetInput) { in.Evidence.Drops.Softnet = nil }},
	})
}

func TestBacklogDrops(t *testing.T) {
	drops := func(in *NetInput, dropped uint64) {
		in.Evidence.DurationNs = 10e9
		in.Evidence.Drops.Softnet = []evidence.SoftnetCPU{{CPU: 2, Processed: 3_000_000, Dropped: dropped}, {CPU: 5, Processed: 10}}
	}
	runNetCases(t, "net.backlog-drops", []netCase{
		{name: "300k pps into one backlog", edit: func(in *NetInput) { drops(in, 30_000) }, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// 303 000/s × 10 ms = 3030 → 4096 (≥ 2 × 1000); flow limiting
			// was off (the fixture's 20-CPU "00000"): on for CPU 2.
			want := []Change{SysctlChange("net.core.netdev_max_backlog", "1000", "4096"), SysctlChange("net.core.flow_limit_cpu_bitmap", "00000", "00,00000004")}
			if f.Severity != Warn || !slices.EqualFunc(r.Changes, want, Change.Equal) {
				t.Errorf("%v changes %+v", f.Severity, r.Changes)
			}
			if !slices.Equal(r.Apply, []string{"sysctl -w net.core.netdev_max_backlog=4096", "sysctl -w net.core.flow_limit_cpu_bitmap=00,00000004"}) ||
				!slices.Equal(r.Revert, []string{"sysctl -w net.core.flow_limit_cpu_bitmap=00000", "sysctl -w net.core.netdev_max_backlog=1000"}) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			if r.Parameters["netdev_max_backlog"] != 4096 {
				t.Errorf("parameters %v", r.Parameters)
			}
			contains(t, "caveats", r.Caveats, "Flow limiting (net.core.flow_limit_cpu_bitmap = CPUs 2")
		}},
		{name: "kernel without flow limit: the backlog alone", edit: func(in *NetInput) {
			drops(in, 30_000)
			in.Config.Core.FlowLimitCPUBitmap = nil
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindSetting || len(r.Changes) != 1 || !r.Changes[0].Equal(SysctlChange("net.core.netdev_max_backlog", "1000", "4096")) {
				t.Errorf("%v changes %+v", r.Kind, r.Changes)
			}
		}},
		{name: "inside a namespace: both as advice for the host", edit: func(in *NetInput) {
			drops(in, 30_000)
			in.Config.Core.NetdevMaxBacklog, in.Config.Core.FlowLimitCPUBitmap, in.Config.Core.HostOnly = nil, nil, true
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindAdvice || len(r.Changes) != 0 || len(r.Revert) != 0 ||
				!slices.Equal(r.Apply, []string{"# on the host: sysctl -w net.core.netdev_max_backlog=4096", "# on the host: sysctl -w net.core.flow_limit_cpu_bitmap=00,00000004"}) {
				t.Errorf("%v apply %q changes %+v", r.Kind, r.Apply, r.Changes)
			}
			contains(t, "caveats", r.Caveats, "initial network namespace")
		}},
		{name: "flow limit already on", edit: func(in *NetInput) {
			drops(in, 30_000)
			m := "4"
			in.Config.Core.FlowLimitCPUBitmap = &m
		}, want: func(t *testing.T, f *Finding) {
			for _, c := range f.Recommendation.Caveats {
				if strings.Contains(c, "flow_limit") {
					t.Errorf("flow limit advised although on: %q", c)
				}
			}
			if r := f.Recommendation; len(r.Changes) != 1 || r.Changes[0].Key != "net.core.netdev_max_backlog" {
				t.Errorf("changes %+v", r.Changes)
			}
		}},
		{name: "a few drops", silent: true, edit: func(in *NetInput) { drops(in, 200) }},
		{name: "none", silent: true, edit: func(in *NetInput) { in.Evidence.Drops.Softnet = []evidence.SoftnetCPU{{CPU: 1, Processed: 5}} }},
	})
}
