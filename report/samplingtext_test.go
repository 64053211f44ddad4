package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

func u64p(v uint64) *uint64 { return &v }

// The profile's text says which event sampled it and why, each CPU's
// samples taken of those expected, and one line per reason naming the
// CPUs it did not see; the udp section adds the NET_RX time the shares
// miss and heads its table with the CPUs they cover.
func TestSamplingText(t *testing.T) {
	s := evidence.ProfileSampling{Event: "cpu-clock", EventRequested: "auto", PMU: "absent", ExpectedFrom: evidence.ExpectedFromOnline,
		EventReason:      "the hardware cycles event is not supported here (ENOENT: no PMU, as in a virtual machine without PMU passthrough); cpu-clock is perf's fallback",
		UndersampledCPUs: []int{1, 3}}
	const reason = "its sampling clock stops while it idles: a virtual CPU without a PMU"
	rows := []evidence.ProfileCPU{
		{CPU: 0, TakenSamples: u64p(990), ExpectedSamples: u64p(990)},
		{CPU: 1, TakenSamples: u64p(7), ExpectedSamples: u64p(990), Undersampled: true, UndersampledReason: reason},
		{CPU: 2},
		{CPU: 3, TakenSamples: u64p(12), ExpectedSamples: u64p(990), Undersampled: true, UndersampledReason: reason},
	}
	r := New("profile", "v", time.Now())
	r.Data = evidence.Profile{FrequencyHz: 99, CPUs: 4, DurationNs: int64(10 * time.Second), ProfileSampling: s, PerCPU: rows}
	var b bytes.Buffer
	if err := Render(&b, r, Text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"sampled with cpu-clock (--event auto): the hardware cycles event is not supported here (ENOENT",
		"samples taken/expected (99 Hz × each CPU's online time): CPU 0 990/990, CPU 1 7/990, CPU 3 12/990\n",
		"not seen: CPUs 1, 3 (7 of 990, 12 of 990 expected samples): " + reason + "; what ran there is missing from this profile\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("profile text lacks %q:\n%s", want, b.String())
		}
	}

	p := evidence.ProfileSection{ProfileSampling: s, FrequencyHz: 99, NetRXCPUs: []int{0, 1}, NetRXSeen: []int{0}, CPUs: rows[:2],
		NetRXUnseen: []evidence.UnseenCPU{{CPU: 1, TakenSamples: 7, ExpectedSamples: 990, Reason: reason, SoftirqNetRXNs: 690e6, SoftirqNetRXShare: 0.069}},
		Groups:      []evidence.FunctionShare{{Group: "gro", Share: 0.05}}}
	r = New("udp", "v", time.Now())
	r.Data = NetData{NetEvidence: evidence.NetEvidence{Profile: p}}
	b.Reset()
	if err := Render(&b, r, Text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"not seen: CPU 1 (7 of 990 expected samples): " + reason,
		"NET_RX CPU 1 unseen by the profile (7 of 990 expected samples: " + reason + "): the softirq probe measured NET_RX 690.00ms there (6.9% of the CPU), which the shares below do not cover",
		"share on NET_RX CPUs seen (0; not 1)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("udp text lacks %q:\n%s", want, b.String())
		}
	}
}

// On a big machine the per-CPU counts fold into one sum; the CPUs not
// seen are still named.
func TestSamplingTextManyCPUs(t *testing.T) {
	var rows []evidence.ProfileCPU
	for cpu := 0; cpu < 64; cpu++ {
		r := evidence.ProfileCPU{CPU: cpu, TakenSamples: u64p(99), ExpectedSamples: u64p(99)}
		if cpu == 40 {
			r.TakenSamples, r.Undersampled, r.UndersampledReason = u64p(2), true, "r"
		}
		rows = append(rows, r)
	}
	var b bytes.Buffer
	writeSampling(&b, evidence.ProfileSampling{ExpectedFrom: evidence.ExpectedFromOnline}, rows, 99)
	if want := "99 Hz × each CPU's online time): 6239/6336 over 64 CPUs (per CPU: -o json)\nnot seen: CPU 40 (2 of 99 expected samples): r;"; !strings.Contains(b.String(), want) {
		t.Errorf("text:\n%s\nwant %q", b.String(), want)
	}
}
