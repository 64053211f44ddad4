package diagnose

import (
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/evidence"
)

// unseeCPUs marks NET_RX CPUs as not seen by the profile (undersampled:
// 7 of 990 samples, the halted-vCPU reason), each with its softirq NET_RX
// time from the fixture, as recipes' profileSplit would.
func unseeCPUs(in *NetInput, cpus ...int) {
	p := &in.Evidence.Profile
	unseen := map[int]bool{}
	for _, c := range cpus {
		unseen[c] = true
	}
	p.NetRXSeen, p.NetRXUnseen = nil, nil
	for _, c := range p.NetRXCPUs {
		if !unseen[c] {
			p.NetRXSeen = append(p.NetRXSeen, c)
			continue
		}
		var v evidence.SoftirqVector
		for _, s := range in.Evidence.Softirq.CPUs {
			if s.CPU == c {
				v = s.Vectors["NET_RX"]
			}
		}
		p.NetRXUnseen = append(p.NetRXUnseen, evidence.UnseenCPU{CPU: c, TakenSamples: 7, ExpectedSamples: 990,
			Reason: "its sampling clock stops while it idles: a virtual CPU without a PMU", SoftirqNetRXNs: v.TimeNs, SoftirqNetRXShare: v.Share})
	}
}

// A function-group finding rests on the profile's share of the NET_RX
// CPUs' samples: it names the CPUs that share covers, says which NET_RX
// CPUs the profile did not see with the receive work the softirq probe
// measured there, and — when those CPUs did at least half the receive
// work — is reported at info at most. Every rule built on a group share
// does so.
func TestGroupFindingsSayWhichNetRXCPUsTheProfileSaw(t *testing.T) {
	all := cpuset.MustParseList("0-4,10-14").CPUs()
	for _, id := range []string{"net.gro-udp", "net.rp-filter", "net.audit", "net.ip-ident", "net.netfilter-unused"} {
		t.Run(id, func(t *testing.T) {
			in := NetInput{Evidence: referenceEvidence(), Config: referenceConfig(t)}
			base := rule(t, id).check(in, nil)
			if base == nil {
				t.Skipf("%s is silent on the reference fixture", id)
			}
			if strings.Contains(base.Title, "unseen") || strings.Contains(strings.Join(base.Evidence, "\n"), "did not see") {
				t.Fatalf("every CPU seen, yet: %q %q", base.Title, base.Evidence)
			}
			for _, c := range []struct {
				name     string
				unseen   []int
				title    string
				evidence []string
				info     bool
			}{
				{name: "one of ten NET_RX CPUs unseen", unseen: []int{14}, title: "NET_RX CPUs 0-4,10-13 (not 14: unseen by the profile)",
					evidence: []string{"on NET_RX CPUs 0-4,10-13 (not 14: unseen by the profile)",
						"the profile did not see NET_RX CPU 14 (7 of 990 expected samples: its sampling clock stops while it idles: a virtual CPU without a PMU): the softirq probe measured NET_RX at 85.0% of that CPU (8500 ms), which this share does not cover"}},
				{name: "half the receive work unseen", unseen: []int{10, 11, 12, 13, 14}, title: "NET_RX CPUs 0-4 (not 10-14: unseen by the profile)",
					evidence: []string{"50.0% of the receive work (NET_RX time) ran on CPUs the profile did not see: reported at info at most"}, info: true},
				{name: "no NET_RX CPU seen", unseen: all, title: "the profiled CPUs (not NET_RX 0-4,10-14: unseen by the profile)",
					evidence: []string{"100.0% of the receive work"}, info: true},
			} {
				t.Run(c.name, func(t *testing.T) {
					in := NetInput{Evidence: referenceEvidence(), Config: referenceConfig(t)}
					unseeCPUs(&in, c.unseen...)
					f := rule(t, id).check(in, nil)
					if f == nil {
						t.Fatal("silent")
					}
					if !strings.Contains(f.Title, c.title) {
						t.Errorf("title %q lacks %q", f.Title, c.title)
					}
					contains(t, "evidence", f.Evidence, c.evidence...)
					switch {
					case c.info && f.Severity != Info:
						t.Errorf("severity %v with the key CPUs unseen; want info", f.Severity)
					case !c.info && f.Severity != base.Severity:
						t.Errorf("severity %v, %v with every CPU seen: one minor CPU unseen changes nothing", f.Severity, base.Severity)
					}
				})
			}
		})
	}
}
