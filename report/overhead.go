package report

import (
	"fmt"
	"io"

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
	t := Table{Header: []string{"program", "runs", "total", "per run"}}
	for _, p := range ov.Programs {
		t.Add(p.Program, fmt.Sprint(p.RunCount), Nanos(float64(p.RunTimeNs)), Nanos(p.PerRunNs))
	}
	t.Write(w)
	if s := ov.StatsSample; s != nil {
		fmt.Fprintf(w, "bpf_stats sampled: on for %s of %s, runs and totals counted in those windows and scaled ×%.1f (per-run times measured)\n",
			Nanos(float64(s.OnNs)), Nanos(float64(s.TotalNs)), s.Scale)
		if s.Shared {
			fmt.Fprintln(w, "bpf_stats: another process had them on between this run's windows; its windows are not counted")
		}
	}
	fmt.Fprintf(w, "BPF time: %s of all CPU time; events lost: %d; attached with %s in %s\n",
		Percent(ov.BPFTimeShare), ov.EventsLost, ov.AttachMethod, Nanos(float64(ov.AttachNs)))
}
