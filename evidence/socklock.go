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

// TCPSteering is where one connection's data arrived and where it was
// read, from the tcpevents probe's sampled hooks: shares, not counts (under
// the overhead budget the hooks are attached in sampling windows only).
type TCPSteering struct {
	// FedByCPU are the receive path's deliveries (sock:sk_data_ready in
	// softirq) per CPU: the CPU whose softirq fed the connection.
	FedByCPU map[int]uint64 `json:"fed_by_cpu"`
	// FedByBacklog are deliveries by the owner's release_sock (segments
	// that waited in the backlog while a thread held the socket);
	// FedUnknown those whose context the probe could not tell.
	FedByBacklog uint64 `json:"fed_by_backlog"`
	FedUnknown   uint64 `json:"fed_unknown"`
	// ReadOnCPU are the reads that returned data (sock:sock_recv_length)
	// per CPU: where the serving threads ran.
	ReadOnCPU map[int]uint64 `json:"read_on_cpu"`
	// FedCPU is the CPU with most of FedByCPU and FedShare its share;
	// ReadCPU, ReadShare the same for ReadOnCPU (-1, 0: none counted).
	FedCPU    int     `json:"fed_cpu"`
	FedShare  float64 `json:"fed_share"`
	ReadCPU   int     `json:"read_cpu"`
	ReadShare float64 `json:"read_share"`
}
