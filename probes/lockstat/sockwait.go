package lockstat

import (
	"github.com/cilium/ebpf"

	"github.com/perfscope/perfscope/probes"
)

// SockWaitKind is the circumstance of one wait on a TCP socket's
// sk_lock.slock: the waiter's context and whether a process owned the
// socket once the waiter got the spinlock.
type SockWaitKind struct {
	// Softirq: the waiter was serving a softirq (the receive path's
	// bh_lock_sock, TCP timers); else process context (lock_sock,
	// lock_sock_fast, release_sock).
	Softirq bool
	// Owned: sk_lock.owned was set when the spinlock was got. A softirq
	// then queues the segment to the socket's backlog; a process in
	// lock_sock goes on to sleep until the owner releases the socket.
	Owned bool
	// ContextUnknown: the probe cannot tell the waiter's context on this
	// kernel (Snapshot.ContextReadable false); Softirq is then false.
	ContextUnknown bool
}

// SockWaitKey is a TCP socket lock's address and one kind of wait on it.
type SockWaitKey struct {
	Lock uint64
	Kind SockWaitKind
}

func sockWaitKindOf(k lockstatLockstatSockWait) SockWaitKind {
	return SockWaitKind{
		Softirq:        k&lockstatLockstatSockWaitLOCKSTAT_SOCKWAIT_SOFTIRQ != 0,
		Owned:          k&lockstatLockstatSockWaitLOCKSTAT_SOCKWAIT_OWNED != 0,
		ContextUnknown: k&lockstatLockstatSockWaitLOCKSTAT_SOCKWAIT_CONTEXT_UNKNOWN != 0,
	}
}

// readSockWaits reads the per-circumstance waits on TCP socket locks.
func readSockWaits(m *ebpf.Map) (map[SockWaitKey]WaitStats, error) {
	raw, err := probes.ReadPerCPUHash[lockstatSockwaitKey, lockstatWaitStat](m)
	if err != nil {
		return nil, err
	}
	out := make(map[SockWaitKey]WaitStats, len(raw))
	for k, perCPU := range raw {
		out[SockWaitKey{Lock: k.LockAddr, Kind: sockWaitKindOf(k.Kind)}] = sumWaits(perCPU)
	}
	return out, nil
}

// subWaits is cur minus prev per key, keeping keys with new waits; a key
// whose count went down was evicted and re-added: cur is then the delta.
func subWaits[K comparable](cur, prev map[K]WaitStats) map[K]WaitStats {
	out := map[K]WaitStats{}
	for k, v := range cur {
		old := prev[k]
		if old.Count > v.Count {
			old = WaitStats{}
		}
		if v.Count > old.Count {
			out[k] = WaitStats{Count: v.Count - old.Count, Total: v.Total - old.Total, Max: v.Max}
		}
	}
	return out
}

// SockLockSplit is the waits on one TCP socket's sk_lock.slock by
// circumstance.
type SockLockSplit struct {
	// Process are waits in process context (lock_sock, lock_sock_fast,
	// release_sock); ProcessOwned those that found the socket owned
	// (lock_sock then sleeps for the owner, whose sleep is not a
	// contention event and is not timed; release_sock is the owner itself).
	Process, ProcessOwned WaitStats
	// Softirq are waits serving a softirq; SoftirqOwned those that found
	// the socket owned by a process: the segment went to the backlog.
	Softirq, SoftirqOwned WaitStats
	// Unknown are waits whose context could not be read; UnknownOwned
	// those that found the socket owned.
	Unknown, UnknownOwned WaitStats
}

// Total is every split wait.
func (s SockLockSplit) Total() WaitStats { return s.Process.add(s.Softirq).add(s.Unknown) }

func (s *SockLockSplit) add(k SockWaitKind, w WaitStats) {
	all, owned := &s.Process, &s.ProcessOwned
	switch {
	case k.ContextUnknown:
		all, owned = &s.Unknown, &s.UnknownOwned
	case k.Softirq:
		all, owned = &s.Softirq, &s.SoftirqOwned
	}
	*all = all.add(w)
	if k.Owned {
		*owned = owned.add(w)
	}
}

// SockLockSplits groups d's waits on TCP socket locks by lock address.
func (d Snapshot) SockLockSplits() map[uint64]SockLockSplit {
	out := map[uint64]SockLockSplit{}
	for k, w := range d.SockWaits {
		s := out[k.Lock]
		s.add(k.Kind, w)
		out[k.Lock] = s
	}
	return out
}

// Merge adds o's waits to s's.
func (s SockLockSplit) Merge(o SockLockSplit) SockLockSplit {
	return SockLockSplit{
		Process: s.Process.add(o.Process), ProcessOwned: s.ProcessOwned.add(o.ProcessOwned),
		Softirq: s.Softirq.add(o.Softirq), SoftirqOwned: s.SoftirqOwned.add(o.SoftirqOwned),
		Unknown: s.Unknown.add(o.Unknown), UnknownOwned: s.UnknownOwned.add(o.UnknownOwned),
	}
}
