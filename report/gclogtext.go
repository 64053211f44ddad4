package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/evidence"
)

// GCLogData is `perfscope gclog`'s JSON data section.
//
// It prints its own text, and lays out its sections of the HTML page,
// through Render.
type GCLogData struct {
	Files []string    `json:"files"`
	Parse gclog.Stats `json:"parse"`
	GC    evidence.GC `json:"gc"`
	// Safepoints {count, total_ns} is kept from the first schema; the
	// detail is in gc.safepoints.
	Safepoints gclog.PhaseStats `json:"safepoints"`
	Concurrent gclog.PhaseStats `json:"concurrent"`
	TimeJumps  []gclog.TimeJump `json:"time_jumps,omitempty"`
	Series     []gclog.Point    `json:"series"`
}

// WriteText implements Texter.
func (d GCLogData) WriteText(w io.Writer, r *Report) error {
	return writeGCLogText(w, r, d)
}

// PageSections are the GC log's sections of the HTML page.
func (d GCLogData) PageSections() []PageSection {
	return GCPage{Files: d.Files, Parse: d.Parse, GC: d.GC, Series: d.Series}.PageSections()
}

func writeGCLogText(w io.Writer, r *Report, d GCLogData) error {
	writeGCLogHeader(w, d)
	writeGCPauses(w, d.GC)
	writeSafepoints(w, d.GC.Safepoints)
	writePauseCPU(w, d.GC.PauseCPU)
	writeConcurrentCycles(w, d.GC, d.Concurrent)
	writeAllocationAndHeap(w, d.GC)
	writeFullGCCauses(w, d.GC.FullGCCauses)
	Heading(w, "Findings")
	WriteFindings(w, r.Findings)
	return nil
}

// writeGCLogHeader prints what was read and every reason to doubt it,
// before any number.
func writeGCLogHeader(w io.Writer, d GCLogData) {
	gc := d.GC
	collector := gc.Collector
	if collector == "" {
		collector = "unknown collector"
	}
	fmt.Fprintf(w, "GC log: %s, %d files, %d lines, %d events over %.1fs", collector, len(d.Files), d.Parse.Lines, d.Parse.Events, gc.WindowSeconds)
	if gc.Segments > 1 {
		fmt.Fprintf(w, " (%d JVM runs)", gc.Segments)
	}
	fmt.Fprintln(w)
	for _, warning := range d.Parse.Warnings() {
		fmt.Fprintf(w, "WARNING: %s\n", warning)
	}
	if n := d.Parse.UnrecognisedRecords; n > 0 {
		fmt.Fprintf(w, "WARNING: %d GC records could not be read (%s): the numbers below miss their pauses\n", n, strings.Join(gc.UnreadableAt, ", "))
	}
	for _, j := range d.TimeJumps {
		fmt.Fprintf(w, "WARNING: uptime goes back from %.1fs to %.1fs at %s:%d with no JVM start-up lines: files out of order or lines missing\n", j.FromSecs, j.ToSecs, j.File, j.Line)
	}
	if d.Parse.Unknown > 0 {
		fmt.Fprintf(w, "%d lines not recognised, e.g. %q\n", d.Parse.Unknown, d.Parse.UnknownSamples[0])
	}
	for _, note := range d.Parse.Notes() {
		fmt.Fprintf(w, "note: %s\n", note)
	}
}

func writeGCPauses(w io.Writer, gc evidence.GC) {
	Heading(w, "Pauses")
	t := Table{Header: []string{"kind", "count", "total", "mean", "p50", "p95", "p99", "max", ">goal"}}
	for _, p := range append(gc.Pauses, gc.AllPauses) {
		t.Add(p.Kind, fmt.Sprint(p.Count), Nanos(float64(p.TotalNs)), Nanos(p.MeanNs), Nanos(float64(p.P50Ns)),
			Nanos(float64(p.P95Ns)), Nanos(float64(p.P99Ns)), Nanos(float64(p.MaxNs)), fmt.Sprint(p.OverGoal))
	}
	t.Write(w)
	throughput := "- (the log is too short to say)"
	if gc.ThroughputKnown {
		throughput = Percent(gc.Throughput)
	}
	fmt.Fprintf(w, "pause goal %s; GC throughput %s", Nanos(float64(gc.Goals.PauseGoalNs)), throughput)
	if gc.EscalatedFullGCs > 0 {
		fmt.Fprintf(w, "; %d young GCs escalated to full GCs (each one pause)", gc.EscalatedFullGCs)
	}
	fmt.Fprintln(w)
}

func writeSafepoints(w io.Writer, sp *evidence.SafepointStats) {
	if sp == nil {
		return
	}
	a := kvLines{w}
	Heading(w, "Safepoints")
	a.Add("stopped", fmt.Sprintf("%d times, %s in total (%s of the window), longest %s", sp.Count, Nanos(float64(sp.StoppedNs)), Percent(sp.StoppedShare), Nanos(float64(sp.MaxNs))))
	if sp.TTSPCount > 0 {
		op := ""
		if sp.TTSPMaxOp != "" {
			op = " in " + sp.TTSPMaxOp
		}
		a.Add("time to safepoint", fmt.Sprintf("%s in total, longest %s at %.1fs%s", Nanos(float64(sp.TTSPNs)), Nanos(float64(sp.TTSPMaxNs)), sp.TTSPMaxAt, op))
	}
	a.Add("not GC", fmt.Sprintf("%s stopped by other operations, longest %s", Nanos(float64(sp.NonGCNs)), Nanos(float64(sp.NonGCMaxNs))))
	for i, op := range sp.Operations {
		if i == 5 {
			break
		}
		a.Add("  "+op.Name, fmt.Sprintf("%d×, %s, longest %s", op.Count, Nanos(float64(op.StoppedNs)), Nanos(float64(op.MaxNs))))
	}
}

func writePauseCPU(w io.Writer, c *evidence.PauseCPUStats) {
	if c == nil {
		return
	}
	a := kvLines{w}
	Heading(w, "Pause CPU")
	a.Add("pauses with times", fmt.Sprintf("%d: user %s, sys %s, real %s", c.Pauses, Nanos(float64(c.UserNs)), Nanos(float64(c.SysNs)), Nanos(float64(c.RealNs))))
	if c.SysHeavy > 0 {
		a.Add("sys > user", fmt.Sprintf("%d pauses, %s real", c.SysHeavy, Nanos(float64(c.SysHeavyRealNs))))
	}
	if c.Starved > 0 {
		a.Add("real > user+sys", fmt.Sprintf("%d pauses, %s real", c.Starved, Nanos(float64(c.StarvedRealNs))))
	}
}

func writeConcurrentCycles(w io.Writer, gc evidence.GC, concurrent gclog.PhaseStats) {
	c := gc.Cycles
	if c == nil && len(gc.Phases) == 0 && gc.RefProc == nil {
		return
	}
	a := kvLines{w}
	Heading(w, "Concurrent cycles and phases")
	if c != nil {
		a.Add("concurrent cycles", fmt.Sprintf("%d, mean %s, longest %s (%d cut short)", c.Count, Nanos(float64(c.MeanNs)), Nanos(float64(c.MaxNs)), c.Unfinished))
	}
	if concurrent.Count > 0 {
		a.Add("concurrent phases", fmt.Sprintf("%d, %s", concurrent.Count, Nanos(float64(concurrent.TotalNs))))
	}
	for i, ph := range gc.Phases {
		if i == 6 {
			break
		}
		a.Add("  "+ph.Name, fmt.Sprintf("%d×, %s, longest %s", ph.Count, Nanos(float64(ph.TotalNs)), Nanos(float64(ph.MaxNs))))
	}
	if rp := gc.RefProc; rp != nil {
		a.Add("reference processing", fmt.Sprintf("%s in %d pauses (%s of their time), longest %s", Nanos(float64(rp.TotalNs)), rp.Pauses,
			Percent(float64(rp.TotalNs)/math.Max(float64(rp.PauseTotalNs), 1)), Nanos(float64(rp.MaxNs))))
	}
}

func writeAllocationAndHeap(w io.Writer, gc evidence.GC) {
	a := kvLines{w}
	Heading(w, "Allocation and heap")
	if gc.AllocRate > 0 {
		a.Add("allocation rate", fmt.Sprintf("%s/s (from %s occupancy)", Bytes(gc.AllocRate), gc.AllocSource))
	} else {
		a.Add("allocation rate", "- (the log has no occupancy before/after)")
	}
	if gc.PromotionKnown {
		a.Add("promotion rate", fmt.Sprintf("%s/s (%s promoted)", Bytes(gc.PromotionRate), Bytes(gc.PromotedBytes)))
	}
	if gc.YoungGCs > 0 {
		a.Add("young GCs", fmt.Sprintf("%d, one every %.2fs", gc.YoungGCs, gc.YoungIntervalSeconds))
	}
	if gc.EdenBytes > 0 {
		a.Add("Eden", Bytes(gc.EdenBytes))
	}
	if gc.HeapBytes > 0 {
		a.Add("heap", Bytes(gc.HeapBytes))
	}
	if ls := gc.LiveSet; ls.Verdict != "unknown" && len(ls.Samples) > 0 {
		first, last := ls.Samples[0], ls.Samples[len(ls.Samples)-1]
		a.Add("live set", fmt.Sprintf("%s → %s after %s (%s, %s/hour)", Bytes(float64(first.Bytes)), Bytes(float64(last.Bytes)), ls.Basis, ls.Verdict, Bytes(ls.SlopeBytesPerHour)))
	}
	if gc.MetaspaceBytes > 0 {
		a.Add("Metaspace", fmt.Sprintf("%s → %s (max %s)", Bytes(gc.MetaspaceFirstBytes), Bytes(gc.MetaspaceLastBytes), Bytes(gc.MetaspaceBytes)))
	}
	if tn := gc.Tenuring; tn != nil {
		a.Add("tenuring", fmt.Sprintf("%d age tables, %d overflowed the survivor target, threshold %d..%d", tn.Tables, tn.Overflows, gc.TenuringThresholdMin, gc.TenuringThresholdMax))
	}
	if m := gc.Model; m != nil {
		a.Add("per request", fmt.Sprintf("%s at %.0f requests/s", Bytes(m.BytesPerRequest), m.RPS))
		a.Add(fmt.Sprintf("at %.0f requests/s", m.TargetRPS), fmt.Sprintf("%.1f young GCs/min predicted with a %s Eden (%.1f observed)", m.PredictedYoungGCsPerMinute, Bytes(m.EdenBytes), m.ObservedYoungGCsPerMinute))
	}
}

func writeFullGCCauses(w io.Writer, causes []evidence.CauseStats) {
	if len(causes) == 0 {
		return
	}
	Heading(w, "Full GCs by cause")
	c := Table{Header: []string{"cause", "count", "total pause"}}
	for _, fc := range causes {
		c.Add(fc.Cause, fmt.Sprint(fc.Count), Nanos(float64(fc.TotalNs)))
	}
	c.Write(w)
}

// kvLines prints "name  value" lines with the names aligned.
type kvLines struct{ w io.Writer }

func (k kvLines) Add(name, value string) { fmt.Fprintf(k.w, "%-20s %s\n", name, value) }
