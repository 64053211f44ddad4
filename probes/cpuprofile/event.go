package cpuprofile

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// Event is the perf event that drives sampling, named as perf names it.
type Event int

const (
	// EventAuto samples with cycles where the hardware event opens and
	// falls back to cpu-clock where it does not, as `perf record` does.
	EventAuto Event = iota
	// EventCycles is the hardware cycles event (PERF_COUNT_HW_CPU_CYCLES):
	// it counts work, not wall time, so a CPU is sampled in proportion to
	// what it runs — softirq work on an otherwise idle CPU included — and a
	// halted CPU, which does no work, is not sampled at all. Needs a PMU.
	EventCycles
	// EventCPUClock is the software cpu-clock event, an hrtimer: it works
	// without a PMU, but on a virtual CPU that halts when idle the timer
	// stops with it, so the work such a CPU does between halts is barely
	// sampled.
	EventCPUClock
)

// EventNames are the names Event.String gives and ParseEvent takes.
var EventNames = []string{"auto", "cycles", "cpu-clock"}

func (e Event) String() string {
	if e < 0 || int(e) >= len(EventNames) {
		return fmt.Sprintf("event(%d)", int(e))
	}
	return EventNames[e]
}

// ParseEvent reads an event name: auto, cycles or cpu-clock.
func ParseEvent(s string) (Event, error) {
	for i, n := range EventNames {
		if s == n {
			return Event(i), nil
		}
	}
	return EventAuto, fmt.Errorf("unknown event %q (want auto, cycles or cpu-clock)", s)
}

// PMU is what the kernel's answer to opening cycles says about the CPUs'
// performance monitoring unit.
type PMU int

const (
	// PMUUnknown: cycles was refused for a reason that says nothing of
	// the PMU (a missing privilege, an invalid attribute).
	PMUUnknown PMU = iota
	// PMUPresent: cycles opens (or its counters are only busy).
	PMUPresent
	// PMUAbsent: the kernel has no cycles event (ENOENT, ENODEV, ENXIO):
	// no PMU, as in a virtual machine without PMU passthrough.
	PMUAbsent
	// PMUNoSampling: the PMU counts but cannot sample (EOPNOTSUPP: no
	// overflow interrupt), as some hypervisors' virtual PMUs.
	PMUNoSampling
)

// PMUNames are the names PMU.String gives.
var PMUNames = []string{"unknown", "present", "absent", "cannot-sample"}

func (p PMU) String() string {
	if p < 0 || int(p) >= len(PMUNames) {
		return fmt.Sprintf("pmu(%d)", int(p))
	}
	return PMUNames[p]
}

// EventChoice is which event a profiler samples with, and why.
type EventChoice struct {
	// Event is EventCycles or EventCPUClock.
	Event Event
	// Requested is what the caller asked for (EventAuto by default).
	Requested Event
	PMU       PMU
	// Reason says in one clause why Event was chosen.
	Reason string
}

// ChooseEvent decides which event samples, from what was requested and
// how the kernel answered an attempt to open cycles (cyclesErr; nil: it
// opened). It is the whole decision, pure, so that it is tested from the
// kernel's answers on machines that give others.
//
// perf falls back from cycles to cpu-clock when the kernel has no cycles
// event (ENOENT, ENODEV, ENXIO: tools/perf/util/evsel.c,
// evsel__fallback). auto does the same, and also when the PMU cannot
// sample (EOPNOTSUPP), when its counters are taken (EBUSY), and on any
// other refusal: auto means the best event that opens, and a refusal that
// is not about cycles (a missing privilege) refuses cpu-clock too, with
// its own sentence. cpu-clock asked for is used whatever the answer,
// which only tells the PMU's state. cycles asked for and refused is an
// error: ErrNotSupported when the machine has no usable cycles event,
// ErrPermission when the kernel refused the privilege.
func ChooseEvent(want Event, cyclesErr error) (EventChoice, error) {
	c := EventChoice{Requested: want, PMU: pmuOf(cyclesErr)}
	switch want {
	case EventCPUClock:
		c.Event, c.Reason = EventCPUClock, "as asked"
		if cyclesErr == nil {
			c.Reason += "; the hardware cycles event would open here"
		} else if c.PMU != PMUUnknown {
			c.Reason += "; " + refusal(cyclesErr)
		}
		return c, nil
	case EventCycles:
		if cyclesErr != nil {
			return c, cyclesUnavailable(cyclesErr)
		}
		c.Event, c.Reason = EventCycles, "as asked"
		return c, nil
	case EventAuto:
		if cyclesErr == nil {
			c.Event, c.Reason = EventCycles, "the hardware cycles event opens here: perf record's default"
			return c, nil
		}
		c.Event = EventCPUClock
		c.Reason = refusal(cyclesErr) + "; cpu-clock is perf's fallback"
		return c, nil
	}
	return c, fmt.Errorf("unknown sampling event %v", want)
}

// pmuOf reads the PMU's state from the kernel's answer to cycles.
func pmuOf(err error) PMU {
	switch {
	case err == nil, errors.Is(err, unix.EBUSY):
		return PMUPresent
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return PMUAbsent
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, syscall.Errno(524)) /* ENOTSUPP */ :
		return PMUNoSampling
	}
	return PMUUnknown
}

// refusal says in a clause why cycles did not open.
func refusal(err error) string {
	switch pmuOf(err) {
	case PMUAbsent:
		return fmt.Sprintf("the hardware cycles event is not supported here (%s: no PMU, as in a virtual machine without PMU passthrough)", errnoName(err))
	case PMUNoSampling:
		return fmt.Sprintf("the PMU cannot sample cycles here (%s: no overflow interrupt)", errnoName(err))
	case PMUPresent:
		return fmt.Sprintf("the PMU's counters are taken by another user (%s)", errnoName(err))
	}
	return fmt.Sprintf("the kernel refused the hardware cycles event (%s)", errnoName(err))
}

// cyclesUnavailable is the error of cycles asked for and refused: one
// sentence saying what to do instead, marked ErrPermission when the
// kernel refused the privilege and ErrNotSupported otherwise (the machine
// has no cycles event perfscope can sample with), so that the caller's
// exit code says which.
func cyclesUnavailable(err error) error {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return &eventError{msg: fmt.Sprintf("the kernel refused the hardware cycles event (%s): run as root or with CAP_PERFMON", errnoName(err)),
			errs: []error{probes.ErrPermission, err}}
	}
	return &eventError{msg: refusal(err) + ": sample with cpu-clock instead (--event cpu-clock or auto; event=cpu-clock in a recipe)", errs: []error{probes.ErrNotSupported, err}}
}

// eventError is one sentence that unwraps to a sentinel and the kernel's
// errno without printing them again.
type eventError struct {
	msg  string
	errs []error
}

func (e *eventError) Error() string   { return e.msg }
func (e *eventError) Unwrap() []error { return e.errs }

// errnoName is the errno's symbolic name ("ENOENT"), or the error's text.
func errnoName(err error) string {
	var no syscall.Errno
	if !errors.As(err, &no) {
		return err.Error()
	}
	switch no {
	case 524:
		return "ENOTSUPP"
	case unix.EOPNOTSUPP: // also ENOTSUP on Linux; perf's messages say EOPNOTSUPP
		return "EOPNOTSUPP"
	}
	if name := unix.ErrnoName(no); name != "" {
		return name
	}
	return no.Error()
}
