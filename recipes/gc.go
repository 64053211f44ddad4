package recipes

import (
	"context"
	"time"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
)

// GCOptions configure a GC log analysis.
type GCOptions struct {
	// Files are one JVM's GC log files, oldest first (rotated siblings
	// already expanded, gclog.RotatedSet).
	Files     []string
	PauseGoal time.Duration
	// YoungInterval is the young-GC interval goal.
	YoungInterval time.Duration
	// RPS or Requests (over the log's window) enable the bytes-per-request
	// model; TargetRPS is the rate it predicts at.
	RPS, Requests, TargetRPS float64
}

// GCResult is one GC log analysis and its findings.
type GCResult struct {
	Summary gclog.Summary
	// GC is the evidence the GC rules judged (GCEvidence of Summary, with
	// the goals and the request model filled in).
	GC       evidence.GC
	Findings []diagnose.Finding
}

// RunGC analyses GC logs: a thin wrapper over gclog.AnalyzeFiles adding
// the allocation → young-GC model and the GC rules.
func RunGC(ctx context.Context, o GCOptions) (GCResult, error) {
	s, err := gclog.AnalyzeFiles(ctx, o.Files, o.PauseGoal)
	if err != nil {
		return GCResult{Summary: s}, err
	}
	gc := GCEvidence(s)
	gc.Goals.YoungIntervalNs = int64(o.YoungInterval)
	gc.Model = diagnose.GCModelFor(&gc, o.RPS, o.Requests, o.TargetRPS)
	return GCResult{Summary: s, GC: gc, Findings: diagnose.Run(diagnose.GCRules, gc)}, nil
}
