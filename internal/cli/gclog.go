package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/report"
)

type gclogOptions struct {
	Files         []string
	Output        string
	PauseGoal     time.Duration
	YoungInterval time.Duration
	RPS           float64
	Requests      float64
	TargetRPS     float64
	FailOn        string
	NoRotated     bool

	format report.Format
	failOn diagnose.Severity
	// run analyses the logs; tests replace it to check flag handling.
	run func(ctx context.Context, o *gclogOptions, g *Globals) error
}

func newGCLogCmd(g *Globals) *cobra.Command {
	return gclogCmd(g, &gclogOptions{run: runGCLog})
}

func gclogCmd(g *Globals, o *gclogOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gclog FILE...",
		Short: "Analyse HotSpot GC logs: pauses, safepoints, throughput, allocation and promotion rates, full-GC causes",
		Long: `gclog reads JDK 1.4–8 -XX:+PrintGCDetails logs and JDK 9+ unified logs (-Xlog:gc*,
any decorations) of Serial, Parallel, CMS, G1, ZGC and Shenandoah, streaming in
constant memory. Gzip and zstd files are decompressed, UTF-16 text (PowerShell's
">") decoded. The FILEs are one JVM's log in
order; each FILE's rotated siblings (FILE.0, FILE.1, FILE.N.current, .gz) are
read too, oldest first, unless --no-rotated.

It reports pause statistics by kind, GC throughput, safepoints (time to
safepoint, stops GC does not explain), the CPU of pauses, concurrent cycles,
the young-GC interval, the allocation rate (Eden before GC n+1 minus Eden after
GC n, from the heap when Eden is not logged), the promotion rate, the live set
over time and full GCs by cause. With --rps (or --requests over the log's
window) it prints the bytes allocated per request and the young GCs per minute
at --target-rps. Text that looks like a GC record but cannot be read, and a
line longer than 256 KiB, is counted and named, never skipped in silence; a
result missing such lines is marked partial (exit 0, --fail-on warn exits 1).
Holes of NUL bytes (a crash, copytruncate rotation) are skipped and counted.`,
		Example: `  perfscope gclog /var/log/app/gc.log
  perfscope gclog gc.log --rps 800 --target-rps 2000 --young-interval 30s
  perfscope gclog gc.log.gz --pause-goal 50ms -o html > gc.html
  perfscope gclog gc.log -o json | jq '.data.gc.pauses'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Files = args
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text, json or html")
	f.DurationVar(&o.PauseGoal, "pause-goal", diagnose.DefaultPauseGoal, "pauses longer than this are findings")
	f.DurationVar(&o.YoungInterval, "young-interval", diagnose.DefaultTargetGCInterval, "young GCs more frequent than one per this interval are findings")
	f.Float64Var(&o.RPS, "rps", 0, "requests per second the JVM served during the log (enables the bytes-per-request model)")
	f.Float64Var(&o.Requests, "requests", 0, "requests the JVM served during the log (alternative to --rps: divided by the log's window)")
	f.Float64Var(&o.TargetRPS, "target-rps", 0, "request rate to predict young GCs per minute at (default: --rps)")
	f.StringVar(&o.FailOn, "fail-on", "", "exit 1 when a finding is at or above this severity: info, warn or crit")
	f.BoolVar(&o.NoRotated, "no-rotated", false, "read only the named files, not their rotated siblings")
	return cmd
}

func (o *gclogOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat(o.Output, report.PageFormats...); err != nil {
		return asUsage(err)
	}
	if o.FailOn != "" {
		if o.failOn, err = diagnose.ParseSeverity(o.FailOn); err != nil {
			return asUsage(err)
		}
	}
	if o.PauseGoal <= 0 {
		return usageError("--pause-goal must be positive, got %v", o.PauseGoal)
	}
	if o.YoungInterval <= 0 {
		return usageError("--young-interval must be positive, got %v", o.YoungInterval)
	}
	for name, v := range map[string]float64{"--rps": o.RPS, "--requests": o.Requests, "--target-rps": o.TargetRPS} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return usageError("%s must be a positive number, got %v", name, v)
		}
	}
	if o.RPS > 0 && o.Requests > 0 {
		return usageError("give either --rps or --requests, not both")
	}
	if o.TargetRPS > 0 && o.RPS == 0 && o.Requests == 0 {
		return usageError("--target-rps needs the rate during the log: add --rps or --requests")
	}
	return measure.CheckGCLogs(o.Files, o.NoRotated)
}

// analyzeGCLogs reads the logs; a test replaces it to check that a parser
// panic ends in one sentence and exit 4.
var analyzeGCLogs = gclog.AnalyzeFiles

// gclogData is `perfscope gclog`'s JSON data section.
//
// It prints its own text, and lays out its sections of the HTML page,
// through report.Render.
type gclogData struct {
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

func runGCLog(ctx context.Context, o *gclogOptions, g *Globals) (err error) {
	defer func() {
		// A parser bug must not look like bad input (exit 2) or crash with
		// a trace: one sentence, exit 4.
		if v := recover(); v != nil {
			err = &ExitError{Code: ExitFailure, Err: fmt.Errorf("perfscope failed reading the GC log (%v): please report it with the log", v)}
		}
	}()
	files, err := measure.GCLogFiles(o.Files, o.NoRotated)
	if err != nil {
		return err
	}
	res, err := measure.RunGC(ctx, measure.GCOptions{Files: files, PauseGoal: o.PauseGoal, YoungInterval: o.YoungInterval,
		RPS: o.RPS, Requests: o.Requests, TargetRPS: o.TargetRPS, Analyze: analyzeGCLogs})
	if err != nil {
		return err
	}
	s, gc := res.Summary, res.GC

	r := report.New("gclog", Version(), g.Started)
	data := gclogData{Files: s.Files, Parse: s.Parse, GC: gc, Concurrent: s.Concurrent, Series: s.Series, TimeJumps: s.Window.Jumps,
		Safepoints: gclog.PhaseStats{Count: s.Safepoints.Count, TotalNs: int64(s.Safepoints.Stopped)}}
	r.Data = data
	r.Findings = res.Findings
	if r.Findings == nil {
		r.Findings = []diagnose.Finding{}
	}
	r.Meta.DurationNs = int64(time.Since(g.Started))
	if err := report.Render(g.Out, r, o.format); err != nil {
		return err
	}
	return failOn(r.Findings, o.failOn)
}

func (d gclogData) WriteText(w io.Writer, r *report.Report) error {
	return writeGCLogText(w, r, d)
}

// PageSections are the GC log's sections of the HTML page.
func (d gclogData) PageSections() []report.PageSection {
	return report.GCPage{Files: d.Files, Parse: d.Parse, GC: d.GC, Series: d.Series}.PageSections()
}

func writeGCLogText(w io.Writer, r *report.Report, d gclogData) error {
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

	report.Heading(w, "Pauses")
	t := report.Table{Header: []string{"kind", "count", "total", "mean", "p50", "p95", "p99", "max", ">goal"}}
	for _, p := range append(gc.Pauses, gc.AllPauses) {
		t.Add(p.Kind, fmt.Sprint(p.Count), report.Nanos(float64(p.TotalNs)), report.Nanos(p.MeanNs), report.Nanos(float64(p.P50Ns)),
			report.Nanos(float64(p.P95Ns)), report.Nanos(float64(p.P99Ns)), report.Nanos(float64(p.MaxNs)), fmt.Sprint(p.OverGoal))
	}
	t.Write(w)
	throughput := "- (the log is too short to say)"
	if gc.ThroughputKnown {
		throughput = report.Percent(gc.Throughput)
	}
	fmt.Fprintf(w, "pause goal %s; GC throughput %s", report.Nanos(float64(gc.Goals.PauseGoalNs)), throughput)
	if gc.EscalatedFullGCs > 0 {
		fmt.Fprintf(w, "; %d young GCs escalated to full GCs (each one pause)", gc.EscalatedFullGCs)
	}
	fmt.Fprintln(w)

	a := kvLines{w}
	if sp := gc.Safepoints; sp != nil {
		report.Heading(w, "Safepoints")
		a.Add("stopped", fmt.Sprintf("%d times, %s in total (%s of the window), longest %s", sp.Count, report.Nanos(float64(sp.StoppedNs)), report.Percent(sp.StoppedShare), report.Nanos(float64(sp.MaxNs))))
		if sp.TTSPCount > 0 {
			op := ""
			if sp.TTSPMaxOp != "" {
				op = " in " + sp.TTSPMaxOp
			}
			a.Add("time to safepoint", fmt.Sprintf("%s in total, longest %s at %.1fs%s", report.Nanos(float64(sp.TTSPNs)), report.Nanos(float64(sp.TTSPMaxNs)), sp.TTSPMaxAt, op))
		}
		a.Add("not GC", fmt.Sprintf("%s stopped by other operations, longest %s", report.Nanos(float64(sp.NonGCNs)), report.Nanos(float64(sp.NonGCMaxNs))))
		for i, op := range sp.Operations {
			if i == 5 {
				break
			}
			a.Add("  "+op.Name, fmt.Sprintf("%d×, %s, longest %s", op.Count, report.Nanos(float64(op.StoppedNs)), report.Nanos(float64(op.MaxNs))))
		}
	}
	if c := gc.PauseCPU; c != nil {
		report.Heading(w, "Pause CPU")
		a.Add("pauses with times", fmt.Sprintf("%d: user %s, sys %s, real %s", c.Pauses, report.Nanos(float64(c.UserNs)), report.Nanos(float64(c.SysNs)), report.Nanos(float64(c.RealNs))))
		if c.SysHeavy > 0 {
			a.Add("sys > user", fmt.Sprintf("%d pauses, %s real", c.SysHeavy, report.Nanos(float64(c.SysHeavyRealNs))))
		}
		if c.Starved > 0 {
			a.Add("real > user+sys", fmt.Sprintf("%d pauses, %s real", c.Starved, report.Nanos(float64(c.StarvedRealNs))))
		}
	}
	if c := gc.Cycles; c != nil || len(gc.Phases) > 0 || gc.RefProc != nil {
		report.Heading(w, "Concurrent cycles and phases")
		if c != nil {
			a.Add("concurrent cycles", fmt.Sprintf("%d, mean %s, longest %s (%d cut short)", c.Count, report.Nanos(float64(c.MeanNs)), report.Nanos(float64(c.MaxNs)), c.Unfinished))
		}
		if d.Concurrent.Count > 0 {
			a.Add("concurrent phases", fmt.Sprintf("%d, %s", d.Concurrent.Count, report.Nanos(float64(d.Concurrent.TotalNs))))
		}
		for i, ph := range gc.Phases {
			if i == 6 {
				break
			}
			a.Add("  "+ph.Name, fmt.Sprintf("%d×, %s, longest %s", ph.Count, report.Nanos(float64(ph.TotalNs)), report.Nanos(float64(ph.MaxNs))))
		}
		if rp := gc.RefProc; rp != nil {
			a.Add("reference processing", fmt.Sprintf("%s in %d pauses (%s of their time), longest %s", report.Nanos(float64(rp.TotalNs)), rp.Pauses,
				report.Percent(float64(rp.TotalNs)/math.Max(float64(rp.PauseTotalNs), 1)), report.Nanos(float64(rp.MaxNs))))
		}
	}

	report.Heading(w, "Allocation and heap")
	if gc.AllocRate > 0 {
		a.Add("allocation rate", fmt.Sprintf("%s/s (from %s occupancy)", report.Bytes(gc.AllocRate), gc.AllocSource))
	} else {
		a.Add("allocation rate", "- (the log has no occupancy before/after)")
	}
	if gc.PromotionKnown {
		a.Add("promotion rate", fmt.Sprintf("%s/s (%s promoted)", report.Bytes(gc.PromotionRate), report.Bytes(gc.PromotedBytes)))
	}
	if gc.YoungGCs > 0 {
		a.Add("young GCs", fmt.Sprintf("%d, one every %.2fs", gc.YoungGCs, gc.YoungIntervalSeconds))
	}
	if gc.EdenBytes > 0 {
		a.Add("Eden", report.Bytes(gc.EdenBytes))
	}
	if gc.HeapBytes > 0 {
		a.Add("heap", report.Bytes(gc.HeapBytes))
	}
	if ls := gc.LiveSet; ls.Verdict != "unknown" && len(ls.Samples) > 0 {
		first, last := ls.Samples[0], ls.Samples[len(ls.Samples)-1]
		a.Add("live set", fmt.Sprintf("%s → %s after %s (%s, %s/hour)", report.Bytes(float64(first.Bytes)), report.Bytes(float64(last.Bytes)), ls.Basis, ls.Verdict, report.Bytes(ls.SlopeBytesPerHour)))
	}
	if gc.MetaspaceBytes > 0 {
		a.Add("Metaspace", fmt.Sprintf("%s → %s (max %s)", report.Bytes(gc.MetaspaceFirstBytes), report.Bytes(gc.MetaspaceLastBytes), report.Bytes(gc.MetaspaceBytes)))
	}
	if tn := gc.Tenuring; tn != nil {
		a.Add("tenuring", fmt.Sprintf("%d age tables, %d overflowed the survivor target, threshold %d..%d", tn.Tables, tn.Overflows, gc.TenuringThresholdMin, gc.TenuringThresholdMax))
	}
	if m := gc.Model; m != nil {
		a.Add("per request", fmt.Sprintf("%s at %.0f requests/s", report.Bytes(m.BytesPerRequest), m.RPS))
		a.Add(fmt.Sprintf("at %.0f requests/s", m.TargetRPS), fmt.Sprintf("%.1f young GCs/min predicted with a %s Eden (%.1f observed)", m.PredictedYoungGCsPerMinute, report.Bytes(m.EdenBytes), m.ObservedYoungGCsPerMinute))
	}

	if len(gc.FullGCCauses) > 0 {
		report.Heading(w, "Full GCs by cause")
		c := report.Table{Header: []string{"cause", "count", "total pause"}}
		for _, fc := range gc.FullGCCauses {
			c.Add(fc.Cause, fmt.Sprint(fc.Count), report.Nanos(float64(fc.TotalNs)))
		}
		c.Write(w)
	}
	report.Heading(w, "Findings")
	report.WriteFindings(w, r.Findings)
	return nil
}

// kvLines prints "name  value" lines with the names aligned.
type kvLines struct{ w io.Writer }

func (k kvLines) Add(name, value string) { fmt.Fprintf(k.w, "%-20s %s\n", name, value) }
