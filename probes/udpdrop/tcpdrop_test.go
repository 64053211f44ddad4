package udpdrop

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
)

// tcpNetns makes a network namespace with lo up for one test and returns
// its name and inode.
func tcpNetns(t testing.TB) (string, uint32) {
	t.Helper()
	name, path := testutil.NewNetns(t, "pstcpdrop")
	ino, err := probes.NetnsInode(path)
	if err != nil {
		t.Fatal(err)
	}
	return name, ino
}

// tcpCountersIn reads a namespace's Tcp/TcpExt counters from inside it.
func tcpCountersIn(t *testing.T, ns string) netstat.TCPCounters {
	t.Helper()
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "proc"), 0o755)
	if err := os.Symlink("/proc/thread-self/net", filepath.Join(root, "proc/net")); err != nil {
		t.Fatal(err)
	}
	var c netstat.TCPCounters
	if err := testutil.InNetns(ns, func() (err error) { c, err = netstat.NewFS(root).TCPCounters(); return err }); err != nil {
		t.Fatal(err)
	}
	return c
}

// openCounting opens the probe on namespace ino for one test, closed (and
// checked to leave no BPF object behind) when the test ends, and takes its
// first snapshot.
func openCounting(t *testing.T, m probes.AttachMethod, ino uint32) (*Probe, Snapshot) {
	t.Helper()
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	p, err := Open(Options{Method: m, Netns: ino})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
	})
	first, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return p, first
}

// connectTCP4 starts a non-blocking connect to 127.0.0.1:port and returns
// the socket.
func connectTCP4(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// TCP drops are counted per local port and reason from the one kfree_skb
// handler, in the namespace the probe measures: SYNs to a port nobody
// listens on (NO_SOCKET, port from the TCP header: no socket) as many as
// were refused; a listener whose accept queue overflows shows none (see
// below).
func TestTCPDropsPerPortAndReason(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	for _, m := range []probes.AttachMethod{probes.MethodBTF, probes.MethodRaw, probes.MethodTracepoint} {
		t.Run(string(m), func(t *testing.T) {
			ns, ino := tcpNetns(t)
			p, first := openCounting(t, m, ino)
			countersBefore := tcpCountersIn(t, ns)
			const closedPort, listenPort, refused, clients = 7, 8080, 25, 12
			var listener int
			var fds []int
			var err error
			err = testutil.InNetns(ns, func() error {
				for range refused {
					fd, err := connectTCP4(closedPort)
					if err != nil {
						return err
					}
					fds = append(fds, fd)
				}
				listener, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				if err := unix.Bind(listener, &unix.SockaddrInet4{Port: listenPort, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
					return err
				}
				if err := unix.Listen(listener, 1); err != nil {
					return err
				}
				for range clients {
					fd, err := connectTCP4(listenPort)
					if err != nil {
						return err
					}
					fds = append(fds, fd)
				}
				return nil
			})
			defer func() {
				for _, fd := range fds {
					unix.Close(fd)
				}
				unix.Close(listener)
			}()
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // softirq work is done by then on loopback
			last, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			counters := tcpCountersIn(t, ns).Sub(countersBefore)
			d := last.Sub(first)
			noSocket := reasonValue(t, p, "NO_SOCKET")
			closed, listen := d.TCPPortTotal(closedPort), d.TCPPortTotal(listenPort)
			t.Logf("closed port %d: %v; listener %d: %v; ListenOverflows %d ListenDrops %d; all: %+v",
				closedPort, closed, listenPort, listen, counters.ListenOverflows, counters.ListenDrops, d.Ports)
			if closed[noSocket] != refused {
				t.Errorf("closed port %d: %d NO_SOCKET drops counted, %d SYNs refused", closedPort, closed[noSocket], refused)
			}
			// A SYN refused at a full accept queue is counted in
			// ListenOverflows and freed with consume_skb, not kfree_skb
			// (tcp_rcv_state_process, LISTEN): measured on 6.18, the
			// listener's overflows are no drop events, so the report keeps
			// ListenOverflows as their count rather than doubling them.
			if counters.ListenOverflows == 0 {
				t.Fatalf("no ListenOverflows: the test did not overflow the accept queue")
			}
			if n := len(listen); n != 0 {
				t.Errorf("listener %d: drops %v counted for SYNs refused at a full accept queue (ListenOverflows %d): the kernel now frees them with a reason; count them", listenPort, listen, counters.ListenOverflows)
			}
			for k := range d.Ports {
				if k.Proto != unix.IPPROTO_TCP {
					t.Errorf("a UDP row in a namespace with no UDP traffic: %+v", k)
				}
			}
		})
	}
}

// A key's text form carries the protocol; a recording made before TCP
// drops were counted (four fields) reads as UDP.
func TestPortKeyTextKeepsTheProtocol(t *testing.T) {
	k := PortKey{Port: 7, Family: unix.AF_INET6, Kind: KfreeSkb, Reason: 3, Proto: ProtoTCP}
	b, err := k.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	var got PortKey
	if err := got.UnmarshalText(b); err != nil || got != k {
		t.Errorf("round trip of %+v: %+v, %v", k, got, err)
	}
	if err := got.UnmarshalText([]byte("53/2/2/6")); err != nil || got != (PortKey{Port: 53, Family: 2, Kind: KfreeSkb, Reason: 6, Proto: ProtoUDP}) {
		t.Errorf("four-field key: %+v, %v", got, err)
	}
	if err := got.UnmarshalText([]byte("53/2")); err == nil {
		t.Error("a two-field key was accepted")
	}
	s := Snapshot{Ports: map[PortKey]uint64{k: 4, {Port: 7, Kind: KfreeSkb, Reason: 3, Proto: ProtoUDP}: 9, {Port: 7, Family: unix.AF_INET, Kind: KfreeSkb, Reason: 3, Proto: ProtoTCP}: 1}}
	if n := s.TCPPortTotal(7); len(n) != 1 || n[3] != 5 {
		t.Errorf("TCPPortTotal(7) = %v, want 5 of reason 3", n)
	}
	if n := s.PortTotal(7, KfreeSkb); n != 9 {
		t.Errorf("PortTotal(7) = %d, want the UDP 9", n)
	}
}

// BenchmarkTCPNoSocketDropCost is the kfree_skb handler's cost per event
// on the TCP path that reads the packet's headers (no socket: SYNs to a
// closed port in a namespace of its own), from bpf_stats:
//
//	go test -run '^$' -bench TCPNoSocketDropCost -benchtime 2000x ./probes/udpdrop/
func BenchmarkTCPNoSocketDropCost(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	ns, ino := tcpNetns(b)
	stats, err := probes.EnableStats()
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	p, err := Open(Options{Method: probes.MethodBTF, Netns: ino})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	first, err := p.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	err = testutil.InNetns(ns, func() error {
		for range b.N {
			fd, err := connectTCP4(7)
			if err != nil {
				return err
			}
			unix.Close(fd)
		}
		return nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	last, err := p.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	var runs, ns64 uint64
	for _, c := range p.Costs() {
		runs += c.RunCount
		ns64 += uint64(c.RunTime)
	}
	b.ReportMetric(float64(last.Sub(first).TCPPortTotal(7)[reasonValue(b, p, "NO_SOCKET")]), "no_socket_drops")
	b.ReportMetric(float64(runs), "runs")
	if runs > 0 {
		b.ReportMetric(float64(ns64)/float64(runs), "ns/event")
	}
}

// The other way an accept queue overflows: handshakes whose SYNs found room
// but whose last ACKs find the queue full. A backlog-4 listener that never
// accepts (its SYN queue and its accept queue each hold 5): five clients
// from ports 40001-40005 get their SYN-ACKs, their ACKs dropped on the way
// out (nftables), and wait in its SYN queue; five more, answered with SYN
// cookies now that the SYN queue is full, fill the accept queue; the rule
// goes, the listener's SYN-ACK retransmit (1 s) brings the first five's
// ACKs, and tcp_check_req drops each with TCP_LISTEN_OVERFLOW. Each such
// drop is a ListenOverflows, and no SYN overflowed, so the port's
// TCP_LISTEN_OVERFLOW drops equal the namespace's ListenOverflows.
func TestTCPListenOverflowAtTheHandshakeACK(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	testutil.RequireTool(t, "nft", "scripts/deps.sh test installs nftables")
	for _, m := range []probes.AttachMethod{probes.MethodBTF, probes.MethodTracepoint} {
		t.Run(string(m), func(t *testing.T) {
			ns, ino := tcpNetns(t)
			const port, backlog, waiting = 8081, 4, 5
			nft := func(rules string) {
				t.Helper()
				cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
				cmd.Stdin = strings.NewReader(rules)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("nft: %v %s", err, out)
				}
			}
			nft(fmt.Sprintf("table inet acks {\n chain out {\n type filter hook output priority 0; policy accept;\n tcp sport 40001-%d tcp dport %d tcp flags & (syn | ack) == ack drop\n }\n}\n", 40000+waiting, port))
			p, first := openCounting(t, m, ino)
			countersBefore := tcpCountersIn(t, ns)
			listener := -1
			var fds []int
			defer func() {
				for _, fd := range fds {
					unix.Close(fd)
				}
				unix.Close(listener)
			}()
			var err error
			err = testutil.InNetns(ns, func() error {
				if listener, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
					return err
				}
				if err := unix.Bind(listener, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
					return err
				}
				if err := unix.Listen(listener, backlog); err != nil {
					return err
				}
				for i := range waiting * 2 {
					fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
					if err != nil {
						return err
					}
					fds = append(fds, fd)
					if i < waiting { // the ones whose ACKs are dropped
						if err := unix.Bind(fd, &unix.SockaddrInet4{Port: 40001 + i, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
							return err
						}
					}
					err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
					if err != nil && !errors.Is(err, unix.EINPROGRESS) {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			nft("delete table inet acks\n")
			// The first SYN-ACK retransmit comes 1 s after the SYNs, the
			// second 3 s after: read between them.
			time.Sleep(1800 * time.Millisecond)
			last, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			counters := tcpCountersIn(t, ns).Sub(countersBefore)
			overflow := reasonValue(t, p, "TCP_LISTEN_OVERFLOW")
			got := last.Sub(first).TCPPortTotal(port)
			t.Logf("port %d: %v; ListenOverflows %d, ListenDrops %d", port, got, counters.ListenOverflows, counters.ListenDrops)
			if counters.ListenOverflows < waiting {
				t.Fatalf("ListenOverflows %d, want at least %d: the test did not overflow the accept queue at the ACKs", counters.ListenOverflows, waiting)
			}
			if got[overflow] != counters.ListenOverflows {
				t.Errorf("port %d: %d TCP_LISTEN_OVERFLOW drops, ListenOverflows %d", port, got[overflow], counters.ListenOverflows)
			}
		})
	}
}
