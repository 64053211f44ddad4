package evidence

import (
	"math"
	"sort"
)

// z95 is the standard normal quantile of a two-sided 95 % interval.
const z95 = 1.959964

// WilsonInterval bounds the share k/n of a sampled profile at 95 %
// confidence. Samples of a cpu-clock profile are Bernoulli draws of "was
// the CPU in this function at the tick"; the Wilson score interval stays
// inside [0, 1] and is honest for the small counts (a handful of samples in
// a function group) that the normal approximation gets wrong.
func WilsonInterval(k, n uint64) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	p, nf := float64(k)/float64(n), float64(n)
	z2 := z95 * z95
	centre := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z95 / (1 + z2/nf) * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return math.Max(0, centre-half), math.Min(1, centre+half)
}

// netRXFrame marks a sample of NET_RX softirq work.
var netRXFrame = []string{"net_rx_action"}

// ProfileCPUs is the profile per CPU: kept samples, the idle task's split
// into interrupt and loop samples (from cpuprofile.IdleSplit), and the
// samples in NET_RX softirq with their share of every tick on the CPU.
func ProfileCPUs(samples []ProfileSample, idleInterrupt, idleLoop map[int]uint64) []ProfileCPU {
	rows := map[int]*ProfileCPU{}
	row := func(cpu int) *ProfileCPU {
		if r, ok := rows[cpu]; ok {
			return r
		}
		r := &ProfileCPU{CPU: cpu}
		rows[cpu] = r
		return r
	}
	for _, s := range samples {
		r := row(s.CPU)
		r.Samples += s.Count
		for _, f := range s.Frames {
			if matches(f, netRXFrame) {
				r.NetRXSamples += s.Count
				break
			}
		}
	}
	for cpu, n := range idleInterrupt {
		row(cpu).IdleInterruptSamples += n
	}
	for cpu, n := range idleLoop {
		row(cpu).IdleLoopSamples += n
	}
	out := make([]ProfileCPU, 0, len(rows))
	for _, r := range rows {
		if ticks := r.Samples + r.IdleLoopSamples; ticks > 0 {
			r.NetRXShare = float64(r.NetRXSamples) / float64(ticks)
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU < out[j].CPU })
	return out
}
