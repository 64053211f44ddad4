package evidence

import "net/netip"

// LockWaits are contentions and their wait.
type LockWaits struct {
	Count   uint64 `json:"count"`
	TotalNs uint64 `json:"total_ns"`
	MaxNs   uint64 `json:"max_ns"`
}

// SockLockSplit splits the waits on a TCP socket's lock (sk_lock.slock)
// by the waiter's side: a process (lock_sock, lock_sock_fast,
// release_sock) or a softirq (the receive path's bh_lock_sock, the TCP
// timers); each side's *Owned share found the socket owned by a process
// once it got the spinlock — a softirq then queued the segment to the
// socket's backlog, lock_sock went on to sleep for the owner (that sleep
// is not a lock contention event: not timed here).
type SockLockSplit struct {
	// ContextKnown: the lock probe told softirq from process context on
	// this kernel (x86-64, a raw tracepoint attachment); false: every wait
	// is under Unknown.
	ContextKnown bool      `json:"context_known"`
	Process      LockWaits `json:"process"`
	ProcessOwned LockWaits `json:"process_owned"`
	Softirq      LockWaits `json:"softirq"`
	SoftirqOwned LockWaits `json:"softirq_owned"`
	Unknown      LockWaits `json:"unknown"`
	UnknownOwned LockWaits `json:"unknown_owned"`
	// Unsplit are the lock's first contentions, begun before the probe
	// knew the lock as a socket's (at most one per CPU per socket).
	Unsplit LockWaits `json:"unsplit"`
}

// TCPSocketLock is one TCP socket whose lock was contended, named from
// the window's sock_diag dumps.
type TCPSocketLock struct {
	Inode uint64 `json:"inode"`
	// Local, Remote and State are sock_diag's for the inode; Local is
	// invalid (and State "") when the socket was not in the dumps (closed
	// before the end, or another namespace's): Port is then the lock
	// probe's.
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	State  string         `json:"state"`
	Port   int            `json:"port"`
	PIDs   []int          `json:"pids,omitempty"`
	Comm   string         `json:"comm,omitempty"`
	// Waits are every wait on the socket's sk_lock.slock (exact, or scaled
	// with the lock section's estimate).
	Waits LockWaits     `json:"waits"`
	Split SockLockSplit `json:"split"`
}

// TCPSocketLockSection lists the TCP sockets (listeners and connections)
// whose sk_lock.slock was contended, most wait first.
type TCPSocketLockSection struct {
	Section
	Rows []TCPSocketLock `json:"rows"`
}
