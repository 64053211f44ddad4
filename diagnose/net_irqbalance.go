package diagnose

import (
	"fmt"
	"strings"

	"github.com/perfscope/perfscope/collectors/irq"
)

// irqbalanceAdvice says how to keep a running irqbalance from moving the
// NIC's queue IRQs back, in the options of the installed version, preferring
// a ban of those IRQs over stopping the daemon (which then balances nothing
// else either). Options, checked against upstream Irqbalance/irqbalance:
//   - -i/--banirq=N: in every 1.x (irqbalance.1 of 1.0.6, 1.1.0, 1.3.0,
//     1.6.0 and master): the IRQ's affinity is left to the user.
//   - -l/--policyscript=SCRIPT printing "ban=true": 1.0.6 and later
//     (irqbalance.1); a directory of scripts since the policy-script
//     expansion (pull request #70, 2018). Upstream's answer to "honour
//     affinity_hint" since the hint policy was removed (issues #68, #311).
//   - -h/--hintpolicy=exact: up to 1.1 only (1.1.0's irqbalance.1 has it,
//     1.3.0's does not).
//   - IRQBALANCE_BANNED_CPULIST (a CPU list kept free of balanced IRQs):
//     1.8 and later (pull request #166, Nov 2020, which also deprecated the
//     IRQBALANCE_BANNED_CPUS mask). There was never an
//     IRQBALANCE_BANNED_IRQS.
func irqbalanceAdvice(ib irq.Irqbalance, irqs []int) []string {
	config := ib.ConfigFile
	if config == "" {
		config = "/etc/default/irqbalance (Debian/Ubuntu) or /etc/sysconfig/irqbalance (RHEL)"
	}
	var bans []string
	for _, n := range irqs {
		bans = append(bans, fmt.Sprintf("--banirq=%d", n))
	}
	version := "irqbalance (version unknown)"
	if ib.Version != "" {
		version = "irqbalance " + ib.Version
	}
	ban := fmt.Sprintf("To keep %s running instead of stopping it, ban the queue IRQs so it leaves their affinity alone: add %s to IRQBALANCE_ARGS in %s and `systemctl restart irqbalance` (or a --policyscript that prints ban=true for them and copies affinity_hint to smp_affinity).",
		version, strings.Join(bans, " "), config)
	out := []string{ban}
	newer, known := ib.VersionAtLeast(1, 2)
	switch {
	case known && !newer:
		out = append(out, fmt.Sprintf("%s still has a hint policy: `--hintpolicy=exact` (-h exact) in IRQBALANCE_ARGS makes it follow affinity_hint, as Makita did.", version))
	default:
		out = append(out, fmt.Sprintf("%s has no hint policy (removed in 1.2; --hintpolicy/-h exact is not an option of it): a ban or a policy script is the way.", version))
	}
	if atLeast, ok := ib.VersionAtLeast(1, 8); ok && atLeast {
		out = append(out, "IRQBALANCE_BANNED_CPULIST (1.8 and later) keeps other IRQs off CPUs you reserve for receive work.")
	}
	return out
}
