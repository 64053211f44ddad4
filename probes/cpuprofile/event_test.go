package cpuprofile

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// The kernel's answers to perf_event_open(cycles) as Start sees them:
// wrapped by probes.Classify around an *openError, as openEvent returns
// them.
func refused(errno syscall.Errno) error {
	return probes.Classify("open cycles perf event on CPU 0", &openError{cpu: 0, ev: EventCycles, err: errno})
}

// The decision of which event samples, from fixtures of every answer the
// kernel gives to opening cycles: what auto falls back to, what the PMU's
// state is, and when asking for cycles is an error of which kind (the
// exit code follows it).
func TestChooseEvent(t *testing.T) {
	for _, c := range []struct {
		name       string
		want       Event
		cyclesErr  error
		event      Event
		pmu        PMU
		reason     string // in Reason (or in the error)
		err        error  // nil: no error
		notSupport bool
	}{
		{name: "auto, a PMU", want: EventAuto, event: EventCycles, pmu: PMUPresent, reason: "opens here: perf record's default"},
		{name: "auto, no PMU (this project's VMs: ENOENT)", want: EventAuto, cyclesErr: refused(unix.ENOENT), event: EventCPUClock, pmu: PMUAbsent, reason: "not supported here (ENOENT: no PMU"},
		{name: "auto, ENODEV", want: EventAuto, cyclesErr: refused(unix.ENODEV), event: EventCPUClock, pmu: PMUAbsent, reason: "ENODEV"},
		{name: "auto, ENXIO (old PowerPC)", want: EventAuto, cyclesErr: refused(unix.ENXIO), event: EventCPUClock, pmu: PMUAbsent, reason: "ENXIO"},
		{name: "auto, a PMU without overflow interrupts", want: EventAuto, cyclesErr: refused(unix.EOPNOTSUPP), event: EventCPUClock, pmu: PMUNoSampling, reason: "cannot sample cycles here (EOPNOTSUPP"},
		{name: "auto, kernel-internal ENOTSUPP", want: EventAuto, cyclesErr: refused(syscall.Errno(524)), event: EventCPUClock, pmu: PMUNoSampling, reason: "ENOTSUPP"},
		{name: "auto, counters taken", want: EventAuto, cyclesErr: refused(unix.EBUSY), event: EventCPUClock, pmu: PMUPresent, reason: "taken by another user (EBUSY)"},
		{name: "auto, not permitted", want: EventAuto, cyclesErr: refused(unix.EACCES), event: EventCPUClock, pmu: PMUUnknown, reason: "refused the hardware cycles event (EACCES)"},
		{name: "auto, invalid attribute", want: EventAuto, cyclesErr: refused(unix.EINVAL), event: EventCPUClock, pmu: PMUUnknown, reason: "(EINVAL)"},
		{name: "cpu-clock asked, a PMU", want: EventCPUClock, event: EventCPUClock, pmu: PMUPresent, reason: "as asked; the hardware cycles event would open here"},
		{name: "cpu-clock asked, no PMU", want: EventCPUClock, cyclesErr: refused(unix.ENOENT), event: EventCPUClock, pmu: PMUAbsent, reason: "as asked; the hardware cycles event is not supported here (ENOENT"},
		{name: "cpu-clock asked, cycles not permitted", want: EventCPUClock, cyclesErr: refused(unix.EACCES), event: EventCPUClock, pmu: PMUUnknown, reason: "as asked"},
		{name: "cycles asked, a PMU", want: EventCycles, event: EventCycles, pmu: PMUPresent, reason: "as asked"},
		{name: "cycles asked, no PMU", want: EventCycles, cyclesErr: refused(unix.ENOENT), pmu: PMUAbsent, reason: "no PMU", err: probes.ErrNotSupported},
		{name: "cycles asked, cannot sample", want: EventCycles, cyclesErr: refused(unix.EOPNOTSUPP), pmu: PMUNoSampling, reason: "cannot sample", err: probes.ErrNotSupported},
		{name: "cycles asked, counters taken", want: EventCycles, cyclesErr: refused(unix.EBUSY), pmu: PMUPresent, reason: "EBUSY", err: probes.ErrNotSupported},
		{name: "cycles asked, not permitted", want: EventCycles, cyclesErr: refused(unix.EPERM), pmu: PMUUnknown, reason: "CAP_PERFMON", err: probes.ErrPermission},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ChooseEvent(c.want, c.cyclesErr)
			if got.PMU != c.pmu || got.Requested != c.want {
				t.Errorf("PMU %v, requested %v; want %v, %v", got.PMU, got.Requested, c.pmu, c.want)
			}
			if c.err != nil {
				if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.reason) || !strings.Contains(err.Error(), "cpu-clock") && c.err == probes.ErrNotSupported {
					t.Fatalf("error %v; want %v naming %q and the way out", err, c.err, c.reason)
				}
				if strings.Count(err.Error(), "permission denied")+strings.Count(err.Error(), "not supported by this kernel") > 0 {
					t.Errorf("error %q repeats the sentinel's text", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Event != c.event || !strings.Contains(got.Reason, c.reason) {
				t.Errorf("chose %v (%q); want %v with %q", got.Event, got.Reason, c.event, c.reason)
			}
		})
	}
	if _, err := ChooseEvent(Event(7), nil); err == nil {
		t.Error("an unknown event was accepted")
	}
}

func TestParseEvent(t *testing.T) {
	for i, name := range EventNames {
		e, err := ParseEvent(name)
		if err != nil || e != Event(i) || e.String() != name {
			t.Errorf("ParseEvent(%q) = %v, %v", name, e, err)
		}
	}
	for _, bad := range []string{"", "cpu_clock", "CYCLES", "task-clock"} {
		if _, err := ParseEvent(bad); err == nil {
			t.Errorf("ParseEvent(%q) accepted", bad)
		}
	}
	if s := fmt.Sprint(Event(9), PMU(9)); !strings.Contains(s, "9") {
		t.Errorf("out-of-range names = %q", s)
	}
}

// A later span's counts are the growth since the earlier reading, per
// CPU; a CPU new in the later reading counts from zero, and a profile
// whose counts were not read stays without them.
func TestSubCounts(t *testing.T) {
	prev := []CPUCount{{CPU: 0, Taken: 100, EnabledNs: 1e9, RunningNs: 1e9}, {CPU: 1, Taken: 3, EnabledNs: 1e9, RunningNs: 1e9}}
	cur := []CPUCount{{CPU: 0, Taken: 199, EnabledNs: 2e9, RunningNs: 2e9}, {CPU: 1, Taken: 4, EnabledNs: 2e9, RunningNs: 2e9}, {CPU: 2, Taken: 5, EnabledNs: 5e7, RunningNs: 4e7}}
	got := subCounts(cur, prev)
	want := []CPUCount{{CPU: 0, Taken: 99, EnabledNs: 1e9, RunningNs: 1e9}, {CPU: 1, Taken: 1, EnabledNs: 1e9, RunningNs: 1e9}, {CPU: 2, Taken: 5, EnabledNs: 5e7, RunningNs: 4e7}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("subCounts = %+v\nwant %+v", got, want)
	}
	if d := (Profile{CPUs: nil}).Sub(Profile{CPUs: prev}); d.CPUs != nil {
		t.Errorf("unread counts became %+v", d.CPUs)
	}
	if d := subCounts([]CPUCount{{CPU: 0, Taken: 1}}, prev); d[0].Taken != 0 {
		t.Errorf("a count that went back = %+v, want 0", d)
	}
}
