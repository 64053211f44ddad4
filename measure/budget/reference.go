package budget

import (
	"math"
	"sync"
	"time"

	"github.com/perfscope/perfscope/spec"
)

// reference is an exact, always-counting kernel counter that a sampled
// group's events follow: a ratio estimate scales what a window counted by
// what the reference counted over the period against inside the window.
type reference struct {
	name string
	read func() (uint64, error)
	// start is the count at the last period boundary; failed says a read
	// failed since, which makes the period's reference unusable.
	start  uint64
	mu     sync.Mutex
	failed bool
}

// count reads the reference; 0 for none (nil) or a failed read, which
// marks the period's reference unusable.
func (r *reference) count() uint64 {
	if r == nil {
		return 0
	}
	n, err := r.read()
	if err != nil {
		r.mu.Lock()
		r.failed = true
		r.mu.Unlock()
	}
	return n
}

// The references a session offers the governor.
const (
	// PacketsReference: every per-packet group follows the packets
	// through the namespace's interfaces...
	PacketsReference = "packets through the namespace's interfaces (/proc/net/dev)"
	// UDPReadsReference: ... except the socket reads, which follow the
	// datagrams the namespace's sockets read. Scaled by packets, the
	// reads' ratio moved with whatever the windows' hooks slowed more,
	// the sender or the reader (loopback and veth floods: 5–22 % off);
	// the reads of one port against every UDP read hardly moves.
	UDPReadsReference = "UDP datagrams read in the namespace (Udp and Udp6 InDatagrams, /proc/net/snmp)"
	// SoftirqsReference: a sampled softirq probe's times are its
	// windows' time per run times the softirqs the kernel ran. Scaled by
	// time, the runs' rate moved from window to window with the traffic
	// (on a DNS server's veth rig, bounds of ±33–211 % from 3–5 windows).
	SoftirqsReference = "softirqs the kernel ran (/proc/softirqs)"
)

// SetReferences gives every group the reference its events follow, as
// the spec of the probe that declares the group says (refOf): the socket
// group the UDP reads when there is such a counter, the softirq group the
// softirqs when it counts them itself, every group the packets otherwise
// (any may be nil: scaled by time then).
func (g *Governor) SetReferences(packets, udpReads, softirqs func() (uint64, error), refOf func(group string) spec.Reference) {
	var pk, ur, sr *reference
	if packets != nil {
		pk = &reference{name: PacketsReference, read: packets}
		g.refs = append(g.refs, pk)
	}
	if udpReads != nil {
		ur = &reference{name: UDPReadsReference, read: udpReads}
		g.refs = append(g.refs, ur)
	}
	if softirqs != nil {
		sr = &reference{name: SoftirqsReference, read: softirqs}
		g.refs = append(g.refs, sr)
	}
	for _, gg := range g.groups {
		ref := refOf(gg.hg.Name)
		gg.ref, gg.ownRef, gg.follows = pk, false, ref == spec.RefFollows
		switch {
		case ref == spec.RefUDPReads && ur != nil:
			// The socket probe counts every UDP read of the namespace
			// itself: the windows' share of this reference is exact.
			gg.ref, gg.ownRef = ur, gg.hg.Counts != nil
		case ref == spec.RefSoftirqs && sr != nil && gg.hg.Counts != nil:
			// It counts the softirqs it timed: its time per run, times
			// the kernel's count.
			gg.ref, gg.ownRef = sr, true
		}
	}
}

// applyModes attaches the groups that are to stay attached this period
// and detaches demoted ones (g.mu held). whole says the period's sampling
// windows last all of it: a sampled group attached across the boundary
// then stays attached (closePeriod split its span there) instead of being
// detached and attached again at once. Each switch patches the
// tracepoints' call sites on every CPU: on an idle machine, where every
// window is whole, those pairs were a tenth of a 4 s run's CPU.
func (g *Governor) applyModes(now time.Time, whole bool) {
	for _, gg := range g.groups {
		if gg.sampled() {
			if gg.hg.IsAttached() && !whole {
				t, _ := gg.hg.Detach()
				gg.closeSpan(t, gg.edgeRef().count())
				gg.detached = true
			}
			continue
		}
		if !gg.hg.IsAttached() {
			if t, err := gg.hg.Attach(); err == nil {
				gg.onSince, gg.refSince = t, gg.edgeRef().count()
			}
		}
	}
}

// noteOverrun compares the sampled groups' attached time in the period
// just ended with the window planned, and keeps how much longer windows
// run than planned (g.mu held).
func (g *Governor) noteOverrun(window time.Duration) {
	if window <= 0 {
		return
	}
	for _, gg := range g.groups {
		if !gg.sampled() {
			continue
		}
		on := gg.curOn
		if !gg.onSince.IsZero() {
			continue // still attached: not a finished window
		}
		ratio := math.Min(maxOverrun, math.Max(1, float64(on)/float64(window)))
		if g.overrun == 0 {
			g.overrun = ratio
		} else {
			g.overrun = (3*g.overrun + ratio) / 4
		}
	}
}
