package evidence

import (
	"fmt"
	"math"
	"sort"
)

// A profile sees a CPU only while the CPU's event fires. cpu-clock is an
// hrtimer: on a virtual CPU that halts when idle it stops with the CPU, so
// the softirq work such a CPU does between halts — NET_RX steered to it by
// RPS, or run from irq_exit on an otherwise idle CPU — is barely sampled:
// 7 samples of 990 expected on one of this project's VMs while the softirq
// probe measured NET_RX at 6.9 % of the CPU. Each CPU's samples taken are
// therefore set beside what the event should have delivered, and a CPU
// below half of it is reported as not seen, with the reason.

// MinExpectedSamples is the fewest expected samples a CPU is judged on: a
// CPU that should have delivered fewer (a few milliseconds of work with
// cycles) says nothing either way.
const MinExpectedSamples = 10

// ProfileSampling says which event drove a profile and why, what its
// expected samples are frequency × of, and which CPUs it could not see.
// `perfscope profile`'s data and the udp report's profile section carry it
// inline.
type ProfileSampling struct {
	// Event is the perf event sampled with: "cycles" or "cpu-clock";
	// EventRequested what was asked ("auto", "cycles", "cpu-clock");
	// EventReason why Event was chosen. Empty when not known (a profile
	// recorded before they were kept).
	Event          string `json:"event,omitempty"`
	EventRequested string `json:"event_requested,omitempty"`
	EventReason    string `json:"event_reason,omitempty"`
	// PMU is what the kernel's answer to the cycles event says of the
	// performance monitoring unit: "present", "absent", "cannot-sample"
	// or "unknown".
	PMU string `json:"pmu,omitempty"`
	// ExpectedFrom is what each CPU's expected samples are the frequency
	// times: "online_time" (cpu-clock: the time the CPU's event was
	// enabled in the window) or "busy_time" (cycles, which samples work,
	// not time: the CPU's non-idle time in the window, /proc/stat).
	ExpectedFrom string `json:"expected_from,omitempty"`
	// ExpectedUnavailable says why no CPU has expected samples.
	ExpectedUnavailable string `json:"expected_unavailable,omitempty"`
	// UndersampledCPUs are the CPUs whose samples taken fell below half
	// the expected: the profile did not see them.
	UndersampledCPUs []int `json:"undersampled_cpus"`
}

// CPUSampling is one CPU's sampling over a window as the profiler counted
// it: the input of ExpectSamples.
type CPUSampling struct {
	CPU int
	// Taken is every sample the event delivered on the CPU.
	Taken uint64
	// EnabledNs is how long the CPU's event was enabled in the window,
	// RunningNs how long it was counting (less with a multiplexed PMU).
	EnabledNs, RunningNs uint64
	// BusyNs is the CPU's non-idle time in the window (/proc/stat), read
	// for cycles; nil when not read.
	BusyNs *int64
}

// Expected-sample bases (ProfileSampling.ExpectedFrom).
const (
	ExpectedFromOnline = "online_time"
	ExpectedFromBusy   = "busy_time"
)

// ExpectSamples sets, on each CPU's row, the samples its event took and
// the samples it should have taken at freqHz, and says which CPUs were
// undersampled and why (s.UndersampledCPUs, each row's reason). With
// cpu-clock a CPU should take freqHz × the time its event was enabled
// (its online time in the window); with cycles, which counts work, a
// halted CPU rightly takes none, so the expectation is freqHz × the CPU's
// busy time. A CPU counted but without samples in the profile gets a row.
// Without counts (a profile recorded before they were kept) the rows are
// left as they are and s says why.
func ExpectSamples(rows []ProfileCPU, counts []CPUSampling, freqHz int, s *ProfileSampling) []ProfileCPU {
	s.UndersampledCPUs = []int{}
	if len(counts) == 0 {
		s.ExpectedUnavailable = "the profiler did not count the samples each CPU took"
		return rows
	}
	s.ExpectedFrom = ExpectedFromOnline
	if s.Event == "cycles" {
		s.ExpectedFrom = ExpectedFromBusy
	}
	byCPU := map[int]int{}
	for i, r := range rows {
		byCPU[r.CPU] = i
	}
	for _, c := range counts {
		i, ok := byCPU[c.CPU]
		if !ok {
			rows = append(rows, ProfileCPU{CPU: c.CPU})
			i = len(rows) - 1
			byCPU[c.CPU] = i
		}
		r := &rows[i]
		taken, online, counting := c.Taken, int64(c.EnabledNs), int64(c.RunningNs)
		r.TakenSamples, r.OnlineNs, r.CountingNs = &taken, &online, &counting
		basis := &online
		if s.ExpectedFrom == ExpectedFromBusy {
			if c.BusyNs == nil {
				s.ExpectedUnavailable = "the CPUs' busy time (/proc/stat) could not be read"
				continue
			}
			busy := *c.BusyNs
			r.BusyNs, basis = &busy, &busy
		}
		expected := uint64(math.Round(float64(freqHz) * float64(max(*basis, 0)) / 1e9))
		r.ExpectedSamples = &expected
		if expected >= MinExpectedSamples && 2*taken < expected {
			r.Undersampled = true
			r.UndersampledReason = UndersampleReason(s.Event, s.PMU, freqHz, c.EnabledNs, c.RunningNs)
			s.UndersampledCPUs = append(s.UndersampledCPUs, c.CPU)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].CPU < rows[j].CPU })
	sort.Ints(s.UndersampledCPUs)
	return rows
}

// UndersampleReason says why a CPU's event delivered under half the
// samples it should have. The halted-vCPU reason is given only where the
// machine's answer to cycles showed no usable PMU — a virtual machine's
// — and the event was cpu-clock; elsewhere the reason names what else
// can cause it without claiming which.
func UndersampleReason(event, pmu string, freqHz int, enabledNs, runningNs uint64) string {
	switch {
	case event == "cycles" && enabledNs > 0 && float64(runningNs) < 0.9*float64(enabledNs):
		return fmt.Sprintf("its cycles counter was shared with other perf users: the event counted only %.0f %% of the window",
			100*float64(runningNs)/float64(enabledNs))
	case event == "cycles":
		return fmt.Sprintf("it took under half the samples its busy time at %d Hz gives (sampling the kernel throttled, or a period the kernel had not yet fitted to the CPU's bursts of work)", freqHz)
	case pmu == "absent":
		return "its sampling clock stops while it idles: a virtual CPU without a PMU"
	case pmu == "cannot-sample":
		return "its sampling clock stops while it idles: a virtual CPU whose PMU cannot sample"
	}
	return fmt.Sprintf("it took under half the samples its online time at %d Hz gives (a sampling clock that stops while the CPU idles, or sampling the kernel throttled)", freqHz)
}

// UnseenCPU is a CPU doing receive work that the profile did not see,
// with what the softirq probe measured on it over the same window.
type UnseenCPU struct {
	CPU             int    `json:"cpu"`
	TakenSamples    uint64 `json:"taken_samples"`
	ExpectedSamples uint64 `json:"expected_samples"`
	Reason          string `json:"reason"`
	// SoftirqNetRXNs is the NET_RX softirq time the softirq probe counted
	// on the CPU, SoftirqNetRXShare that over the window: the receive work
	// the profile's shares do not cover.
	SoftirqNetRXNs    uint64  `json:"softirq_net_rx_ns"`
	SoftirqNetRXShare float64 `json:"softirq_net_rx_share"`
}

// SplitSeen divides the NET_RX CPUs into those the profile saw and those
// it did not (undersampled rows), the latter with the softirq probe's
// NET_RX time on them. A CPU without a row, or whose row has no expected
// samples, counts as seen: nothing says otherwise.
func SplitSeen(netRXCPUs []int, rows []ProfileCPU, soft SoftirqEvidence) (seen []int, unseen []UnseenCPU) {
	seen, unseen = []int{}, []UnseenCPU{}
	byCPU := map[int]ProfileCPU{}
	for _, r := range rows {
		byCPU[r.CPU] = r
	}
	netRX := map[int]SoftirqVector{}
	for _, c := range soft.CPUs {
		netRX[c.CPU] = c.Vectors["NET_RX"]
	}
	for _, cpu := range netRXCPUs {
		r, ok := byCPU[cpu]
		if !ok || !r.Undersampled || r.TakenSamples == nil || r.ExpectedSamples == nil {
			seen = append(seen, cpu)
			continue
		}
		v := netRX[cpu]
		unseen = append(unseen, UnseenCPU{CPU: cpu, TakenSamples: *r.TakenSamples, ExpectedSamples: *r.ExpectedSamples,
			Reason: r.UndersampledReason, SoftirqNetRXNs: v.TimeNs, SoftirqNetRXShare: v.Share})
	}
	return seen, unseen
}
