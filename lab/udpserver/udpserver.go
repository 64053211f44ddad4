// Package udpserver is the UDP server of perfscope's labs: it reproduces
// the server configurations Makita's talk walks through — one socket shared by
// every receiving thread, N SO_REUSEPORT sockets selected by flow hash, and
// N SO_REUSEPORT sockets steered by the receiving CPU with
// SO_ATTACH_REUSEPORT_CBPF — each socket served by its own OS thread,
// optionally pinned to a CPU.
package udpserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/gosafe"
)

// Mode is a server configuration.
type Mode string

const (
	// Single: one socket, read by Threads threads (Makita's starting
	// point: every softirq contends on the one socket's locks).
	Single Mode = "single"
	// ReusePort: one SO_REUSEPORT socket per thread; the kernel picks a
	// socket by flow hash.
	ReusePort Mode = "reuseport"
	// ReusePortCPU: as ReusePort, plus a classic BPF program that picks
	// socket (receiving CPU mod N), so each CPU's softirq feeds one socket.
	ReusePortCPU Mode = "reuseport-cpu"
)

// ParseMode validates a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Single, ReusePort, ReusePortCPU:
		return m, nil
	}
	return "", fmt.Errorf("unknown server mode %q (want single, reuseport or reuseport-cpu)", s)
}

// Config describes a server.
type Config struct {
	Listen  netip.AddrPort
	Mode    Mode
	Threads int // receiving threads (and sockets, in the reuseport modes)
	// RcvBuf sets SO_RCVBUF when > 0 (the kernel doubles it).
	RcvBuf int
	// PinCPUs pins thread i to PinCPUs[i % len]; empty = no pinning.
	PinCPUs []int
	// Echo sends each datagram back, as Makita's echo server does.
	Echo bool
}

// Server is a running server.
type Server struct {
	cfg      Config
	fds      []int
	received atomic.Uint64
	wg       sync.WaitGroup
	stop     chan struct{}
	panics   []error // per receiving thread, returned by Stop
}

// Start binds the sockets and starts the receiving threads.
func Start(cfg Config) (*Server, error) {
	if cfg.Threads == 0 {
		cfg.Threads = 1
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, stop: make(chan struct{})}
	nsock := cfg.Threads
	if cfg.Mode == Single {
		nsock = 1
	}
	for i := 0; i < nsock; i++ {
		fd, err := s.bind(cfg)
		if err != nil {
			s.closeFDs()
			return nil, err
		}
		s.fds = append(s.fds, fd)
	}
	if cfg.Mode == ReusePortCPU {
		// Attaching to one socket of the group steers the whole group.
		if err := attachCPUSteering(s.fds[0], len(s.fds)); err != nil {
			s.closeFDs()
			return nil, err
		}
	}
	s.panics = make([]error, cfg.Threads)
	for i := 0; i < cfg.Threads; i++ {
		fd := s.fds[i%len(s.fds)]
		cpu := -1
		if len(cfg.PinCPUs) > 0 {
			cpu = cfg.PinCPUs[i%len(cfg.PinCPUs)]
		}
		s.wg.Add(1)
		go s.serve(fd, cpu, &s.panics[i])
	}
	return s, nil
}

func (s *Server) bind(cfg Config) (int, error) {
	family := unix.AF_INET
	if cfg.Listen.Addr().Is6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("udpserver: socket: %w", err)
	}
	if cfg.Mode != Single {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("udpserver: SO_REUSEPORT: %w", err)
		}
	}
	if cfg.RcvBuf > 0 {
		// SO_RCVBUFFORCE (root) is not capped by net.core.rmem_max, which a
		// lab namespace cannot raise: it is the host's, read-only.
		opt := unix.SO_RCVBUF
		if os.Geteuid() == 0 {
			opt = unix.SO_RCVBUFFORCE
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, cfg.RcvBuf); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("udpserver: SO_RCVBUF: %w", err)
		}
	}
	// A receive timeout lets threads notice Stop without closing sockets
	// under a blocked recvfrom.
	tv := unix.Timeval{Usec: 200_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("udpserver: SO_RCVTIMEO: %w", err)
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET {
		sa = &unix.SockaddrInet4{Port: int(cfg.Listen.Port()), Addr: cfg.Listen.Addr().As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(cfg.Listen.Port()), Addr: cfg.Listen.Addr().As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("udpserver: bind %s: %w", cfg.Listen, err)
	}
	return fd, nil
}

// attachCPUSteering installs the classic BPF program of the kernel's
// reuseport_bpf_cpu selftest: return the current CPU modulo the group size.
func attachCPUSteering(fd, n int) error {
	// SKF_AD_OFF + SKF_AD_CPU: the ancillary load of the current CPU.
	const skfAdOff, skfAdCPU int32 = -0x1000, 36
	cpuLoad := skfAdOff + skfAdCPU
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: uint32(cpuLoad)},
		{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: uint32(n)},
		{Code: unix.BPF_RET | unix.BPF_A},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fprog); err != nil {
		return fmt.Errorf("udpserver: SO_ATTACH_REUSEPORT_CBPF: %w", err)
	}
	return nil
}

func (s *Server) serve(fd, cpu int, panicked *error) {
	defer s.wg.Done()
	defer gosafe.Recover(panicked)
	// One OS thread per receiver, as a C server would have: thread CPUs and
	// pinning are what perfscope inspects.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cpu >= 0 {
		var set unix.CPUSet
		set.Set(cpu)
		unix.SchedSetaffinity(0, &set)
	}
	buf := make([]byte, 2048)
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		s.received.Add(1)
		if s.cfg.Echo && from != nil {
			unix.Sendto(fd, buf[:n], unix.MSG_DONTWAIT, from)
		}
	}
}

// Received is the number of datagrams read so far.
func (s *Server) Received() uint64 { return s.received.Load() }

// Sockets is the number of bound sockets.
func (s *Server) Sockets() int { return len(s.fds) }

// Stop stops the threads and closes the sockets; the error is a
// receiving thread's panic.
func (s *Server) Stop() error {
	close(s.stop)
	s.wg.Wait()
	s.closeFDs()
	return errors.Join(s.panics...)
}

func (s *Server) closeFDs() {
	for _, fd := range s.fds {
		unix.Close(fd)
	}
	s.fds = nil
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) (uint64, error) {
	s, err := Start(cfg)
	if err != nil {
		return 0, err
	}
	<-ctx.Done()
	err = s.Stop()
	return s.Received(), err
}
