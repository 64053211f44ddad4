package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
)

// startHeap is the heap the process grows to before its first garbage
// collection.
const startHeap = 32 << 20

// deferFirstGC lets the heap grow to startHeap (or to the soft limit a
// command sets instead, udp's 40 MiB) before the first garbage
// collection, then hands back to the runtime's defaults: GOGC=100, and no
// limit unless a command set its own, which stays. The Go runtime
// collects from a 4 MB heap on: a 4 s `perfscope udp` collected six
// times, ~30 ms of its ~250 ms of CPU, decoding the kernel's BTF and
// building the report, while its heap never passed ~12 MB (peak RSS 35
// MB; ~40 MB without those collections). A run whose heap reaches the
// limit — a long serve, a large profile — collects there and from then on
// as before. GOGC or GOMEMLIMIT in the environment is the user's choice
// and is left alone.
func deferFirstGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(startHeap)
	// The sentinel becomes unreachable now; its finalizer runs after the
	// first collection, which only the limit can start.
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		debug.SetGCPercent(100)
		if debug.SetMemoryLimit(-1) == startHeap {
			debug.SetMemoryLimit(math.MaxInt64)
		}
	})
}
