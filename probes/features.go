package probes

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ProgramTypeCheck is the outcome of loading and attaching a minimal program
// of one type. Version numbers lie (backports, distribution configs,
// lockdown, seccomp), so perfscope asks the kernel directly.
type ProgramTypeCheck struct {
	Type string // tracepoint, raw_tp, tp_btf, perf_event, kprobe, fentry
	// Stage is where it failed: "load" or "attach"; empty when it worked.
	Stage string
	Err   error
}

// OK reports whether the program type loads and attaches here.
func (c ProgramTypeCheck) OK() bool { return c.Err == nil }

// Refused tells a kernel that knows the type but will not allow it (EPERM,
// e.g. fentry under lockdown or a restrictive LSM) from one that lacks it.
func (c ProgramTypeCheck) Refused() bool { return errors.Is(c.Err, ErrPermission) }

// CheckProgramTypes loads and attaches one trivial program of each type
// perfscope may use, then detaches it. The attach targets are tracepoints
// and functions every kernel has.
func CheckProgramTypes() []ProgramTypeCheck {
	Prepare()
	return []ProgramTypeCheck{
		checkTracepoint(),
		checkRawTP(),
		checkTPBTF(),
		checkPerfEvent(),
		checkKprobe(),
		checkFentry(),
	}
}

var trivial = asm.Instructions{asm.LoadImm(asm.R0, 0, asm.DWord), asm.Return()}

func load(spec *ebpf.ProgramSpec) (*ebpf.Program, error) {
	spec.Instructions = trivial
	spec.License = "GPL"
	return newProgram(spec)
}

func result(typ, stage string, err error) ProgramTypeCheck {
	if err == nil {
		return ProgramTypeCheck{Type: typ}
	}
	return ProgramTypeCheck{Type: typ, Stage: stage, Err: Classify(stage+" "+typ, err)}
}

func checkTracepoint() ProgramTypeCheck {
	prog, err := load(&ebpf.ProgramSpec{Type: ebpf.TracePoint})
	if err != nil {
		return result("tracepoint", "load", err)
	}
	defer prog.Close()
	err = WithTracefs(func(string) error {
		l, err := link.Tracepoint("irq", "softirq_entry", prog, nil)
		if err == nil {
			l.Close()
		}
		return err
	})
	if err != nil {
		return result("tracepoint", "attach", err)
	}
	return result("tracepoint", "", nil)
}

func checkRawTP() ProgramTypeCheck {
	prog, err := load(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint})
	if err != nil {
		return result("raw_tp", "load", err)
	}
	defer prog.Close()
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "softirq_entry", Program: prog})
	if err != nil {
		return result("raw_tp", "attach", err)
	}
	l.Close()
	return result("raw_tp", "", nil)
}

func checkTPBTF() ProgramTypeCheck {
	prog, err := load(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "softirq_entry"})
	if err != nil {
		return result("tp_btf", "load", err)
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		return result("tp_btf", "attach", err)
	}
	l.Close()
	return result("tp_btf", "", nil)
}

func checkPerfEvent() ProgramTypeCheck {
	prog, err := load(&ebpf.ProgramSpec{Type: ebpf.PerfEvent})
	if err != nil {
		return result("perf_event", "load", err)
	}
	defer prog.Close()
	fd, err := OpenCPUClock(0, 1)
	if err != nil {
		return result("perf_event", "attach", err)
	}
	defer unix.Close(fd)
	l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
	if err != nil {
		return result("perf_event", "attach", err)
	}
	l.Close()
	return result("perf_event", "", nil)
}

// OpenCPUClock opens a software cpu-clock perf event on cpu sampling at freq
// Hz, for all processes. It works in VMs where hardware counters do not.
func OpenCPUClock(cpu, freq int) (int, error) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample: uint64(freq),
		Bits:   unix.PerfBitFreq,
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("perf_event_open cpu-clock on CPU %d: %w", cpu, err)
	}
	return fd, nil
}

func checkKprobe() ProgramTypeCheck {
	prog, err := load(&ebpf.ProgramSpec{Type: ebpf.Kprobe})
	if err != nil {
		return result("kprobe", "load", err)
	}
	defer prog.Close()
	l, err := link.Kprobe("udp_rcv", prog, nil)
	if err != nil {
		return result("kprobe", "attach", err)
	}
	l.Close()
	return result("kprobe", "", nil)
}

func checkFentry() ProgramTypeCheck {
	prog, err := load(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, AttachTo: "udp_rcv"})
	if err != nil {
		return result("fentry", "load", err)
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		return result("fentry", "attach", err)
	}
	l.Close()
	return result("fentry", "", nil)
}

// TracepointCheck says whether a tracepoint exists, from the kernel's BTF
// (btf_trace_<name>, what tp_btf needs) and from tracefs (what classic
// tracepoints need) when tracefs is mounted.
type TracepointCheck struct {
	CatalogEntry
	InBTF     bool
	InTracefs *bool // nil when tracefs is not mounted
}

// CheckTracepoints looks up every tracepoint of entries. It does not mount
// tracefs: doctor reports on the system as it is.
func CheckTracepoints(entries []CatalogEntry) ([]TracepointCheck, error) {
	kernel, btfErr := KernelTypes()
	var tracefs string
	for _, d := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(d + "/events"); err == nil {
			tracefs = d
			break
		}
	}
	var out []TracepointCheck
	for _, e := range entries {
		c := TracepointCheck{CatalogEntry: e}
		if btfErr == nil {
			var t *btf.Typedef
			c.InBTF = kernel.TypeByName("btf_trace_"+e.Name, &t) == nil
		}
		if tracefs != "" {
			_, err := os.Stat(fmt.Sprintf("%s/events/%s/%s", tracefs, e.Group, e.Name))
			ok := err == nil
			c.InTracefs = &ok
		}
		out = append(out, c)
	}
	return out, btfErr
}
