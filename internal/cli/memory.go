package cli

import (
	"os"
	"runtime/debug"
)

// udpHeapLimit is the soft heap limit of `perfscope udp`. During the window
// the command allocates almost nothing; at its end, symbolizing the
// profile (kallsyms, the processes' ELF symbol tables) holds ~33 MB live
// for a moment, and the garbage collector's default goal of twice the live
// heap let a 120 s run peak at 70 MB RSS. A soft limit makes the collector
// work harder only in that last second, where the CPU is perfscope's own.
const udpHeapLimit = 40 << 20

// limitHeap sets a soft memory limit unless the user chose one with
// GOMEMLIMIT.
func limitHeap(bytes int64) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(bytes)
	}
}
