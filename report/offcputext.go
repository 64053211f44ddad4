package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// writeOffCPUText prints an off-CPU run: where the threads' time went
// (on CPU, runnable, blocked by state), the waits by reason and by stack
// with who woke them, the thread pools, and run-queue latency.
func writeOffCPUText(w io.Writer, r *Report, ev evidence.OffCPU) {
	target := "every process"
	if ev.PID != 0 {
		target = fmt.Sprintf("%s (pid %d)", ev.Comm, ev.PID)
	}
	fmt.Fprintf(w, "perfscope offcpu — %s, %.2fs on %d CPUs, kernel %s; %s stacks, waits ≥ %s kept by stack",
		target, time.Duration(ev.DurationNs).Seconds(), ev.CPUs, r.Meta.Kernel, ev.Stacks, Nanos(float64(ev.MinBlockNs)))
	if ev.StackEvery > 1 {
		fmt.Fprintf(w, ", stacks at 1 in %d switches (scaled)", ev.StackEvery)
	}
	fmt.Fprintln(w)
	for _, warn := range ev.Warnings {
		fmt.Fprintf(w, "note: %s\n", warn)
	}

	t := ev.Totals
	seen := t.OnCPUNs + t.RunnableNs + t.BlockedNs + t.UnknownNs
	Heading(w, fmt.Sprintf("Where %d threads' time went (%d more never switched: blocked or running the whole window)", t.Threads, t.ThreadsUnseen))
	share := func(ns int64) string {
		if seen <= 0 {
			return "-"
		}
		return Percent(float64(ns) / float64(seen))
	}
	tt := Table{Header: []string{"", "time", "share"}}
	tt.Add("on CPU", Nanos(float64(t.OnCPUNs)), share(t.OnCPUNs))
	tt.Add("runnable (waiting for a CPU)", Nanos(float64(t.RunnableNs)), share(t.RunnableNs))
	tt.Add("blocked", Nanos(float64(t.BlockedNs)), share(t.BlockedNs))
	states := make([]string, 0, len(t.BlockedByState))
	for s := range t.BlockedByState {
		states = append(states, s)
	}
	sort.Slice(states, func(i, j int) bool { return t.BlockedByState[states[i]] > t.BlockedByState[states[j]] })
	for _, s := range states {
		tt.Add("  "+s, Nanos(float64(t.BlockedByState[s])), share(t.BlockedByState[s]))
	}
	if t.UnknownNs > 0 {
		tt.Add("unknown (before first seen)", Nanos(float64(t.UnknownNs)), share(t.UnknownNs))
	}
	tt.Write(w)
	fmt.Fprintf(w, "%d waits timed; %d shorter than %s (%s) are in the totals only; %s kept by stack\n",
		t.Waits, t.ShortWaits, Nanos(float64(ev.MinBlockNs)), Nanos(float64(t.ShortNs)), Nanos(float64(t.KeptNs)))

	if len(ev.ByReason) > 0 {
		Heading(w, "Off-CPU time by reason (waits kept by stack)")
		rt := Table{Header: []string{"reason", "time", "share", "", "waits", "top site"}}
		for _, rs := range ev.ByReason {
			rt.Add(rs.Reason, Nanos(float64(rs.Ns)), Percent(rs.Share), Bar(rs.Share, 12), fmt.Sprint(rs.Waits), rs.TopSite)
		}
		rt.Write(w)
	}

	top := r.Show.Top
	if top <= 0 || top > len(ev.Waits) {
		top = len(ev.Waits)
	}
	if top > 0 {
		Heading(w, fmt.Sprintf("Longest waits by stack (%d)", top))
		for i, wt := range ev.Waits[:top] {
			fmt.Fprintf(w, "%2d. %s total in %d waits (max %s, runnable %s) — %s/%d (pid %d), %s, %s at %s\n",
				i+1, Nanos(float64(wt.TotalNs)), wt.Count, Nanos(float64(wt.MaxNs)), Nanos(float64(wt.RunnableNs)),
				wt.Comm, wt.TID, wt.PID, wt.State, wt.Reason, wt.Site)
			if len(wt.Stack) > 0 {
				fmt.Fprintf(w, "    stack: %s\n", strings.Join(lastFrames(wt.Stack, 8), " ← "))
			}
			if wk := wt.Waker; wk != nil {
				fmt.Fprintf(w, "    woken by %s %s/%d (pid %d) at %s\n", wk.Kind, wk.Comm, wk.TID, wk.PID, wk.Site)
			}
		}
	}

	if len(ev.Pools) > 0 {
		Heading(w, "Thread pools (time seen: on CPU / runnable / blocked)")
		pt := Table{Header: []string{"pool", "process", "threads", "on CPU", "runnable", "blocked", "mean runnable", "top wait"}}
		for _, p := range ev.Pools {
			topWait := "-"
			if p.TopSite != "" {
				topWait = fmt.Sprintf("%s %s (%s of blocked)", p.TopSiteReason, p.TopSite, Percent(p.TopSiteShare))
			}
			pt.Add(p.Name, fmt.Sprintf("%s/%d", p.Process, p.PID), fmt.Sprint(p.Threads), Percent(p.OnCPUShare), Percent(p.RunnableShare),
				Percent(p.BlockedShare), Nanos(float64(p.MeanRunnableNs)), topWait)
		}
		pt.Write(w)
	}

	rq := ev.RunQueue
	Heading(w, fmt.Sprintf("Run-queue latency (wakeup or preemption → running): %d waits, p50 %s, p99 %s",
		rq.All.Count, Nanos(rq.All.P50Ns), Nanos(rq.All.P99Ns)))
	if len(rq.PerCPU) > 0 {
		ct := Table{Header: []string{"CPU", "busy", "waits", "p50", "p99", "mean"}}
		busy := map[int]float64{}
		for _, b := range ev.CPUBusy {
			busy[b.CPU] = b.BusyShare
		}
		for _, c := range rq.PerCPU {
			b := "-"
			if v, ok := busy[c.CPU]; ok {
				b = Percent(v)
			}
			ct.Add(fmt.Sprint(c.CPU), b, fmt.Sprint(c.All.Count), Nanos(c.All.P50Ns), Nanos(c.All.P99Ns), Nanos(c.All.MeanNs))
		}
		ct.Write(w)
	}
	writeHistogram(w, evidence.LatencyHistogram{Count: rq.All.Count, Buckets: rq.All.Buckets})

	if l := ev.Lost; l != (evidence.OffCPULost{}) {
		fmt.Fprintf(w, "\nnot recorded (maps full or stacks unreadable): threads %d, kernel stacks %d+%d, user stacks %d+%d, waits %d, processes %d, waker stacks %d\n",
			l.ThreadsFull, l.KernelStacksFull, l.KernelStackFaults, l.UserStacksFull, l.UserStackFaults, l.WaitsFull, l.ProcessesFull, l.WakerStacks)
	}
	writeFindingsIfAny(w, r.Findings)
	writeOverhead(w, r.Overhead)
}

// lastFrames are the innermost n frames of a root-first stack, innermost
// first.
func lastFrames(stack []string, n int) []string {
	var out []string
	for i := len(stack) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, stack[i])
	}
	return out
}
