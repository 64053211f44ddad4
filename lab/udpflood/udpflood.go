// Package udpflood is a bounded UDP load generator and sink for perfscope's
// tests, benchmarks and labs. Every run is limited in packets and in time,
// and refuses destinations outside loopback unless the caller says the
// address belongs to a network namespace it created.
package udpflood

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
)

// Config bounds a flood.
type Config struct {
	Target  netip.AddrPort
	Senders int // sending goroutines
	// Flows is the number of sockets (source ports) the senders send from,
	// dealt round-robin to them; each sender cycles through its own, a
	// datagram each (0: one per sender). The receiver's RSS queue and
	// reuseport socket are chosen by a hash of each flow: a few flows can
	// all land on one queue or socket, many cannot in practice.
	Flows    int
	Payload  int           // bytes per datagram
	Duration time.Duration // stop after this long
	// MaxPackets stops the flood after this many datagrams in total
	// (0 = only Duration bounds it).
	MaxPackets uint64
	// AllowNonLoopback must be set to send anywhere but 127.0.0.0/8 or ::1;
	// only for addresses inside a network namespace the caller created.
	AllowNonLoopback bool
	// Bind, when valid, is the local address senders bind to.
	Bind netip.Addr
	// Rate caps the datagrams per second of all senders together
	// (0 = as fast as they can). Pacing is in bursts of about a
	// millisecond, like a real client population, not evenly spaced.
	Rate int
}

// Result is what a flood sent.
type Result struct {
	Sent    uint64
	Errors  uint64
	Elapsed time.Duration
}

// Send floods cfg.Target until Duration, MaxPackets or ctx ends.
func Send(ctx context.Context, cfg Config) (Result, error) {
	if !cfg.Target.IsValid() {
		return Result{}, errors.New("udpflood: no target")
	}
	if !cfg.Target.Addr().IsLoopback() && !cfg.AllowNonLoopback {
		return Result{}, fmt.Errorf("udpflood: refusing non-loopback target %s", cfg.Target)
	}
	if cfg.Senders == 0 {
		cfg.Senders = 1
	}
	if cfg.Flows == 0 {
		cfg.Flows = cfg.Senders
	}
	if cfg.Payload == 0 {
		cfg.Payload = 64
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()

	var sent, errs atomic.Uint64
	var wg sync.WaitGroup
	start := time.Now()
	var firstErr error
	var once sync.Once
	var laddr *net.UDPAddr
	if cfg.Bind.IsValid() {
		laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.Bind, 0))
	}
	flows := make([][]*net.UDPConn, cfg.Senders)
	closeAll := func() {
		for _, cs := range flows {
			for _, c := range cs {
				c.Close()
			}
		}
	}
	for i := 0; i < cfg.Flows; i++ {
		conn, err := net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(cfg.Target))
		if err != nil {
			closeAll()
			return Result{}, fmt.Errorf("udpflood: dial %s: %w", cfg.Target, err)
		}
		flows[i%cfg.Senders] = append(flows[i%cfg.Senders], conn)
	}
	// A sender blocked in Write on a full send buffer (a veth whose peer
	// stopped draining) never reaches its context check: when the flood
	// ends, a deadline in the past wakes every blocked Write.
	stop := context.AfterFunc(ctx, func() {
		for _, cs := range flows {
			for _, c := range cs {
				c.SetWriteDeadline(time.Now())
			}
		}
	})
	defer stop()
	panics := make([]error, len(flows)) // one slot per sender, no lock
	for i, conns := range flows {
		wg.Add(1)
		go func(conns []*net.UDPConn, id int) {
			defer wg.Done()
			defer gosafe.Recover(&panics[id])
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			buf := make([]byte, cfg.Payload)
			buf[0] = byte(id)
			pace := newPacer(cfg.Rate, cfg.Senders)
			for n := 0; ; n++ {
				if !pace.wait(ctx, n) {
					return
				}
				// Check the context every 64 datagrams: cheap enough to
				// keep the sender near line rate, often enough to stop
				// within microseconds.
				if n&63 == 0 && ctx.Err() != nil {
					return
				}
				if cfg.MaxPackets > 0 && sent.Load() >= cfg.MaxPackets {
					return
				}
				if _, err := conns[n%len(conns)].Write(buf); err != nil {
					if ctx.Err() != nil {
						return
					}
					// ECONNREFUSED from a closed port is reported once;
					// the flood goes on (the receiver may bind later).
					errs.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				sent.Add(1)
			}
		}(conns, i)
	}
	wg.Wait()
	r := Result{Sent: sent.Load(), Errors: errs.Load(), Elapsed: time.Since(start)}
	if err := errors.Join(panics...); err != nil {
		return r, err
	}
	if r.Sent == 0 && firstErr != nil {
		return r, fmt.Errorf("udpflood: nothing sent: %w", firstErr)
	}
	return r, nil
}

// pacer holds one sender to its share of Config.Rate.
type pacer struct {
	perSecond float64
	start     time.Time
}

func newPacer(rate, senders int) pacer {
	return pacer{perSecond: float64(rate) / float64(senders), start: time.Now()}
}

// wait blocks until the sender may send its n-th datagram, and says false
// when the flood ended meanwhile. Sleeping in steps of a millisecond keeps
// the timer cost negligible at any rate.
func (p pacer) wait(ctx context.Context, n int) bool {
	if p.perSecond <= 0 {
		return true
	}
	for float64(n) > p.perSecond*time.Since(p.start).Seconds() {
		if ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// Sink receives datagrams on one socket and counts them.
type Sink struct {
	Conn     *net.UDPConn
	received atomic.Uint64
	done     chan struct{}
	panicked error // a panic of the receive loop, returned by Close
}

// Listen opens a sink on addr (e.g. 127.0.0.1:0) and starts receiving.
func Listen(addr string) (*Sink, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	c, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	s := &Sink{Conn: c, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer gosafe.Recover(&s.panicked)
		buf := make([]byte, 65536)
		for {
			if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			s.received.Add(1)
		}
	}()
	return s, nil
}

// AddrPort is where the sink listens.
func (s *Sink) AddrPort() netip.AddrPort {
	return s.Conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Received is the number of datagrams read so far.
func (s *Sink) Received() uint64 { return s.received.Load() }

// Close stops the sink.
func (s *Sink) Close() error {
	err := s.Conn.Close()
	<-s.done
	return errors.Join(s.panicked, err)
}
