package diagnose

import (
	"slices"
	"strings"
	"testing"
)

func TestIRQAffinityAdviceFollowsInstalledIrqbalance(t *testing.T) {
	caveats := func(f *Finding) string { return strings.Join(f.Recommendation.Caveats, "\n") }
	runNetCases(t, "net.irq-affinity-ignores-hint", []netCase{
		{name: "1.0.7 (RHEL 7, Makita's era) has a hint policy", edit: func(in *NetInput) { in.Config.Irqbalance.Version = "1.0.7" }, want: func(t *testing.T, f *Finding) {
			c := caveats(f)
			if !strings.Contains(c, "irqbalance 1.0.7 still has a hint policy: `--hintpolicy=exact`") || !strings.Contains(c, "systemctl restart irqbalance") {
				t.Errorf("caveats:\n%s", c)
			}
			// The ban itself is a typed change, first, with the file's
			// arguments kept.
			r := f.Recommendation
			if ban := r.Changes[0]; ban.Kind != ChangeIrqbalanceBan || ban.Old != ValueUnbanned || ban.New != ValueBanned || ban.IRQs[0] != 65 || ban.IRQs[1] != 66 {
				t.Errorf("first change %+v", ban)
			}
			if !strings.Contains(r.Apply[0], "--banirq=65 --banirq=66") {
				t.Errorf("apply %q", r.Apply[0])
			}
			if strings.Contains(c, "BANNED_CPULIST") || strings.Contains(c, "BANNED_IRQS") {
				t.Errorf("options 1.0.7 does not have:\n%s", c)
			}
			contains(t, "evidence", f.Evidence, "irqbalance 1.0.7 runs")
		}},
		{name: "1.9.3 (Debian 12): ban, no hint policy", edit: func(in *NetInput) { in.Config.Irqbalance.Version = "1.9.3" }, want: func(t *testing.T, f *Finding) {
			c := caveats(f)
			for _, want := range []string{"bans the queue IRQs in /etc/sysconfig/irqbalance", "has no hint policy (removed in 1.2", "IRQBALANCE_BANNED_CPULIST (1.8 and later)", "policyscript"} {
				if !strings.Contains(c, want) {
					t.Errorf("caveats lack %q:\n%s", want, c)
				}
			}
			if strings.Contains(c, "BANNED_IRQS") || strings.Contains(c, "still has a hint policy") {
				t.Errorf("options 1.9.3 does not have:\n%s", c)
			}
		}},
		{name: "version unknown: what every current version supports", edit: func(in *NetInput) { in.Config.Irqbalance.Version = "" }, want: func(t *testing.T, f *Finding) {
			c := caveats(f)
			if !strings.Contains(c, "irqbalance (version unknown)") || !strings.Contains(c, "--policyscript") || strings.Contains(c, "BANNED_CPULIST") {
				t.Errorf("caveats:\n%s", c)
			}
		}},
		{name: "no configuration file: the ban is advice, the IRQ moves stay", edit: func(in *NetInput) {
			in.Config.Irqbalance.Version = "1.9.3"
			in.Config.Irqbalance.ConfigFile = ""
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if slices.ContainsFunc(r.Changes, func(c Change) bool { return c.Kind == ChangeIrqbalanceBan }) || len(r.Changes) != 20 || !r.Applicable() {
				t.Errorf("changes %+v", r.Changes)
			}
			c := caveats(f)
			if !strings.Contains(c, "cannot edit its configuration safely") || !strings.Contains(c, "--banirq=65 --banirq=66") || !strings.Contains(c, "/etc/default/irqbalance (Debian/Ubuntu)") {
				t.Errorf("caveats:\n%s", c)
			}
		}},
		{name: "configured arguments it cannot write back: the ban is advice", edit: func(in *NetInput) {
			in.Config.Irqbalance.ConfigArgs = []string{"--policyscript=$(x)"}
		}, want: func(t *testing.T, f *Finding) {
			if slices.ContainsFunc(f.Recommendation.Changes, func(c Change) bool { return c.Kind == ChangeIrqbalanceBan }) {
				t.Errorf("changes %+v", f.Recommendation.Changes)
			}
			contains(t, "caveats", f.Recommendation.Caveats, "cannot edit its configuration safely")
		}},
	})
}
