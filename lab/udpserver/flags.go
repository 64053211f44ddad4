package udpserver

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/perfscope/perfscope/collectors/cpuset"
)

// Flags are `perfscope lab udp-server`'s flags as given.
type Flags struct {
	Listen   string
	Mode     string
	Threads  int
	RcvBuf   int
	Pin      string
	Echo     bool
	For      time.Duration
	Progress time.Duration
}

// Config checks the flags and gives the server they describe; every
// error is one sentence naming the flag, the user's to correct.
func (f Flags) Config() (Config, error) {
	listen, err := netip.ParseAddrPort(f.Listen)
	if err != nil {
		return Config{}, fmt.Errorf("--listen %q: want ADDR:PORT", f.Listen)
	}
	mode, err := ParseMode(f.Mode)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Listen: listen, Mode: mode, Threads: f.Threads, RcvBuf: f.RcvBuf, Echo: f.Echo}
	if f.Pin != "" {
		set, err := cpuset.ParseList(f.Pin)
		if err != nil {
			return Config{}, fmt.Errorf("--pin %q: %v", f.Pin, err)
		}
		cfg.PinCPUs = set.CPUs()
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	if f.For < 0 {
		return Config{}, fmt.Errorf("--for must be 0 (until interrupted) or positive, got %v", f.For)
	}
	if f.Progress < 0 || f.Progress > 0 && f.Progress < 10*time.Millisecond {
		return Config{}, fmt.Errorf("--progress must be 0 (never) or at least 10ms, got %v", f.Progress)
	}
	return cfg, nil
}

// Serve runs the server of cfg until ctx ends or f.For elapses: it says
// on log when it listens (a driver waits for that line) and, every
// f.Progress, how many datagrams it has read, with the wall-clock time in
// Unix nanoseconds, so a driver can tell what it read during another
// tool's measurement window. It returns the datagrams read and the
// sockets it read them from.
func (f Flags) Serve(ctx context.Context, cfg Config, log io.Writer) (received uint64, sockets int, err error) {
	if f.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.For)
		defer cancel()
	}
	s, err := Start(cfg)
	if err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(log, "listening on %s (%s, %d sockets)\n", cfg.Listen, cfg.Mode, s.Sockets())
	progress(ctx, log, s, f.Progress)
	sockets = s.Sockets() // Stop closes them
	s.Stop()
	return s.Received(), sockets, nil
}

func progress(ctx context.Context, log io.Writer, s *Server, interval time.Duration) {
	if interval <= 0 {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		fmt.Fprintf(log, "received %d at %d\n", s.Received(), time.Now().UnixNano())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
