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

// A finding that merely rests on an estimate (no threshold weighed) keeps
// its severity while the estimate is bounded, and drops to info, saying
// how long a run would bound it, when it has no bound or one wider than
// the number itself.
func TestFindingsOnUnboundedEstimates(t *testing.T) {
	rel, wide := 0.2, 2.1
	bounded := &evidence.Estimate{Windows: 5, Coverage: 0.05, RelError: &rel}
	f := &Finding{Severity: Warn}
	onEstimate(f, "queues", "the kernel's per-queue counts", bounded)
	if f.Severity != Warn || len(f.Estimates) != 1 {
		t.Errorf("bounded: %+v", f)
	}
	for _, c := range []struct {
		name string
		e    evidence.Estimate
		want string
	}{
		{"one window", evidence.Estimate{Windows: 1, Coverage: 0.05, SampledEvents: 900, DurationFor10PctNs: 10e9}, "has no bound (fewer than two sampling windows saw it): run with --duration 10s (or --exact) to confirm"},
		{"wider than the number", evidence.Estimate{Windows: 3, Coverage: 0.05, RelError: &wide, DurationFor10PctNs: 2215e9}, "bound only to ±210 %, wider than the number itself: run with --duration 36m55s (or --exact) to confirm"},
		{"no length known", evidence.Estimate{Windows: 0}, "run longer or with --exact to confirm"},
	} {
		f := &Finding{Severity: Crit}
		onEstimate(f, "queues", "the kernel's per-queue counts", &c.e)
		if ev := strings.Join(f.Evidence, "\n"); f.Severity != Info || !strings.Contains(ev, c.want) {
			t.Errorf("%s: severity %v, evidence:\n%s\nwant %q", c.name, f.Severity, ev, c.want)
		}
	}
}
