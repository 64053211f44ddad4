package measure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// What the network parts need of their probes: the probes.Probe contract
// and the probe's typed snapshot, plus the few extras a probe offers.
type (
	SocketProbe = probes.Snapshotter[udpsock.Snapshot]
	QueueProbe  interface {
		probes.Snapshotter[netqueue.Snapshot]
		// NoNAPI says napi:napi_poll was left out on purpose.
		NoNAPI() bool
	}
	DropProbe interface {
		probes.Snapshotter[udpdrop.Snapshot]
		// ReasonName names a drop reason the way the kernel's BTF does.
		ReasonName(kind udpdrop.Kind, reason uint32) string
	}
)

// delta is a probe snapshot: cumulative counts that subtract.
type delta[S any] interface {
	Sub(prev S) S
}

// snapshotPart is what the probe-backed parts below share: one optional
// probe of snapshot type S, read at both ends of the window. A probe that
// does not open leaves its error, which the part's section prints as
// "unavailable: <why>"; the rest of the run goes on.
type snapshotPart[S delta[S], P probes.Snapshotter[S]] struct {
	what string // "queue probe", for messages
	// timeline: read at every tick of a window with an interval, each
	// interval's counts handed to interval (set by the part).
	timeline bool
	// interval gets the counts between from and now (the budget's
	// coverage of that span scales them).
	interval    func(d S, from, now time.Time)
	probe       P
	openErr     error
	first, last S
	// cov is how the budget attached the probe's hooks (nil: exact).
	cov *budget.Coverage
	// prev is the last tick's reading, for a timeline, taken at prevAt.
	prev   S
	prevAt time.Time
	// lastOK: last is the reading End took at lastAt (carryOver).
	lastOK bool
	lastAt time.Time
}

// SetCoverage implements Sampled.
func (p *snapshotPart[S, P]) SetCoverage(c *budget.Coverage) { p.cov = c }

func (p *snapshotPart[S, P]) open(probe P, err error) {
	p.probe, p.openErr = probe, err
}

func (p *snapshotPart[S, P]) opened() bool { return p.openErr == nil }

// Probes implements Part.
func (p *snapshotPart[S, P]) Probes() []probes.Probe {
	if !p.opened() {
		return nil
	}
	return []probes.Probe{p.probe}
}

// Begin implements Part. Without a budget (cov nil, set before Begin)
// nothing detaches the probe's hooks between two windows of one session
// (perfscope serve --exact): the window starts from the last one's closing
// reading, so the events counted while serve assembled the last window
// belong to this one, not to none. Under a budget a sampled group's
// estimate covers its window's own time, and the window starts afresh.
func (p *snapshotPart[S, P]) Begin(context.Context) error {
	if p.cov == nil && p.carryOver() {
		return nil
	}
	var err error
	p.lastOK = false
	if p.opened() {
		if p.first, err = p.probe.Snapshot(); err != nil {
			return fmt.Errorf("read %s: %w", p.what, err)
		}
		p.prev, p.prevAt = p.first, time.Now()
	}
	return nil
}

// tick reads the probe at a tick of the window and returns the counts
// since the last; ok is false without a timeline or a probe.
func (p *snapshotPart[S, P]) tick(now time.Time) (d S, from time.Time, ok bool, err error) {
	if !p.timeline || !p.opened() {
		return d, from, false, nil
	}
	cur, err := p.probe.Snapshot()
	if err != nil {
		return d, from, false, fmt.Errorf("read %s: %w", p.what, err)
	}
	d, p.prev = cur.Sub(p.prev), cur
	from, p.prevAt = p.prevAt, now
	return d, from, true, nil
}

// Tick implements Ticker.
func (p *snapshotPart[S, P]) Tick(_ context.Context, now time.Time) error {
	d, from, ok, err := p.tick(now)
	if ok {
		p.interval(d, from, now)
	}
	return err
}

// Tail implements Tailer.
func (p *snapshotPart[S, P]) Tail(now time.Time) {
	if d, ok := p.tail(); ok {
		p.interval(d, p.prevAt, now)
	}
}

// tail is the counts from the last tick to the window's last reading.
func (p *snapshotPart[S, P]) tail() (d S, ok bool) {
	if !p.timeline || !p.opened() {
		return d, false
	}
	d, p.prev = p.last.Sub(p.prev), p.last
	return d, true
}

// End implements Part.
func (p *snapshotPart[S, P]) End(context.Context) error {
	var err error
	if p.opened() {
		if p.last, err = p.probe.Snapshot(); err != nil {
			return fmt.Errorf("read %s: %w", p.what, err)
		}
		p.lastOK, p.lastAt = true, time.Now()
	}
	return nil
}

// carryOver starts a window from the last one's closing reading, so that
// nothing the probe counts falls between two windows of one session
// (perfscope serve spends part of each second assembling the last
// window). Only for a probe whose hooks stay attached between windows:
// a sampled group's estimate covers its window's own time. False when
// there is no such reading (the first window, or the last End failed).
func (p *snapshotPart[S, P]) carryOver() bool {
	if !p.opened() || !p.lastOK {
		return false
	}
	p.first, p.prev, p.prevAt, p.lastOK = p.last, p.last, p.lastAt, false
	return true
}

// OpenErr is why the part's probe could not be opened (nil when it was).
func (p *snapshotPart[S, P]) OpenErr() error { return p.openErr }

// QueueOptions configure the queue part.
type QueueOptions struct {
	Method probes.AttachMethod
	Iface  netdev.Interface
	// Timeline keeps the packets of every tick of the window
	// (evidence.QueueSection.Intervals).
	Timeline bool
}

// Queues is the queue part: packets per RX and TX queue and CPU, NAPI
// polls per queue and CPU, and qdisc activity of one interface, from the
// kernel's side (the netqueue probe).
type Queues struct {
	snapshotPart[netqueue.Snapshot, QueueProbe]
	opts QueueOptions
	// sampled is what the windows counted per queue, before scaling:
	// each row's own error bound depends on it.
	sampled   struct{ rx, tx map[int]uint64 }
	intervals []evidence.QueueInterval
}

// NewQueues returns the queue part.
func NewQueues(opts QueueOptions) *Queues {
	p := &Queues{opts: opts, snapshotPart: snapshotPart[netqueue.Snapshot, QueueProbe]{what: "queue probe", timeline: opts.Timeline}}
	p.snapshotPart.interval = p.interval
	return p
}

// Open implements Part. A device without NAPI instances of its own (lo,
// veth without GRO) gets no napi_poll probe: on loopback it fires once per
// packet for nothing the report shows. Kernels without the netdev netlink
// family (< 6.8) cannot tell, and keep it.
func (p *Queues) Open(src Sources) error {
	napis, napiErr := src.Netlink.NAPIs(p.opts.Iface.Index)
	noNAPI := napiErr == nil && len(napis) == 0
	p.open(OpenProbe[QueueProbe](src.Probes, &netqueue.Spec, netqueue.Options{Method: p.opts.Method, Ifindex: p.opts.Iface.Index, NoNAPI: noNAPI}))
	return nil
}

// Begin implements Part.
func (p *Queues) Begin(ctx context.Context) error {
	p.intervals = nil
	return p.snapshotPart.Begin(ctx)
}

// interval records the interface's packets in one interval.
func (p *Queues) interval(d netqueue.Snapshot, from, now time.Time) {
	ifindex := p.opts.Iface.Index
	k := p.cov.ScaleBetween(netqueue.GroupPackets, from, now)
	if k == 0 {
		return // no sampling window in the interval: its packets are unknown
	}
	iv := evidence.QueueInterval{End: now, RXByQueue: map[int]uint64{}}
	for q, perCPU := range d.RXQueues(ifindex, netqueue.ConventionFor(p.opts.Iface.Driver)) {
		n := budget.Scaled(netqueue.TrafficTotal(perCPU).Packets, k)
		iv.RXPackets += n
		if q >= 0 && n > 0 {
			iv.RXByQueue[q] += n
		}
	}
	for key, perCPU := range d.TX {
		if key.Ifindex == ifindex {
			iv.TXPackets += budget.Scaled(netqueue.TrafficTotal(perCPU).Packets, k)
		}
	}
	p.intervals = append(p.intervals, iv)
}

// Intervals are the window's ticks (with Timeline).
func (p *Queues) Intervals() []evidence.QueueInterval { return p.intervals }

// Notes say what the kernel side of the queue table lacks.
func (p *Queues) Notes() []string {
	if !p.opened() {
		return []string{fmt.Sprintf("kernel per-queue counts: queue probe unavailable: %v", p.openErr)}
	}
	if m := missingNote(p.probe.Missing()); m != "" {
		return []string{"tracepoints unavailable: " + m}
	}
	return nil
}

// missingNote lists optional hooks that did not attach.
func missingNote(m map[string]error) string {
	var parts []string
	for hook, err := range m {
		parts = append(parts, fmt.Sprintf("%s: %v", hook, err))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// Evidence turns the window into the kernel-side per-queue counts, the
// (queue × CPU) NAPI matrix (into matrix), per-CPU TX queues and qdisc
// rows. driver names the queue numbering convention.
func (p *Queues) Evidence(src Sources, driver string, matrix *evidence.QueueCPUSection) (QueueCounts, map[int]map[int]uint64, []evidence.QdiscRow) {
	if !p.opened() {
		matrix.Unavailable = fmt.Sprintf("queue probe: %v", p.openErr)
		return QueueCounts{}, nil, nil
	}
	d := p.last.Sub(p.first)
	ifindex, name := p.opts.Iface.Index, p.opts.Iface.Name
	conv := netqueue.ConventionFor(driver)
	// Under a budget the per-packet hooks and the NAPI polls may each have
	// been counted in sampling windows only: scale to the window.
	kp, kn := p.cov.Scale(netqueue.GroupPackets), p.cov.Scale(netqueue.GroupNAPI)
	var counts QueueCounts
	counts.RX = map[int]uint64{}
	p.sampled.rx, p.sampled.tx = map[int]uint64{}, map[int]uint64{}
	for q, perCPU := range d.RXQueues(ifindex, conv) {
		if q >= 0 {
			n := netqueue.TrafficTotal(perCPU).Packets
			p.sampled.rx[q] = n
			counts.RX[q] = budget.Scaled(n, kp)
		}
	}
	counts.TX = map[int]uint64{}
	txByCPU := map[int]map[int]uint64{}
	for k, perCPU := range d.TX {
		if k.Ifindex != ifindex {
			continue
		}
		n := netqueue.TrafficTotal(perCPU).Packets
		p.sampled.tx[k.Queue] += n
		counts.TX[k.Queue] += budget.Scaled(n, kp)
		for cpu, t := range perCPU {
			if t.Packets == 0 {
				continue
			}
			if txByCPU[cpu] == nil {
				txByCPU[cpu] = map[int]uint64{}
			}
			txByCPU[cpu][k.Queue] += budget.Scaled(t.Packets, kp)
		}
	}
	byQ := map[int]*evidence.QdiscRow{}
	for k, perCPU := range d.Qdisc {
		if k.Ifindex != ifindex {
			continue
		}
		r := byQ[k.Queue]
		if r == nil {
			r = &evidence.QdiscRow{TXQueue: k.Queue}
			byQ[k.Queue] = r
		}
		for _, s := range perCPU {
			r.Enqueues += budget.Scaled(s.Enqueues, kp)
			r.Dequeues += budget.Scaled(s.DequeuedPackets, kp)
		}
	}
	var qdisc []evidence.QdiscRow
	for _, r := range byQ {
		qdisc = append(qdisc, *r)
	}
	sort.Slice(qdisc, func(i, j int) bool { return qdisc[i].TXQueue < qdisc[j].TXQueue })

	var fromNetlink map[uint32]int
	if qs, err := src.Netlink.Queues(ifindex); err == nil {
		fromNetlink = netlinkq.QueueNAPI(qs)
	}
	napiQueue, method, err := netqueue.ResolveNAPIQueues(fromNetlink, d, ifindex, conv)
	switch {
	case p.probe.NoNAPI():
		matrix.Unavailable = fmt.Sprintf("%s has no NAPI instance of its own (netdev netlink lists none; loopback and RPS use the per-CPU backlog): napi:napi_poll not attached", name)
	case err != nil:
		matrix.Unavailable = fmt.Sprintf("NAPI ids of %s could not be mapped to queues: %v", name, err)
	}
	matrix.Mapping = method
	counts.NAPIWork = map[int]uint64{}
	for k, perCPU := range d.NAPI {
		if k.Ifindex != ifindex {
			continue
		}
		q, ok := napiQueue[k.ID]
		if !ok {
			q = -1
		}
		for cpu, s := range perCPU {
			if s.Polls == 0 && s.Work == 0 {
				continue
			}
			polls, work := budget.Scaled(s.Polls, kn), budget.Scaled(s.Work, kn)
			matrix.Cells = append(matrix.Cells, evidence.QueueCPUCell{Queue: q, NAPI: k.ID, CPU: cpu, Polls: polls, Work: work})
			if q >= 0 {
				counts.NAPIWork[q] += work
			}
		}
	}
	if len(matrix.Cells) == 0 && matrix.Unavailable == "" {
		matrix.Unavailable = fmt.Sprintf("no NAPI polls on %s in the window (no per-queue NAPI: on veth it needs GRO or XDP)", name)
	}
	if len(counts.NAPIWork) == 0 {
		counts.NAPIWork = nil
	}
	sort.Slice(matrix.Cells, func(i, j int) bool {
		a, b := matrix.Cells[i], matrix.Cells[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		return a.CPU < b.CPU
	})
	matrix.Estimate = p.cov.Estimate(netqueue.GroupNAPI)
	return counts, txByCPU, qdisc
}

// MarkEstimates says, in the queue and TX sections built from Evidence's
// counts, how the kernel-side counts were obtained: each row's error
// bound from what its queue's windows counted.
func (p *Queues) MarkEstimates(q *evidence.QueueSection, tx *evidence.TXSection) {
	e := p.cov.Estimate(netqueue.GroupPackets)
	if e == nil || !p.opened() {
		return
	}
	q.Estimate, tx.Estimate = e, e
	for _, rows := range []struct {
		rows    []evidence.QueueRow
		sampled map[int]uint64
	}{{q.RX, p.sampled.rx}, {q.TX, p.sampled.tx}} {
		for i := range rows.rows {
			if rows.rows[i].KernelPackets != nil {
				rows.rows[i].RelError = e.RowError(rows.sampled[rows.rows[i].Queue])
			}
		}
	}
}

// DropOptions configure the drop part.
type DropOptions struct {
	Method probes.AttachMethod
	// Port counts drops of this local port (0: every port).
	Port int
	// Timeline keeps the drops of every tick of the window
	// (evidence.DropSection.Intervals).
	Timeline bool
	// PID, when its network namespace is not perfscope's, makes the
	// probe count the sockets and devices of that namespace instead.
	PID int
}

// Drops is the drop part: dropped packets per local UDP port and reason
// (the udpdrop probe).
type Drops struct {
	snapshotPart[udpdrop.Snapshot, DropProbe]
	opts      DropOptions
	intervals []evidence.DropInterval
}

// NewDrops returns the drop part.
func NewDrops(opts DropOptions) *Drops {
	p := &Drops{opts: opts, snapshotPart: snapshotPart[udpdrop.Snapshot, DropProbe]{what: "drop probe", timeline: opts.Timeline}}
	p.snapshotPart.interval = p.interval
	return p
}

// Open implements Part.
func (p *Drops) Open(src Sources) error {
	o := udpdrop.Options{Method: p.opts.Method, Port: uint16(p.opts.Port)}
	if name, path := otherNetns(src.Root, p.opts.PID); name != "" {
		ino, err := probes.NetnsInode(path)
		if err != nil {
			p.open(nil, fmt.Errorf("the network namespace of pid %d: %w", p.opts.PID, err))
			return nil
		}
		o.Netns = ino
	}
	p.open(OpenProbe[DropProbe](src.Probes, &udpdrop.Spec, o))
	return nil
}

// Begin implements Part.
func (p *Drops) Begin(ctx context.Context) error {
	p.intervals = nil
	return p.snapshotPart.Begin(ctx)
}

// interval records the port's drops (every port's without one) in
// the interval, by reason.
func (p *Drops) interval(d udpdrop.Snapshot, from, now time.Time) {
	k := p.cov.ScaleBetween(udpdrop.Group, from, now)
	if k == 0 {
		return // no sampling window in the interval: its drops are unknown
	}
	iv := evidence.DropInterval{End: now, ByReason: map[string]uint64{}}
	for key, n := range d.Ports {
		if n == 0 || key.Proto != udpdrop.ProtoUDP || (p.opts.Port != 0 && int(key.Port) != p.opts.Port) {
			continue
		}
		n = budget.Scaled(n, k)
		iv.Count += n
		reason := key.Kind.String()
		if name := p.probe.ReasonName(key.Kind, key.Reason); name != "" {
			reason += ":" + name
		}
		iv.ByReason[reason] += n
	}
	p.intervals = append(p.intervals, iv)
}

// Add replaces the counters' coarser sk_drops rows with the probe's drops
// by port and reason, or says why it cannot. Under a budget the probe saw
// the drops of its sampling windows only; a port's sockets' own drop
// counter (sk_drops, exact) then gives the port's total and the windows
// its split by reason — drops come in bursts a window may miss, so
// scaling the windows' count alone would be far off — and a port without
// sampled drops keeps its exact sk_drops row.
func (p *Drops) Add(sec *evidence.DropSection) {
	if !p.opened() {
		sec.Notes = append(sec.Notes, fmt.Sprintf("drop reasons: drop probe unavailable: %v (socket drop counters shown)", p.openErr))
		return
	}
	d := p.last.Sub(p.first)
	k, e := p.cov.Scale(udpdrop.Group), p.cov.Estimate(udpdrop.Group)
	sec.Estimate = e
	exact := map[int]uint64{}
	for _, r := range sec.ByPort {
		exact[r.Port] += r.Count
	}
	coarse := sec.ByPort
	sec.ByPort = nil
	type key struct {
		port   int
		reason string
	}
	agg := map[key]uint64{}
	for k, n := range d.Ports {
		if n == 0 || k.Proto != udpdrop.ProtoUDP {
			continue
		}
		reason := k.Kind.String()
		if name := p.probe.ReasonName(k.Kind, k.Reason); name != "" {
			reason += ":" + name
		}
		agg[key{int(k.Port), reason}] += n
	}
	sampled := map[int]uint64{}
	for key, n := range agg {
		sampled[key.port] += n
	}
	for key, n := range agg {
		row := evidence.PortDrops{Port: key.port, Reason: key.reason, Count: budget.Scaled(n, k), RelError: e.RowError(n)}
		if total := exact[key.port]; e != nil && total > 0 {
			share := float64(n) / float64(sampled[key.port])
			row.Count = budget.Scaled(total, share)
			rel := 1.96 * math.Sqrt((1-share)/(share*float64(sampled[key.port])))
			row.RelError = &rel
		}
		sec.ByPort = append(sec.ByPort, row)
	}
	if e != nil {
		for _, r := range coarse {
			// The probe counts only --port's drops, when given.
			if sampled[r.Port] == 0 && (p.opts.Port == 0 || r.Port == p.opts.Port) {
				sec.ByPort = append(sec.ByPort, r)
			}
		}
	}
	sortDrops(sec.ByPort)
	for r, n := range d.Reasons {
		if n > 0 {
			sec.ByReason[p.probe.ReasonName(udpdrop.KfreeSkb, r)] += budget.Scaled(n, k)
		}
	}
	sec.Intervals = p.intervals
}

// AddTCP fills the TCP drops per local port and reason (the probe's TCP
// rows; with --port, that port's and those not attributable to a port),
// scaled from the sampling windows under a budget.
func (p *Drops) AddTCP(sec *evidence.TCPDropSection) {
	if !p.opened() {
		sec.Unavailable = fmt.Sprintf("TCP drops by reason: drop probe unavailable: %v", p.openErr)
		return
	}
	d := p.last.Sub(p.first)
	k, e := p.cov.Scale(udpdrop.Group), p.cov.Estimate(udpdrop.Group)
	sec.Estimate = e
	agg := map[evidence.PortDrops]uint64{}
	for key, n := range d.Ports {
		if n == 0 || key.Proto != udpdrop.ProtoTCP {
			continue
		}
		agg[evidence.PortDrops{Port: int(key.Port), Reason: p.probe.ReasonName(key.Kind, key.Reason)}] += n
	}
	sec.ByPort = nil
	for row, n := range agg {
		row.Count, row.RelError = budget.Scaled(n, k), e.RowError(n)
		sec.ByPort = append(sec.ByPort, row)
	}
	sortDrops(sec.ByPort)
}

// SocketOptions configure the socket-reads part.
type SocketOptions struct {
	Method probes.AttachMethod
	// Port and PID choose the sockets; with neither the probe is not
	// loaded at all (nothing would show its counts).
	Port, PID int
	// Timeline keeps the reads of every tick of the window.
	Timeline bool
}

// SocketReads is the socket-reads part: datagrams each UDP socket's owner
// read, and which CPUs' softirqs woke it (the udpsock probe).
type SocketReads struct {
	snapshotPart[udpsock.Snapshot, SocketProbe]
	opts  SocketOptions
	ticks []socketReadTick
}

// socketReadTick is the datagrams read per socket inode in one interval;
// the sockets section keeps those of its own sockets.
type socketReadTick struct {
	end   time.Time
	reads map[uint64]uint64
	// unknown: the budget left the probe detached for the whole interval.
	unknown bool
}

// NewSocketReads returns the socket-reads part.
func NewSocketReads(opts SocketOptions) *SocketReads {
	p := &SocketReads{opts: opts, snapshotPart: snapshotPart[udpsock.Snapshot, SocketProbe]{what: "socket probe", timeline: opts.Timeline}}
	p.snapshotPart.interval = p.interval
	return p
}

// Open implements Part.
func (p *SocketReads) Open(src Sources) error {
	if p.opts.Port == 0 && p.opts.PID == 0 {
		p.openErr = errors.New("no --port or --pid given")
		return nil
	}
	p.open(OpenProbe[SocketProbe](src.Probes, &udpsock.Spec, udpsock.Options{Method: p.opts.Method, Port: uint16(p.opts.Port)}))
	return nil
}

// Begin implements Part.
func (p *SocketReads) Begin(ctx context.Context) error {
	p.ticks = nil
	return p.snapshotPart.Begin(ctx)
}

// interval records the datagrams read per socket in one interval.
func (p *SocketReads) interval(d udpsock.Snapshot, from, now time.Time) {
	k := p.cov.ScaleBetween(udpsock.Group, from, now)
	// k == 0: no sampling window in the interval, its reads unknown.
	t := socketReadTick{end: now, reads: map[uint64]uint64{}, unknown: k == 0}
	for ino, r := range d.Sockets {
		if r.Datagrams > 0 {
			t.reads[ino] = budget.Scaled(r.Datagrams, k)
		}
	}
	p.ticks = append(p.ticks, t)
}

// Add fills the sockets' received datagrams and wakeups from the window,
// or says why they are missing.
func (p *SocketReads) Add(sec *evidence.SocketSection, window time.Duration) {
	if !p.opened() {
		sec.ReceivedUnavailable = fmt.Sprintf("socket probe: %v", p.openErr)
		return
	}
	d := p.last.Sub(p.first)
	k, e := p.cov.Scale(udpsock.Group), p.cov.Estimate(udpsock.Group)
	reads := make(map[uint64]uint64, len(d.Sockets))
	for ino, r := range d.Sockets {
		reads[ino] = budget.Scaled(r.Datagrams, k)
	}
	AddSocketReads(sec, reads, window)
	if e != nil {
		sec.Estimate = e
		for i := range sec.Sockets {
			sec.Sockets[i].ReceivedRelError = e.RowError(d.Sockets[sec.Sockets[i].Inode].Datagrams)
		}
	}
	// Wakeups are read as shares: a common scale changes none.
	AddSocketWakeups(sec, d.Wakeups)
	if d.Lost > 0 {
		sec.ReceivedUnavailable = fmt.Sprintf("%d reads not counted: the socket probe's map was full", d.Lost)
	}
}

func init() {
	registerBuilder(netqueue.Spec.Name, func(b Build, _ PartUse, ps *Parts) {
		ps.Net.Queues = NewQueues(QueueOptions{Method: b.Method, Iface: b.Iface, Timeline: b.timeline()})
	})
	registerBuilder(udpdrop.Spec.Name, func(b Build, u PartUse, ps *Parts) {
		ps.Net.add(udpdrop.Spec.Name, NewDrops(DropOptions{Method: b.Method, Port: optInt(u, "port"), PID: ps.NetOptions.PID, Timeline: b.timeline()}))
	})
	registerNetJoin(netJoinSpec{name: udpdrop.Spec.Name, stage: netOnCounters,
		join: func(j *netJoin, p Part) { p.(*Drops).Add(&j.ev.Drops) },
		absent: func(j *netJoin) {
			j.ev.Drops.Notes = append(j.ev.Drops.Notes, notInRecipe("drop reasons", udpdrop.Spec.Name)+"; socket drop counters shown")
		}})
	registerBuilder(udpsock.Spec.Name, func(b Build, u PartUse, ps *Parts) {
		ps.Net.add(udpsock.Spec.Name, NewSocketReads(SocketOptions{Method: b.Method, Port: optInt(u, "port"), PID: optInt(u, "pid"), Timeline: b.timeline()}))
	})
	registerNetJoin(netJoinSpec{name: udpsock.Spec.Name, stage: netOnCounters,
		join: func(j *netJoin, p Part) {
			if s := p.(*SocketReads); j.ev.Sockets.Unavailable == "" {
				s.Add(&j.ev.Sockets, j.window)
				j.socketReads = s.ticks
			}
		},
		absent: func(j *netJoin) {
			if j.ev.Sockets.Unavailable == "" {
				j.ev.Sockets.ReceivedUnavailable = notInRecipe("datagrams read", udpsock.Spec.Name)
			}
		}})
}
