package cpuprofile

import (
	"fmt"
	"time"
)

// Sample is one aggregation bucket: Count ticks of thread TID of process PID
// on CPU with the same stacks. Stacks are instruction addresses, leaf first;
// nil when not collected.
type Sample struct {
	PID, TID, CPU int
	Comm          string
	KernelStack   []uint64
	UserStack     []uint64
	Count         uint64
}

// Lost counts samples that were dropped, by reason.
type Lost struct {
	// KernelStacksFull and UserStacksFull: the stack map had no room for
	// a stack it had not seen; a bigger StackEntries helps.
	KernelStacksFull uint64 `json:"kernel_stacks_full"`
	UserStacksFull   uint64 `json:"user_stacks_full"`
	// KernelStackFaults and UserStackFaults: the stack walk failed
	// (-EFAULT), e.g. a user stack paged out.
	KernelStackFaults uint64 `json:"kernel_stack_faults"`
	UserStackFaults   uint64 `json:"user_stack_faults"`
	// CountsFull: the count hash had no room for a new tuple.
	CountsFull uint64 `json:"counts_full"`
}

// Total is the number of samples lost for any reason.
func (l Lost) Total() uint64 {
	return l.KernelStacksFull + l.UserStacksFull + l.KernelStackFaults + l.UserStackFaults + l.CountsFull
}

// Profile is what a profiler has counted since Start.
type Profile struct {
	Taken   time.Time
	Samples []Sample
	Lost    Lost
	// CPUs is, per CPU sampled, how many samples its event delivered and
	// how long the event was enabled and counting, over the same span as
	// Samples; nil when not read (a profile recorded before it was kept).
	CPUs []CPUCount
}

// CPUCount is one CPU's sampling over a span: what to compare the
// samples with to see whether the CPU's event fired as often as it
// should have.
type CPUCount struct {
	CPU int
	// Taken is the samples the event delivered on the CPU: every run of
	// the sampling program, counted before it filters anything (the idle
	// task, other processes than Options.PID) and before a stack can be
	// lost, so Taken covers every sample the profile keeps, leaves out or
	// loses. A sample the kernel skipped because another BPF program was
	// running on the CPU is not taken.
	Taken uint64
	// EnabledNs is how long the CPU's event was enabled (perf's
	// time_enabled: the span, less any time the CPU was offline or
	// sampling was paused); RunningNs how long it was counting on the PMU
	// (time_running: less than EnabledNs when a hardware counter was
	// shared with other perf users and multiplexed; equal for cpu-clock).
	EnabledNs, RunningNs uint64
}

// Total is the number of samples in the profile.
func (p Profile) Total() uint64 {
	var n uint64
	for _, s := range p.Samples {
		n += s.Count
	}
	return n
}

// Sub returns p − prev: the samples counted between the two snapshots,
// for a profiler read window after window without a restart. Tuples whose
// count did not grow are left out.
func (p Profile) Sub(prev Profile) Profile {
	key := func(s Sample) string {
		return fmt.Sprint(s.PID, s.TID, s.CPU, s.Comm, s.KernelStack, s.UserStack)
	}
	before := make(map[string]uint64, len(prev.Samples))
	for _, s := range prev.Samples {
		before[key(s)] += s.Count
	}
	out := Profile{Taken: p.Taken, Lost: p.Lost.sub(prev.Lost), CPUs: subCounts(p.CPUs, prev.CPUs)}
	for _, s := range p.Samples {
		if n := before[key(s)]; s.Count > n {
			s.Count -= n
			out.Samples = append(out.Samples, s)
		}
	}
	return out
}

// subCounts is cur − prev per CPU; nil when cur is (not read). A CPU
// missing from prev counts from zero; a count that went back (a profiler
// restarted in between) is zero.
func subCounts(cur, prev []CPUCount) []CPUCount {
	if cur == nil {
		return nil
	}
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	before := make(map[int]CPUCount, len(prev))
	for _, c := range prev {
		before[c.CPU] = c
	}
	out := make([]CPUCount, 0, len(cur))
	for _, c := range cur {
		b := before[c.CPU]
		out = append(out, CPUCount{CPU: c.CPU, Taken: d(c.Taken, b.Taken), EnabledNs: d(c.EnabledNs, b.EnabledNs), RunningNs: d(c.RunningNs, b.RunningNs)})
	}
	return out
}

func (l Lost) sub(prev Lost) Lost {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return Lost{d(l.KernelStacksFull, prev.KernelStacksFull), d(l.UserStacksFull, prev.UserStacksFull),
		d(l.KernelStackFaults, prev.KernelStackFaults), d(l.UserStackFaults, prev.UserStackFaults), d(l.CountsFull, prev.CountsFull)}
}
