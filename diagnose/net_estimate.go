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
// how to confirm it, rather than as certain.

// onEstimate notes in f that what, a number it rests on, is an estimate
// (nothing when e is nil: exact).
func onEstimate(f *Finding, section, what string, e *evidence.Estimate) {
	if f == nil || e == nil {
		return
	}
	if !slices.Contains(f.Estimates, section) {
		f.Estimates = append(f.Estimates, section)
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("depends on an estimate: %s %s", what, e))
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
	// An unknown bound (fewer than two windows) cannot confirm a finding.
	low, high := evidence.Bounds(value, rel)
	if rel != nil && low >= threshold {
		return
	}
	f.Severity = Info
	if rel == nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s is %s over the %s threshold, but its error is unknown (fewer than two sampling windows): run longer or with --exact to confirm", what, pct(value), pct(threshold)))
		return
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("%s is %s, its 95 %% range %s–%s reaches below the %s threshold: run longer or with --exact to confirm", what, pct(value), pct(low), pct(high), pct(threshold)))
}
