package diagnose

import (
	"fmt"
	"strings"

	"github.com/perfscope/perfscope/base/shellquote"
	"github.com/perfscope/perfscope/collectors/netconfig"
)

// IRQSuspendSource names the series that added IRQ suspension: the
// per-NAPI irq-suspend-timeout, which epoll busy polling with
// prefer_busy_poll (EPIOCSPARAMS) extends while it finds events.
const IRQSuspendSource = "Martin Karsten and Joe Damato, \"net: Add napi_struct parameter irq_suspend_timeout\" and the series \"Suspend IRQs during application busy periods\" (Linux 6.13, 2024)"

// IRQSuspendDocs is the section of napi.rst the rule follows.
const IRQSuspendDocs = "Linux kernel documentation, networking/napi.rst (\"IRQ suspension\")"

// napiSuspendLines caps the evidence lines of instances listed one by one;
// the ids of the rest follow on one line.
const napiSuspendLines = 16

// suspendInstance is one NAPI instance whose irq-suspend-timeout is set
// and misconfigured: noDeferral when its defer-hard-irqs or
// gro-flush-timeout is 0, notLonger when the suspension ends no later than
// the deferral timer would (judged against the gro-flush-timeout the
// recommendation leaves it: napi.rst's example where it sets one).
type suspendInstance struct {
	inst       netconfig.NAPIInstance
	queue      *int
	noDeferral bool
	notLonger  bool
	busy       bool
}

func (s suspendInstance) name() string {
	if s.queue != nil {
		return fmt.Sprintf("NAPI %d (rx-%d)", s.inst.ID, *s.queue)
	}
	return fmt.Sprintf("NAPI %d", s.inst.ID)
}

func (s suspendInstance) evidence() string {
	i := s.inst
	line := fmt.Sprintf("%s: irq-suspend-timeout %d ns, defer-hard-irqs %d, gro-flush-timeout %d ns", s.name(), *i.IRQSuspendTimeoutNs, *i.DeferHardIRQs, *i.GROFlushTimeoutNs)
	var why []string
	if s.noDeferral {
		why = append(why, "no deferral to fall back on")
	}
	switch {
	case s.notLonger && *i.GROFlushTimeoutNs == 0:
		why = append(why, fmt.Sprintf("the suspension no longer than gro-flush-timeout %d ns once that is set", NAPIGROFlushTimeoutNs))
	case s.notLonger:
		why = append(why, "the suspension no longer than gro-flush-timeout")
	}
	if s.busy {
		why = append(why, "a busy queue")
	}
	return line + " — " + strings.Join(why, ", ")
}

// napiSuspendMisconfigured lists the instances of the device with
// irq-suspend-timeout set and misconfigured, in the kernel's order; an
// instance whose kernel does not report all three settings is not judged.
func napiSuspendMisconfigured(in NetInput) []suspendInstance {
	busy, _ := busyNAPIs(in)
	isBusy := map[uint32]bool{}
	for _, b := range busy {
		isBusy[b.ID] = true
	}
	var out []suspendInstance
	for _, i := range in.Config.NAPI.Instances {
		if i.IRQSuspendTimeoutNs == nil || *i.IRQSuspendTimeoutNs == 0 || i.DeferHardIRQs == nil || i.GROFlushTimeoutNs == nil {
			continue
		}
		suspend, flush := *i.IRQSuspendTimeoutNs, *i.GROFlushTimeoutNs
		s := suspendInstance{inst: i, noDeferral: *i.DeferHardIRQs == 0 || flush == 0}
		if flush == 0 {
			flush = NAPIGROFlushTimeoutNs // what the typed change sets
		}
		s.notLonger = suspend <= flush
		if !s.noDeferral && !s.notLonger {
			continue
		}
		s.queue, s.busy = napiQueue(in, i.ID), isBusy[i.ID]
		out = append(out, s)
	}
	return out
}

// checkNAPIIRQSuspend: net.napi-irq-suspend-misconfigured. IRQ suspension
// (napi.rst, "IRQ suspension") masks a NAPI instance's IRQ for up to
// irq-suspend-timeout while an application's epoll busy polling with
// prefer_busy_poll keeps finding events; when a poll finds none, the
// deferral settings take over. With defer-hard-irqs or gro-flush-timeout
// 0 nothing takes over (the kernel's busy_poll_stop keeps the IRQ masked
// only when both are non-zero) and the IRQ is back at full rate at the
// first empty poll; with irq-suspend-timeout no longer than
// gro-flush-timeout the suspension ends no later than the deferral timer
// would, and adds nothing.
//
// Severity: warn when an instance without deferral is busy (its IRQ at
// NAPIBusyQueueIRQsPerS or more: the IRQs suspension was set up to save
// are firing), info otherwise — an idle instance's IRQs cost little, and
// a too-short timeout wastes nothing but the setting.
func checkNAPIIRQSuspend(in NetInput) *Finding {
	c := in.Config
	if c == nil || !napiPerInstance(c.NAPI) {
		return nil
	}
	bad := napiSuspendMisconfigured(in)
	if len(bad) == 0 {
		return nil
	}
	iface := c.Interface.Name
	var noDefer, notLonger []suspendInstance
	warn := false
	for _, s := range bad {
		if s.noDeferral {
			noDefer = append(noDefer, s)
			warn = warn || s.busy
		}
		if s.notLonger {
			notLonger = append(notLonger, s)
		}
	}
	f := &Finding{Severity: Info, Impact: 0.02}
	switch {
	case len(noDefer) > 0:
		f.Title = fmt.Sprintf("%d NAPI instances of %s suspend IRQs (irq-suspend-timeout) without IRQ deferral to fall back on: their IRQs return at full rate whenever busy polling finds nothing", len(noDefer), iface)
		if len(notLonger) > 0 {
			f.Title += fmt.Sprintf("; %d with irq-suspend-timeout no longer than gro-flush-timeout", len(notLonger))
		}
	default:
		f.Title = fmt.Sprintf("%d NAPI instances of %s have irq-suspend-timeout no longer than gro-flush-timeout: IRQ suspension adds nothing to the deferral", len(notLonger), iface)
	}
	if warn {
		f.Severity, f.Impact = Warn, 0.05
	}
	for n, s := range bad {
		if n == napiSuspendLines {
			var ids []string
			for _, r := range bad[n:] {
				ids = append(ids, fmt.Sprint(r.inst.ID))
			}
			f.Evidence = append(f.Evidence, fmt.Sprintf("and %d more alike: NAPI %s", len(bad)-n, strings.Join(ids, ", ")))
			break
		}
		f.Evidence = append(f.Evidence, s.evidence())
	}
	r := &f.Recommendation
	r.Why = "IRQ suspension masks a NAPI instance's IRQ for up to irq-suspend-timeout while an application's epoll busy polling (with prefer_busy_poll set on its epoll instance) keeps finding events; the timeout is only a safety net for a stalled application, so napi.rst says to set it much larger than gro-flush-timeout. Once a busy poll finds no data, napi_defer_hard_irqs and gro_flush_timeout take over to keep deferring the IRQ, which is why napi.rst says to set them too (low values): the kernel keeps the IRQ masked after busy polling only when both are non-zero, else it re-arms it at once."
	r.Reference = IRQSuspendDocs + "; " + IRQSuspendSource + "; " + NAPISetSource
	if len(noDefer) > 0 {
		r.Kind = KindSetting
		for _, s := range noDefer {
			old, new := map[string]uint64{}, map[string]uint64{}
			if *s.inst.DeferHardIRQs == 0 {
				old["defer-hard-irqs"], new["defer-hard-irqs"] = 0, NAPIDeferHardIRQs
			}
			if *s.inst.GROFlushTimeoutNs == 0 {
				old["gro-flush-timeout"], new["gro-flush-timeout"] = 0, NAPIGROFlushTimeoutNs
			}
			r.AddChanges(NAPISettingsChange(iface, s.queue, s.inst.ID, old, new))
		}
		r.Parameters = map[string]int64{"napi_defer_hard_irqs": NAPIDeferHardIRQs, "gro_flush_timeout_ns": NAPIGROFlushTimeoutNs}
		r.Expected = fmt.Sprintf("While the application's busy polling finds events nothing changes; when it finds none, the IRQ stays masked through up to %d empty polls re-polled every %d µs instead of returning at once — fewer interrupts between bursts.", NAPIDeferHardIRQs, NAPIGROFlushTimeoutNs/1000)
	} else {
		r.Kind = KindAdvice
		r.Expected = "IRQ suspension holds the IRQ masked through the application's busy periods instead of ending with the deferral timer; nothing changes for an application that does not use it."
	}
	if len(notLonger) > 0 {
		advice := notLongerAdvice(iface, notLonger)
		if r.Kind == KindAdvice {
			r.Apply = advice
		} else {
			r.Caveats = append(r.Caveats, "Not a change perfscope makes: "+strings.Join(advice, " "))
		}
	}
	r.Caveats = append(r.Caveats,
		"These settings matter only for an application that busy-polls through epoll with prefer_busy_poll set on its epoll instance (the EPIOCSPARAMS ioctl); perfscope cannot see that setting from outside the process. Without such an application the IRQs are deferred, or not, by napi_defer_hard_irqs and gro_flush_timeout alone.",
		"napi-set writes the NAPI instances by id: a device reset or a change of its channel count gives its queues new NAPI instances, which start from the device-wide files' values — perfscope refuses the apply (and skips the revert) of an id that no longer belongs to "+iface+".",
	)
	return f
}

// notLongerAdvice says how to raise irq-suspend-timeout on the instances
// where it is no longer than gro-flush-timeout. perfscope proposes no value:
// napi.rst sizes the timeout to cover the time the application takes to
// process what one epoll_wait returns, which a run does not measure.
func notLongerAdvice(iface string, insts []suspendInstance) []string {
	var names []string
	for _, s := range insts {
		names = append(names, s.name())
	}
	example := shellquote.Join("ynl", "--family", "netdev", "--do", "napi-set", "--json", fmt.Sprintf(`{"id": %d, "irq-suspend-timeout": NS}`, insts[0].inst.ID))
	return []string{
		fmt.Sprintf("Raise irq-suspend-timeout of %s on %s well above gro-flush-timeout: to the longest the application may take to process one epoll_wait's events (a smaller max_events shortens it), e.g. `%s`.", strings.Join(names, ", "), iface, example),
	}
}
