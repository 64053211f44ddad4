package diagnose

import (
	"slices"
	"testing"

	"github.com/perfscope/perfscope/collectors/netconfig"
)

// napiSettings sets instance i's per-NAPI settings as napi-get reports
// them (suspend nil: a kernel that does not report irq-suspend-timeout).
func napiSettings(in *NetInput, i int, deferIRQs uint32, flush uint64, suspend *uint64) {
	inst := &in.Config.NAPI.Instances[i]
	inst.DeferHardIRQs, inst.GROFlushTimeoutNs, inst.IRQSuspendTimeoutNs = &deferIRQs, &flush, suspend
}

func TestNAPIIRQSuspend(t *testing.T) {
	const id = "net.napi-irq-suspend-misconfigured"
	setting := func(t *testing.T, f *Finding, want ...Change) {
		t.Helper()
		r := f.Recommendation
		if r.Kind != KindSetting || !slices.EqualFunc(r.Changes, want, Change.Equal) {
			t.Errorf("kind %v changes %+v, want %+v", r.Kind, r.Changes, want)
		}
		for _, c := range r.Changes {
			if err := c.Validate(); err != nil {
				t.Errorf("%+v: %v", c, err)
			}
		}
	}
	zero := map[string]uint64{"defer-hard-irqs": 0, "gro-flush-timeout": 0}
	example := map[string]uint64{"defer-hard-irqs": NAPIDeferHardIRQs, "gro-flush-timeout": NAPIGROFlushTimeoutNs}
	q0 := 0
	runNetCases(t, id, []netCase{
		{name: "(a) suspension without deferral on a busy and a quiet instance: warn, napi-set of both", edit: func(in *NetInput) {
			napiOff(12)(in)
			busy3(in)
			napiSettings(in, 0, 0, 0, u64(20_000_000))
			napiSettings(in, 3, 0, 0, u64(20_000_000))
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Warn {
				t.Errorf("severity %v", f.Severity)
			}
			setting(t, f, NAPISettingsChange("ens1f0", &q0, 8193, zero, example), NAPISettingsChange("ens1f0", nil, 8196, zero, example))
			r := f.Recommendation
			if r.Apply[0] != `ynl --family netdev --do napi-set --json '{"id": 8193, "defer-hard-irqs": 2, "gro-flush-timeout": 200000}'   # NAPI instance of ens1f0 rx-0` {
				t.Errorf("apply %q", r.Apply[0])
			}
			if r.Revert[0] != `ynl --family netdev --do napi-set --json '{"id": 8196, "defer-hard-irqs": 0, "gro-flush-timeout": 0}'   # NAPI instance of ens1f0` {
				t.Errorf("revert %q", r.Revert[0])
			}
			contains(t, "title", []string{f.Title}, "2 NAPI instances of ens1f0", "without IRQ deferral")
			contains(t, "evidence", f.Evidence,
				"NAPI 8193 (rx-0): irq-suspend-timeout 20000000 ns, defer-hard-irqs 0, gro-flush-timeout 0 ns — no deferral to fall back on, a busy queue",
				"NAPI 8196: irq-suspend-timeout 20000000 ns, defer-hard-irqs 0, gro-flush-timeout 0 ns — no deferral to fall back on")
			contains(t, "caveats", r.Caveats, "prefer_busy_poll", "EPIOCSPARAMS", "cannot see")
			contains(t, "reference", []string{r.Reference}, "napi.rst (\"IRQ suspension\")", "net: Add napi_struct parameter irq_suspend_timeout")
		}},
		{name: "(a) on a quiet instance only: info", edit: func(in *NetInput) {
			napiOff(12)(in)
			busy3(in)
			napiSettings(in, 3, 0, 0, u64(20_000_000))
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Info {
				t.Errorf("severity %v", f.Severity)
			}
			setting(t, f, NAPISettingsChange("ens1f0", nil, 8196, zero, example))
		}},
		{name: "(a) defer-hard-irqs set, gro-flush-timeout 0: only the zero one is changed", edit: func(in *NetInput) {
			napiOff(2)(in)
			napiSettings(in, 1, 5, 0, u64(20_000_000))
		}, want: func(t *testing.T, f *Finding) {
			setting(t, f, NAPISettingsChange("ens1f0", nil, 8194, map[string]uint64{"gro-flush-timeout": 0}, map[string]uint64{"gro-flush-timeout": NAPIGROFlushTimeoutNs}))
		}},
		{name: "(b) irq-suspend-timeout below gro-flush-timeout: info, advice", edit: func(in *NetInput) {
			napiOff(2)(in)
			napiSettings(in, 0, 2, 200_000, u64(100_000))
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if f.Severity != Info || r.Kind != KindAdvice || len(r.Changes) != 0 {
				t.Errorf("severity %v kind %v changes %+v", f.Severity, r.Kind, r.Changes)
			}
			contains(t, "title", []string{f.Title}, "1 NAPI instances of ens1f0 have irq-suspend-timeout no longer than gro-flush-timeout")
			contains(t, "evidence", f.Evidence, "NAPI 8193: irq-suspend-timeout 100000 ns, defer-hard-irqs 2, gro-flush-timeout 200000 ns — the suspension no longer than gro-flush-timeout")
			contains(t, "apply", r.Apply, "Raise irq-suspend-timeout of NAPI 8193 on ens1f0 well above gro-flush-timeout", `"irq-suspend-timeout": NS`)
			contains(t, "caveats", r.Caveats, "prefer_busy_poll")
		}},
		{name: "(b) irq-suspend-timeout equal to gro-flush-timeout", edit: func(in *NetInput) {
			napiOff(2)(in)
			napiSettings(in, 0, 2, 200_000, u64(200_000))
		}, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice {
				t.Errorf("kind %v", f.Recommendation.Kind)
			}
		}},
		{name: "(a) and (b): the napi-set change, the timeout as advice in a caveat", edit: func(in *NetInput) {
			napiOff(2)(in)
			napiSettings(in, 0, 0, 0, u64(100_000))
		}, want: func(t *testing.T, f *Finding) {
			setting(t, f, NAPISettingsChange("ens1f0", nil, 8193, zero, example))
			contains(t, "title", []string{f.Title}, "; 1 with irq-suspend-timeout no longer than gro-flush-timeout")
			contains(t, "evidence", f.Evidence, "no deferral to fall back on, the suspension no longer than gro-flush-timeout 200000 ns once that is set")
			contains(t, "caveats", f.Recommendation.Caveats, "Not a change perfscope makes: Raise irq-suspend-timeout of NAPI 8193")
		}},
		{name: "20 instances: 16 listed, the rest by id", edit: func(in *NetInput) {
			napiOff(20)(in)
			for i := range 20 {
				napiSettings(in, i, 0, 0, u64(20_000_000))
			}
		}, want: func(t *testing.T, f *Finding) {
			if len(f.Evidence) != 17 || len(f.Recommendation.Changes) != 20 {
				t.Errorf("%d evidence lines, %d changes", len(f.Evidence), len(f.Recommendation.Changes))
			}
			contains(t, "evidence", f.Evidence, "and 4 more alike: NAPI 8209, 8210, 8211, 8212")
		}},
		{name: "irq-suspend-timeout not reported (before Linux 6.13)", silent: true, edit: napiOff(12)},
		{name: "irq-suspend-timeout 0", silent: true, edit: func(in *NetInput) {
			napiOff(2)(in)
			napiSettings(in, 0, 0, 0, u64(0))
		}},
		{name: "properly configured: napi.rst's deferral, a 20 ms suspension", silent: true, edit: func(in *NetInput) {
			napiOff(2)(in)
			busy3(in)
			napiSettings(in, 0, 2, 200_000, u64(20_000_000))
			napiSettings(in, 1, 2, 200_000, u64(20_000_000))
		}},
		{name: "a kernel without per-NAPI settings", silent: true, edit: func(in *NetInput) {
			napiOff(2)(in)
			for i := range in.Config.NAPI.Instances {
				inst := &in.Config.NAPI.Instances[i]
				inst.DeferHardIRQs, inst.GROFlushTimeoutNs, inst.IRQSuspendTimeoutNs = nil, nil, u64(20_000_000)
			}
		}},
		{name: "netdev netlink unavailable", silent: true, edit: func(in *NetInput) {
			in.Config.NAPI = netconfig.NAPIConfig{DeferHardIRQs: i64(0), GROFlushTimeoutNs: i64(0), Unavailable: "old kernel"}
		}},
	})
}
