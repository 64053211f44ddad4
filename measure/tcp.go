package measure

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/collectors/tcpdiag"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/tcpevents"
)

// Defaults of the tcp part.
const (
	// DefaultTCPSampleEvery is how often the listeners' accept queues are
	// sampled: a queue that fills and drains faster is seen only through
	// ListenOverflows.
	DefaultTCPSampleEvery = 100 * time.Millisecond
	// DefaultTCPTop is the connections (and event rows) listed.
	DefaultTCPTop = 20
)

// TCPOptions configure the tcp part.
type TCPOptions struct {
	Method probes.AttachMethod
	// Port keeps the listeners, connections and events of this local port
	// (0: every port); PID the listeners and connections this process
	// holds (0: every process).
	Port, PID int
	// Top is how many connections and event rows are listed.
	Top int
	// SampleEvery is the accept queues' sampling period.
	SampleEvery time.Duration
}

// TCP is the tcp part: the namespace's TCP counters, settings and sockstat
// at both ends of the window, the listeners' accept queues sampled through
// it (sock_diag), the busiest connections at its end with their tcp_info
// and owners, and retransmits and resets per connection (the tcpevents
// probe, exact).
type TCP struct {
	snapshotPart[tcpevents.Snapshot, TCPEventsProbe]
	opts TCPOptions
	src  Sources

	countersAt        [2]netstat.TCPCounters
	firstErr, lastErr error
	settings          netstat.TCPSettings
	settingsErr       error
	sockstat          netstat.TCPSockstat
	sockstatErr       error

	// startBytes are each connection's bytes received plus acked at the
	// start, by socket cookie; startErr why they could not be read.
	startBytes map[uint64]uint64
	startErr   error

	// mu guards what the sampler writes while the window runs.
	mu        sync.Mutex
	listeners map[uint64]*listenerSamples
	samples   int
	diagErr   error
	stop      chan struct{}
	done      chan struct{}

	conns    []tcpdiag.Socket
	connsErr error
}

// listenerSamples is one listener's accept queue over the window, and
// its SYN queue: the half-open connections (request sockets in SYN_RECV)
// to its address and port.
type listenerSamples struct {
	sock             tcpdiag.Socket
	last, peak       uint32
	full, seen       int
	synLast, synPeak uint32
	synFull          int
}

// NewTCP returns the tcp part.
func NewTCP(opts TCPOptions) *TCP {
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = DefaultTCPSampleEvery
	}
	if opts.Top <= 0 {
		opts.Top = DefaultTCPTop
	}
	return &TCP{opts: opts, snapshotPart: snapshotPart[tcpevents.Snapshot, TCPEventsProbe]{what: "tcpevents probe"}}
}

// Open implements Part: the tcpevents probe is optional (its section says
// why it is missing); the counters and sock_diag are read at Begin.
func (p *TCP) Open(src Sources) error {
	p.src = src
	if src.Probes.TCPEvents == nil {
		p.open(nil, fmt.Errorf("no tcpevents probe in this run"))
		return nil
	}
	p.open(src.Probes.TCPEvents(tcpevents.Options{Method: p.opts.Method, Port: uint16(p.opts.Port)}))
	return nil
}

func (p *TCP) diag(states tcpdiag.States) ([]tcpdiag.Socket, error) {
	if p.src.TCPDiag == nil {
		return nil, fmt.Errorf("sock_diag is not read in this run")
	}
	return p.src.TCPDiag(tcpdiag.Query{States: states, Port: uint16(p.opts.Port)})
}

// Begin implements Part.
func (p *TCP) Begin(ctx context.Context) error {
	if err := p.snapshotPart.Begin(ctx); err != nil {
		return err
	}
	p.countersAt[0], p.firstErr = p.src.netstat().TCPCounters()
	p.startBytes, p.startErr = nil, nil
	if socks, err := p.diag(tcpdiag.Connected); err != nil {
		p.startErr = err
	} else {
		p.startBytes = map[uint64]uint64{}
		for _, s := range socks {
			if b, ok := connBytes(s); ok {
				p.startBytes[s.Cookie] = b
			}
		}
	}
	p.listeners, p.samples, p.diagErr = map[uint64]*listenerSamples{}, 0, nil
	p.sample()
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.sampler(ctx)
	return nil
}

// sampler reads the listeners every SampleEvery until End, or until ctx
// ends (a window that never reaches End leaves no goroutine behind).
func (p *TCP) sampler(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.opts.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			p.sample()
		}
	}
}

// sample reads every listener's accept queue and SYN queue once.
func (p *TCP) sample() {
	socks, err := p.diag(tcpdiag.StatesOf(tcpdiag.Listen, tcpdiag.SynRecv))
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.diagErr == nil {
			p.diagErr = err
		}
		return
	}
	p.samples++
	var listening, halfOpen []tcpdiag.Socket
	for _, s := range socks {
		if s.Listening() {
			listening = append(listening, s)
		} else {
			halfOpen = append(halfOpen, s)
		}
	}
	for _, s := range listening {
		l := p.listeners[s.Cookie]
		if l == nil {
			l = &listenerSamples{sock: s}
			p.listeners[s.Cookie] = l
		}
		l.seen++
		l.last = s.RecvQ
		if s.RecvQ > l.peak {
			l.peak = s.RecvQ
		}
		// The kernel refuses a handshake when the queue holds more than
		// the backlog (sk_acceptq_is_full).
		if s.RecvQ > s.SendQ {
			l.full++
		}
		syn := synQueue(s, halfOpen)
		l.synLast = syn
		l.synPeak = max(l.synPeak, syn)
		// inet_csk_reqsk_queue_is_full: the SYN queue holds at most the
		// listen backlog.
		if s.SendQ > 0 && syn >= s.SendQ {
			l.synFull++
		}
	}
}

// synQueue counts the half-open connections of listener l: request
// sockets to its port and address (any address of its family when it
// listens on the wildcard). sock_diag does not say which socket of an
// SO_REUSEPORT group holds a request, so each member counts the group's.
func synQueue(l tcpdiag.Socket, halfOpen []tcpdiag.Socket) uint32 {
	var n uint32
	for _, h := range halfOpen {
		if h.Local.Port() != l.Local.Port() || h.Family != l.Family {
			continue
		}
		if l.Local.Addr().IsUnspecified() || l.Local.Addr() == h.Local.Addr() {
			n++
		}
	}
	return n
}

// End implements Part.
func (p *TCP) End(ctx context.Context) error {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	p.sample()
	err := p.snapshotPart.End(ctx)
	fs := p.src.netstat()
	p.countersAt[1], p.lastErr = fs.TCPCounters()
	p.settings, p.settingsErr = fs.TCPSettings()
	p.sockstat, p.sockstatErr = fs.TCPSockstat()
	p.conns, p.connsErr = p.diag(tcpdiag.Connected)
	if p.connsErr == nil {
		p.connsErr = tcpdiag.AttachOwners(p.src.sockets(), p.conns)
	}
	return err
}

// connBytes is a connection's bytes received plus acked over its life.
func connBytes(s tcpdiag.Socket) (uint64, bool) {
	if s.Info == nil || s.Info.BytesReceived == nil || s.Info.BytesAcked == nil {
		return 0, false
	}
	return *s.Info.BytesReceived + *s.Info.BytesAcked, true
}

func ownedBy(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// Evidence is the part's evidence for a window of length window.
func (p *TCP) Evidence(window time.Duration) evidence.TCPEvidence {
	ev := evidence.TCPEvidence{DurationNs: int64(window), Port: p.opts.Port, PID: p.opts.PID}
	switch {
	case p.firstErr != nil:
		ev.Counters.Unavailable = fmt.Sprintf("TCP counters: %v", p.firstErr)
	case p.lastErr != nil:
		ev.Counters.Unavailable = fmt.Sprintf("TCP counters: %v", p.lastErr)
	default:
		w := evidence.TCPCounters(p.countersAt[1].Sub(p.countersAt[0]))
		ev.Counters.Window = &w
	}
	if p.settingsErr == nil {
		ev.Settings = evidence.TCPSettings(p.settings)
	}
	if p.sockstatErr == nil {
		s := evidence.TCPSockstat(p.sockstat)
		ev.Sockstat = &s
	}
	ev.Listeners = p.listenerEvidence()
	ev.Connections = p.connectionEvidence()
	ev.Events = p.eventEvidence()
	return ev
}

func (p *TCP) listenerEvidence() evidence.ListenerSection {
	var s evidence.ListenerSection
	if p.diagErr != nil && p.samples == 0 {
		s.Unavailable = fmt.Sprintf("listeners: %v", p.diagErr)
		return s
	}
	var socks []tcpdiag.Socket
	for _, l := range p.listeners {
		socks = append(socks, l.sock)
	}
	ownerErr := tcpdiag.AttachOwners(p.src.sockets(), socks)
	group := map[netip.AddrPort]int{}
	for _, l := range p.listeners {
		group[l.sock.Local]++
	}
	for _, sock := range socks {
		l := p.listeners[sock.Cookie]
		if p.opts.PID != 0 && !ownedBy(sock.PIDs, p.opts.PID) {
			continue
		}
		row := evidence.TCPListener{Local: sock.Local, Inode: sock.Inode, PIDs: sock.PIDs, Backlog: l.sock.SendQ,
			QueueLast: l.last, QueuePeak: l.peak, FullSamples: l.full, Samples: l.seen, ReusePort: group[sock.Local],
			SynQueueLast: l.synLast, SynQueuePeak: l.synPeak, SynFullSamples: l.synFull}
		if len(sock.PIDs) > 0 {
			row.Comm = p.comm(sock.PIDs[0])
		}
		s.Rows = append(s.Rows, row)
	}
	sort.Slice(s.Rows, func(i, j int) bool {
		a, b := s.Rows[i], s.Rows[j]
		if a.FullSamples != b.FullSamples {
			return a.FullSamples > b.FullSamples
		}
		if a.QueuePeak != b.QueuePeak {
			return a.QueuePeak > b.QueuePeak
		}
		return a.Local.Compare(b.Local) < 0
	})
	if ownerErr != nil {
		s.Unavailable = fmt.Sprintf("listener owners: %v", ownerErr)
	} else if len(s.Rows) == 0 {
		s.Unavailable = "no listener" + p.filterText()
	}
	return s
}

// filterText is " on port P of pid N" for the filters given.
func (p *TCP) filterText() string {
	var b strings.Builder
	if p.opts.Port != 0 {
		fmt.Fprintf(&b, " on port %d", p.opts.Port)
	}
	if p.opts.PID != 0 {
		fmt.Fprintf(&b, " of pid %d", p.opts.PID)
	}
	return b.String()
}

func (p *TCP) comm(pid int) string {
	s, err := p.src.Root.ReadString("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

func (p *TCP) connectionEvidence() evidence.ConnectionSection {
	var s evidence.ConnectionSection
	if p.connsErr != nil {
		s.Unavailable = fmt.Sprintf("connections: %v", p.connsErr)
		return s
	}
	var feeds map[uint64]tcpevents.Feed
	if p.opened() {
		feeds = p.last.Sub(p.first).Feeds
	}
	var rows []evidence.TCPConnection
	for _, c := range p.conns {
		if p.opts.PID != 0 && !ownedBy(c.PIDs, p.opts.PID) {
			continue
		}
		row := evidence.TCPConnection{Local: c.Local, Remote: c.Remote, State: c.State.String(), PIDs: c.PIDs, RecvQ: c.RecvQ, SendQ: c.SendQ}
		if i := c.Info; i != nil {
			row.RTTUs, row.RTTVarUs, row.MinRTTUs, row.SndCwnd, row.TotalRetrans = i.RTTUs, i.RTTVarUs, i.MinRTTUs, i.SndCwnd, i.TotalRetrans
			row.BytesReceived, row.BytesAcked, row.BytesRetrans, row.RcvSpace, row.RcvWnd = i.BytesReceived, i.BytesAcked, i.BytesRetrans, i.RcvSpace, i.RcvWnd
		}
		if m := c.Memory; m != nil {
			row.Rcvbuf, row.Sndbuf, row.Drops, row.Backlog = m.Rcvbuf, m.Sndbuf, m.Drops, m.Backlog
		}
		if f, ok := feeds[c.Inode]; ok {
			row.Steering = steering(f)
		}
		if now, ok := connBytes(c); ok {
			if before, seen := p.startBytes[c.Cookie]; seen && now >= before {
				d := now - before
				row.BytesWindow = &d
			}
		}
		rows = append(rows, row)
	}
	s.Total = len(rows)
	// Busiest first: bytes over the window, then (connections opened
	// during it) over their life.
	key := func(r evidence.TCPConnection) (bool, uint64) {
		if r.BytesWindow != nil {
			return true, *r.BytesWindow
		}
		var n uint64
		if r.BytesReceived != nil {
			n += *r.BytesReceived
		}
		if r.BytesAcked != nil {
			n += *r.BytesAcked
		}
		return false, n
	}
	sort.SliceStable(rows, func(i, j int) bool {
		wi, ni := key(rows[i])
		wj, nj := key(rows[j])
		if ni != nj {
			return ni > nj
		}
		return wi && !wj
	})
	if len(rows) > p.opts.Top {
		rows = rows[:p.opts.Top]
	}
	s.Rows = rows
	return s
}

func (p *TCP) eventEvidence() evidence.TCPEventSection {
	var s evidence.TCPEventSection
	if !p.opened() {
		s.Unavailable = fmt.Sprintf("retransmits and resets per connection: %v", p.openErr)
		return s
	}
	d := p.last.Sub(p.first)
	count := func(c tcpevents.Count) evidence.TCPEventCount { return evidence.TCPEventCount(c) }
	s.Retransmits = count(d.Total(tcpevents.Retransmit))
	s.SynAckRetransmits = count(d.Total(tcpevents.RetransmitSynAck))
	s.ResetsSent = count(d.Total(tcpevents.ResetSent))
	s.ResetsReceived = count(d.Total(tcpevents.ResetReceived))
	s.RetransmitKinds = map[string]evidence.TCPEventCount{}
	for _, k := range []tcpevents.RetransmitKind{tcpevents.KindRTO, tcpevents.KindFast, tcpevents.KindTLP, tcpevents.KindSYN, tcpevents.KindOther} {
		s.RetransmitKinds[k.String()] = count(d.Kind(k))
	}
	s.LostConns = d.LostConns
	for k, c := range d.Conns {
		row := evidence.TCPConnEvents{Local: k.Local, Remote: k.Remote, Event: k.Event.String(), Events: c.Events, Segs: c.Segs}
		if k.State != 0 {
			row.State = tcpdiag.State(k.State).String()
		}
		switch k.Event {
		case tcpevents.Retransmit:
			row.Kind = tcpevents.RetransmitKind(k.Detail).String()
		case tcpevents.ResetSent:
			row.Kind = p.probe.ResetReason(k.Detail)
		}
		s.Top = append(s.Top, row)
	}
	sort.Slice(s.Top, func(i, j int) bool {
		a, b := s.Top[i], s.Top[j]
		if a.Events != b.Events {
			return a.Events > b.Events
		}
		if c := a.Local.Compare(b.Local); c != 0 {
			return c < 0
		}
		if c := a.Remote.Compare(b.Remote); c != 0 {
			return c < 0
		}
		return a.Event+a.Kind < b.Event+b.Kind
	})
	if len(s.Top) > p.opts.Top {
		s.Top = s.Top[:p.opts.Top]
	}
	return s
}
