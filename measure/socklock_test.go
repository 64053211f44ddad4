package measure

import (
	"net/netip"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/tcpdiag"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes/lockstat"
)

// The split of a TCP socket's lock waits is summed per socket (inode)
// across its lock addresses, the waits the probe could not split yet are
// Unsplit, and the rows are named from sock_diag by inode.
func TestTCPSocketLockSplitJoin(t *testing.T) {
	const lockA, lockB, udpLock = 0x1000, 0x2000, 0x3000
	w := func(n uint64, ns time.Duration) lockstat.WaitStats {
		return lockstat.WaitStats{Count: n, Total: ns, Max: ns}
	}
	d := lockstat.Snapshot{
		ContextReadable: true,
		Owners: map[uint64]lockstat.Owner{
			lockA:   {Field: lockstat.FieldSockLock, Protocol: "tcp", Port: 8080, Inode: 11},
			lockB:   {Field: lockstat.FieldSockLock, Protocol: "tcp", Port: 40000, Inode: 22},
			udpLock: {Field: lockstat.FieldReceiveQueue, Protocol: "udp", Port: 53, Inode: 33},
		},
		Locks: map[uint64]lockstat.WaitStats{lockA: w(12, 1200), lockB: w(3, 300), udpLock: w(5, 500)},
		SockWaits: map[lockstat.SockWaitKey]lockstat.WaitStats{
			{Lock: lockA, Kind: lockstat.SockWaitKind{}}:                           w(4, 400),
			{Lock: lockA, Kind: lockstat.SockWaitKind{Owned: true}}:                w(2, 200),
			{Lock: lockA, Kind: lockstat.SockWaitKind{Softirq: true}}:              w(1, 100),
			{Lock: lockA, Kind: lockstat.SockWaitKind{Softirq: true, Owned: true}}: w(4, 400),
			{Lock: lockB, Kind: lockstat.SockWaitKind{ContextUnknown: true}}:       w(3, 300),
		},
	}
	splits := sockLockSplits(d)
	a := splits[11]
	if a == nil || !a.ContextKnown || a.Process.Count != 6 || a.ProcessOwned.Count != 2 || a.Softirq.Count != 5 ||
		a.SoftirqOwned.Count != 4 || a.SoftirqOwned.TotalNs != 400 || a.Unsplit.Count != 1 || a.Unsplit.TotalNs != 100 {
		t.Errorf("socket 11 split = %+v", a)
	}
	if b := splits[22]; b == nil || b.ContextKnown || b.Unknown.Count != 3 || b.Unsplit.Count != 0 {
		t.Errorf("socket 22 split = %+v", b)
	}
	if splits[33] != nil {
		t.Errorf("a UDP socket split: %+v", splits[33])
	}

	locks := evidence.LockSection{Sockets: []evidence.SocketContention{
		{Socket: evidence.SocketRef{Protocol: "udp", Port: 53, Inode: 33}, Count: 5},
		{Socket: evidence.SocketRef{Protocol: "tcp", Port: 40000, Inode: 22, PID: 7, Comm: "client"}, SockLock: splits[22],
			ByLock: []evidence.SocketLockWait{{Field: "sk_lock.slock", Count: 3, TotalNs: 300}}},
		{Socket: evidence.SocketRef{Protocol: "tcp", Port: 8080, Inode: 11, PID: 9, Comm: "server"}, SockLock: splits[11],
			ByLock: []evidence.SocketLockWait{{Field: "sk_receive_queue.lock", Count: 9, TotalNs: 9000}, {Field: "sk_lock.slock", Count: 12, TotalNs: 1200}}},
	}}
	socks := map[uint64]tcpdiag.Socket{11: {Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("10.0.0.2:5555"),
		State: tcpdiag.Established, Inode: 11, PIDs: []int{9, 10}}}
	sec := tcpSocketLocks(locks, socks, 0)
	if len(sec.Rows) != 2 {
		t.Fatalf("rows = %+v, want the two TCP sockets", sec.Rows)
	}
	r := sec.Rows[0]
	if r.Inode != 11 || r.Waits.Count != 12 || r.Waits.TotalNs != 1200 || r.Local.Port() != 8080 || r.State != "ESTABLISHED" || len(r.PIDs) != 2 {
		t.Errorf("first row = %+v, want socket 11 named from sock_diag with its sk_lock.slock wait", r)
	}
	if r := sec.Rows[1]; r.Inode != 22 || r.Local.IsValid() || r.Port != 40000 || r.PIDs[0] != 7 {
		t.Errorf("second row = %+v, want socket 22 by port only", r)
	}
	if got := tcpSocketLocks(locks, socks, 7); len(got.Rows) != 1 || got.Rows[0].Inode != 22 {
		t.Errorf("--pid 7 keeps %+v", got.Rows)
	}
	if got := tcpSocketLocks(evidence.LockSection{Section: evidence.Section{Unavailable: "lock contention: no"}}, socks, 0); got.Unavailable == "" {
		t.Error("an unavailable lock section gives an available socket-lock section")
	}
}
