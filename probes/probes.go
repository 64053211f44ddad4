// Package probes holds what every perfscope BPF probe shares: choosing an
// attach method the kernel accepts, mounting tracefs (privately) when a
// classic tracepoint needs it, turning kernel errors into the sentinels the CLI maps
// to exit codes, and reading each program's own run time from bpf_stats.
//
// Each probe lives in its own sub-package and owns exactly one BPF object.
// Nothing outside probes/ imports cilium/ebpf.
package probes

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/perfscope/perfscope/base/gosafe"
	"golang.org/x/sys/unix"
)

var (
	// ErrNotSupported means the kernel lacks a feature a probe needs
	// (a tracepoint, a program type, BTF).
	ErrNotSupported = errors.New("not supported by this kernel")
	// ErrPermission means the kernel refused for lack of privilege.
	ErrPermission = errors.New("permission denied")
)

// AttachMethod is how a probe's programs are attached to tracepoints.
type AttachMethod string

const (
	// MethodAuto picks the first method below that the kernel accepts.
	MethodAuto AttachMethod = ""
	// MethodBTF attaches tp_btf programs: typed arguments, needs kernel BTF.
	MethodBTF AttachMethod = "tp_btf"
	// MethodRaw attaches raw tracepoints: no BTF, no tracefs needed.
	MethodRaw AttachMethod = "raw_tp"
	// MethodTracepoint attaches classic tracepoints: needs tracefs.
	MethodTracepoint AttachMethod = "tracepoint"
)

// Methods is the preference order of attach methods.
var Methods = []AttachMethod{MethodBTF, MethodRaw, MethodTracepoint}

// ParseMethod validates a user-supplied attach method.
func ParseMethod(s string) (AttachMethod, error) {
	switch m := AttachMethod(s); m {
	case MethodAuto, MethodBTF, MethodRaw, MethodTracepoint:
		return m, nil
	}
	return "", fmt.Errorf("unknown attach method %q (want tp_btf, raw_tp or tracepoint)", s)
}

// Prepare lifts the memlock rlimit where the kernel still charges BPF memory
// to it. Kernels ≥ 5.11 account BPF memory to the memory cgroup instead, and
// RemoveMemlock then does nothing; where raising the limit is not permitted
// (no CAP_SYS_RESOURCE) loading may still work, so that error is not fatal.
func Prepare() {
	_ = rlimit.RemoveMemlock()
}

// Classify wraps err with ErrPermission or ErrNotSupported when the kernel's
// errno says so, and appends the tail of the verifier log when there is one.
func Classify(what string, err error) error {
	if err == nil {
		return nil
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		log := ve.Log
		if len(log) > 8 {
			log = log[len(log)-8:]
		}
		return fmt.Errorf("%s: verifier rejected the program:\n%s\n%w", what, strings.Join(log, "\n"), ErrNotSupported)
	}
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES), errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s: %w (%w)", what, ErrPermission, err)
	case errors.Is(err, ebpf.ErrNotSupported), errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTSUP),
		errors.Is(err, syscall.Errno(524)) /* ENOTSUPP */, errors.Is(err, unix.EINVAL):
		return fmt.Errorf("%s: %w (%w)", what, ErrNotSupported, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// WithTracefs runs f with the directory where tracefs is mounted. When it
// is not mounted, f runs on an OS thread of its own in a private mount
// namespace where tracefs is mounted at /sys/kernel/tracing: the system's
// mount table never changes, and the mount vanishes with the thread when
// f returns — or with the process, even on SIGKILL, when nothing could
// have unmounted it. Only the thread f runs on sees the mount, so f must
// not hand tracefs paths to other goroutines.
func WithTracefs(f func(dir string) error) error {
	for _, d := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(d + "/events"); err == nil {
			return f(d)
		}
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: when this goroutine ends, the runtime ends the
		// thread, and the mount namespace with its last thread.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- Classify("unshare the mount namespace to mount tracefs", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- Classify("make the private mount namespace private", err)
			return
		}
		const d = "/sys/kernel/tracing"
		if err := unix.Mount("nodev", d, "tracefs", 0, ""); err != nil {
			errc <- Classify("mount tracefs at "+d, err)
			return
		}
		// f is the caller's code: a panic in it comes back as an error,
		// not a crash with this goroutine's trace.
		errc <- gosafe.Call(func() error { return f(d) })
	}()
	return <-errc
}

// ProgramCost is what one BPF program cost while it ran, from the kernel's
// bpf_stats (run count and cumulative run time), and the runs the kernel
// skipped.
type ProgramCost struct {
	Program  string        `json:"program"`
	RunCount uint64        `json:"run_count"`
	RunTime  time.Duration `json:"run_time_ns"`
	// Missed is the program's recursion_misses: events it did not see
	// because the kernel skipped it, counted whether or not bpf_stats
	// are on. A tracepoint or kprobe program is skipped while another
	// one runs on the same CPU (a softirq's event arriving while a
	// process-context program runs; counted since Linux 6.7, commit
	// dd8657894c11 "bpf: Count missed stats in trace_call_bpf"); a raw or
	// BTF tracepoint program only when it would run inside itself.
	Missed uint64 `json:"missed,omitempty"`
}

// PerRun is the mean cost of one run.
func (c ProgramCost) PerRun() time.Duration {
	if c.RunCount == 0 {
		return 0
	}
	return c.RunTime / time.Duration(c.RunCount)
}

// EnableStats turns on the kernel's BPF run-time statistics for as long as
// the returned Closer is open. It uses BPF_ENABLE_STATS rather than writing
// kernel.bpf_stats_enabled: the kernel reference-counts it and switches it
// off again when the file descriptor closes, even if perfscope is killed, so
// the sysctl is always restored.
func EnableStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, Classify("enable bpf_stats", err)
	}
	return c, nil
}

// Costs reads bpf_stats and recursion misses of the given programs, keyed
// by name.
func Costs(progs map[string]*ebpf.Program) []ProgramCost {
	var out []ProgramCost
	for name, p := range progs {
		if p == nil {
			continue
		}
		st, err := p.Stats()
		if err != nil {
			continue
		}
		out = append(out, ProgramCost{Program: name, RunCount: st.RunCount, RunTime: st.Runtime, Missed: st.RecursionMisses})
	}
	return out
}
