package measure

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/report"
)

// LockProbe is what the lock part needs of its probe.
type LockProbe = probes.Snapshotter[lockstat.Snapshot]

// LockOptions configure the lock part.
type LockOptions struct {
	Method probes.AttachMethod
	// StackEvery takes the waiter's stack for 1 in N contentions
	// (lockstat.DefaultStackEvery when 0).
	StackEvery int
	// TCP keeps TCP sockets in the per-socket list; the udp command is
	// about UDP and leaves them out (their wait still counts in the sites
	// and classes).
	TCP bool
	// Timeline keeps the wait of every tick of the window
	// (evidence.LockSection.Intervals).
	Timeline bool
	// MaxLocks sizes the per-lock table (lockstat.Options.MaxLocks; 0:
	// lockstat.DefaultMaxLocks, for runs of unknown length).
	MaxLocks int
}

// Locks is the lock part: kernel lock contention system-wide, per call
// site (symbolized and classified) and per socket whose lock it was. It
// needs no interface.
type Locks struct {
	opts      LockOptions
	src       Sources
	probe     LockProbe
	openErr   error
	sym       *symbols.Symbolizer
	first     lockstat.Snapshot
	prev      lockstat.Snapshot
	last      lockstat.Snapshot
	udp       sockets.UDPTable
	intervals []evidence.LockInterval
	cov       *budget.Coverage
}

// SetCoverage implements Sampled.
func (p *Locks) SetCoverage(c *budget.Coverage) { p.cov = c }

// NewLocks returns the lock part.
func NewLocks(opts LockOptions) *Locks {
	if opts.StackEvery == 0 {
		opts.StackEvery = lockstat.DefaultStackEvery
	}
	return &Locks{opts: opts}
}

// Open implements Part. A kernel without the lock tracepoints leaves the
// part open and its section unavailable; use OpenErr to require them.
func (p *Locks) Open(src Sources) error {
	p.src = src
	p.sym = src.symbolizer()
	p.probe, p.openErr = OpenProbe[LockProbe](src.Probes, &lockstat.Spec, lockstat.Options{Method: p.opts.Method, StackEvery: p.opts.StackEvery, MaxLocks: p.opts.MaxLocks})
	return nil
}

// OpenErr is why the lock probe could not be opened (nil when it was).
func (p *Locks) OpenErr() error { return p.openErr }

// Probes implements Part.
func (p *Locks) Probes() []probes.Probe { return probesOf(p.probe) }

// Begin implements Part.
func (p *Locks) Begin(context.Context) error {
	if p.probe == nil {
		return nil
	}
	s, err := p.probe.Snapshot()
	if err != nil {
		return fmt.Errorf("read lock probe: %w", err)
	}
	p.first, p.prev, p.intervals = s, s, nil
	return nil
}

// Tick implements Ticker.
func (p *Locks) Tick(_ context.Context, now time.Time) error {
	if p.probe == nil || !p.opts.Timeline {
		return nil
	}
	s, err := p.probe.Snapshot()
	if err != nil {
		return fmt.Errorf("read lock probe: %w", err)
	}
	p.interval(s, now)
	return nil
}

// Tail implements Tailer.
func (p *Locks) Tail(now time.Time) {
	if p.probe != nil && p.opts.Timeline {
		p.interval(p.last, now)
	}
}

func (p *Locks) interval(s lockstat.Snapshot, now time.Time) {
	d := s.Sub(p.prev)
	k := p.cov.ScaleBetween(lockstat.Group, p.prev.Taken, s.Taken)
	p.prev = s
	iv := evidence.LockInterval{End: now, ByClass: map[string]uint64{}}
	for _, w := range d.Sites {
		iv.Count += budget.Scaled(w.Count, k)
		iv.TotalNs += budget.Scaled(uint64(w.Total), k)
	}
	for c, ns := range p.sites(d).ByClass {
		iv.ByClass[c] = budget.Scaled(ns, k)
	}
	p.intervals = append(p.intervals, iv)
}

// End implements Part: the last reading, and this namespace's UDP sockets
// to name the contended ones.
func (p *Locks) End(context.Context) error {
	if p.probe == nil {
		return nil
	}
	var err error
	if p.last, err = p.probe.Snapshot(); err != nil {
		return fmt.Errorf("read lock probe: %w", err)
	}
	p.udp, _ = p.src.sockets().UDP() // unreadable: sockets named by port only
	return nil
}

// Lost implements LossCounter.
func (p *Locks) Lost() uint64 {
	if p.probe == nil {
		return 0
	}
	return p.last.Sub(p.first).Lost.Total()
}

// Evidence is the window's lock section.
func (p *Locks) Evidence() evidence.LockSection {
	if p.probe == nil {
		return evidence.LockSection{Section: evidence.Section{Unavailable: fmt.Sprintf("lock contention: %v", p.openErr)}}
	}
	sec := p.section(p.last.Sub(p.first), p.udp)
	scaleLocks(&sec, p.cov.Estimate(lockstat.Group))
	sec.Intervals = p.intervals
	return sec
}

// scaleLocks scales what the lock probe's sampling windows counted to the
// window (e nil: exact, nothing to do). The longest waits stay the
// longest seen: a lower bound.
func scaleLocks(sec *evidence.LockSection, e *evidence.Estimate) {
	if e == nil {
		return
	}
	k := e.Scale
	sec.Estimate = e
	for i := range sec.Sites {
		s := &sec.Sites[i]
		s.Count, s.TotalNs = budget.Scaled(s.Count, k), budget.Scaled(s.TotalNs, k)
	}
	for c, ns := range sec.ByClass {
		sec.ByClass[c] = budget.Scaled(ns, k)
	}
	sec.TotalNs = budget.Scaled(sec.TotalNs, k)
	for i := range sec.Sockets {
		s := &sec.Sockets[i]
		s.RelError = e.RowError(s.Count)
		s.Count, s.TotalNs = budget.Scaled(s.Count, k), budget.Scaled(s.TotalNs, k)
		for j := range s.ByLock {
			s.ByLock[j].Count, s.ByLock[j].TotalNs = budget.Scaled(s.ByLock[j].Count, k), budget.Scaled(s.ByLock[j].TotalNs, k)
		}
		if s.SockLock != nil {
			scaleSockLock(s.SockLock, k)
		}
	}
}

// lockPrimitive reports frames that take or wait on a lock; the site shown
// for a stack is its first frame past them.
func lockPrimitive(f string) bool {
	f = strings.TrimSuffix(f, "_[k]")
	for _, p := range []string{"spin_lock", "queued_spin", "queued_read", "queued_write", "mutex_lock", "__mutex", "rwsem", "down_read", "down_write", "contention", "__bpf_trace", "bpf_trace_run", "perf_trace"} {
		if strings.Contains(f, p) {
			return true
		}
	}
	return false
}

// section symbolizes and classifies contended sites and names the sockets
// whose locks were contended. The lock probe recognises a socket's lock in
// the kernel and records the socket's inode, port and network namespace;
// this namespace's /proc/net/udp (udp, a zero table when it could not be
// read) adds the bound address and /proc/PID/fd the processes, both by
// inode, so no kernel address is needed.
//
// With stacks sampled (d.StackEvery > 1) the sites' counts and waits, and
// so total_ns_by_class, are lockstat.SiteWaits' estimates: each sampled
// stack scaled to every contention of its lock kind, unbiased for the
// class shares the rules compare. total_ns and the sockets are exact.
func (p *Locks) section(d lockstat.Snapshot, udp sockets.UDPTable) evidence.LockSection {
	sec := p.sites(d)
	if len(d.Owners) == 0 {
		return sec // no socket's lock was contended
	}
	p.addSockets(&sec, d, udp)
	return sec
}

// sites are the contended call sites, symbolized and classified.
func (p *Locks) sites(d lockstat.Snapshot) evidence.LockSection {
	sec := evidence.LockSection{ByClass: map[string]uint64{}, Lost: d.Lost.Total(), StackEvery: max(d.StackEvery, 1)}
	waits := d.SiteWaits()
	// The sampled stacks' addresses are named in one batch, and only when
	// there is a stack to name.
	var addrs []uint64
	for k, sw := range waits {
		if sw.Estimated.Count > 0 && k.StackID != lockstat.Unsampled {
			addrs = append(addrs, d.Stacks[k.StackID]...)
		}
	}
	var names symbols.KernelTable
	if len(addrs) > 0 {
		names = p.sym.KernelTable(addrs)
	}
	for k, sw := range waits {
		w := sw.Estimated
		if w.Count == 0 {
			continue
		}
		class, site := lockstat.NotSampled, "[unsampled]"
		var frames []string
		if k.StackID != lockstat.Unsampled {
			frames = lockstat.Symbolize(d.Stacks[k.StackID], names)
			class, site = lockstat.Classify(frames), "[unknown]"
			for _, f := range frames {
				if !lockPrimitive(f) {
					site = strings.TrimSuffix(f, "_[k]")
					break
				}
			}
		}
		sec.Sites = append(sec.Sites, evidence.LockSite{Class: string(class), Site: site, Stack: frames,
			Count: w.Count, TotalNs: uint64(w.Total), MaxNs: uint64(w.Max), SampledCount: sw.Sampled.Count})
		sec.ByClass[string(class)] += uint64(w.Total)
	}
	// The exact total: the estimates add up to it only up to rounding.
	for _, w := range d.Sites {
		sec.TotalNs += uint64(w.Total)
	}
	sort.Slice(sec.Sites, func(i, j int) bool {
		if sec.Sites[i].TotalNs != sec.Sites[j].TotalNs {
			return sec.Sites[i].TotalNs > sec.Sites[j].TotalNs
		}
		return sec.Sites[i].Site < sec.Sites[j].Site
	})
	return sec
}

// addSockets names the sockets whose locks were contended.
func (p *Locks) addSockets(sec *evidence.LockSection, d lockstat.Snapshot, udp sockets.UDPTable) {

	// An unreadable namespace link (0) leaves every socket in "this"
	// namespace: inodes are unique across namespaces, so the join by inode
	// still finds only our own sockets in /proc/net/udp.
	fs := p.src.sockets()
	netns, _ := fs.NetNS("self")
	pids, _ := lockstat.SocketOwners(fs, d.Inodes())
	splits := sockLockSplits(d)
	for _, sw := range d.SocketWaits(lockstat.NewSocketDirectory(netns, udp, pids)) {
		if sw.Socket.Protocol == "tcp" && !p.opts.TCP {
			continue
		}
		sc := socketContention(sw, p.src.Root)
		sc.SockLock = splits[sw.Socket.Inode]
		// The socket's owner, not the task the softirq interrupted.
		sc.Socket.Workload = p.src.workload(sc.Socket.PID)
		sec.Sockets = append(sec.Sockets, sc)
	}
	// Sites are per stack, not per lock: name the socket on socket
	// sites when one socket holds most of the socket wait.
	if len(sec.Sockets) > 0 {
		top := sec.Sockets[0]
		var all uint64
		for _, sc := range sec.Sockets {
			all += sc.TotalNs
		}
		if float64(top.TotalNs) >= 0.8*float64(all) {
			for i := range sec.Sites {
				if lockstat.IsSocketClass(lockstat.Class(sec.Sites[i].Class)) {
					s := top.Socket
					sec.Sites[i].Socket = &s
				}
			}
		}
	}
}

func socketContention(sw lockstat.SocketWait, proc procfs.FS) evidence.SocketContention {
	ref := sw.Socket
	sc := evidence.SocketContention{
		Socket: evidence.SocketRef{Port: int(ref.Port), Protocol: ref.Protocol, Inode: ref.Inode, NetNS: ref.NetNS,
			OtherNetNS: ref.OtherNetNS, Field: string(ref.Field)},
		Count: sw.Count, TotalNs: uint64(sw.Total), MaxNs: uint64(sw.Max),
	}
	if ref.Local.IsValid() {
		sc.Socket.Local = ref.Local.String()
	}
	if len(ref.PIDs) > 0 {
		sc.Socket.PID = ref.PIDs[0]
		if comm, err := proc.ReadString(fmt.Sprintf("/proc/%d/comm", ref.PIDs[0])); err == nil {
			sc.Socket.Comm = comm
		}
	}
	for _, f := range sw.ByField {
		sc.ByLock = append(sc.ByLock, evidence.SocketLockWait{Field: string(f.Field), Count: f.Count,
			TotalNs: uint64(f.Total), MaxNs: uint64(f.Max)})
	}
	return sc
}

// LockResult is one system-wide lock-contention run.
type LockResult struct {
	Evidence evidence.LockSection
	Run      Run
}

// RunLocks measures kernel lock contention system-wide over one window
// (with Window.Interval and opts.Timeline, on a timeline). Unlike the udp
// runner it requires the lock probe.
func RunLocks(ctx context.Context, src Sources, opts LockOptions, w Window) (LockResult, error) {
	part := NewLocks(opts)
	run, err := measureMandatory(ctx, src, w, part)
	if err != nil {
		return LockResult{}, err
	}
	return LockResult{Evidence: part.Evidence(), Run: run}, nil
}

// Report is the run's report envelope.
func (r LockResult) Report(version string) *report.Report {
	return envelope("locks", version, r.Run, int64(r.Run.Duration()), r.Evidence)
}

func init() {
	registerBuilder(lockstat.Spec.Name, func(b Build, u PartUse, ps *Parts) {
		// A one-shot run's per-lock table is sized by its length; serve's
		// keeps the largest, for windows after windows.
		maxLocks := lockstat.DefaultMaxLocks
		if !b.Continuous {
			maxLocks = lockstat.LocksFor(b.Window)
		}
		ps.Locks = NewLocks(LockOptions{Method: b.Method, StackEvery: optInt(u, "stacks_every"),
			TCP: u.Opts["tcp"].(bool), Timeline: b.timeline(), MaxLocks: maxLocks})
	})
}
