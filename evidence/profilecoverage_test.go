package evidence

import (
	"reflect"
	"strings"
	"testing"
)

func i64(v int64) *int64 { return &v }

// What each CPU's event should have delivered, from fixtures of what the
// profiler counted: cpu-clock expects the frequency over the CPU's online
// time, cycles over its busy time; a CPU below half is undersampled, with
// the reason the machine's PMU state gives; too small an expectation is
// not judged, and what cannot be computed says why.
func TestExpectSamples(t *testing.T) {
	const s4 = 4e9 // a 4 s window
	type want struct {
		expected     []uint64 // per CPU, in order; ^0: null
		undersampled []int
		reason       string // of the first undersampled CPU
		unavailable  string
	}
	for _, c := range []struct {
		name   string
		event  string
		pmu    string
		counts []CPUSampling
		want   want
	}{
		{name: "this project's VM: idle CPU 1's cpu-clock stops", event: "cpu-clock", pmu: "absent",
			counts: []CPUSampling{{CPU: 0, Taken: 396, EnabledNs: s4, RunningNs: s4}, {CPU: 1, Taken: 3, EnabledNs: s4, RunningNs: s4}},
			want:   want{expected: []uint64{396, 396}, undersampled: []int{1}, reason: "its sampling clock stops while it idles: a virtual CPU without a PMU"}},
		{name: "a PMU that cannot sample", event: "cpu-clock", pmu: "cannot-sample",
			counts: []CPUSampling{{CPU: 0, Taken: 7, EnabledNs: 10e9, RunningNs: 10e9}},
			want:   want{expected: []uint64{990}, undersampled: []int{0}, reason: "a virtual CPU whose PMU cannot sample"}},
		{name: "cpu-clock on a machine with a PMU: a neutral reason", event: "cpu-clock", pmu: "present",
			counts: []CPUSampling{{CPU: 0, Taken: 100, EnabledNs: s4, RunningNs: s4}},
			want:   want{expected: []uint64{396}, undersampled: []int{0}, reason: "under half the samples its online time at 99 Hz gives"}},
		{name: "exactly half is seen; a CPU online 50 ms is not judged", event: "cpu-clock", pmu: "absent",
			counts: []CPUSampling{{CPU: 0, Taken: 198, EnabledNs: s4, RunningNs: s4}, {CPU: 1, Taken: 0, EnabledNs: 5e7, RunningNs: 5e7}},
			want:   want{expected: []uint64{396, 5}, undersampled: []int{}}},
		{name: "cycles: a halted CPU rightly takes none", event: "cycles", pmu: "present",
			counts: []CPUSampling{{CPU: 0, Taken: 380, EnabledNs: s4, RunningNs: s4, BusyNs: i64(4e9)}, {CPU: 1, Taken: 0, EnabledNs: s4, RunningNs: s4, BusyNs: i64(2e7)}},
			want:   want{expected: []uint64{396, 2}, undersampled: []int{}}},
		{name: "cycles: busy but barely sampled", event: "cycles", pmu: "present",
			counts: []CPUSampling{{CPU: 0, Taken: 20, EnabledNs: s4, RunningNs: s4, BusyNs: i64(1e9)}},
			want:   want{expected: []uint64{99}, undersampled: []int{0}, reason: "under half the samples its busy time at 99 Hz gives"}},
		{name: "cycles: a multiplexed counter", event: "cycles", pmu: "present",
			counts: []CPUSampling{{CPU: 0, Taken: 100, EnabledNs: s4, RunningNs: 12e8, BusyNs: i64(4e9)}},
			want:   want{expected: []uint64{396}, undersampled: []int{0}, reason: "shared with other perf users: the event counted only 30 % of the window"}},
		{name: "cycles without /proc/stat", event: "cycles", pmu: "present",
			counts: []CPUSampling{{CPU: 0, Taken: 100, EnabledNs: s4, RunningNs: s4}},
			want:   want{expected: []uint64{^uint64(0)}, undersampled: []int{}, unavailable: "busy time"}},
		{name: "not counted (an old recording)", event: "cpu-clock", pmu: "absent",
			want: want{undersampled: []int{}, unavailable: "did not count"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// CPU 0 has samples in the profile; any other CPU gets a row.
			rows := []ProfileCPU{{CPU: 0, Samples: 50}}
			s := ProfileSampling{Event: c.event, PMU: c.pmu}
			rows = ExpectSamples(rows, c.counts, 99, &s)
			if !reflect.DeepEqual(s.UndersampledCPUs, c.want.undersampled) {
				t.Errorf("undersampled %v, want %v", s.UndersampledCPUs, c.want.undersampled)
			}
			if !strings.Contains(s.ExpectedUnavailable, c.want.unavailable) || (c.want.unavailable == "") != (s.ExpectedUnavailable == "") {
				t.Errorf("unavailable %q, want %q", s.ExpectedUnavailable, c.want.unavailable)
			}
			if c.counts == nil {
				if len(rows) != 1 || rows[0].TakenSamples != nil || rows[0].ExpectedSamples != nil {
					t.Errorf("rows changed without counts: %+v", rows)
				}
				return
			}
			if len(rows) != len(c.counts) {
				t.Fatalf("%d rows for %d CPUs counted: %+v", len(rows), len(c.counts), rows)
			}
			for i, r := range rows {
				if r.CPU != c.counts[i].CPU || r.TakenSamples == nil || *r.TakenSamples != c.counts[i].Taken || *r.OnlineNs != int64(c.counts[i].EnabledNs) {
					t.Errorf("row %d = %+v for %+v", i, r, c.counts[i])
				}
				switch w := c.want.expected[i]; {
				case w == ^uint64(0) && r.ExpectedSamples != nil:
					t.Errorf("CPU %d expected %d, want null", r.CPU, *r.ExpectedSamples)
				case w != ^uint64(0) && (r.ExpectedSamples == nil || *r.ExpectedSamples != w):
					t.Errorf("CPU %d expected %v, want %d", r.CPU, r.ExpectedSamples, w)
				}
				under := false
				for _, u := range c.want.undersampled {
					under = under || u == r.CPU
				}
				if r.Undersampled != under || under != (r.UndersampledReason != "") {
					t.Errorf("CPU %d undersampled %v (%q), want %v", r.CPU, r.Undersampled, r.UndersampledReason, under)
				}
				if under && !strings.Contains(r.UndersampledReason, c.want.reason) {
					t.Errorf("CPU %d reason %q lacks %q", r.CPU, r.UndersampledReason, c.want.reason)
				}
			}
			if rows[0].Samples != 50 && rows[0].CPU == 0 {
				t.Errorf("CPU 0's kept samples lost: %+v", rows[0])
			}
			if want := map[string]string{"cycles": ExpectedFromBusy, "cpu-clock": ExpectedFromOnline}[c.event]; s.ExpectedFrom != want {
				t.Errorf("expected from %q, want %q", s.ExpectedFrom, want)
			}
		})
	}
}

// The NET_RX CPUs split into those the profile saw and those it did not,
// the latter with the softirq probe's NET_RX time; a CPU the profile has
// no verdict on counts as seen.
func TestSplitSeen(t *testing.T) {
	taken, expected := uint64(7), uint64(990)
	rows := []ProfileCPU{{CPU: 0}, {CPU: 1, TakenSamples: &taken, ExpectedSamples: &expected, Undersampled: true, UndersampledReason: "r"}}
	soft := SoftirqEvidence{CPUs: []SoftirqCPU{
		{CPU: 0, Vectors: map[string]SoftirqVector{"NET_RX": {TimeNs: 9e8, Share: 0.09}}},
		{CPU: 1, Vectors: map[string]SoftirqVector{"NET_RX": {TimeNs: 69e7, Share: 0.069}}},
	}}
	seen, unseen := SplitSeen([]int{0, 1, 2}, rows, soft)
	want := []UnseenCPU{{CPU: 1, TakenSamples: 7, ExpectedSamples: 990, Reason: "r", SoftirqNetRXNs: 69e7, SoftirqNetRXShare: 0.069}}
	if !reflect.DeepEqual(seen, []int{0, 2}) || !reflect.DeepEqual(unseen, want) {
		t.Errorf("seen %v, unseen %+v", seen, unseen)
	}
	if seen, unseen := SplitSeen(nil, rows, soft); seen == nil || unseen == nil || len(seen)+len(unseen) != 0 {
		t.Errorf("no NET_RX CPUs: %v %v (want empty, not null)", seen, unseen)
	}
}
