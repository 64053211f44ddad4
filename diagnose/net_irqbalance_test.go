package diagnose

import (
	"strings"
	"testing"
)

func TestIRQAffinityAdviceFollowsInstalledIrqbalance(t *testing.T) {
	caveats := func(f *Finding) string { return strings.Join(f.Recommendation.Caveats, "\n") }
	runNetCases(t, "net.irq-affinity-ignores-hint", []netCase{
		{name: "1.0.7 (RHEL 7, Makita's era) has a hint policy", edit: func(in *NetInput) { in.Config.Irqbalance.Version = "1.0.7" }, want: func(t *testing.T, f *Finding) {
			c := caveats(f)
			if !strings.Contains(c, "irqbalance 1.0.7 still has a hint policy: `--hintpolicy=exact`") || !strings.Contains(c, "--banirq=65 --banirq=66") {
				t.Errorf("caveats:\n%s", c)
			}
			if strings.Contains(c, "BANNED_CPULIST") || strings.Contains(c, "BANNED_IRQS") {
				t.Errorf("options 1.0.7 does not have:\n%s", c)
			}
			contains(t, "evidence", f.Evidence, "irqbalance 1.0.7 runs")
		}},
		{name: "1.9.3 (Debian 12): ban, no hint policy", edit: func(in *NetInput) { in.Config.Irqbalance.Version = "1.9.3" }, want: func(t *testing.T, f *Finding) {
			c := caveats(f)
			for _, want := range []string{"--banirq=65", "/etc/sysconfig/irqbalance", "has no hint policy (removed in 1.2", "IRQBALANCE_BANNED_CPULIST (1.8 and later)", "policyscript"} {
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
			if !strings.Contains(c, "irqbalance (version unknown)") || !strings.Contains(c, "--banirq=") || strings.Contains(c, "BANNED_CPULIST") {
				t.Errorf("caveats:\n%s", c)
			}
		}},
	})
}
