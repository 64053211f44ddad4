package lockstat

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
)

// tcpPair is a connected loopback TCP pair of raw blocking sockets: raw, so
// that several threads can be in the kernel on one socket at once (Go's
// net.Conn lets one writer and one reader in at a time).
type tcpPair struct {
	client, server int
	listener       int
}

func newTCPPair(tb testing.TB) *tcpPair {
	tb.Helper()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	lo := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(ln, lo); err != nil {
		unix.Close(ln)
		tb.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		unix.Close(ln)
		tb.Fatal(err)
	}
	sa, err := unix.Getsockname(ln)
	if err != nil {
		unix.Close(ln)
		tb.Fatal(err)
	}
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Close(ln)
		tb.Fatal(err)
	}
	if err := unix.Connect(c, sa); err != nil {
		unix.Close(ln)
		unix.Close(c)
		tb.Fatal(err)
	}
	s, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		unix.Close(ln)
		unix.Close(c)
		tb.Fatal(err)
	}
	return &tcpPair{client: c, server: s, listener: ln}
}

func (p *tcpPair) Close() {
	unix.Close(p.client)
	unix.Close(p.server)
	unix.Close(p.listener)
}

func inodeOf(tb testing.TB, fd int) uint64 {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		tb.Fatal(err)
	}
	return st.Ino
}

// Four threads write to one connected TCP socket while two read its peer
// on loopback: the writers queue on the sender's socket lock in process
// context (lock_sock finding it owned by another writer), and the ACKs and
// data the loopback softirq delivers find the sockets owned by a writer or
// reader (bh_lock_sock, then the backlog). The probe must see both sides
// on the pair's sockets, each counted once, the split adding up to the
// exact per-lock count.
func TestTCPSocketLockSplit(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	p, err := Open(Options{Method: probes.MethodAuto})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
	}()
	first, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !first.ContextReadable {
		t.Fatal("the waiter's context is not readable on this kernel (x86 with __preempt_count in its BTF expected)")
	}
	pair := newTCPPair(t)
	defer pair.Close()
	inodes := map[uint64]string{inodeOf(t, pair.client): "client", inodeOf(t, pair.server): "server"}

	var stop atomic.Bool
	var wg sync.WaitGroup
	buf := make([]byte, 16<<10)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := unix.Write(pair.client, buf); err != nil && !errors.Is(err, unix.EINTR) {
					return
				}
			}
		}()
	}
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]byte, 64<<10)
			for !stop.Load() {
				if n, err := unix.Read(pair.server, in); n <= 0 && !errors.Is(err, unix.EINTR) {
					return
				}
			}
		}()
	}
	// Bounded: stop as soon as both sides were seen, at most 6 s.
	var d Snapshot
	var split SockLockSplit
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		last, err := p.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		d = last.Sub(first)
		split = SockLockSplit{}
		for lock, s := range d.SockLockSplits() {
			if o, ok := d.Owners[lock]; ok && inodes[o.Inode] != "" {
				split = split.Merge(s)
			}
		}
		if split.Process.Count > 0 && split.SoftirqOwned.Count > 0 && split.ProcessOwned.Count > 0 {
			break
		}
	}
	stop.Store(true)
	unix.Shutdown(pair.client, unix.SHUT_RDWR)
	unix.Shutdown(pair.server, unix.SHUT_RDWR)
	wg.Wait()

	t.Logf("split on the pair's socket locks: %+v", split)
	if split.Unknown.Count != 0 {
		t.Errorf("%d waits of unknown context with the context readable", split.Unknown.Count)
	}
	if split.Process.Count == 0 || split.ProcessOwned.Count == 0 {
		t.Errorf("no process-context wait (or none finding the socket owned) on the pair's socket locks: %+v", split)
	}
	if split.Softirq.Count == 0 || split.SoftirqOwned.Count == 0 {
		t.Errorf("no softirq wait finding the socket owned (backlog) on the pair's socket locks: %+v", split)
	}
	// Every split wait is one of the per-lock map's: the split can only
	// miss a lock's first contentions, begun before the first one ended
	// and recorded the lock's owner — at most one spinning waiter per CPU.
	for lock, s := range d.SockLockSplits() {
		all := d.Locks[lock]
		if tot := s.Total(); tot.Count > all.Count || tot.Count+uint64(runtime.NumCPU()) < all.Count {
			t.Errorf("lock %#x: split counts %d waits, the lock %d", lock, tot.Count, all.Count)
		}
		if o, ok := d.Owners[lock]; !ok || o.Protocol != "tcp" || o.Field != FieldSockLock {
			t.Errorf("lock %#x split but owned by %+v, want a TCP socket's sk_lock.slock", lock, o)
		}
	}
}
