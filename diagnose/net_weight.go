package diagnose

import (
	"fmt"
	"math"
	"strings"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/evidence"
)

// A profile-based finding is a share estimated from samples: 6 samples in a
// group are 0.77 % on one run and 1.2 % on the next. Every such finding
// states its count and a 95 % interval, and a group whose share is within a
// factor of two below its threshold, with an interval that reaches the
// threshold, is reported at info with the run length that would decide it
// instead of being left out.

// groupWeight is one function group's share weighed against a rule's
// threshold.
type groupWeight struct {
	Group     evidence.FunctionShare
	Share     float64
	Threshold float64
	// Samples of Total: the share's numerator and denominator (the NET_RX
	// CPUs' samples, or all samples when no NET_RX CPU was sampled:
	// AllCPUs).
	Samples, Total uint64
	AllCPUs        bool
	Low, High      float64
	// Undecided: below the threshold but near it (≥ half) with an
	// interval that reaches it — more samples would decide.
	Undecided bool
	// DecideSeconds is the window that would put the threshold outside
	// the interval at the measured share (0 when not undecided); why says
	// what is undecided.
	DecideSeconds float64
	why           string
	// Seen are the NET_RX CPUs the profile saw, Unseen those it did not
	// (their event was undersampled), with the softirq probe's NET_RX
	// time on each; UnseenWork is the unseen CPUs' share of the NET_RX
	// time the softirq probe measured on every NET_RX CPU.
	Seen       []int
	Unseen     []evidence.UnseenCPU
	UnseenWork float64
}

// UnseenKeyShare is the share of the receive work (the softirq probe's
// NET_RX time) on NET_RX CPUs the profile did not see from which a
// function-group finding is lowered to info: its share then describes the
// lesser part of the receive path, and the part it cannot see may differ.
const UnseenKeyShare = 0.5

// scope names the CPUs the share covers, for a finding's title: "the
// NET_RX CPUs", or only those the profile saw.
func (w groupWeight) scope() string {
	if len(w.Unseen) == 0 {
		return "the NET_RX CPUs"
	}
	var unseen []int
	for _, u := range w.Unseen {
		unseen = append(unseen, u.CPU)
	}
	if len(w.Seen) == 0 {
		return fmt.Sprintf("the profiled CPUs (not NET_RX %s: unseen by the profile)", cpuset.Of(unseen...).List())
	}
	return fmt.Sprintf("NET_RX %s (not %s: unseen by the profile)", cpusNoun(w.Seen), cpuset.Of(unseen...).List())
}

// cpusNoun is "CPU 0" or "CPUs 0-2".
func cpusNoun(cpus []int) string {
	if len(cpus) == 1 {
		return fmt.Sprintf("CPU %d", cpus[0])
	}
	return "CPUs " + cpuset.Of(cpus...).List()
}

// unseenLines say which NET_RX CPUs the share does not cover, why, and
// the receive work the softirq probe measured on each.
func (w groupWeight) unseenLines() []string {
	var out []string
	for _, u := range w.Unseen {
		out = append(out, fmt.Sprintf("the profile did not see NET_RX CPU %d (%d of %d expected samples: %s): the softirq probe measured NET_RX at %s of that CPU (%.0f ms), which this share does not cover",
			u.CPU, u.TakenSamples, u.ExpectedSamples, u.Reason, pct(u.SoftirqNetRXShare), float64(u.SoftirqNetRXNs)/1e6))
	}
	return out
}

// unseenWork is the NET_RX CPUs' receive work, by the softirq probe, that
// ran on the CPUs the profile did not see (0–1).
func unseenWork(e evidence.NetEvidence) float64 {
	if len(e.Profile.NetRXUnseen) == 0 {
		return 0
	}
	netRX := map[int]bool{}
	for _, c := range e.Profile.NetRXCPUs {
		netRX[c] = true
	}
	var all, unseen uint64
	for _, c := range e.Softirq.CPUs {
		if netRX[c.CPU] {
			all += c.Vectors["NET_RX"].TimeNs
		}
	}
	for _, u := range e.Profile.NetRXUnseen {
		unseen += u.SoftirqNetRXNs
	}
	if all == 0 {
		return 1 // unseen CPUs, and no time to weigh them by: assume the worst
	}
	return math.Min(1, float64(unseen)/float64(all))
}

// weighGroup returns the group's weight and whether a rule should speak:
// share at or above the threshold (with at least minSamples), or undecided.
func weighGroup(e evidence.NetEvidence, name string, threshold float64, minSamples uint64) (groupWeight, bool) {
	g, share, allCPUs, ok := groupShare(e, name)
	if !ok {
		return groupWeight{}, false
	}
	w := groupWeight{Group: g, Share: share, Threshold: threshold, Samples: g.NetRXSamples, Total: e.Profile.NetRXSamples,
		Seen: e.Profile.NetRXSeen, Unseen: e.Profile.NetRXUnseen, UnseenWork: unseenWork(e)}
	if allCPUs {
		w.Samples, w.Total, w.AllCPUs = g.Samples, e.Profile.Samples, true
	}
	if w.Total == 0 {
		// A report from before the counts were kept: the share alone.
		w.Samples, w.Low, w.High = g.Samples, share, share
		return w, share >= threshold && w.Samples >= minSamples
	}
	w.Low, w.High = evidence.WilsonInterval(w.Samples, w.Total)
	if share >= threshold && w.Samples >= minSamples {
		return w, true
	}
	if share < threshold/2 || w.High < threshold {
		return w, false
	}
	w.Undecided = true
	if share >= threshold {
		// Over the threshold on fewer than minSamples samples: run until
		// the share would give minSamples.
		w.why = fmt.Sprintf("only %d samples (a finding needs %d)", w.Samples, minSamples)
		perSecond := float64(w.Total) / seconds(e.DurationNs)
		w.DecideSeconds = math.Ceil(float64(minSamples)/share/perSecond/5) * 5
		return w, true
	}
	w.why = fmt.Sprintf("below the %s threshold, but the interval reaches it", pct(threshold))
	w.DecideSeconds = decideSeconds(share, threshold, w.Total, e.DurationNs)
	return w, true
}

// decideSeconds is how long a run at the same sample rate needs for the
// 95 % interval around share to exclude threshold: n = z²·p(1−p)/(p−T)²
// samples. A share within a tenth of the threshold is taken a tenth away:
// closer than that, no run length decides and the answer would be absurd.
func decideSeconds(share, threshold float64, total uint64, durationNs int64) float64 {
	if total == 0 || durationNs <= 0 {
		return 0
	}
	gap := math.Max(math.Abs(threshold-share), threshold/10)
	p := math.Max(share, 1/float64(total))
	need := 1.96 * 1.96 * p * (1 - p) / (gap * gap)
	perSecond := float64(total) / seconds(durationNs)
	s := need / perSecond
	return math.Ceil(s/5) * 5 // a round --duration
}

// line states the weight: "6 of 780 samples on the NET_RX CPUs (0.8 %,
// 95 % interval 0.4–1.7 %) in dev_gro_receive, ...".
func (w groupWeight) line() string {
	where := "on the NET_RX CPUs"
	if len(w.Unseen) > 0 {
		where = "on " + w.scope()
	}
	if w.AllCPUs {
		where = "on all CPUs (none on a NET_RX CPU)"
	}
	return fmt.Sprintf("%d of %d profile samples %s (%s, 95%% interval %s–%s) in %s",
		w.Samples, w.Total, where, pct(w.Share), pct(w.Low), pct(w.High), strings.Join(w.Group.Functions, ", "))
}

// functionGroupFinding starts a finding about CPU in one of Makita's
// removable function groups: info, warn from the share warn (the rule's
// function_warn_share, FunctionShareWarn by default), ranked by
// the share. An undecided group is an info finding whose title says so and
// whose evidence says how long to run.
func functionGroupFinding(warn float64, w groupWeight, title string) *Finding {
	f := &Finding{
		Severity: Info,
		Title:    title,
		Evidence: append([]string{w.line()}, w.unseenLines()...),
		Impact:   w.Share,
	}
	keyUnseen := len(w.Unseen) > 0 && w.UnseenWork >= UnseenKeyShare
	if keyUnseen {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s of the receive work (NET_RX time) ran on CPUs the profile did not see: reported at info at most (the cycles event, on a machine with a PMU, samples such CPUs)",
			pct(w.UnseenWork)))
	}
	if w.Undecided {
		f.Title = "undecided: " + title
		f.Impact = w.Share / 2
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: too few samples to decide; run for --duration %.0fs (at the same --freq) to decide",
			w.why, w.DecideSeconds))
		return f
	}
	if w.Low < w.Threshold {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the interval's lower end is below the %s threshold: a longer run would confirm it", pct(w.Threshold)))
	}
	if w.Share >= warn && !keyUnseen {
		f.Severity = Warn
	}
	return f
}
