package diagnose

import (
	"strings"
	"testing"
)

// setGroup gives a group k samples of n on the NET_RX CPUs.
func setGroup(in *NetInput, name string, k, n uint64) {
	p := &in.Evidence.Profile
	p.Samples, p.NetRXSamples = n, n
	for i := range p.Groups {
		g := &p.Groups[i]
		if g.Group == name {
			g.Samples, g.NetRXSamples = k, k
			g.Share = float64(k) / float64(n)
		}
	}
}

// The rig that motivated this: a 4 s window at 99 Hz gave 6 samples in the
// GRO group (0.77 %, under the 1 % threshold) and no finding.
func TestGROUndecidedSaysHowLongToRun(t *testing.T) {
	runNetCases(t, "net.gro-udp", []netCase{
		{name: "6 samples: undecided", edit: func(in *NetInput) {
			in.Evidence.DurationNs = 4e9
			setGroup(in, "gro", 6, 780)
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Info || !strings.HasPrefix(f.Title, "undecided: ") {
				t.Errorf("%v %q", f.Severity, f.Title)
			}
			contains(t, "evidence", f.Evidence, "6 of 780 profile samples on the NET_RX CPUs (0.8%, 95% interval 0.4%–1.7%)", "run for --duration")
			// n = 1.96²·p(1−p)/(T−p)² ≈ 5600 samples at 195/s ≈ 29 s.
			if !strings.Contains(strings.Join(f.Evidence, "\n"), "--duration 30s") {
				t.Errorf("decide time: %q", f.Evidence)
			}
		}},
		{name: "the same share over 10 s decides it: below", silent: true, edit: func(in *NetInput) {
			in.Evidence.DurationNs = 10e9
			setGroup(in, "gro", 150, 19500)
		}},
		{name: "far below: silent", silent: true, edit: func(in *NetInput) { setGroup(in, "gro", 2, 780) }},
		{name: "above, with its interval", edit: func(in *NetInput) { setGroup(in, "gro", 12, 780) }, want: func(t *testing.T, f *Finding) {
			if strings.HasPrefix(f.Title, "undecided") {
				t.Errorf("1.5 %% over a 1 %% threshold is a finding: %q", f.Title)
			}
			contains(t, "evidence", f.Evidence, "12 of 780 profile samples", "lower end is below the 1.0% threshold")
		}},
	})
}

func TestDecideSeconds(t *testing.T) {
	if s := decideSeconds(0.0077, 0.01, 780, 4e9); s != 30 {
		t.Errorf("decideSeconds = %v, want 30", s)
	}
	if s := decideSeconds(0.01, 0.01, 780, 4e9); s <= 30 {
		t.Errorf("a share on the threshold needs longer than one beside it: %v", s)
	}
	if s := decideSeconds(0.005, 0.01, 0, 4e9); s != 0 {
		t.Errorf("no samples: %v", s)
	}
}

// The rules weigh a group on the NET_RX CPUs: a group that takes the other
// CPUs' time but none of theirs is 0 % there, not its all-CPU share
// (which the report labels "share of all"). Only a profile with no sample
// on a NET_RX CPU falls back to all CPUs, and says so.
func TestGroupWeightIsOnTheNetRXCPUs(t *testing.T) {
	in := NetInput{Evidence: referenceEvidence(), Config: referenceConfig(t)}
	p := &in.Evidence.Profile
	p.Samples, p.NetRXSamples = 136, 100
	for i := range p.Groups {
		g := &p.Groups[i]
		if g.Group == "audit" {
			// 2 samples, both on a CPU below NET_RX's 5 %.
			g.Samples, g.NetRXSamples, g.Share, g.AllShare = 2, 0, 0, 2.0/136
		}
	}
	if w, speak := weighGroup(in.Evidence, "audit", FunctionShareMin/2, 1); speak || w.Share != 0 || w.AllCPUs {
		t.Errorf("audit off the NET_RX CPUs: weight %+v, speaks %v; want 0 %% and silent", w, speak)
	}
	p.NetRXSamples = 0
	w, speak := weighGroup(in.Evidence, "audit", FunctionShareMin/2, 1)
	if !speak || !w.AllCPUs || w.Samples != 2 || w.Total != 136 || !strings.Contains(w.line(), "on all CPUs") {
		t.Errorf("no NET_RX CPU sampled: weight %+v (%q), speaks %v; want the all-CPU share, said", w, w.line(), speak)
	}
}
