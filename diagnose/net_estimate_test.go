package diagnose

import (
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

// A finding over an estimate says so; one whose 95 % range reaches below
// its threshold drops to info with how to confirm it; an exact one is
// left alone.
func TestFindingsWeighEstimates(t *testing.T) {
	rel := 0.2
	e := &evidence.Estimate{Windows: 10, Coverage: 0.05, RelError: &rel}

	exact := &Finding{Severity: Warn}
	weighEstimate(exact, "softirq", "CPU 1's NET_RX share", 0.95, 0.9, nil, nil)
	if exact.Severity != Warn || len(exact.Estimates) != 0 || len(exact.Evidence) != 0 {
		t.Errorf("exact: %+v", exact)
	}

	clear := &Finding{Severity: Warn}
	weighEstimate(clear, "softirq", "CPU 1's NET_RX share", 0.95, 0.5, e, nil)
	if clear.Severity != Warn || len(clear.Estimates) != 1 || !strings.Contains(clear.Evidence[0], "estimated from 10 windows") {
		t.Errorf("well above the threshold: %+v", clear)
	}

	near := &Finding{Severity: Warn}
	weighEstimate(near, "softirq", "CPU 1's NET_RX share", 0.95, 0.9, e, nil)
	if near.Severity != Info || !strings.Contains(strings.Join(near.Evidence, "\n"), "--exact") {
		t.Errorf("within its bound of the threshold: %+v", near)
	}

	unknown := &Finding{Severity: Crit}
	e2 := *e
	e2.RelError = nil
	weighEstimate(unknown, "sockets", "skew", 3, 1.5, &e2, nil)
	if unknown.Severity != Info {
		t.Errorf("an unknown bound cannot confirm a finding: %+v", unknown)
	}
}
