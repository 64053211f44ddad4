package report

import (
	"fmt"
	"io"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

func writeSoftirqText(w io.Writer, r *Report, ev evidence.SoftirqEvidence) {
	secs := time.Duration(ev.DurationNs).Seconds()
	attach := ""
	if ov := r.Overhead; ov != nil {
		attach = fmt.Sprintf("; probes attached with %s in %s", ov.AttachMethod, Nanos(float64(ov.AttachNs)))
	}
	fmt.Fprintf(w, "perfscope softirq — %.2fs on %d CPUs, kernel %s%s\n", secs, len(ev.CPUs), r.Meta.Kernel, attach)

	Heading(w, "NET_RX and NET_TX per CPU (share = time in the softirq / wall time)")
	t := Table{Header: []string{"CPU", "NET_RX/s", "time", "share", "NET_RX", "NET_TX/s", "time", "share", "NET_TX", "all softirq", "/proc/stat soft"}}
	for _, c := range ev.CPUs {
		rx, tx := c.Vectors["NET_RX"], c.Vectors["NET_TX"]
		t.Add(fmt.Sprint(c.CPU),
			Count(float64(rx.Count)/secs), Nanos(float64(rx.TimeNs)), Percent(rx.Share), Bar(rx.Share, 12),
			Count(float64(tx.Count)/secs), Nanos(float64(tx.TimeNs)), Percent(tx.Share), Bar(tx.Share, 12),
			Percent(c.Share), Percent(c.ProcStatShare))
	}
	t.Write(w)
	if e := ev.Estimate; e != nil {
		fmt.Fprintf(w, "probe counts and times: %s; times are the windows' time per run × /proc/softirqs' exact count\n", e)
	}

	Heading(w, "Softirqs per vector: probe vs /proc/softirqs over the same window")
	vt := Table{Header: []string{"vector", "probe", "/proc/softirqs", "diff", "time", "mean"}}
	for _, a := range ev.Totals {
		if a.Probe == 0 && a.ProcCount == 0 {
			continue
		}
		mean := "-"
		if a.Probe > 0 {
			mean = Nanos(float64(a.TimeNs) / float64(a.Probe))
		}
		vt.Add(a.Vector, fmt.Sprint(a.Probe), fmt.Sprint(a.ProcCount), fmt.Sprintf("%+.2f%%", a.Diff*100), Nanos(float64(a.TimeNs)), mean)
	}
	vt.Write(w)

	for _, h := range ev.Latency {
		Heading(w, fmt.Sprintf("%s raise → entry latency: %d runs, p50 %s, p99 %s", h.Vector, h.Count, Nanos(h.P50Ns), Nanos(h.P99Ns)))
		writeHistogram(w, h)
	}
	writeFindingsIfAny(w, r.Findings)
	writeOverhead(w, r.Overhead)
}

// writeHistogram prints non-empty buckets like bcc's log2 histograms.
func writeHistogram(w io.Writer, h evidence.LatencyHistogram) {
	if h.Count == 0 {
		fmt.Fprintln(w, "no events")
		return
	}
	first, last := -1, -1
	var max uint64
	for i, b := range h.Buckets {
		if b.Count > 0 {
			if first < 0 {
				first = i
			}
			last = i
			if b.Count > max {
				max = b.Count
			}
		}
	}
	for _, b := range h.Buckets[first : last+1] {
		fmt.Fprintf(w, "%10s → %-10s %10d |%s|\n", Nanos(float64(b.LowNs)), Nanos(float64(b.HighNs)), b.Count,
			Bar(float64(b.Count)/float64(max), 30))
	}
}

// WriteSoftirqIntervalHeader and WriteSoftirqInterval print the lines of
// `perfscope softirq --interval` as the run goes, like mpstat.
func WriteSoftirqIntervalHeader(w io.Writer) {
	fmt.Fprintf(w, "%-8s  %10s  %10s  %8s  %8s  %s\n", "TIME", "NET_RX/s", "NET_TX/s", "%NET_RX", "%NET_TX", "busiest CPU (%softirq)")
}

// WriteSoftirqInterval prints one interval line.
func WriteSoftirqInterval(w io.Writer, iv evidence.SoftirqInterval) {
	fmt.Fprintf(w, "%-8s  %10s  %10s  %8s  %8s  cpu%d (%s)\n", iv.End.Format("15:04:05"),
		Count(iv.NetRXPerS), Count(iv.NetTXPerS), Percent(iv.NetRXShare), Percent(iv.NetTXShare), iv.BusiestCPU, Percent(iv.BusiestShare))
}
