package diagnose

import (
	"fmt"
	"strings"

	"github.com/perfscope/perfscope/collectors/irq"
)

// irqbalanceFix keeps a running irqbalance from moving the NIC's queue
// IRQs back: a typed ban of those IRQs in its configuration file when
// perfscope can edit that file safely (banning beats stopping the daemon,
// which then balances nothing else either), else the ban as advice; and
// what else the installed version offers. Options, checked against
// upstream Irqbalance/irqbalance:
//   - -i/--banirq=N: in every 1.x (irqbalance.1 of 1.0.6, 1.1.0, 1.3.0,
//     1.6.0 and master): the IRQ's affinity is left to the user.
//   - -l/--policyscript=SCRIPT printing "ban=true": 1.0.6 and later
//     (irqbalance.1); a directory of scripts since the policy-script
//     expansion (pull request #70, 2018). Upstream's answer to "honour
//     affinity_hint" since the hint policy was removed
//     (https://github.com/Irqbalance/irqbalance/issues/68 and
//     https://github.com/Irqbalance/irqbalance/issues/311).
//   - -h/--hintpolicy=exact: up to 1.1 only (1.1.0's irqbalance.1 has it,
//     1.3.0's does not).
//   - IRQBALANCE_BANNED_CPULIST (a CPU list kept free of balanced IRQs):
//     1.8 and later (pull request #166, Nov 2020, which also deprecated the
//     IRQBALANCE_BANNED_CPUS mask). There was never an
//     IRQBALANCE_BANNED_IRQS.
func irqbalanceFix(ib irq.Irqbalance, irqs []int) (changes []Change, caveats []string) {
	version := "irqbalance (version unknown)"
	if ib.Version != "" {
		version = "irqbalance " + ib.Version
	}
	if ban := IrqbalanceBanChange(ib.ConfigFile, ib.ConfigArgs, irqs); ban.Validate() == nil {
		changes = append(changes, ban)
		caveats = append(caveats, fmt.Sprintf("--apply bans the queue IRQs in %s (%s); perfscope does not restart services: after --apply (and after --revert) run `systemctl restart irqbalance` so that %s reads it; until then it may move these IRQs back within 10 s.",
			ib.ConfigFile, IrqbalanceVariable, version))
	} else {
		config := ib.ConfigFile
		if config == "" {
			config = "/etc/default/irqbalance (Debian/Ubuntu) or /etc/sysconfig/irqbalance (RHEL)"
		}
		var bans []string
		for _, n := range irqs {
			bans = append(bans, fmt.Sprintf("--banirq=%d", n))
		}
		caveats = append(caveats, fmt.Sprintf("%s runs and perfscope cannot edit its configuration safely (not found, or arguments it cannot write back), so --apply does not ban the IRQs and it will move them back within 10 s: add %s to %s in %s and `systemctl restart irqbalance` (or stop irqbalance while you measure).",
			version, strings.Join(bans, " "), IrqbalanceVariable, config))
	}
	caveats = append(caveats, "Instead of a ban, a --policyscript that prints ban=true for these IRQs and copies affinity_hint to smp_affinity keeps them where the driver meant.")
	newer, known := ib.VersionAtLeast(1, 2)
	switch {
	case known && !newer:
		caveats = append(caveats, fmt.Sprintf("%s still has a hint policy: `--hintpolicy=exact` (-h exact) in %s makes it follow affinity_hint, as Makita did.", version, IrqbalanceVariable))
	default:
		caveats = append(caveats, fmt.Sprintf("%s has no hint policy (removed in 1.2; --hintpolicy/-h exact is not an option of it): a ban or a policy script is the way.", version))
	}
	if atLeast, ok := ib.VersionAtLeast(1, 8); ok && atLeast {
		caveats = append(caveats, "IRQBALANCE_BANNED_CPULIST (1.8 and later) keeps other IRQs off CPUs you reserve for receive work.")
	}
	return changes, caveats
}
