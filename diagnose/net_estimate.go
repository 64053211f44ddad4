package diagnose

import (
	"fmt"
	"slices"

	"github.com/perfscope/perfscope/evidence"
)

// Under perfscope's overhead budget the per-packet hooks, and batch ones
// that cost too much, count in sampling windows only, and the numbers they
// give are estimates with a 95 % bound (evidence.Estimate). A finding
// that rests on one says so — an evidence line and the section named in
// Finding.Estimates — and when the estimate's bound reaches below the
// threshold the finding was weighed against, it is reported at info with
// how to confirm it, rather than as certain. So is one resting on an
// estimate with no bound (fewer than two sampling windows) or a bound
// wider than the number itself: nothing a user can act on.

// notesEstimate notes in f that what, which it cites, is an estimate
// (nothing when e is nil: exact): something the windows saw happen (CPUs
// that shared a queue, the reasons of drops whose total is exact), which
// does not decide the finding whatever its count.
func notesEstimate(f *Finding, section, what string, e *evidence.Estimate) {
	if f == nil || e == nil {
		return
	}
	if !slices.Contains(f.Estimates, section) {
		f.Estimates = append(f.Estimates, section)
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("depends on an estimate: %s %s", what, e))
}

// onEstimate notes in f that what, a number it rests on, is an estimate
// (nothing when e is nil: exact), and lowers f to info when that number
// has no bound or one wider than itself.
func onEstimate(f *Finding, section, what string, e *evidence.Estimate) {
	if f == nil || e == nil {
		return
	}
	notesEstimate(f, section, what, e)
	switch {
	case e.RelError == nil:
		f.Severity = Info
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s has no bound (fewer than two sampling windows saw it): %s", what, confirmHow(e)))
	case *e.RelError >= 1:
		f.Severity = Info
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s is bound only to ±%.0f %%, wider than the number itself: %s", what, 100**e.RelError, confirmHow(e)))
	}
}

// confirmHow says how to confirm a finding an estimate left unconfirmed:
// the run length that would bound the estimate, when it is known.
func confirmHow(e *evidence.Estimate) string {
	if d := e.DurationFor10PctNs; d > 0 {
		return fmt.Sprintf("run with --duration %s (or --exact) to confirm", evidence.DurationText(d))
	}
	return "run longer or with --exact to confirm"
}

// weighEstimate notes the estimate behind value, which f compared with
// threshold (value ≥ threshold), and lowers f to info when value's 95 %
// interval reaches below the threshold. rel is the number's own bound
// when it has one, else the section's.
func weighEstimate(f *Finding, section, what string, value, threshold float64, e *evidence.Estimate, rel *float64) {
	if f == nil || e == nil {
		return
	}
	onEstimate(f, section, what, e)
	if rel == nil {
		rel = e.RelError
	}
	// An unknown bound (fewer than two windows) cannot confirm a finding:
	// onEstimate said so.
	low, high := evidence.Bounds(value, rel)
	if rel == nil || low >= threshold {
		return
	}
	f.Severity = Info
	f.Evidence = append(f.Evidence, fmt.Sprintf("%s is %s, its 95 %% range %s–%s reaches below the %s threshold: %s", what, pct(value), pct(low), pct(high), pct(threshold), confirmHow(e)))
}
