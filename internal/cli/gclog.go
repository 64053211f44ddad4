package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/report"
)

type gclogOptions struct {
	Files         []string
	PauseGoal     time.Duration
	YoungInterval time.Duration
	RPS           float64
	Requests      float64
	TargetRPS     float64
	NoRotated     bool

	report reportFlags
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
	o.report.register(f, "gclog", "text", false, true)
	f.DurationVar(&o.PauseGoal, "pause-goal", diagnose.DefaultPauseGoal, "pauses longer than this are findings")
	f.DurationVar(&o.YoungInterval, "young-interval", diagnose.DefaultTargetGCInterval, "young GCs more frequent than one per this interval are findings")
	f.Float64Var(&o.RPS, "rps", 0, "requests per second the JVM served during the log (enables the bytes-per-request model)")
	f.Float64Var(&o.Requests, "requests", 0, "requests the JVM served during the log (alternative to --rps: divided by the log's window)")
	f.Float64Var(&o.TargetRPS, "target-rps", 0, "request rate to predict young GCs per minute at (default: --rps)")
	f.BoolVar(&o.NoRotated, "no-rotated", false, "read only the named files, not their rotated siblings")
	return cmd
}

func (o *gclogOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	if err := o.gcOptions(nil).Check(); err != nil {
		return err
	}
	return measure.CheckGCLogs(o.Files, o.NoRotated)
}

func (o *gclogOptions) gcOptions(files []string) measure.GCOptions {
	return measure.GCOptions{Files: files, PauseGoal: o.PauseGoal, YoungInterval: o.YoungInterval,
		RPS: o.RPS, Requests: o.Requests, TargetRPS: o.TargetRPS, Analyze: analyzeGCLogs}
}

// analyzeGCLogs reads the logs; a test replaces it to check that a parser
// panic ends in one sentence and exit 4.
var analyzeGCLogs = gclog.AnalyzeFiles

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
	res, err := measure.RunGC(ctx, o.gcOptions(files))
	if err != nil {
		return err
	}
	r := report.New("gclog", Version(), g.Started)
	r.Data = res.Data()
	r.Findings = res.Findings
	if r.Findings == nil {
		r.Findings = []diagnose.Finding{}
	}
	r.Meta.DurationNs = int64(time.Since(g.Started))
	if err := report.Render(g.Out, r, o.report.format); err != nil {
		return err
	}
	return failOn(r.Findings, o.report.failOn)
}
