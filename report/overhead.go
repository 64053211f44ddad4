package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// writeOverhead is the one "perfscope's own cost" section every measuring
// command prints: each BPF program's runs and run time, how bpf_stats
// were taken, the BPF share of all CPU time, events lost, and how and how
// fast the probes attached.
func writeOverhead(w io.Writer, ov *evidence.Overhead) {
	if ov == nil {
		return
	}
	Heading(w, "perfscope's own cost")
	if ov.StatsUnavailable != "" {
		fmt.Fprintf(w, "bpf_stats unavailable: %s\n", ov.StatsUnavailable)
	}
	if ov.StatsOff != "" {
		fmt.Fprintf(w, "bpf_stats %s\n", ov.StatsOff)
	}
	t := Table{Header: []string{"program", "runs", "total", "per run", "per run from"}}
	for _, p := range ov.Programs {
		t.Add(p.Program, fmt.Sprint(p.RunCount), Nanos(float64(p.RunTimeNs)), Nanos(p.PerRunNs), p.PerRunFrom)
	}
	t.Write(w)
	if missed := missedRuns(ov.Programs); missed != "" {
		fmt.Fprintf(w, "missed: %s — events the kernel did not run the program for (another tracing program was running on that CPU; bpf_prog_info recursion_misses): the counts they feed are short by that many\n", missed)
	}
	if ov.Programs != nil && ov.Programs[0].PerRunFrom != "" {
		fmt.Fprintln(w, "runs: counted by the programs themselves (exact); per run: bpf_stats where they timed the program, else its own timing of 1 in 64 runs")
	}
	if s := ov.StatsSample; s != nil {
		fmt.Fprintf(w, "bpf_stats sampled: on for %s of %s, runs and totals counted in those windows and scaled ×%.1f (per-run times measured)\n",
			Nanos(float64(s.OnNs)), Nanos(float64(s.TotalNs)), s.Scale)
		if s.Shared {
			fmt.Fprintln(w, "bpf_stats: another process had them on between this run's windows; its windows are not counted")
		}
	}
	fmt.Fprintf(w, "BPF time: %s of all CPU time; events lost: %d; attached with %s in %s\n",
		Percent(ov.BPFTimeShare), ov.EventsLost, ov.AttachMethod, Nanos(float64(ov.AttachNs)))
	if c := ov.CPUCost; c != nil {
		entry := fmt.Sprintf("entry %s per event, measured", Nanos(c.EntryNs))
		if c.EntryUnmeasured != "" {
			entry = "entry cost " + c.EntryUnmeasured
		}
		fmt.Fprintf(w, "cost per CPU (estimate: runs × (per run + entry), %s): busiest CPU %d %s, all CPUs %s\n",
			entry, c.MaxCPU, Percent(c.MaxShare), Percent(c.Share))
	}
	if b := ov.Budget; b != nil {
		fmt.Fprintf(w, "overhead budget: %s of any one CPU for perfscope, programs and process", Percent(b.CPUShare))
		if ov.CPUCost != nil {
			governed := ov.CPUCost.MaxShare + b.ProcessShare
			verdict := "kept"
			if governed > b.CPUShare {
				verdict = "exceeded"
			}
			fmt.Fprintf(w, " — %s (%s: programs %s of the busiest CPU, process %s of every CPU while governed); over the whole window, readings and symbols included, perfscope took %s of the busiest CPU",
				verdict, Percent(governed), Percent(ov.CPUCost.MaxShare), Percent(b.ProcessShare), Percent(b.TotalShare))
		}
		fmt.Fprintln(w)
		if b.SwitchNs > 0 {
			period := Nanos(float64(b.PeriodNs))
			// A period ends when its counters are read, a little late:
			// only a real stretch is worth saying.
			if float64(b.MaxPeriodNs) > 1.05*float64(b.PeriodNs) {
				period += " stretched up to " + Nanos(float64(b.MaxPeriodNs))
			}
			fmt.Fprintf(w, "  windows every %s; attaching and detaching them took the process %s\n", period, Nanos(float64(b.SwitchNs)))
		}
		for _, g := range b.Groups {
			how := "exact (attached throughout)"
			if g.Estimate != nil {
				how = g.Estimate.String()
			}
			fmt.Fprintf(w, "  %-18s %-10s %s\n", g.Group, g.Class, how)
		}
	} else if ov.CPUCost != nil {
		fmt.Fprintln(w, "overhead budget: none (--exact): every tracepoint attached throughout, every event counted")
	}
	if ov.ProcessCPUNs > 0 {
		fmt.Fprintf(w, "perfscope's process: %s of CPU time over the window (%s of all CPU time)\n", Nanos(float64(ov.ProcessCPUNs)), Percent(ov.ProcessCPUShare))
	}
	WriteRunCost(w, ov)
}

// WriteRunCost is the whole process's line: what the run cost from exec to
// the report, the parts the window's figures leave out included. Commands
// that print their own cost section (jvm) print it too.
func WriteRunCost(w io.Writer, ov *evidence.Overhead) {
	if ov.RunCPUNs <= 0 {
		return
	}
	fmt.Fprintf(w, "the whole run, exec to this report: %s of CPU time", Nanos(float64(ov.RunCPUNs)))
	if ov.RunNs > 0 {
		fmt.Fprintf(w, " in %s (%s of one CPU)", Nanos(float64(ov.RunNs)), Percent(ov.RunCPUShare))
	}
	if ov.AttachCPUNs > 0 {
		rest := ov.RunCPUNs - ov.AttachCPUNs - ov.ProcessCPUNs
		fmt.Fprintf(w, ": start-up and attaching %s, the window %s, the rest (calibrating, naming stacks, the report) %s",
			Nanos(float64(ov.AttachCPUNs)), Nanos(float64(ov.ProcessCPUNs)), Nanos(float64(max(rest, 0))))
	}
	fmt.Fprintln(w, "; formatting the report is not counted")
}

// missedRuns lists the programs the kernel skipped during the run and how
// many times ("tcp:tcp_retransmit_skb 2, …"), or "" when none were.
func missedRuns(progs []evidence.ProgramCost) string {
	var b strings.Builder
	for _, p := range progs {
		if p.Missed == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", p.Program, p.Missed)
	}
	return b.String()
}
