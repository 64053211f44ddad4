package cpuprofile

import (
	"strings"

	"github.com/perfscope/perfscope/collectors/symbols"
)

// IdleSplit counts, per CPU, the idle task's samples: those taken while the
// idle CPU served an interrupt or a softirq (kept in the profile) and those
// of the idle loop itself (dropped).
type IdleSplit struct {
	// InterruptByCPU: samples of pid 0 whose kernel stack passes through
	// interrupt or softirq entry — NET_RX run from irq_exit on an idle CPU.
	InterruptByCPU map[int]uint64
	// LoopByCPU: samples of the idle loop (halted or polling for work).
	LoopByCPU map[int]uint64
}

// Interrupt is the number of interrupt-on-idle samples kept.
func (s IdleSplit) Interrupt() uint64 { return sum(s.InterruptByCPU) }

// Loop is the number of idle-loop samples dropped.
func (s IdleSplit) Loop() uint64 { return sum(s.LoopByCPU) }

func sum(m map[int]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// interruptFrames mark a kernel stack that entered an interrupt or a
// softirq: the sample interrupted handler code, not the idle loop. The
// stack starts at the interrupted instruction (the sampling timer's own
// frames are not in it), so an idle-loop sample has none of these. x86-64
// names first, then arm64's.
var interruptFrames = []string{
	"handle_softirqs", "__do_softirq", "do_softirq", "do_softirq_own_stack", "irq_exit_rcu", "__irq_exit_rcu", "irq_exit",
	"net_rx_action", "common_interrupt", "asm_common_interrupt", "sysvec_*", "asm_sysvec_*", "__sysvec_*",
	"call_on_irq_stack", "el1_interrupt", "el1h_64_irq*", "gic_handle_irq", "handle_domain_irq", "generic_handle_domain_irq",
}

// IsInterruptStack reports whether a kernel stack (function names, in any
// order; "_[k]" suffixes allowed) passes through interrupt or softirq entry.
func IsInterruptStack(frames []string) bool {
	for _, f := range frames {
		f = strings.TrimSuffix(f, "_[k]")
		for _, p := range interruptFrames {
			if prefix, ok := strings.CutSuffix(p, "*"); ok {
				if strings.HasPrefix(f, prefix) {
					return true
				}
			} else if f == p {
				return true
			}
		}
	}
	return false
}

// SplitIdle drops the idle loop's samples from a profile taken with
// KeepIdleInterrupts and keeps the idle task's interrupt and softirq
// samples, counting both per CPU. Samples of other threads pass unchanged.
// An idle sample without a kernel stack cannot be classified and counts as
// the loop: it is not shown as work.
func (p Profile) SplitIdle(sym *symbols.Symbolizer) (Profile, IdleSplit) {
	split := IdleSplit{InterruptByCPU: map[int]uint64{}, LoopByCPU: map[int]uint64{}}
	out := p
	out.Samples = make([]Sample, 0, len(p.Samples))
	for _, s := range p.Samples {
		if s.TID != 0 {
			out.Samples = append(out.Samples, s)
			continue
		}
		if len(s.KernelStack) > 0 && IsInterruptStack(sym.Kernel(symbols.CallSites(s.KernelStack))) {
			split.InterruptByCPU[s.CPU] += s.Count
			out.Samples = append(out.Samples, s)
			continue
		}
		split.LoopByCPU[s.CPU] += s.Count
	}
	return out, split
}
