package cli

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/report"
	"github.com/perfscope/perfscope/report/gchtml"
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
		Short: "Analyse HotSpot GC logs: pauses, throughput, allocation and promotion rates, full-GC causes",
		Long: `gclog reads JDK 6–8 -XX:+PrintGCDetails logs and JDK 9+ unified logs (-Xlog:gc*,
any decorations) of Serial, Parallel, CMS, G1, ZGC and Shenandoah, streaming in
constant memory. Gzipped files are read as is. The FILEs are one JVM's log in
order; each FILE's rotated siblings (FILE.0, FILE.1, FILE.N.current, .gz) are
read too, oldest first, unless --no-rotated.

It reports pause statistics by kind, GC throughput, the young-GC interval, the
allocation rate (Eden before GC n+1 minus Eden after GC n, from the heap when
Eden is not logged), the promotion rate and full GCs by cause, then applies
the allocation → young-GC model: with --rps (or --requests over the log's window) it prints
the bytes allocated per request and the young GCs per minute at --target-rps.`,
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
	if o.format, err = report.ParseFormat(o.Output, report.Text, report.JSON, report.HTML); err != nil {
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
	for _, f := range o.Files {
		st, err := os.Stat(f)
		if err != nil && o.NoRotated {
			return usageError("cannot read GC log %s: %v", f, errors.Unwrap(err))
		}
		if err == nil && st.IsDir() {
			return usageError("%s is a directory: name the GC log file in it", f)
		}
	}
	return nil
}

// files expands each argument to its rotation set, keeping argument order
// and reading no file twice.
func (o *gclogOptions) files() ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, f := range o.Files {
		set := []string{f}
		if !o.NoRotated {
			var err error
			if set, err = gclog.RotatedSet(f); err != nil {
				return nil, err
			}
		}
		for _, s := range set {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func runGCLog(ctx context.Context, o *gclogOptions, g *Globals) error {
	files, err := o.files()
	if err != nil {
		return asUsage(fmt.Errorf("%w (check the path)", err))
	}
	s, err := gclog.AnalyzeFiles(ctx, files, o.PauseGoal)
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, gclog.ErrNotFound), errors.Is(err, os.ErrPermission), errors.Is(err, gzip.ErrHeader),
		errors.Is(err, gzip.ErrChecksum), errors.Is(err, io.ErrUnexpectedEOF):
		return asUsage(err)
	case err != nil:
		return err
	}
	if s.Parse.Events == 0 {
		return usageError("no GC events in %s (%d lines, %d unrecognised): is it a HotSpot GC log written with -XX:+PrintGCDetails or -Xlog:gc?",
			strings.Join(files, ", "), s.Parse.Lines, s.Parse.Unknown)
	}
	s.GC.Goals.YoungIntervalNs = int64(o.YoungInterval)
	s.GC.Model = diagnose.GCModelFor(&s.GC, o.RPS, o.Requests, o.TargetRPS)

	r := report.New("gclog", Version(), g.Started)
	r.Data = gclogData{s}
	r.Findings = diagnose.Run(diagnose.GCRules, s.GC)
	if r.Findings == nil {
		r.Findings = []diagnose.Finding{}
	}
	r.Meta.DurationNs = int64(time.Since(g.Started))
	if err := report.Render(g.Out, r, o.format); err != nil {
		return err
	}
	return failOn(r.Findings, o.failOn)
}

// gclogData is the gclog report's data (its JSON is the summary's own):
// it prints its own text and HTML page through report.Render.
type gclogData struct{ gclog.Summary }

func (d gclogData) WriteText(w io.Writer, r *report.Report) error {
	return writeGCLogText(w, r, d.Summary)
}
func (d gclogData) WriteHTML(w io.Writer, r *report.Report) error {
	return gchtml.Write(w, r, d.Summary)
}

func writeGCLogText(w io.Writer, r *report.Report, s gclog.Summary) error {
	gc := s.GC
	collector := gc.Collector
	if collector == "" {
		collector = "unknown collector"
	}
	fmt.Fprintf(w, "GC log: %s, %d files, %d lines, %d events over %.1fs\n", collector, len(s.Files), s.Parse.Lines, s.Parse.Events, gc.WindowSeconds)
	if s.Parse.Unknown > 0 {
		fmt.Fprintf(w, "%d lines not recognised, e.g. %q\n", s.Parse.Unknown, s.Parse.UnknownSamples[0])
	}

	report.Heading(w, "Pauses")
	t := report.Table{Header: []string{"kind", "count", "total", "mean", "p50", "p95", "p99", "max", ">goal"}}
	for _, p := range append(gc.Pauses, gc.AllPauses) {
		t.Add(p.Kind, fmt.Sprint(p.Count), report.Nanos(float64(p.TotalNs)), report.Nanos(p.MeanNs), report.Nanos(float64(p.P50Ns)),
			report.Nanos(float64(p.P95Ns)), report.Nanos(float64(p.P99Ns)), report.Nanos(float64(p.MaxNs)), fmt.Sprint(p.OverGoal))
	}
	t.Write(w)
	fmt.Fprintf(w, "pause goal %s; GC throughput %s", report.Nanos(float64(gc.Goals.PauseGoalNs)), report.Percent(gc.Throughput))
	if s.Concurrent.Count > 0 {
		fmt.Fprintf(w, "; %d concurrent phases, %s", s.Concurrent.Count, report.Nanos(float64(s.Concurrent.TotalNs)))
	}
	if s.Safepoints.Count > 0 {
		fmt.Fprintf(w, "; %d safepoints stopped threads for %s", s.Safepoints.Count, report.Nanos(float64(s.Safepoints.TotalNs)))
	}
	fmt.Fprintln(w)

	report.Heading(w, "Allocation")
	a := kvLines{w}
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
