package measure

import (
	"sort"

	"github.com/perfscope/perfscope/collectors/tcpdiag"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/tcpevents"
)

func lockWaits(w lockstat.WaitStats) evidence.LockWaits {
	return evidence.LockWaits{Count: w.Count, TotalNs: uint64(w.Total), MaxNs: uint64(w.Max)}
}

// sockLockSplits are the split waits on TCP sockets' sk_lock.slock by
// socket inode; Unsplit is the rest of each socket's sk_lock.slock wait
// (its first contentions, begun before its owner was known).
func sockLockSplits(d lockstat.Snapshot) map[uint64]*evidence.SockLockSplit {
	type sum struct {
		split lockstat.SockLockSplit
		all   lockstat.WaitStats
	}
	byInode := map[uint64]*sum{}
	for lock, s := range d.SockLockSplits() {
		o, ok := d.Owners[lock]
		if !ok {
			continue
		}
		t := byInode[o.Inode]
		if t == nil {
			t = &sum{}
			byInode[o.Inode] = t
		}
		t.split = t.split.Merge(s)
	}
	// The whole wait of each split socket's sk_lock.slock.
	for lock, w := range d.Locks {
		o, ok := d.Owners[lock]
		if !ok || o.Field != lockstat.FieldSockLock || byInode[o.Inode] == nil {
			continue
		}
		byInode[o.Inode].all = byInode[o.Inode].all.Add(w)
	}
	out := map[uint64]*evidence.SockLockSplit{}
	for inode, t := range byInode {
		s := t.split
		split := s.Total()
		unsplit := lockstat.WaitStats{}
		if t.all.Count > split.Count {
			unsplit = lockstat.WaitStats{Count: t.all.Count - split.Count, Total: max(t.all.Total-split.Total, 0)}
		}
		out[inode] = &evidence.SockLockSplit{
			ContextKnown: d.ContextReadable && s.Unknown.Count == 0,
			Process:      lockWaits(s.Process), ProcessOwned: lockWaits(s.ProcessOwned),
			Softirq: lockWaits(s.Softirq), SoftirqOwned: lockWaits(s.SoftirqOwned),
			Unknown: lockWaits(s.Unknown), UnknownOwned: lockWaits(s.UnknownOwned),
			Unsplit: lockWaits(unsplit),
		}
	}
	return out
}

// scaleSockLock scales a split as scaleLocks does the rest (the longest
// waits stay the longest seen).
func scaleSockLock(s *evidence.SockLockSplit, k float64) {
	for _, w := range []*evidence.LockWaits{&s.Process, &s.ProcessOwned, &s.Softirq, &s.SoftirqOwned, &s.Unknown, &s.UnknownOwned, &s.Unsplit} {
		w.Count, w.TotalNs = budget.Scaled(w.Count, k), budget.Scaled(w.TotalNs, k)
	}
}

// tcpSocketLocks joins the lock section's TCP sockets whose sk_lock.slock
// was contended with the window's sock_diag dumps (by inode).
func tcpSocketLocks(locks evidence.LockSection, socks map[uint64]tcpdiag.Socket, pid int) evidence.TCPSocketLockSection {
	var sec evidence.TCPSocketLockSection
	if locks.Unavailable != "" {
		sec.Unavailable = locks.Unavailable
		return sec
	}
	for _, sc := range locks.Sockets {
		if sc.Socket.Protocol != "tcp" || sc.SockLock == nil {
			continue
		}
		row := evidence.TCPSocketLock{Inode: sc.Socket.Inode, Port: sc.Socket.Port, Comm: sc.Socket.Comm, Split: *sc.SockLock}
		if sc.Socket.PID != 0 {
			row.PIDs = []int{sc.Socket.PID}
		}
		for _, f := range sc.ByLock {
			if f.Field == string(lockstat.FieldSockLock) {
				row.Waits = evidence.LockWaits{Count: f.Count, TotalNs: f.TotalNs, MaxNs: f.MaxNs}
			}
		}
		if s, ok := socks[sc.Socket.Inode]; ok {
			row.Local, row.Remote, row.State = s.Local, s.Remote, s.State.String()
			if len(s.PIDs) > 0 {
				row.PIDs = s.PIDs
			}
		}
		if pid != 0 && !ownedBy(row.PIDs, pid) {
			continue
		}
		sec.Rows = append(sec.Rows, row)
	}
	sort.SliceStable(sec.Rows, func(i, j int) bool { return sec.Rows[i].Waits.TotalNs > sec.Rows[j].Waits.TotalNs })
	return sec
}

// socketsByInode are the listeners and connections of the window's dumps.
func (p *TCP) socketsByInode() map[uint64]tcpdiag.Socket {
	out := map[uint64]tcpdiag.Socket{}
	p.mu.Lock()
	for _, l := range p.listeners {
		out[l.sock.Inode] = l.sock
	}
	p.mu.Unlock()
	for _, c := range p.conns {
		out[c.Inode] = c
	}
	return out
}

// SocketLocks is the window's TCP socket-lock section from the lock
// part's evidence.
func (p *TCP) SocketLocks(locks evidence.LockSection) evidence.TCPSocketLockSection {
	return tcpSocketLocks(locks, p.socketsByInode(), p.opts.PID)
}

// steering is a connection's feed from the tcpevents probe.
func steering(f tcpevents.Feed) *evidence.TCPSteering {
	s := &evidence.TCPSteering{FedByCPU: map[int]uint64{}, ReadOnCPU: map[int]uint64{}, FedByBacklog: f.Process, FedUnknown: f.Unknown}
	s.FedCPU, s.FedShare = topCPU(f.Softirq, s.FedByCPU)
	s.ReadCPU, s.ReadShare = topCPU(f.Reads, s.ReadOnCPU)
	return s
}

// topCPU fills into with perCPU's non-zero counts and returns the CPU with
// the most and its share (-1, 0 when all are 0).
func topCPU(perCPU []uint64, into map[int]uint64) (int, float64) {
	top, sum := -1, uint64(0)
	for cpu, n := range perCPU {
		if n == 0 {
			continue
		}
		into[cpu] = n
		sum += n
		if top < 0 || n > perCPU[top] {
			top = cpu
		}
	}
	if top < 0 {
		return -1, 0
	}
	return top, float64(perCPU[top]) / float64(sum)
}
