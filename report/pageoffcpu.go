package report

import (
	"fmt"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// offCPUSection draws an off-CPU run: where the threads' time went, the
// waits by reason and by stack with their wakers, the thread pools and
// run-queue latency per CPU — the same numbers as the text.
func offCPUSection(ev evidence.OffCPU) PageSection {
	s := PageSection{ID: "offcpu", Title: "Off-CPU time"}
	target := "every process"
	if ev.PID != 0 {
		target = fmt.Sprintf("%s (pid %d)", ev.Comm, ev.PID)
	}
	rt := PageTable{Caption: "Run", Header: []string{"target", "duration", "CPUs", "stacks", "kept by stack", "attach"}}
	rt.Add(target, Nanos(float64(ev.DurationNs)), fmt.Sprint(ev.CPUs), ev.Stacks, "waits ≥ "+Nanos(float64(ev.MinBlockNs)), ev.AttachMethod)
	s.Tables = append(s.Tables, rt)

	t := ev.Totals
	seen := float64(t.OnCPUNs + t.RunnableNs + t.BlockedNs + t.UnknownNs)
	frac := func(ns int64) float64 {
		if seen <= 0 {
			return 0
		}
		return float64(ns) / seen
	}
	where := BarChart{Title: "Where the threads' time went", Desc: "Share of the watched threads' time on CPU, waiting for a CPU, blocked, and before they were first seen.", Format: Percent, Max: 1}
	wt := PageTable{Caption: "Threads' time", Header: []string{"", "time", "share"}}
	for _, row := range []struct {
		name string
		ns   int64
	}{{"on CPU", t.OnCPUNs}, {"runnable", t.RunnableNs}, {"blocked", t.BlockedNs}, {"unknown", t.UnknownNs}} {
		where.Bars = append(where.Bars, ChartBar{Label: row.name, Value: frac(row.ns)})
		wt.Add(row.name, Nanos(float64(row.ns)), Percent(frac(row.ns)))
	}
	for state, ns := range t.BlockedByState {
		wt.Add("blocked: "+state, Nanos(float64(ns)), Percent(frac(ns)))
	}
	s.Charts = append(s.Charts, where)
	s.Tables = append(s.Tables, wt)

	if len(ev.ByReason) > 0 {
		chart := BarChart{Title: "Off-CPU time by reason", Desc: "Waits kept by stack, by why the thread waited (classified from its stack).", Format: func(v float64) string { return Nanos(v) }}
		bt := PageTable{Caption: "By reason", Header: []string{"reason", "time", "share", "waits", "top site"}}
		for _, r := range ev.ByReason {
			chart.Bars = append(chart.Bars, ChartBar{Label: r.Reason, Value: float64(r.Ns)})
			bt.Add(r.Reason, Nanos(float64(r.Ns)), Percent(r.Share), fmt.Sprint(r.Waits), r.TopSite)
		}
		s.Charts = append(s.Charts, chart)
		s.Tables = append(s.Tables, bt)
	}
	if len(ev.Waits) > 0 {
		wtab := PageTable{Caption: "Longest waits by stack", Header: []string{"total", "waits", "max", "thread", "state", "reason", "site", "woken by", "stack (innermost first)"}}
		for _, w := range ev.Waits {
			waker := "-"
			if k := w.Waker; k != nil {
				waker = fmt.Sprintf("%s %s/%d at %s", k.Kind, k.Comm, k.TID, k.Site)
			}
			wtab.Add(Nanos(float64(w.TotalNs)), fmt.Sprint(w.Count), Nanos(float64(w.MaxNs)), fmt.Sprintf("%s/%d (pid %d)", w.Comm, w.TID, w.PID),
				w.State, w.Reason, w.Site, waker, strings.Join(lastFrames(w.Stack, 8), " ← "))
		}
		s.Tables = append(s.Tables, wtab)
	}
	if len(ev.Pools) > 0 {
		pt := PageTable{Caption: "Thread pools", Header: []string{"pool", "process", "threads", "on CPU", "runnable", "blocked", "mean runnable", "top wait"}}
		for _, p := range ev.Pools {
			top := "-"
			if p.TopSite != "" {
				top = fmt.Sprintf("%s %s (%s of blocked)", p.TopSiteReason, p.TopSite, Percent(p.TopSiteShare))
			}
			pt.Add(p.Name, fmt.Sprintf("%s/%d", p.Process, p.PID), fmt.Sprint(p.Threads), Percent(p.OnCPUShare), Percent(p.RunnableShare),
				Percent(p.BlockedShare), Nanos(float64(p.MeanRunnableNs)), top)
		}
		s.Tables = append(s.Tables, pt)
	}
	rq := ev.RunQueue
	if len(rq.PerCPU) > 0 {
		chart := BarChart{Title: "Run-queue latency p99 per CPU", Desc: "Wakeup or preemption to running, 99th percentile (log2 buckets, interpolated).", Format: func(v float64) string { return Nanos(v) }}
		ct := PageTable{Caption: "Run-queue latency", Header: []string{"CPU", "waits", "p50", "p99", "mean"}}
		ct.Add("all", fmt.Sprint(rq.All.Count), Nanos(rq.All.P50Ns), Nanos(rq.All.P99Ns), Nanos(rq.All.MeanNs))
		for _, c := range rq.PerCPU {
			chart.Bars = append(chart.Bars, ChartBar{Label: fmt.Sprintf("CPU %d", c.CPU), Value: c.All.P99Ns})
			ct.Add(fmt.Sprint(c.CPU), fmt.Sprint(c.All.Count), Nanos(c.All.P50Ns), Nanos(c.All.P99Ns), Nanos(c.All.MeanNs))
		}
		s.Charts = append(s.Charts, chart)
		s.Tables = append(s.Tables, ct)
	}
	s.Notes = append(s.Notes, ev.Warnings...)
	return s
}
