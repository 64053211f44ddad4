package measure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

// GCOptions configure a GC log analysis.
type GCOptions struct {
	// Files are one JVM's GC log files, oldest first (rotated siblings
	// already expanded: GCLogFiles).
	Files     []string
	PauseGoal time.Duration
	// YoungInterval is the young-GC interval goal.
	YoungInterval time.Duration
	// RPS or Requests (over the log's window) enable the bytes-per-request
	// model; TargetRPS is the rate it predicts at.
	RPS, Requests, TargetRPS float64
	// Analyze reads the logs (nil: gclog.AnalyzeFiles); tests replace it.
	Analyze func(ctx context.Context, files []string, pauseGoal time.Duration) (gclog.Summary, error)
}

// GCResult is one GC log analysis and its findings.
type GCResult struct {
	Summary gclog.Summary
	// GC is the evidence the GC rules judged (GCEvidence of Summary, with
	// the goals and the request model filled in).
	GC       evidence.GC
	Findings []diagnose.Finding
}

// CheckGCLogs checks GC log arguments before anything is read: each is
// looked at with stat, not opened (opening a FIFO with no writer would
// block). A missing one is refused only with noRotated: otherwise its
// rotated siblings may be there. Every refusal is bad input.
func CheckGCLogs(args []string, noRotated bool) error {
	for _, f := range args {
		st, err := os.Stat(f)
		if err != nil && noRotated {
			return BadInput("cannot read GC log %s: %v", f, errors.Unwrap(err))
		}
		if err == nil && st.IsDir() {
			return BadInput("%s is a directory: name the GC log file in it", f)
		}
		if err == nil && !st.Mode().IsRegular() {
			return BadInput("%s is not a regular file (a FIFO, device or socket): copy the GC log to a file and name that", f)
		}
	}
	return nil
}

// GCLogFiles checks GC log arguments (CheckGCLogs) and expands each to its
// rotation set (unless noRotated), keeping argument order and naming no
// file twice.
func GCLogFiles(args []string, noRotated bool) ([]string, error) {
	if err := CheckGCLogs(args, noRotated); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range args {
		set := []string{f}
		if !noRotated {
			var err error
			if set, err = gclog.RotatedSet(f); err != nil {
				return nil, MarkBadInput(fmt.Errorf("%w (check the path)", err))
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

// RunGC analyses GC logs: a thin wrapper over gclog.AnalyzeFiles adding
// the allocation → young-GC model and the GC rules. A log perfscope cannot
// read (missing, unreadable, not a file, corrupt, no GC record in it) is
// bad input; a parser failing is not.
func RunGC(ctx context.Context, o GCOptions) (GCResult, error) {
	analyze := o.Analyze
	if analyze == nil {
		analyze = gclog.AnalyzeFiles
	}
	s, err := analyze(ctx, o.Files, o.PauseGoal)
	switch {
	case errors.Is(err, context.Canceled):
		return GCResult{Summary: s}, err
	case errors.Is(err, gclog.ErrNotFound), errors.Is(err, os.ErrPermission), errors.Is(err, gclog.ErrCorrupt),
		errors.Is(err, gclog.ErrNotRegular):
		return GCResult{Summary: s}, MarkBadInput(err)
	case err != nil:
		return GCResult{Summary: s}, err
	}
	// Over-long lines are unrecognised records, but a file holding nothing
	// else is not a GC log.
	if s.Parse.Events == 0 && s.Parse.Safepoints == 0 && s.Parse.UnrecognisedRecords == s.Parse.OverlongLines {
		seen := fmt.Sprintf("%d lines, %d unrecognised", s.Parse.Lines, s.Parse.Unknown)
		if n := s.Parse.OverlongLines; n > 0 {
			seen += fmt.Sprintf(", %d longer than %d KiB", n, gclog.MaxLineBytes>>10)
		}
		if n := s.Parse.NULBytes; n > 0 {
			seen += fmt.Sprintf(", %d NUL bytes", n)
		}
		return GCResult{Summary: s}, BadInput("no GC events in %s (%s): is it a HotSpot GC log written with -XX:+PrintGCDetails or -Xlog:gc?",
			strings.Join(o.Files, ", "), seen)
	}
	gc := GCEvidence(s)
	gc.Goals.YoungIntervalNs = int64(o.YoungInterval)
	gc.Model = diagnose.GCModelFor(&gc, o.RPS, o.Requests, o.TargetRPS)
	return GCResult{Summary: s, GC: gc, Findings: diagnose.Run(diagnose.GCRules, gc)}, nil
}

// Check refuses goals and rates `perfscope gclog` cannot judge with
// before anything is read; the sentences name its flags. Every refusal
// is bad input.
func (o GCOptions) Check() error {
	if o.PauseGoal <= 0 {
		return BadInput("--pause-goal must be positive, got %v", o.PauseGoal)
	}
	if o.YoungInterval <= 0 {
		return BadInput("--young-interval must be positive, got %v", o.YoungInterval)
	}
	for name, v := range map[string]float64{"--rps": o.RPS, "--requests": o.Requests, "--target-rps": o.TargetRPS} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return BadInput("%s must be a positive number, got %v", name, v)
		}
	}
	if o.RPS > 0 && o.Requests > 0 {
		return BadInput("give either --rps or --requests, not both")
	}
	if o.TargetRPS > 0 && o.RPS == 0 && o.Requests == 0 {
		return BadInput("--target-rps needs the rate during the log: add --rps or --requests")
	}
	return nil
}

// Data is the analysis as `perfscope gclog` reports it.
func (r GCResult) Data() report.GCLogData {
	s := r.Summary
	return report.GCLogData{Files: s.Files, Parse: s.Parse, GC: r.GC, Concurrent: s.Concurrent, Series: s.Series, TimeJumps: s.Window.Jumps,
		Safepoints: gclog.PhaseStats{Count: s.Safepoints.Count, TotalNs: int64(s.Safepoints.Stopped)}}
}
