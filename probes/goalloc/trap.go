package goalloc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// MeasureTrap is what one uprobe hit costs a program on this machine
// beyond the BPF program's own run — the breakpoint trap, the kernel's
// uprobe dispatch and the single-step back — which the programs cannot
// time themselves. It attaches the Put hook (for another process, so its
// program returns after the pid check) to offset in this process's
// executable exe, where call runs the hooked function n times, and times
// n calls with and without it (the thread's CPU time), the best of rounds
// each.
func MeasureTrap(exe string, offset uint64, call func(n int), n, rounds int) (time.Duration, error) {
	if runtime.GOARCH != "amd64" {
		return 0, fmt.Errorf("goalloc: %w", probes.ErrNotSupported)
	}
	if n <= 0 || rounds <= 0 {
		return 0, errors.New("goalloc: no calls to time")
	}
	spec, err := loadGoalloc()
	if err != nil {
		return 0, fmt.Errorf("load goalloc BPF spec: %w", err)
	}
	// No process has pid 0 as its tgid: the program returns at once.
	if err := probes.SetVariables(spec, map[string]any{goallocVarTargetTgid: uint32(0), goallocVarSizeReg: goallocGoArgReg(RBX), goallocVarCollectStacks: false}); err != nil {
		return 0, err
	}
	probes.Prepare()
	objs := &probeObjects{}
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return 0, probes.Classify("load goalloc BPF programs", err)
	}
	defer objs.Close()
	ex, err := link.OpenExecutable(exe)
	if err != nil {
		return 0, err
	}
	// The thread's CPU time, not the wall clock: the trap is charged to
	// the thread, and on a busy machine the wall clock counts the time
	// others ran.
	cpu := func() time.Duration {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return time.Duration(ts.Nano())
	}
	best := func() time.Duration {
		b := time.Duration(1 << 62)
		for i := 0; i < rounds; i++ {
			start := cpu()
			call(n)
			b = min(b, cpu()-start)
		}
		return b
	}
	// The calls run on this goroutine's thread, pinned for both timings.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	without := best()
	l, err := ex.Uprobe("", objs.UprobePoolPut, &link.UprobeOptions{Address: offset, PID: os.Getpid()})
	if err != nil {
		return 0, probes.Classify(fmt.Sprintf("attach a uprobe to %s at file offset %#x", exe, offset), err)
	}
	with := best()
	l.Close()
	without = min(without, best())
	if with <= without {
		return 0, nil
	}
	return (with - without) / time.Duration(n), nil
}
