package serve

import (
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// Connection limits. Anyone who can reach the metrics port can open
// connections, and each holds a descriptor of a process whose probes need
// descriptors too: serve holds at most a bounded number, and a connection
// beyond it closes the one that has waited longest without a request.
const (
	// DefaultMaxConnections bounds the connections held at once when the
	// open-file limit allows: a few scrapers need a few.
	DefaultMaxConnections = 256
	// minConnections is the fewest serve runs with: below it the
	// open-file limit is too low to both measure and serve.
	minConnections = 8
	// fdHeadroom is kept free beyond the probes' own descriptors: a
	// window opens /proc files, bpf_stats and an entry-cost program, and
	// the overhead governor reattaches what it detached.
	fdHeadroom = 64
)

// FDBudget is how serve divides its open-file limit.
type FDBudget struct {
	// Limit is the soft RLIMIT_NOFILE (Go raises it to the hard limit
	// when the process starts).
	Limit uint64
	// Open are the descriptors open once the probes are attached.
	Open int
	// Reserved are kept for the measuring loop: as many again as are
	// open (each window may reattach every probe group), plus headroom.
	Reserved int
	// MaxConnections is what is left for connections, at most
	// DefaultMaxConnections.
	MaxConnections int
}

// budgetFDs reads the open-file limit and the descriptors open now.
func budgetFDs() (FDBudget, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return FDBudget{}, fmt.Errorf("read the open-file limit: %w", err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return FDBudget{}, fmt.Errorf("count open descriptors: %w", err)
	}
	return newFDBudget(lim.Cur, len(fds)), nil
}

func newFDBudget(limit uint64, open int) FDBudget {
	b := FDBudget{Limit: limit, Open: open, Reserved: open + fdHeadroom}
	left := int64(min(limit, 1<<30)) - int64(b.Open) - int64(b.Reserved)
	b.MaxConnections = int(max(0, min(left, DefaultMaxConnections)))
	return b
}

// check refuses a limit too low to both measure and serve.
func (b FDBudget) check() error {
	if b.MaxConnections >= minConnections {
		return nil
	}
	need := b.Open + b.Reserved + minConnections
	return fmt.Errorf("the open-file limit (ulimit -n %d) leaves %d descriptors for scrapes: %d are open with the probes attached and %d are kept for their windows; raise it to at least %d (ulimit -n %d)",
		b.Limit, b.MaxConnections, b.Open, b.Reserved, need, need)
}

// connState is where a connection is in its life, for eviction.
type connState int

const (
	// waiting: no request read yet — new, sending its header slowly (or
	// never: slowloris), or idle between requests. Evicted first.
	waiting connState = iota
	// active: a request read (http.StateActive, set once its header is
	// whole), its handler about to run or just done. Evicted only when
	// no connection is waiting.
	active
	// serving: a handler runs for it. Never evicted: it is a scrape
	// being answered, bounded by the write timeout.
	serving
)

// connTable holds the connections the server has open, in the order they
// last changed state, and closes the oldest waiting (else active) one
// when a new connection would pass the limit.
type connTable struct {
	max int

	mu     sync.Mutex
	open   int
	queues [serving]*list.List // waiting, active; serving conns are in none
	// evicted and refused count the connections closed to make room, and
	// those closed on arrival because every held one was being served.
	evicted, refused uint64
}

func newConnTable(max int) *connTable {
	t := &connTable{max: max}
	for i := range t.queues {
		t.queues[i] = list.New()
	}
	return t
}

// trackedConn is a connection the table holds.
type trackedConn struct {
	net.Conn
	table *connTable

	// Guarded by table.mu.
	state  connState
	elem   *list.Element
	closed bool
}

// Close removes the connection from the table; safe more than once.
func (c *trackedConn) Close() error {
	c.table.forget(c)
	return c.Conn.Close()
}

// forget drops c from the table unless it was dropped already.
func (t *connTable) forget(c *trackedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.closed {
		t.dropLocked(c)
	}
}

func (t *connTable) dropLocked(c *trackedConn) {
	c.closed = true
	if c.elem != nil {
		t.queues[c.state].Remove(c.elem)
		c.elem = nil
	}
	t.open--
}

// admit adds a new connection. At the limit it first closes the
// connection that has waited longest for a request (else the one active
// longest); when every held connection is being served, it closes the new
// one and returns nil.
func (t *connTable) admit(raw net.Conn) net.Conn {
	t.mu.Lock()
	var victim *trackedConn
	if t.open >= t.max {
		for _, q := range t.queues {
			if e := q.Front(); e != nil {
				victim = e.Value.(*trackedConn)
				break
			}
		}
		if victim == nil {
			t.refused++
			t.mu.Unlock()
			raw.Close()
			return nil
		}
		t.evicted++
		t.dropLocked(victim)
	}
	c := &trackedConn{Conn: raw, table: t, state: waiting}
	c.elem = t.queues[waiting].PushBack(c)
	t.open++
	t.mu.Unlock()
	if victim != nil {
		// Its server goroutine's read fails and it ends; its own Close
		// then finds it already dropped.
		victim.Conn.Close()
	}
	return c
}

// move puts c at the back of state's queue (or in none while serving).
func (t *connTable) move(c *trackedConn, state connState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.closed || c.state == state {
		return
	}
	if c.elem != nil {
		t.queues[c.state].Remove(c.elem)
		c.elem = nil
	}
	c.state = state
	if state != serving {
		c.elem = t.queues[state].PushBack(c)
	}
}

// connState is the http.Server's ConnState hook: a connection that read a
// request is active; one idle between requests waits again.
func (t *connTable) connState(nc net.Conn, s http.ConnState) {
	c := tracked(nc)
	if c == nil {
		return
	}
	switch s {
	case http.StateActive:
		t.move(c, active)
	case http.StateIdle:
		t.move(c, waiting)
	}
}

type connKey struct{}

// connContext is the http.Server's ConnContext hook: handlers find their
// connection through the request's context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// protect marks a request's connection as served while h runs: a scrape
// being answered is never closed to make room.
func (t *connTable) protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, _ := r.Context().Value(connKey{}).(net.Conn)
		c := tracked(nc)
		if c != nil {
			t.move(c, serving)
			defer t.move(c, active)
		}
		h.ServeHTTP(w, r)
	})
}

// tracked finds the table's connection under a wrapper (TLS has
// NetConn).
func tracked(nc net.Conn) *trackedConn {
	for nc != nil {
		if c, ok := nc.(*trackedConn); ok {
			return c
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		nc = u.NetConn()
	}
	return nil
}

// stats are the table's counts, for metrics.
func (t *connTable) stats() (open int, evicted, refused uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open, t.evicted, t.refused
}

// limitedListener admits every accepted connection through the table.
type limitedListener struct {
	net.Listener
	table *connTable
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.table.admit(raw); c != nil {
			return c, nil
		}
	}
}

// connCollector exports the table's counts.
type connCollector struct {
	table                     *connTable
	openDesc, maxDesc, closed *prometheus.Desc
}

func newConnCollector(t *connTable) *connCollector {
	return &connCollector{table: t,
		openDesc: prometheus.NewDesc("perfscope_http_connections", "HTTP connections open to the metrics port.", nil, nil),
		maxDesc:  prometheus.NewDesc("perfscope_http_connections_max", "The most HTTP connections serve holds at once (from its open-file limit).", nil, nil),
		closed: prometheus.NewDesc("perfscope_http_connections_closed_total",
			"HTTP connections serve closed at the limit: evicted (the one waiting longest for a request) or refused (every held one was being served).", []string{"reason"}, nil),
	}
}

func (cc *connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.openDesc
	ch <- cc.maxDesc
	ch <- cc.closed
}

func (cc *connCollector) Collect(ch chan<- prometheus.Metric) {
	open, evicted, refused := cc.table.stats()
	ch <- prometheus.MustNewConstMetric(cc.openDesc, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(cc.maxDesc, prometheus.GaugeValue, float64(cc.table.max))
	ch <- prometheus.MustNewConstMetric(cc.closed, prometheus.CounterValue, float64(evicted), "evicted")
	ch <- prometheus.MustNewConstMetric(cc.closed, prometheus.CounterValue, float64(refused), "refused")
}
