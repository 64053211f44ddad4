package report

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// RecipeRef says which recipe produced a report and with which values:
// enough to run it again.
type RecipeRef struct {
	Name string `json:"name"`
	// Source is "builtin" or the recipe file.
	Source string `json:"source"`
	// Parameters are every parameter's value, defaults included.
	Parameters map[string]string `json:"parameters"`
}

// RecipeData is the data of a recipe run with more than one section (or
// with a joined timeline): each section as its own command would report
// it, side by side. A recipe with one section of a measuring command
// (net, softirq, locks, profile) reports that command's data instead.
type RecipeData struct {
	Net       *NetData                  `json:"net,omitempty"`
	Softirq   *evidence.SoftirqEvidence `json:"softirq,omitempty"`
	Locks     *evidence.LockSection     `json:"locks,omitempty"`
	Profile   *evidence.Profile         `json:"profile,omitempty"`
	JVMPauses *evidence.JVMPauses       `json:"jvm_pauses,omitempty"`
	JVM       *evidence.JVM             `json:"jvm,omitempty"`
	// JVMLoad is the HTTP load perfscope drove for the JVM section.
	JVMLoad  any                `json:"jvm_load,omitempty"`
	GC       *evidence.GC       `json:"gc,omitempty"`
	GCFiles  []string           `json:"gc_files,omitempty"`
	Timeline *evidence.Timeline `json:"timeline,omitempty"`
	OffCPU   *evidence.OffCPU   `json:"offcpu,omitempty"`
}

// writeRecipeText prints each section with its own command's text, the
// joined timeline, the findings once and perfscope's cost once.
func writeRecipeText(w io.Writer, r *Report, d RecipeData) error {
	name := r.Command
	if r.Recipe != nil {
		name = "recipe " + r.Recipe.Name
	}
	fmt.Fprintf(w, "perfscope %s — %.2fs, kernel %s, %d CPUs\n", name, time.Duration(r.Meta.DurationNs).Seconds(), r.Meta.Kernel, r.Meta.CPUs)
	// Sections print without the cost (once, at the end) and, but for
	// the network text that places them itself, without the findings.
	section := *r
	section.Overhead = nil
	findingsShown := false
	if d.Net != nil {
		section.Data = *d.Net
		fmt.Fprintln(w)
		writeNetText(w, &section, d.Net.NetEvidence)
		findingsShown = true
	}
	section.Findings = nil
	if d.Softirq != nil {
		fmt.Fprintln(w)
		writeSoftirqText(w, &section, *d.Softirq)
	}
	if d.Locks != nil {
		fmt.Fprintln(w)
		writeLocksText(w, &section, *d.Locks)
	}
	if d.Profile != nil {
		fmt.Fprintln(w)
		writeProfileText(w, &section, *d.Profile)
	}
	if d.OffCPU != nil {
		fmt.Fprintln(w)
		writeOffCPUText(w, &section, *d.OffCPU)
	}
	if d.JVMPauses != nil {
		writeJVMPausesText(w, *d.JVMPauses)
	}
	if d.JVM != nil {
		writeJVMSummary(w, *d.JVM)
	}
	if d.GC != nil {
		writeGCSummary(w, *d.GC, d.GCFiles)
	}
	if d.Timeline != nil {
		writeTimeline(w, *d.Timeline)
	}
	if !findingsShown {
		Heading(w, "Findings")
		WriteFindings(w, r.Findings)
	}
	writeOverhead(w, r.Overhead)
	return nil
}

func writeJVMPausesText(w io.Writer, p evidence.JVMPauses) {
	who := fmt.Sprintf("JVM pid %d", p.PID)
	if p.Workload != nil {
		who += " in " + p.Workload.Label()
	}
	Heading(w, who+": pauses (hsperfdata)")
	t := Table{Header: []string{"young GCs", "old GCs", "GC time", "safepoints", "stopped"}}
	sp, st := "-", "-"
	if p.Safepoints != nil {
		sp = fmt.Sprint(*p.Safepoints)
	}
	if p.SafepointTimeNs != nil {
		st = Nanos(float64(*p.SafepointTimeNs))
	}
	t.Add(fmt.Sprint(p.YoungGCs), fmt.Sprint(p.OldGCs), Nanos(float64(p.GCTimeNs)), sp, st)
	t.Write(w)
}

func writeJVMSummary(w io.Writer, e evidence.JVM) {
	Heading(w, fmt.Sprintf("JVM pid %d (%s): allocation and GC, async-profiler event %s", e.PID, e.Collector, e.ProfileEvent))
	t := Table{Header: []string{"measure", "value"}}
	if e.AllocBytesProfiler > 0 {
		t.Add("allocated (async-profiler)", Bytes(float64(e.AllocBytesProfiler)))
	}
	t.Add("allocated (hsperfdata Eden)", Bytes(float64(e.AllocBytesEden)))
	t.Add("allocation rate (Eden)", Bytes(e.AllocRateEden)+"/s")
	if n, ok := e.RequestCount(); ok {
		t.Add("requests ("+e.RequestsSource+")", fmt.Sprint(n))
	} else {
		t.Add("requests", "unknown: "+e.RequestsUnknown)
	}
	if b, ok := e.PerRequest(); ok {
		t.Add("bytes per request", Bytes(b))
	} else if e.BytesPerRequestUnknown != "" {
		t.Add("bytes per request", "unknown: "+e.BytesPerRequestUnknown)
	}
	t.Add("young GCs", fmt.Sprintf("%d (%.1f/min, mean pause %s)", e.YoungGCs, e.YoungGCsPerMinute, Nanos(e.MeanYoungPauseNs)))
	t.Add("GC time share", Percent(e.GCTimeShare))
	t.Write(w)
	if len(e.Sites) > 0 {
		st := Table{Header: []string{"share", "weight", "frame"}}
		for i, s := range e.Sites {
			if i == 5 {
				break
			}
			st.Add(Percent(s.Share), Count(float64(s.Bytes)), s.Frame)
		}
		st.Write(w)
	}
}

func writeGCSummary(w io.Writer, g evidence.GC, files []string) {
	n := fmt.Sprintf("%d files", len(files))
	if len(files) == 1 {
		n = "1 file"
	}
	Heading(w, fmt.Sprintf("GC log (%s, %.1fs of log, %s)", g.Collector, g.WindowSeconds, n))
	t := Table{Header: []string{"pauses", "count", "p50", "p99", "max", "over goal"}}
	for _, p := range g.Pauses {
		t.Add(p.Kind, fmt.Sprint(p.Count), Nanos(float64(p.P50Ns)), Nanos(float64(p.P99Ns)), Nanos(float64(p.MaxNs)), fmt.Sprint(p.OverGoal))
	}
	t.Write(w)
	fmt.Fprintf(w, "throughput %s; allocation %s/s (%s); promotion %s/s; young GC every %.1fs\n",
		Percent(g.Throughput), Bytes(g.AllocRate), g.AllocSource, Bytes(g.PromotionRate), g.YoungIntervalSeconds)
}

// writeTimeline prints the joined timeline, one line per interval, with
// the columns some part measured.
func writeTimeline(w io.Writer, tl evidence.Timeline) {
	title := "Timeline"
	if tl.Port > 0 {
		title += fmt.Sprintf(" (port %d", tl.Port)
		if tl.PID > 0 {
			title += fmt.Sprintf(", JVM pid %d", tl.PID)
		}
		title += ")"
	}
	Heading(w, title)
	type col struct {
		name string
		has  func(evidence.TimelineRow) bool
		cell func(evidence.TimelineRow) string
	}
	cols := []col{
		{"NET_RX/s", func(r evidence.TimelineRow) bool { return r.NetRXPerS != nil }, func(r evidence.TimelineRow) string { return Count(*r.NetRXPerS) }},
		{"NET_RX", func(r evidence.TimelineRow) bool { return r.NetRXShare != nil }, func(r evidence.TimelineRow) string { return Percent(*r.NetRXShare) }},
		{"busiest", func(r evidence.TimelineRow) bool { return r.BusiestCPU != nil }, func(r evidence.TimelineRow) string {
			return fmt.Sprintf("cpu%d %s", *r.BusiestCPU, Percent(*r.BusiestShare))
		}},
		{"feeding NET_RX", func(r evidence.TimelineRow) bool { return r.FeedingNetRXShare != nil }, func(r evidence.TimelineRow) string { return Percent(*r.FeedingNetRXShare) }},
		{"lock wait", func(r evidence.TimelineRow) bool { return r.LockWaitNs != nil }, func(r evidence.TimelineRow) string { return Nanos(float64(*r.LockWaitNs)) }},
		{"socket locks", func(r evidence.TimelineRow) bool { return r.SocketLockWaitNs != nil }, func(r evidence.TimelineRow) string { return Nanos(float64(*r.SocketLockWaitNs)) }},
		{"rx pkts", func(r evidence.TimelineRow) bool { return r.RXPackets != nil }, func(r evidence.TimelineRow) string { return fmt.Sprint(*r.RXPackets) }},
		{"tx pkts", func(r evidence.TimelineRow) bool { return r.TXPackets != nil }, func(r evidence.TimelineRow) string { return fmt.Sprint(*r.TXPackets) }},
		{"read/s", func(r evidence.TimelineRow) bool { return r.DatagramsPerS != nil }, func(r evidence.TimelineRow) string { return Count(*r.DatagramsPerS) }},
		{"drops/s", func(r evidence.TimelineRow) bool { return r.DropsPerS != nil }, func(r evidence.TimelineRow) string { return Count(*r.DropsPerS) }},
		{"queue", func(r evidence.TimelineRow) bool { return r.SocketQueueBytes != nil }, func(r evidence.TimelineRow) string { return Bytes(float64(*r.SocketQueueBytes)) }},
		{"GCs", func(r evidence.TimelineRow) bool { return r.JVMGCs != nil }, func(r evidence.TimelineRow) string { return fmt.Sprint(*r.JVMGCs) }},
		{"JVM stopped", func(r evidence.TimelineRow) bool { return r.StoppedNs() != nil }, func(r evidence.TimelineRow) string { return Nanos(float64(*r.StoppedNs())) }},
	}
	var shown []col
	for _, c := range cols {
		for _, r := range tl.Rows {
			if c.has(r) {
				shown = append(shown, c)
				break
			}
		}
	}
	t := Table{Header: []string{"time"}}
	for _, c := range shown {
		t.Header = append(t.Header, c.name)
	}
	rows := append([]evidence.TimelineRow(nil), tl.Rows...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].End.Before(rows[j].End) })
	for _, r := range rows {
		cells := []string{r.End.Format("15:04:05.0")}
		for _, c := range shown {
			v := "-"
			if c.has(r) {
				v = c.cell(r)
			}
			cells = append(cells, v)
		}
		t.Add(cells...)
	}
	t.Write(w)
	if len(tl.FeedingCPUs) > 0 {
		fmt.Fprintf(w, "CPUs feeding port %d: %v\n", tl.Port, tl.FeedingCPUs)
	}
}
