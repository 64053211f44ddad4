package measure

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/tcpdiag"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/tcpevents"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// TCPEventsProbe is what the tcp part needs of the tcpevents probe.
type TCPEventsProbe interface {
	probes.Snapshotter[tcpevents.Snapshot]
	// ResetReason names a sent reset's reason as the kernel's BTF does.
	ResetReason(detail uint32) string
}

// Defaults of the tcp part.
const (
	// DefaultTCPSampleEvery is how often the listeners' accept queues are
	// sampled: a queue that fills and drains faster is seen only through
	// ListenOverflows.
	DefaultTCPSampleEvery = 100 * time.Millisecond
	// synDumpBudget bounds the SYN-queue reads to this share of one CPU.
	// The listeners are read from the listening table alone, but the
	// half-open connections (SYN_RECV) only by walking the table of every
	// connection, TIME_WAIT included: with 26,000 TIME_WAIT sockets in the
	// namespace (after a load of new connections) one walk took 7 ms, and
	// at every 100 ms sample they cost perfscope tcp 7 % of a CPU. Even
	// in a namespace of a few sockets a walk of both families takes
	// ~0.65 ms (the whole established hash is walked, 262,144 buckets
	// here), so at 0.5 % of a CPU the SYN reads were half of perfscope's
	// own CPU in the window under an HTTP load, more than the accept
	// queues' reads every 100 ms and the budget's switches. A read that
	// took d waits d/synDumpBudget before the next, but never more than
	// synMaxEvery: a SYN queue is read at least every 5 s whatever its
	// cost, and a read slowed by a busy machine's scheduling does not
	// silence the rest of the window. At once a second, under nginx and
	// wrk opening connections (~9 ms a read) the reads were still the
	// largest share of perfscope's own CPU; every refused handshake is in
	// the exact counters (ListenDrops, TCPReqQFullDrop) whatever the
	// samples see.
	synDumpBudget = 0.001
	synMaxEvery   = 5 * time.Second
	// DefaultTCPTop is the connections (and event rows) listed.
	DefaultTCPTop = 20
)

// TCPOptions configure the tcp part.
type TCPOptions struct {
	Method probes.AttachMethod
	// Port keeps the listeners, connections and events of this local port
	// (0: every port); PID the listeners, connections and event rows of
	// the sockets this process holds (0: every process).
	Port, PID int
	// Select, from --cgroup, --container or --pod (SelectWorkload), keeps
	// the listeners, connections and event rows of the sockets its
	// processes hold; nil: every socket.
	Select *cgroup.Selection
	// Top is how many connections and event rows are listed.
	Top int
	// SampleEvery is the accept queues' sampling period.
	SampleEvery time.Duration
	// Timeline reads the counters at every tick of the window and keeps
	// each interval's accept-queue peaks (evidence.TCPEvidence.Intervals).
	Timeline bool
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
	// netns is the network namespace the TCP layer is read in: empty for
	// perfscope's own, else --pid's ("net:[4026532001]") at netnsPath
	// (/proc/PID/ns/net), whose MIB files are in netDir (/proc/PID/net).
	netns, netnsPath, netDir string

	countersAt        [2]netstat.TCPCounters
	firstErr, lastErr error
	// ended: a window ended on this part (countersAt[1] is its reading).
	ended       bool
	settings    netstat.TCPSettings
	settingsErr error
	sockstat    netstat.TCPSockstat
	sockstatErr error

	// startBytes are each connection's bytes received plus acked at the
	// start, by socket cookie; startErr why they could not be read.
	startBytes map[uint64]uint64
	startErr   error

	// mu guards what the sampler writes while the window runs.
	mu        sync.Mutex
	listeners map[uint64]*listenerSamples
	samples   int
	diagErr   error
	// synNext is when the sampler next reads the SYN queues, spaced to
	// keep them within synBudget of one CPU (synDumpBudget).
	synNext   time.Time
	synBudget float64
	// findable are the listeners the last listing found, when each can be
	// looked up alone (findableListeners); nil: list every sample.
	findable []tcpdiag.Socket
	stop     chan struct{}
	done     chan struct{}

	conns    []tcpdiag.Socket
	connsErr error

	// The timeline: the counters at the last tick, the intervals so far,
	// and each listener's fullest queue and full samples since the last
	// tick (under mu).
	tickAt    netstat.TCPCounters
	tickOK    bool
	intervals []tcpInterval
	ivPeak    map[uint64]uint32
	ivFull    map[uint64]int
}

// tcpInterval is one tick's counters (ok: read at both ends) and the
// listeners' accept queues between the ticks, by cookie.
type tcpInterval struct {
	end  time.Time
	d    netstat.TCPCounters
	ok   bool
	peak map[uint64]uint32
	full map[uint64]int
}

// NewTCP returns the tcp part.
func NewTCP(opts TCPOptions) *TCP {
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = DefaultTCPSampleEvery
	}
	if opts.Top <= 0 {
		opts.Top = DefaultTCPTop
	}
	return &TCP{opts: opts, synBudget: synDumpBudget, snapshotPart: snapshotPart[tcpevents.Snapshot, TCPEventsProbe]{what: "tcpevents probe"}}
}

// Open implements Part: the tcpevents probe is optional (its section says
// why it is missing); the counters and sock_diag are read at Begin.
func (p *TCP) Open(src Sources) error {
	p.src = src
	p.findNetns()
	if !src.Probes.Has(&tcpevents.Spec) {
		p.open(nil, fmt.Errorf("no tcpevents probe in this run"))
		return nil
	}
	o := tcpevents.Options{Method: p.opts.Method, Port: uint16(p.opts.Port)}
	if p.netns != "" {
		ino, err := probes.NetnsInode(p.netnsPath)
		if err != nil {
			p.open(nil, fmt.Errorf("the network namespace of pid %d: %w", p.opts.PID, err))
			return nil
		}
		o.Netns = ino
	}
	p.open(OpenProbe[TCPEventsProbe](src.Probes, &tcpevents.Spec, o))
	return nil
}

// findNetns reads the TCP layer in --pid's network namespace when it is
// not perfscope's: sock_diag is asked there, the counters come from
// /proc/PID/net, the sysctls are read by a thread inside it and the probe
// counts its sockets. A root whose namespace links cannot be read (a
// fixture without them) is read as one namespace.
func (p *TCP) findNetns() {
	p.netns, p.netnsPath, p.netDir = "", "", netstat.OwnNet
	if p.netns, p.netnsPath = otherNetns(p.src.Root, p.opts.PID); p.netns != "" {
		p.netDir = "/proc/" + strconv.Itoa(p.opts.PID) + "/net"
	}
}

// otherNetns is pid's network namespace ("net:[4026532…]") and the path
// of its link when it is not perfscope's; "", "" when it is, when pid is
// 0, or when the links cannot be read (a fixture without them is read as
// one namespace).
func otherNetns(root procfs.FS, pid int) (name, path string) {
	if pid == 0 {
		return "", ""
	}
	path = root.Path("/proc/" + strconv.Itoa(pid) + "/ns/net")
	own, err := os.Readlink(root.Path("/proc/self/ns/net"))
	if err != nil {
		return "", ""
	}
	theirs, err := os.Readlink(path)
	if err != nil || theirs == own {
		return "", ""
	}
	return theirs, path
}

func (p *TCP) diag(states tcpdiag.States) ([]tcpdiag.Socket, error) {
	if p.src.TCPDiag == nil {
		return nil, fmt.Errorf("sock_diag is not read in this run")
	}
	return p.src.TCPDiag(tcpdiag.Query{States: states, Port: uint16(p.opts.Port), Netns: p.netnsPath})
}

// Begin implements Part.
func (p *TCP) Begin(ctx context.Context) error {
	// The tcpevents hooks are never detached (budget class rare), so a
	// window of a session starts from the last one's closing reading, as
	// the counters do below: a reset sent while perfscope serve assembled
	// the last window was once counted by no window.
	if !p.carryOver() {
		if err := p.snapshotPart.Begin(ctx); err != nil {
			return err
		}
	}
	// Window after window on one session (perfscope serve), a window
	// starts from the last one's closing reading: what the kernel counted
	// between two windows belongs to the next, not to none.
	if p.ended && p.lastErr == nil {
		p.countersAt[0], p.firstErr = p.countersAt[1], nil
	} else {
		p.countersAt[0], p.firstErr = p.src.netstat().TCPCountersIn(p.netDir)
	}
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
	p.listeners, p.samples, p.diagErr, p.synNext, p.findable = map[uint64]*listenerSamples{}, 0, nil, time.Time{}, nil
	p.tickAt, p.tickOK = p.countersAt[0], p.firstErr == nil
	p.intervals, p.ivPeak, p.ivFull = nil, map[uint64]uint32{}, map[uint64]int{}
	p.sample()
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.sampler(ctx)
	return nil
}

// Tick implements Ticker: the counters since the last tick and the
// accept queues sampled in between make one interval.
func (p *TCP) Tick(_ context.Context, now time.Time) error {
	if !p.opts.Timeline {
		return nil
	}
	c, err := p.src.netstat().TCPCounters()
	p.interval(c, err == nil, now)
	return nil
}

// Tail implements Tailer: the last interval ends with the window.
func (p *TCP) Tail(now time.Time) {
	if p.opts.Timeline {
		p.interval(p.countersAt[1], p.lastErr == nil, now)
	}
}

func (p *TCP) interval(c netstat.TCPCounters, ok bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	iv := tcpInterval{end: now, ok: ok && p.tickOK, peak: p.ivPeak, full: p.ivFull}
	if iv.ok {
		iv.d = c.Sub(p.tickAt)
	}
	p.intervals = append(p.intervals, iv)
	p.tickAt, p.tickOK = c, ok
	p.ivPeak, p.ivFull = map[uint64]uint32{}, map[uint64]int{}
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
	p.countersAt[1], p.lastErr = fs.TCPCountersIn(p.netDir)
	p.ended = true
	if p.netns == "" {
		p.settings, p.settingsErr = fs.TCPSettings()
	} else {
		// /proc/sys/net shows the namespace of the thread that opens it.
		p.settingsErr = netdev.InNamespace(p.netnsPath, func() error {
			var err error
			p.settings, err = fs.TCPSettings()
			return err
		})
	}
	p.sockstat, p.sockstatErr = fs.TCPSockstatIn(p.netDir)
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

// filtered is true when the rows are kept to --pid or a workload.
func (p *TCP) filtered() bool { return p.opts.PID != 0 || p.opts.Select != nil }

// keeps says whether a socket held by pids is in the run's selection:
// held by --pid, or by a process of the --cgroup, --container or --pod
// (every socket without a filter; none without an owner under one).
func (p *TCP) keeps(pids []int) bool {
	if p.opts.PID != 0 && !ownedBy(pids, p.opts.PID) {
		return false
	}
	if p.opts.Select == nil {
		return true
	}
	for _, pid := range pids {
		if p.src.covers(p.opts.Select, pid) {
			return true
		}
	}
	return false
}

// Evidence is the part's evidence for a window of length window.
func (p *TCP) Evidence(window time.Duration) evidence.TCPEvidence {
	ev := evidence.TCPEvidence{DurationNs: int64(window), Port: p.opts.Port, PID: p.opts.PID, Netns: p.netns}
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
	} else {
		ev.SettingsUnavailable = fmt.Sprintf("TCP sysctls%s: %v", p.netnsText(), p.settingsErr)
	}
	if p.sockstatErr == nil {
		s := evidence.TCPSockstat(p.sockstat)
		ev.Sockstat = &s
	}
	var kept map[uint64]bool
	ev.Listeners, kept = p.listenerEvidence()
	ev.Intervals = p.intervalEvidence(kept)
	ev.Connections = p.connectionEvidence()
	ev.Events = p.eventEvidence()
	return ev
}

// intervalEvidence is the timeline's intervals, their accept queues
// those of the kept listeners.
func (p *TCP) intervalEvidence(kept map[uint64]bool) []evidence.TCPInterval {
	var out []evidence.TCPInterval
	for _, iv := range p.intervals {
		e := evidence.TCPInterval{End: iv.end}
		if iv.ok {
			e.ListenOverflows, e.ListenDrops = ptr(iv.d.ListenOverflows), ptr(iv.d.ListenDrops)
			e.BacklogDrops, e.PassiveOpens = ptr(iv.d.TCPBacklogDrop), ptr(iv.d.PassiveOpens)
		}
		found := false
		for cookie, peak := range iv.peak {
			if !kept[cookie] {
				continue
			}
			if full := iv.full[cookie]; !found || peak > e.QueuePeak || (peak == e.QueuePeak && full > e.FullSamples) {
				found = true
				e.QueuePeak, e.FullSamples = peak, full
				if l := p.listeners[cookie]; l != nil {
					e.Backlog = l.sock.SendQ
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// listenerEvidence is the listeners section, and the cookies of the
// listeners it keeps.
func (p *TCP) listenerEvidence() (evidence.ListenerSection, map[uint64]bool) {
	var s evidence.ListenerSection
	kept := map[uint64]bool{}
	if p.diagErr != nil && p.samples == 0 {
		s.Unavailable = fmt.Sprintf("listeners: %v", p.diagErr)
		return s, kept
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
		if !p.keeps(sock.PIDs) {
			continue
		}
		kept[sock.Cookie] = true
		row := evidence.TCPListener{Local: sock.Local, Inode: sock.Inode, PIDs: sock.PIDs, Backlog: l.sock.SendQ,
			QueueLast: l.last, QueuePeak: l.peak, FullSamples: l.full, Samples: l.seen, ReusePort: group[sock.Local],
			SynQueueLast: l.synLast, SynQueuePeak: l.synPeak, SynFullSamples: l.synFull, SynSamples: l.synSeen}
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
		s.Unavailable = evidence.NoListenerFound + p.filterText()
	}
	return s, kept
}

// netnsText is " in the network namespace of pid N (net:[…])" when the
// TCP layer is read in --pid's namespace.
func (p *TCP) netnsText() string {
	if p.netns == "" {
		return ""
	}
	return fmt.Sprintf(" in the network namespace of pid %d (%s)", p.opts.PID, p.netns)
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
	if p.opts.Select != nil {
		fmt.Fprintf(&b, " held by %s", p.opts.Select.Filter)
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
		d := p.last.Sub(p.first)
		feeds, s.SteeringLost = d.Feeds, d.LostFeeds
	}
	var rows []evidence.TCPConnection
	for _, c := range p.conns {
		if !p.keeps(c.PIDs) {
			continue
		}
		row := evidence.TCPConnection{Local: c.Local, Remote: c.Remote, State: c.State.String(), PIDs: c.PIDs, RecvQ: c.RecvQ, SendQ: c.SendQ}
		if i := c.Info; i != nil {
			row.RTTUs, row.RTTVarUs, row.MinRTTUs, row.SndCwnd, row.TotalRetrans = i.RTTUs, i.RTTVarUs, i.MinRTTUs, i.SndCwnd, i.TotalRetrans
			row.BytesReceived, row.BytesAcked, row.BytesRetrans, row.RcvSpace, row.RcvWnd = i.BytesReceived, i.BytesAcked, i.BytesRetrans, i.RcvSpace, i.RcvWnd
			row.RcvSsthresh = i.RcvSsthresh
			if i.RcvRTTUs > 0 {
				v := i.RcvRTTUs
				row.RcvRTTUs = &v
			}
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

// eventOwners finds the processes holding an event's socket: the
// connection of the same four-tuple at the end of the window, else the
// listener of its local address and port (SYN-ACKs, resets answered for
// a listener). known is false when neither is open any more: a closed
// connection's owner cannot be learned afterwards.
func (p *TCP) eventOwners() func(local, remote netip.AddrPort) (pids []int, known bool) {
	conns := map[[2]netip.AddrPort][]int{}
	for _, c := range p.conns {
		conns[[2]netip.AddrPort{c.Local, c.Remote}] = c.PIDs
	}
	var listening []tcpdiag.Socket
	for _, l := range p.listeners {
		listening = append(listening, l.sock)
	}
	// The listeners' owners, read once for every row.
	_ = tcpdiag.AttachOwners(p.src.sockets(), listening)
	return func(local, remote netip.AddrPort) ([]int, bool) {
		if pids, ok := conns[[2]netip.AddrPort{local, remote}]; ok {
			return pids, true
		}
		for _, l := range listening {
			if l.Local.Port() == local.Port() && (l.Local.Addr() == local.Addr() || l.Local.Addr().IsUnspecified()) {
				return l.PIDs, true
			}
		}
		return nil, false
	}
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
	owners := p.eventOwners()
	for k, c := range d.Conns {
		if p.filtered() {
			pids, known := owners(k.Local, k.Remote)
			if !known {
				s.Unattributed += c.Events
				continue
			}
			if !p.keeps(pids) {
				continue
			}
		}
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

func init() {
	registerBuilder(TCPSpec.Name, func(b Build, u PartUse, ps *Parts) {
		ps.Net.add(TCPSpec.Name, NewTCP(TCPOptions{Method: b.Method, Port: optInt(u, "port"), PID: optInt(u, "pid"), Select: b.Select,
			Top: optInt(u, "top"), SampleEvery: u.Opts["sample_interval"].(time.Duration), Timeline: b.timeline()}))
	})
	registerNetJoin(netJoinSpec{name: TCPSpec.Name, stage: netAbove, join: func(j *netJoin, p Part) { p.(*TCP).join(j) }})
}

// join adds the TCP layer over the network run's complete sections: its
// socket lock waits from the lock part, its drops by reason from the drop
// part; in a run without the UDP socket part the UDP socket view, which
// has nothing to say about a TCP port, is replaced by a note.
func (p *TCP) join(j *netJoin) {
	t := p.Evidence(j.window)
	if j.parts.Locks != nil {
		t.SocketLocks = p.SocketLocks(j.ev.Locks)
	} else {
		t.SocketLocks.Unavailable = notInRecipe("socket lock waits", lockstat.Spec.Name)
	}
	drops, _ := j.parts.Part(udpdrop.Spec.Name).(*Drops)
	switch {
	case drops != nil && t.Netns != "" && drops.opts.PID != t.PID:
		// A recipe's drop part counts perfscope's own namespace's
		// sockets and devices; its TCP rows would not be --pid's.
		t.Drops.Unavailable = fmt.Sprintf("TCP drops by reason: counted in perfscope's network namespace, not in the %s of pid %d", t.Netns, t.PID)
	case drops != nil:
		// With --pid in another namespace the probe counted that
		// namespace's sockets and devices (Drops.Open).
		drops.AddTCP(&t.Drops)
	default:
		t.Drops.Unavailable = notInRecipe("TCP drops by reason", udpdrop.Spec.Name)
	}
	j.ev.TCP = &t
	if j.parts.Part(udpsock.Spec.Name) == nil {
		j.ev.Sockets = evidence.SocketSection{}
		j.ev.Sockets.Unavailable = "UDP sockets: not listed in a TCP run (tcp.listeners and tcp.connections are)"
	}
}
