package probes

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
)

// SelfRuns is what one program counted about itself on one CPU since it
// was loaded (probes/include/selfcost.h): its runs, and how long the
// TimedRuns of them it timed (about 1 in 64) took in all.
type SelfRuns struct {
	Runs      uint64
	TimedRuns uint64
	TimedNs   uint64
}

// Sub is the counts between prev and s (zero when the program was
// replaced in between and the counters went back).
func (s SelfRuns) Sub(prev SelfRuns) SelfRuns {
	if s.Runs < prev.Runs || s.TimedRuns < prev.TimedRuns || s.TimedNs < prev.TimedNs {
		return SelfRuns{}
	}
	return SelfRuns{Runs: s.Runs - prev.Runs, TimedRuns: s.TimedRuns - prev.TimedRuns, TimedNs: s.TimedNs - prev.TimedNs}
}

// Add sums two counts.
func (s SelfRuns) Add(o SelfRuns) SelfRuns {
	return SelfRuns{Runs: s.Runs + o.Runs, TimedRuns: s.TimedRuns + o.TimedRuns, TimedNs: s.TimedNs + o.TimedNs}
}

// PerRun is the mean time of a timed run; 0 when none was timed.
func (s SelfRuns) PerRun() time.Duration {
	if s.TimedRuns == 0 {
		return 0
	}
	return time.Duration(s.TimedNs / s.TimedRuns)
}

// SelfCosts maps each attached hook ("irq:softirq_entry", or a perf
// event program's name) to its programs' own counters, indexed by CPU.
type SelfCosts map[string][]SelfRuns

// Sub is the counts between prev and s, per hook and CPU.
func (s SelfCosts) Sub(prev SelfCosts) SelfCosts {
	out := make(SelfCosts, len(s))
	for hook, perCPU := range s {
		d := make([]SelfRuns, len(perCPU))
		for cpu, v := range perCPU {
			if p := prev[hook]; cpu < len(p) {
				v = v.Sub(p[cpu])
			}
			d[cpu] = v
		}
		out[hook] = d
	}
	return out
}

// Total is one hook's counts summed over CPUs.
func Total(perCPU []SelfRuns) SelfRuns {
	var t SelfRuns
	for _, v := range perCPU {
		t = t.Add(v)
	}
	return t
}

// SelfCounted is a probe whose programs count their own runs per CPU,
// without bpf_stats and so without CAP_SYS_ADMIN.
type SelfCounted interface {
	SelfCosts() (SelfCosts, error)
}

// ErrNoSelfCost means a probe's object keeps no self_costs map.
var ErrNoSelfCost = errors.New("the probe's programs do not count their own runs")

// SelfCostReader returns the reader of an object's self_costs map (see
// selfcost.h) for the hooks in slots (hook name → the slot its programs
// count in). V is the object's generated self_cost struct; conv copies
// its fields by name, so it stops compiling if the C struct changes.
func SelfCostReader[V any](m *ebpf.Map, slots map[string]uint32, conv func(V) SelfRuns) func() (SelfCosts, error) {
	return func() (SelfCosts, error) {
		if m == nil {
			return nil, ErrNoSelfCost
		}
		all, err := ReadPerCPUArray[V](m)
		if err != nil {
			return nil, err
		}
		out := make(SelfCosts, len(slots))
		for hook, slot := range slots {
			if int(slot) >= len(all) {
				return nil, fmt.Errorf("read %s: slot %d of %s beyond the map", m, slot, hook)
			}
			perCPU := make([]SelfRuns, len(all[slot]))
			for cpu, v := range all[slot] {
				perCPU[cpu] = conv(v)
			}
			out[hook] = perCPU
		}
		return out, nil
	}
}

// AttachedSlots keeps the slots of the hooks that are attached (an
// optional hook the kernel lacks counts nothing).
func (a *Attached) AttachedSlots(slots map[string]uint32) map[string]uint32 {
	out := map[string]uint32{}
	for hook, slot := range slots {
		if _, ok := a.Programs[hook]; ok {
			out[hook] = slot
		}
	}
	return out
}
