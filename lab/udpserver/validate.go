package udpserver

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// MaxThreads bounds --threads: each receiving thread is an OS thread, and
// Go's runtime aborts the process (no recovery possible) past 10000.
const MaxThreads = 1024

// MaxRcvBuf bounds SO_RCVBUF: the kernel doubles the value into an int.
const MaxRcvBuf = 1 << 30

// ErrInvalid marks a configuration the server refuses.
var ErrInvalid = errors.New("invalid udp-server configuration")

// Validate checks cfg before anything is bound: every value the kernel
// would silently adjust (port 0, a negative buffer) or that would run
// away (a hundred thousand threads, a CPU that does not exist) is refused.
func (cfg Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if !cfg.Listen.IsValid() {
		return bad("no listen address")
	}
	if cfg.Listen.Port() == 0 {
		return bad("listen port 0 would bind a random port no sender knows")
	}
	if cfg.Threads < 1 || cfg.Threads > MaxThreads {
		return bad("threads must be between 1 and %d, got %d", MaxThreads, cfg.Threads)
	}
	if cfg.RcvBuf < 0 || cfg.RcvBuf > MaxRcvBuf {
		return bad("rcvbuf must be between 0 (the system default) and %d bytes, got %d", MaxRcvBuf, cfg.RcvBuf)
	}
	if len(cfg.PinCPUs) > 0 {
		var allowed unix.CPUSet
		if err := unix.SchedGetaffinity(0, &allowed); err != nil {
			return fmt.Errorf("read this process's CPUs: %w", err)
		}
		for _, c := range cfg.PinCPUs {
			if c < 0 || c >= len(allowed)*64 || !allowed.IsSet(c) {
				return bad("CPU %d is not one this process may run on (%d CPUs allowed)", c, allowed.Count())
			}
		}
	}
	return nil
}
