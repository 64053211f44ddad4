package report

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// DefaultTop is how many rows "top" tables print when Show.Top is 0.
const DefaultTop = 20

func writeProfileText(w io.Writer, r *Report, d evidence.Profile) {
	target := "all processes"
	if d.PID != 0 {
		target = fmt.Sprintf("process %d", d.PID)
	}
	fmt.Fprintf(w, "perfscope profile — %s, %.2fs at %d Hz on %d CPUs, %s stacks: %d samples, %d lost\n",
		target, time.Duration(d.DurationNs).Seconds(), d.FrequencyHz, d.CPUs, d.Stacks, d.Samples, d.Lost)
	for _, warn := range d.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	writeSampling(w, d.ProfileSampling, d.PerCPU, d.FrequencyHz)
	if d.Samples == 0 {
		fmt.Fprintln(w, "No samples: the target did not run on a CPU during the window.")
		return
	}
	top := r.Show.Top
	if top <= 0 {
		top = DefaultTop
	}
	fns := d.TopFunctions
	Heading(w, "Top functions by self samples (where the CPU was)")
	writeFunctionTable(w, fns, top)

	byTotal := append([]evidence.FunctionSamples(nil), fns...)
	sort.SliceStable(byTotal, func(i, j int) bool { return byTotal[i].Total > byTotal[j].Total })
	Heading(w, "Top functions by total samples (on the stack)")
	writeFunctionTable(w, byTotal, top)

	if d.Lost > 0 {
		l := d.LostBy
		fmt.Fprintf(w, "\nLost samples: %d kernel and %d user stacks with the stack map full, %d kernel-stack and %d user-stack faults, %d with the count table full\n",
			l.KernelStacksFull, l.UserStacksFull, l.KernelStackFaults, l.UserStackFaults, l.CountsFull)
	}
	writeOverhead(w, r.Overhead)
}

func writeFunctionTable(w io.Writer, fns []evidence.FunctionSamples, top int) {
	t := Table{Header: []string{"self", "self%", "total", "total%", "", "function"}}
	for i, f := range fns {
		if i == top {
			break
		}
		t.Add(fmt.Sprint(f.Self), Percent(f.SelfShare), fmt.Sprint(f.Total), Percent(f.TotalShare), Bar(f.SelfShare, 10), f.Function)
	}
	t.Write(w)
}

// writeLocksText prints a system-wide lock-contention run.
func writeLocksText(w io.Writer, r *Report, l evidence.LockSection) {
	fmt.Fprintf(w, "perfscope locks — kernel lock contention, all CPUs, %.2fs, kernel %s: %s waited in all\n",
		time.Duration(r.Meta.DurationNs).Seconds(), r.Meta.Kernel, Nanos(float64(l.TotalNs)))
	top := r.Show.Top
	if top <= 0 {
		top = DefaultTop
	}
	Heading(w, "Top lock contention")
	writeLockSites(w, l, top)
	if len(l.Intervals) > 0 {
		Heading(w, "Lock wait per interval")
		t := Table{Header: []string{"time", "contentions", "wait", "socket locks", "qdisc root lock"}}
		for _, iv := range l.Intervals {
			t.Add(iv.End.Format("15:04:05"), fmt.Sprint(iv.Count), Nanos(float64(iv.TotalNs)),
				Nanos(float64(iv.ByClass["socket-receive-queue"]+iv.ByClass["socket-wakeup"]+iv.ByClass["socket-lock"])), Nanos(float64(iv.ByClass["qdisc-root-lock"])))
		}
		t.Write(w)
	}
	writeFindingsIfAny(w, r.Findings)
	writeOverhead(w, r.Overhead)
}
