package tcplab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perfscope/perfscope/lab/netlab"
	"golang.org/x/sys/unix"
)

// listen opens a TCP listener on addr inside ns with an explicit listen()
// backlog (Go's net.Listen asks for the somaxconn of the namespace the
// process started in, not the lab's), optionally with SO_REUSEPORT. It
// returns the raw blocking descriptor: the lab's accepting threads call
// accept() on it themselves, as a threaded C or Java server does, so that
// several threads wait on one listener in the kernel (Go's own Accept would
// serialize them in the runtime instead).
func listen(ns string, addr netip.AddrPort, backlog int, reuseport bool) (int, error) {
	fd := -1
	err := netlab.InNetns(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return fmt.Errorf("SO_REUSEADDR: %w", err)
		}
		if reuseport {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
				return fmt.Errorf("SO_REUSEPORT: %w", err)
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}); err != nil {
			return fmt.Errorf("bind %s: %w", addr, err)
		}
		if err := unix.Listen(fd, backlog); err != nil {
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		return nil
	})
	if err != nil && fd >= 0 {
		unix.Close(fd)
		fd = -1
	}
	return fd, err
}

// Counts are what the lab's servers and clients did in a phase; the
// before/after table shows them beside perfscope's numbers.
type Counts struct {
	// Connects are connections the clients completed (handshake done and
	// the server's answer read); SlowConnects those whose connect took
	// a second or more: a SYN or handshake ACK the server's full accept
	// queue dropped, retransmitted after the kernel's 1 s timeout.
	Connects     uint64 `json:"connects"`
	SlowConnects uint64 `json:"slow_connects"`
	// ConnectFailures are connects that failed or timed out.
	ConnectFailures uint64 `json:"connect_failures"`
	// BytesReceived is what the server read from the bulk clients.
	BytesReceived uint64 `json:"bytes_received"`
}

// counters is Counts updated by many goroutines.
type counters struct {
	connects, slow, failures, bytes atomic.Uint64
}

func (c *counters) snapshot() Counts {
	return Counts{Connects: c.connects.Load(), SlowConnects: c.slow.Load(), ConnectFailures: c.failures.Load(), BytesReceived: c.bytes.Load()}
}

func (c Counts) sub(o Counts) Counts {
	return Counts{Connects: c.Connects - o.Connects, SlowConnects: c.SlowConnects - o.SlowConnects,
		ConnectFailures: c.ConnectFailures - o.ConnectFailures, BytesReceived: c.BytesReceived - o.BytesReceived}
}

// Load is one phase's server and clients, all goroutines of this process
// with their sockets in the lab's namespaces; Stop ends them and closes
// every socket.
type Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	c      counters
	lfds   []int

	mu    sync.Mutex
	conns map[io.Closer]struct{}
}

// Counts returns what the phase has done so far.
func (l *Load) Counts() Counts { return l.c.snapshot() }

// track remembers an open connection so Stop can close it; false when the
// load is stopping.
func (l *Load) track(c io.Closer) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Load) untrack(c io.Closer) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

// Stop ends the phase: listeners shut down (which wakes the threads
// blocked in accept), connections closed, every goroutine returned, then
// the listeners' descriptors closed.
func (l *Load) Stop() {
	l.cancel()
	for _, fd := range l.lfds {
		unix.Shutdown(fd, unix.SHUT_RDWR)
	}
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.conns = nil
	l.mu.Unlock()
	l.wg.Wait()
	for _, fd := range l.lfds {
		unix.Close(fd)
	}
	l.lfds = nil
}

func (l *Load) goFn(fn func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
	}()
}

// startLoad starts the server (in rns at server) and the clients (in sns)
// that a scenario's phase describes. It returns once the listeners exist.
func startLoad(ctx context.Context, rns, sns string, server netip.AddrPort, s Server, w Workload) (*Load, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cancel: cancel, conns: map[io.Closer]struct{}{}}
	listeners := max(s.Listeners, 1)
	for i := 0; i < listeners; i++ {
		fd, err := listen(rns, server, s.Backlog, listeners > 1)
		if err != nil {
			l.Stop()
			return nil, err
		}
		l.lfds = append(l.lfds, fd)
	}
	for _, fd := range l.lfds {
		for t := 0; t < max(s.Threads, 1); t++ {
			l.goFn(func() { l.serve(ctx, fd, s, w) })
		}
	}
	for i := 0; i < w.Clients; i++ {
		l.goFn(func() {
			// Each client is an OS thread in the sender's namespace
			// (see netlab.InNetns): every socket it dials is created there.
			err := netlab.InNetns(sns, func() error {
				if w.Bulk {
					l.bulkClient(ctx, server)
				} else {
					l.connectClient(ctx, server)
				}
				return nil
			})
			if err != nil {
				l.c.failures.Add(1)
			}
		})
	}
	return l, nil
}

// serve is one accepting thread: a blocking accept() on the listener (the
// goroutine holds its OS thread for the call, as a thread of a threaded
// server would). For a connection storm each connection is answered inline
// after AcceptWork (the slow accept loop the fault needs); bulk connections
// are read to the end in their own goroutine.
func (l *Load) serve(ctx context.Context, lfd int, s Server, w Workload) {
	for ctx.Err() == nil {
		fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err == unix.EINTR || err == unix.ECONNABORTED {
			continue
		}
		if err != nil {
			return // the listener was shut down
		}
		if w.Bulk {
			f := os.NewFile(uintptr(fd), "lab-conn")
			if !l.track(f) {
				f.Close()
				return
			}
			l.goFn(func() { l.drain(f) })
			continue
		}
		c := rawConn{fd: fd}
		if !l.track(c) {
			unix.Close(fd)
			return
		}
		busy(s.AcceptWork)
		tv := unix.Timeval{Sec: 2}
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		var b [1]byte
		if n, err := unix.Read(fd, b[:]); err == nil && n == 1 {
			unix.Write(fd, b[:])
		}
		l.untrack(c) // out of Stop's reach before the number is freed
		unix.Close(fd)
	}
}

// rawConn is an accepted connection its accepting thread serves and
// closes itself. Close only shuts it down, which wakes the thread if it
// is blocked reading: closing the descriptor under it could hand its
// number to another socket while the thread still uses it.
type rawConn struct{ fd int }

func (c rawConn) Close() error { return unix.Shutdown(c.fd, unix.SHUT_RDWR) }

// drain reads a bulk connection until it ends.
func (l *Load) drain(f *os.File) {
	defer l.untrack(f)
	c, err := net.FileConn(f)
	if err != nil {
		return
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		l.c.bytes.Add(uint64(n))
		if err != nil {
			return
		}
	}
}

// busy spins for d: the per-connection work of a server that accepts
// slower than connections arrive (a sleep would let the CPU idle, and
// the storm is about accept throughput, not latency).
func busy(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// connectClient opens connections back to back: connect, send a byte,
// read the answer, close.
func (l *Load) connectClient(ctx context.Context, server netip.AddrPort) {
	d := net.Dialer{Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		start := time.Now()
		c, err := d.DialContext(ctx, "tcp4", server.String())
		if err != nil {
			if ctx.Err() == nil {
				l.c.failures.Add(1)
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		if !l.track(c) {
			c.Close()
			return
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		_, err = c.Write(b[:])
		if err == nil {
			_, err = io.ReadFull(c, b[:])
		}
		l.untrack(c)
		switch {
		case err != nil && ctx.Err() == nil:
			l.c.failures.Add(1)
		case err == nil:
			l.c.connects.Add(1)
			if time.Since(start) >= time.Second {
				l.c.slow.Add(1)
			}
		}
	}
}

// bulkClient sends 64 KiB writes as fast as the connection takes, until
// the phase ends.
func (l *Load) bulkClient(ctx context.Context, server netip.AddrPort) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp4", server.String())
	if err != nil {
		if ctx.Err() == nil {
			l.c.failures.Add(1)
		}
		return
	}
	if !l.track(c) {
		c.Close()
		return
	}
	defer l.untrack(c)
	l.c.connects.Add(1)
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		if _, err := c.Write(buf); err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				l.c.failures.Add(1)
			}
			return
		}
	}
}
