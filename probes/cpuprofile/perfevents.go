package cpuprofile

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/perfscope/perfscope/probes"
	"golang.org/x/sys/unix"
)

// perfEvent is one CPU's sampling event and the attachment of the
// program to it.
type perfEvent struct {
	cpu  int
	fd   int
	link link.Link // nil when attached with the ioctl
}

func (e *perfEvent) close() error {
	var errs []error
	if e.link != nil {
		errs = append(errs, e.link.Close())
		e.link = nil
	}
	if e.fd >= 0 {
		// With the ioctl attachment, closing the event is what detaches.
		errs = append(errs, unix.Close(e.fd))
		e.fd = -1
	}
	return errors.Join(errs...)
}

// read is the event's enabled and running times since it was opened
// (the read format openEvent asks for: count, time_enabled,
// time_running).
func (e *perfEvent) read() (CPUCount, error) {
	var buf [3]uint64
	b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), unsafe.Sizeof(buf))
	n, err := unix.Read(e.fd, b)
	if err != nil {
		return CPUCount{}, fmt.Errorf("read the sampling event of CPU %d: %w", e.cpu, err)
	}
	if n != len(b) {
		return CPUCount{}, fmt.Errorf("read the sampling event of CPU %d: %d bytes, want %d", e.cpu, n, len(b))
	}
	return CPUCount{CPU: e.cpu, EnabledNs: buf[1], RunningNs: buf[2]}, nil
}

// openError is perf_event_open refusing an event, as opposed to the
// program failing to attach to one that opened.
type openError struct {
	cpu int
	ev  Event
	err error
}

func (e *openError) Error() string {
	return fmt.Sprintf("open %s perf event on CPU %d: %v", e.ev, e.cpu, e.err)
}

func (e *openError) Unwrap() error { return e.err }

func isOpenError(err error) bool {
	var oe *openError
	return errors.As(err, &oe)
}

// eventAttr is ev sampling at freq Hz (frequency mode: the kernel adjusts
// the period to hit freq samples per second of the event's own time: of
// wall time for cpu-clock, of busy time for cycles), for every process,
// with the times openEvent's readers need.
func eventAttr(ev Event, freq int) unix.PerfEventAttr {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_CPU_CLOCK,
		Sample:      uint64(freq),
		Bits:        unix.PerfBitFreq,
		Read_format: unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING,
	}
	if ev == EventCycles {
		attr.Type, attr.Config = unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	return attr
}

// probeEvent asks whether ev opens on cpu, and closes it again.
func probeEvent(cpu, freq int, ev Event) error {
	attr := eventAttr(ev, freq)
	attr.Bits |= unix.PerfBitDisabled
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return &openError{cpu: cpu, ev: ev, err: err}
	}
	return unix.Close(fd)
}

// openEvent opens ev on cpu sampling at freq Hz and attaches prog.
// cpu-clock is an hrtimer, so it works in VMs without a PMU; cycles
// needs one. A refusal to open is an *openError.
func openEvent(cpu, freq int, ev Event, prog *ebpf.Program) (*perfEvent, error) {
	attr := eventAttr(ev, freq)
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		if ev == EventCPUClock && errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("open cpu-clock perf event on CPU %d at %d Hz (above kernel.perf_event_max_sample_rate?): %w", cpu, freq, &openError{cpu: cpu, ev: ev, err: err})
		}
		return nil, probes.Classify(fmt.Sprintf("open %s perf event on CPU %d", ev, cpu), &openError{cpu: cpu, ev: ev, err: err})
	}
	pe := &perfEvent{cpu: cpu, fd: fd}
	l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
	if err == nil {
		pe.link = l
		return pe, nil
	}
	// Kernels before 5.15 have no perf links: attach the old way. The
	// attachment then lives exactly as long as the event's fd.
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, prog.FD()); err != nil {
		pe.close()
		return nil, probes.Classify(fmt.Sprintf("attach BPF to perf event on CPU %d", cpu), err)
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		pe.close()
		return nil, probes.Classify(fmt.Sprintf("enable perf event on CPU %d", cpu), err)
	}
	return pe, nil
}

// onlineCPUs lists the CPUs perf can open events on: offline CPUs refuse
// perf_event_open.
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("list online CPUs: %w", err)
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

// parseCPUList parses the kernel's CPU list format ("0-3,8,10-11").
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if last < first {
			return nil, fmt.Errorf("cpu list %q: range %s is reversed", s, part)
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("cpu list %q is empty", s)
	}
	return cpus, nil
}
