package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// writeSampling prints how a profile sampled: the event and why, each
// CPU's samples taken of those expected, and the CPUs it did not see with
// the reason — what a reader must know before trusting any share.
func writeSampling(w io.Writer, s evidence.ProfileSampling, rows []evidence.ProfileCPU, freqHz int) {
	if s.Event != "" {
		fmt.Fprintf(w, "sampled with %s (--event %s): %s\n", s.Event, s.EventRequested, s.EventReason)
	}
	if s.ExpectedUnavailable != "" {
		fmt.Fprintf(w, "samples expected per CPU unknown: %s\n", s.ExpectedUnavailable)
	}
	var cells []string
	var taken, expected uint64
	for _, r := range rows {
		if r.TakenSamples == nil || r.ExpectedSamples == nil {
			continue
		}
		cells = append(cells, fmt.Sprintf("CPU %d %d/%d", r.CPU, *r.TakenSamples, *r.ExpectedSamples))
		taken, expected = taken+*r.TakenSamples, expected+*r.ExpectedSamples
	}
	basis := "online time"
	if s.ExpectedFrom == evidence.ExpectedFromBusy {
		basis = "busy time"
	}
	switch {
	case len(cells) > maxSamplingCells:
		// The CPUs not seen follow by name; the rest is in -o json.
		fmt.Fprintf(w, "samples taken/expected (%d Hz × each CPU's %s): %d/%d over %d CPUs (per CPU: -o json)\n", freqHz, basis, taken, expected, len(cells))
	case len(cells) > 0:
		fmt.Fprintf(w, "samples taken/expected (%d Hz × each CPU's %s): %s\n", freqHz, basis, strings.Join(cells, ", "))
	}
	for _, line := range undersampledLines(rows) {
		fmt.Fprintln(w, line)
	}
}

// maxSamplingCells is the most CPUs whose samples the text lists one by
// one: a line, not a screen.
const maxSamplingCells = 16

// undersampledLines says, one line per reason, which CPUs the profile did
// not see: "not seen: CPU 1 (3 of 396 expected samples): its sampling
// clock stops while it idles: a virtual CPU without a PMU".
func undersampledLines(rows []evidence.ProfileCPU) []string {
	byReason := map[string][]evidence.ProfileCPU{}
	var reasons []string
	for _, r := range rows {
		if !r.Undersampled {
			continue
		}
		if _, ok := byReason[r.UndersampledReason]; !ok {
			reasons = append(reasons, r.UndersampledReason)
		}
		byReason[r.UndersampledReason] = append(byReason[r.UndersampledReason], r)
	}
	sort.Strings(reasons)
	var out []string
	for _, reason := range reasons {
		var cpus, counts []string
		for _, r := range byReason[reason] {
			cpus = append(cpus, strconv.Itoa(r.CPU))
			counts = append(counts, fmt.Sprintf("%d of %d", deref(r.TakenSamples), deref(r.ExpectedSamples)))
		}
		noun := "CPU"
		if len(cpus) > 1 {
			noun = "CPUs"
		}
		out = append(out, fmt.Sprintf("not seen: %s %s (%s expected samples): %s; what ran there is missing from this profile",
			noun, strings.Join(cpus, ", "), strings.Join(counts, ", "), reason))
	}
	return out
}

// deref is *p, or zero when p is nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// netRXScope names the NET_RX CPUs a share covers: all of them, or those
// the profile saw when it missed some ("NET_RX CPUs 0 (not 1: unseen)").
func netRXScope(p evidence.ProfileSection) string {
	if len(p.NetRXUnseen) == 0 {
		return "NET_RX CPUs"
	}
	var unseen []string
	for _, u := range p.NetRXUnseen {
		unseen = append(unseen, strconv.Itoa(u.CPU))
	}
	return fmt.Sprintf("NET_RX CPUs seen (%s; not %s)", cpuList(p.NetRXSeen), strings.Join(unseen, ","))
}

func cpuList(cpus []int) string {
	if len(cpus) == 0 {
		return "none"
	}
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// writeUnseenNetRX sets the softirq probe's NET_RX time on each NET_RX
// CPU the profile did not see beside the shares that miss it.
func writeUnseenNetRX(w io.Writer, p evidence.ProfileSection) {
	for _, u := range p.NetRXUnseen {
		fmt.Fprintf(w, "NET_RX CPU %d unseen by the profile (%d of %d expected samples: %s): the softirq probe measured NET_RX %s there (%s of the CPU), which the shares below do not cover\n",
			u.CPU, u.TakenSamples, u.ExpectedSamples, u.Reason, Nanos(float64(u.SoftirqNetRXNs)), Percent(u.SoftirqNetRXShare))
	}
}
