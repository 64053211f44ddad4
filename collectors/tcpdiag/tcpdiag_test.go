package tcpdiag

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/internal/netnstest"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/internal/testutil"
)

// The tcp_info offsets are the UAPI's; golang.org/x/sys/unix generates
// its TCPInfo from the same header, so the two must agree.
func TestInfoOffsetsMatchUAPI(t *testing.T) {
	var i unix.TCPInfo
	for _, c := range []struct {
		name      string
		ours, gen uintptr
	}{
		{"ca_state", offCaState, unsafe.Offsetof(i.Ca_state)}, {"rto", offRTO, unsafe.Offsetof(i.Rto)},
		{"snd_mss", offSndMSS, unsafe.Offsetof(i.Snd_mss)}, {"rcv_mss", offRcvMSS, unsafe.Offsetof(i.Rcv_mss)},
		{"unacked", offUnacked, unsafe.Offsetof(i.Unacked)}, {"lost", offLost, unsafe.Offsetof(i.Lost)},
		{"retrans", offRetrans, unsafe.Offsetof(i.Retrans)}, {"rcv_ssthresh", offRcvSsthresh, unsafe.Offsetof(i.Rcv_ssthresh)},
		{"rtt", offRTT, unsafe.Offsetof(i.Rtt)}, {"rttvar", offRTTVar, unsafe.Offsetof(i.Rttvar)},
		{"snd_ssthresh", offSndSsthresh, unsafe.Offsetof(i.Snd_ssthresh)}, {"snd_cwnd", offSndCwnd, unsafe.Offsetof(i.Snd_cwnd)},
		{"rcv_rtt", offRcvRTT, unsafe.Offsetof(i.Rcv_rtt)}, {"rcv_space", offRcvSpace, unsafe.Offsetof(i.Rcv_space)}, {"total_retrans", offTotalRetr, unsafe.Offsetof(i.Total_retrans)},
		{"bytes_acked", offBytesAcked, unsafe.Offsetof(i.Bytes_acked)}, {"bytes_received", offBytesRecv, unsafe.Offsetof(i.Bytes_received)},
		{"segs_out", offSegsOut, unsafe.Offsetof(i.Segs_out)}, {"segs_in", offSegsIn, unsafe.Offsetof(i.Segs_in)},
		{"min_rtt", offMinRTT, unsafe.Offsetof(i.Min_rtt)}, {"delivery_rate", offDelivery, unsafe.Offsetof(i.Delivery_rate)},
		{"busy_time", offBusy, unsafe.Offsetof(i.Busy_time)}, {"rwnd_limited", offRwndLim, unsafe.Offsetof(i.Rwnd_limited)},
		{"sndbuf_limited", offSndbufLim, unsafe.Offsetof(i.Sndbuf_limited)}, {"bytes_sent", offBytesSent, unsafe.Offsetof(i.Bytes_sent)},
		{"bytes_retrans", offBytesRetr, unsafe.Offsetof(i.Bytes_retrans)}, {"snd_wnd", offSndWnd, unsafe.Offsetof(i.Snd_wnd)},
		{"rcv_wnd", offRcvWnd, unsafe.Offsetof(i.Rcv_wnd)}, {"total_rto", offTotalRTO, unsafe.Offsetof(i.Total_rto)},
	} {
		if c.ours != c.gen {
			t.Errorf("tcp_info.%s at %d, x/sys/unix says %d", c.name, c.ours, c.gen)
		}
	}
}

// recorded reads testdata/NAME: inet_diag replies recorded on Linux 6.18
// by TestListenerAcceptQueueInNetns (PERFSCOPE_RECORD_TCPDIAG=1), each a
// 4-byte length then the message.
func recorded(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for len(b) >= 4 {
		n := binary.LittleEndian.Uint32(b)
		out, b = append(out, b[4:4+n]), b[4+n:]
	}
	return out
}

func TestParseRecordedReplies(t *testing.T) {
	var listener, conn *Socket
	for _, m := range recorded(t, "linux618.bin") {
		s, err := parseMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case s.Listening() && s.Local.Port() == 7001:
			listener = &s
		case s.State == Established && s.Local.Port() == 7002:
			conn = &s
		}
	}
	if listener == nil || conn == nil {
		t.Fatalf("recording lacks the listener on 7001 or the connection on 7002")
	}
	// A listener with backlog 1 that never accepts holds 2 connections.
	if listener.SendQ != 1 || listener.RecvQ != 2 || listener.Local.Addr() != netip.MustParseAddr("127.0.0.1") || listener.Inode == 0 {
		t.Errorf("listener = %+v", listener)
	}
	in := conn.Info
	if in == nil || in.RTTUs == 0 || in.RcvRTTUs == 0 || in.SndCwnd == 0 || in.BytesReceived == nil || *in.BytesReceived < 1<<20 ||
		in.TotalRTO == nil || in.RcvWnd == nil || conn.Memory == nil || conn.Memory.Drops == nil || conn.Congestion == "" {
		t.Errorf("connection = %+v info %+v memory %+v", conn, in, conn.Memory)
	}
}

func TestParseShortAndBad(t *testing.T) {
	if _, err := parseMessage(make([]byte, 10)); err == nil {
		t.Error("short message accepted")
	}
	m := make([]byte, sizeofMsg)
	m[0] = 99
	if _, err := parseMessage(m); err == nil {
		t.Error("family 99 accepted")
	}
	m[0] = unix.AF_INET6
	// A truncated attribute header.
	if _, err := parseMessage(append(m, 8, 0)); err == nil {
		t.Error("truncated attribute accepted")
	}
	// A tcp_info of Linux 2.6 (104 bytes): the newer fields are unknown.
	old := make([]byte, offTotalRetr+4)
	binary.NativeEndian.PutUint32(old[offRTT:], 1500)
	binary.NativeEndian.PutUint32(old[offRcvRTT:], 40000)
	in := parseInfo(old)
	if in == nil || in.RTTUs != 1500 || in.RcvRTTUs != 40000 || in.BytesAcked != nil || in.TotalRTO != nil || in.SndWnd != nil {
		t.Errorf("old tcp_info = %+v", in)
	}
	if parseInfo(old[:50]) != nil {
		t.Error("a 50-byte tcp_info parsed")
	}
	mem := parseMemory(make([]byte, 7*4))
	if mem == nil || mem.Drops != nil || mem.Backlog != nil {
		t.Errorf("pre-4.6 meminfo = %+v", mem)
	}
	if State(10).String() != "LISTEN" || State(200).String() != "state(200)" {
		t.Error("state names")
	}
}

func TestEncodeRequest(t *testing.T) {
	all := encodeRequest(unix.AF_INET, Query{})
	if len(all) != sizeofRequest || all[1] != unix.IPPROTO_TCP || binary.NativeEndian.Uint32(all[4:]) != ^uint32(0) {
		t.Errorf("request = %x", all)
	}
	p := encodeRequest(unix.AF_INET6, Query{States: StatesOf(Listen), Port: 8080})
	want := []byte{12, 0, 1, 0, 11, 8, 12, 0, 0, 0, 0x90, 0x1f} // nlattr{12, BYTECODE}, S_EQ yes 8 no 12, port 8080
	if binary.NativeEndian.Uint32(p[4:]) != 1<<10 || !bytes.Equal(p[sizeofRequest:], want) {
		t.Errorf("port request = %x", p)
	}
}

// newNetns creates a network namespace with lo up, removed when t ends.
func newNetns(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("pstcpdiag%d", os.Getpid())
	exec.Command("ip", "netns", "del", ns).Run()
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	netnstest.Run(t, "ip", "netns", "add", ns)
	netnstest.Run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	return ns
}

// nsCounters reads the namespace's TCP counters: proc/net below the root
// points at /proc/thread-self/net, read from a thread inside ns.
func nsCounters(t *testing.T, ns string) netstat.TCPCounters {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/thread-self/net", filepath.Join(root, "proc/net")); err != nil {
		t.Fatal(err)
	}
	var c netstat.TCPCounters
	var err error
	netnstest.In(t, ns, func() { c, err = netstat.NewFS(root).TCPCounters() })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func listen(t *testing.T, port, backlog int) int {
	return listenOn(t, [4]byte{127, 0, 0, 1}, port, backlog, nil)
}

// listenOn is a listener on addr:port, set (when given) applied to its
// socket before bind.
func listenOn(t *testing.T, addr [4]byte, port, backlog int, set func(fd int) error) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if set != nil {
		if err := set(fd); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: addr}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		t.Fatal(err)
	}
	return fd
}

// A listener with backlog 1 that never accepts, in a namespace the test
// creates: its accept queue fills (2 connections: the kernel lets it reach
// backlog + 1), further SYNs overflow it, and ListenOverflows counts them.
// A second listener accepts one connection that carries 2 MiB, whose
// tcp_info must show the bytes and an RTT. The port filter must keep the
// client's side out.
func TestListenerAcceptQueueInNetns(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t)
	before := nsCounters(t, ns)
	const payload = 2 << 20
	netnstest.In(t, ns, func() {
		listen(t, 7001, 1)
		for range 8 {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { unix.Close(fd) })
			if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 7001, Addr: [4]byte{127, 0, 0, 1}}); err != unix.EINPROGRESS && err != nil {
				t.Error(err)
			}
		}
		ln, err := net.Listen("tcp4", "127.0.0.1:7002")
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { ln.Close() })
		client, err := net.Dial("tcp4", "127.0.0.1:7002")
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { client.Close() })
		server, err := ln.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { server.Close() })
		go client.Write(make([]byte, payload))
		buf := make([]byte, 64<<10)
		for n := 0; n < payload; {
			server.SetReadDeadline(time.Now().Add(10 * time.Second))
			k, err := server.Read(buf)
			if err != nil {
				t.Error(err)
				return
			}
			n += k
		}
	})
	if t.Failed() {
		return
	}
	time.Sleep(200 * time.Millisecond) // the handshakes on loopback finish in softirq
	nsFile := "/run/netns/" + ns
	listeners, err := Sockets(Query{States: StatesOf(Listen), Port: 7001, Netns: nsFile})
	if err != nil {
		t.Fatal(err)
	}
	if len(listeners) != 1 || listeners[0].SendQ != 1 || listeners[0].RecvQ != 2 {
		t.Fatalf("listeners on 7001 = %+v", listeners)
	}
	if err := AttachOwners(sockets.Default, listeners); err != nil {
		t.Fatal(err)
	}
	if len(listeners[0].PIDs) != 1 || listeners[0].PIDs[0] != os.Getpid() {
		t.Errorf("listener owned by %v, want this test (%d)", listeners[0].PIDs, os.Getpid())
	}
	after := nsCounters(t, ns)
	if d := after.Sub(before); d.ListenOverflows == 0 || d.ListenDrops < d.ListenOverflows {
		t.Errorf("ListenOverflows +%d, ListenDrops +%d: the full accept queue was not counted", d.ListenOverflows, d.ListenDrops)
	}
	conns, err := Sockets(Query{States: Connected, Port: 7002, Netns: nsFile})
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 1 || conns[0].Remote.Port() == 7002 {
		t.Fatalf("connections with local port 7002 = %+v (the port filter must leave the client's side out)", conns)
	}
	in := conns[0].Info
	if in == nil || in.BytesReceived == nil || *in.BytesReceived < payload || in.RTTUs == 0 || in.SndCwnd == 0 {
		t.Errorf("server side tcp_info = %+v", in)
	}
	// This process's own namespace has no listener on 7001.
	own, err := Sockets(Query{States: StatesOf(Listen), Port: 7001})
	if err != nil || len(own) != 0 {
		t.Errorf("own namespace: %+v %v", own, err)
	}
	if os.Getenv("PERFSCOPE_RECORD_TCPDIAG") == "1" {
		record(t, nsFile)
	}
}

// Listeners found one by one (Query.Find) are those a listing shows, with
// the same accept queue: an IPv4 listener, an IPv6 one and one bound to
// an interface. A closed listener and a wrong cookie are not found, and of
// an SO_REUSEPORT group the lookup finds only the one it picks.
func TestFindListenersInNetns(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t)
	var closed int
	netnstest.In(t, ns, func() {
		listen(t, 7101, 5)
		closed = listen(t, 7102, 5)
		ln6, err := net.Listen("tcp6", "[::1]:7103")
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { ln6.Close() })
		// Bound to lo: found only when the lookup names the interface.
		listenOn(t, [4]byte{}, 7104, 3, func(fd int) error {
			return unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, "lo")
		})
		for range 2 {
			listenOn(t, [4]byte{127, 0, 0, 1}, 7105, 3, func(fd int) error {
				return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			})
		}
		// Two connections wait in 7101's accept queue.
		for range 2 {
			c, err := net.Dial("tcp4", "127.0.0.1:7101")
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	})
	if t.Failed() {
		return
	}
	time.Sleep(100 * time.Millisecond)
	nsFile := "/run/netns/" + ns
	listed, err := Sockets(Query{States: StatesOf(Listen), Netns: nsFile})
	if err != nil {
		t.Fatal(err)
	}
	byPort := map[uint16][]Socket{}
	for _, l := range listed {
		byPort[l.Local.Port()] = append(byPort[l.Local.Port()], l)
	}
	if len(listed) != 6 || len(byPort[7105]) != 2 || byPort[7101][0].RecvQ != 2 || byPort[7104][0].Interface == 0 {
		t.Fatalf("listed %+v", listed)
	}
	alone := []Socket{byPort[7101][0], byPort[7103][0], byPort[7104][0]}
	found, err := Sockets(Query{Find: alone, Netns: nsFile})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 3 {
		t.Fatalf("found %+v, want the 3 listeners %+v", found, alone)
	}
	want := map[uint64]Socket{}
	for _, w := range alone {
		want[w.Cookie] = w
	}
	for _, g := range found {
		if w := want[g.Cookie]; g.RecvQ != w.RecvQ || g.SendQ != w.SendQ || g.Local != w.Local || !g.Listening() {
			t.Errorf("found %+v, want %+v", g, w)
		}
		delete(want, g.Cookie)
	}
	stale := byPort[7101][0]
	stale.Cookie++
	unix.Close(closed)
	gone, err := Sockets(Query{Find: []Socket{stale, byPort[7102][0]}, Netns: nsFile})
	if err != nil || len(gone) != 0 {
		t.Errorf("a wrong cookie and a closed listener: found %+v, %v", gone, err)
	}
	group, err := Sockets(Query{Find: byPort[7105], Netns: nsFile})
	if err != nil || len(group) != 1 {
		t.Errorf("an SO_REUSEPORT group of 2: found %+v, %v; want the one the lookup picks", group, err)
	}
}

func TestBadNamespace(t *testing.T) {
	if _, err := Sockets(Query{Netns: "/nonexistent/ns"}); err == nil || !strings.Contains(err.Error(), "network namespace") {
		t.Errorf("err = %v", err)
	}
}

// record writes the namespace's raw inet_diag replies to testdata.
func record(t *testing.T, nsFile string) {
	msgs, err := messages(Query{Netns: nsFile})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, m := range msgs {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(m)))
		out = append(out, m...)
	}
	if err := os.WriteFile("testdata/linux618.bin", out, 0o644); err != nil {
		t.Fatal(err)
	}
}
