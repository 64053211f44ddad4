package cpuprofile

import (
	"fmt"
	"strings"

	"github.com/perfscope/perfscope/collectors/symbols"
)

// RootFrame is the synthetic frame put below each stack, so one graph can
// be split by process, thread or CPU.
type RootFrame int

const (
	// RootComm roots stacks at the thread's command name, as FlameGraph's
	// stackcollapse-perf does by default.
	RootComm RootFrame = iota
	// RootNone puts no synthetic frame.
	RootNone
	// RootProcess roots stacks at "comm-pid".
	RootProcess
	// RootThread roots stacks at "comm-pid/tid".
	RootThread
	// RootCPU roots stacks at "cpu-N": the view for per-queue network
	// work, where each CPU runs one queue's softirqs.
	RootCPU
)

// Frames names s's stack root first: the root frame, then user frames from
// main outwards, then kernel frames down to the interrupted function.
func Frames(sym *symbols.Symbolizer, s Sample, root RootFrame) []string {
	frames := make([]string, 0, 1+len(s.UserStack)+len(s.KernelStack))
	if r := rootName(s, root); r != "" {
		frames = append(frames, r)
	}
	if len(s.UserStack) > 0 {
		frames = appendReversed(frames, sym.User(s.PID, callSites(s.UserStack)))
	}
	if len(s.KernelStack) > 0 {
		frames = appendReversed(frames, sym.Kernel(callSites(s.KernelStack)))
	}
	if len(s.UserStack) == 0 && len(s.KernelStack) == 0 {
		// Only a kernel-only profile has samples without either half:
		// the CPU was running user code, whose stack was not asked for.
		frames = append(frames, UserSpaceFrame)
	}
	return frames
}

// KernelAddrs is every address Frames looks up in p's kernel stacks (their
// call sites), each once: what a symbolizer names in one batch
// (symbols.Symbolizer.KernelNames) before Frames names stack by stack.
func (p Profile) KernelAddrs() []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	for _, s := range p.Samples {
		for _, a := range callSites(s.KernelStack) {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// UserAddrs is every address Frames looks up in p's user stacks (their
// call sites), by process, each once: what a symbolizer reads binaries for
// in one pass (symbols.Symbolizer.PrepareUser) before Frames names stack
// by stack.
func (p Profile) UserAddrs() map[int][]uint64 {
	seen := map[[2]uint64]bool{}
	out := map[int][]uint64{}
	for _, s := range p.Samples {
		for _, a := range callSites(s.UserStack) {
			if k := [2]uint64{uint64(s.PID), a}; !seen[k] {
				seen[k] = true
				out[s.PID] = append(out[s.PID], a)
			}
		}
	}
	return out
}

// UserSpaceFrame stands for user code in a kernel-only profile, so its
// share of the CPU still shows.
const UserSpaceFrame = "[user space]"

func rootName(s Sample, root RootFrame) string {
	comm := strings.ReplaceAll(s.Comm, ";", ":")
	switch root {
	case RootComm:
		return comm
	case RootProcess:
		return fmt.Sprintf("%s-%d", comm, s.PID)
	case RootThread:
		return fmt.Sprintf("%s-%d/%d", comm, s.PID, s.TID)
	case RootCPU:
		return fmt.Sprintf("cpu-%d", s.CPU)
	}
	return ""
}

// callSites turns a leaf-first stack of return addresses into addresses
// inside the calls: a return address is the instruction after a call, which
// belongs to the next function when the call is a function's last
// instruction (calls to noreturn functions). The leaf is the interrupted
// instruction itself and stays as it is.
func callSites(stack []uint64) []uint64 {
	out := make([]uint64, len(stack))
	for i, a := range stack {
		if i > 0 && a > 0 {
			a--
		}
		out[i] = a
	}
	return out
}

func appendReversed(dst, leafFirst []string) []string {
	for i := len(leafFirst) - 1; i >= 0; i-- {
		dst = append(dst, leafFirst[i])
	}
	return dst
}
