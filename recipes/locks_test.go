package cli

import (
	"net/netip"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes/lockstat"
)

func TestSocketContention(t *testing.T) {
	sw := lockstat.SocketWait{
		Socket: lockstat.SocketRef{Owner: lockstat.Owner{Field: lockstat.FieldReceiveQueue, Protocol: "udp", Port: 9000, Inode: 11, NetNS: 7},
			Local: netip.MustParseAddrPort("10.0.0.2:9000")},
		WaitStats: lockstat.WaitStats{Count: 3, Total: 30 * time.Microsecond, Max: 20 * time.Microsecond},
		ByField: []lockstat.FieldWait{
			{Field: lockstat.FieldReceiveQueue, WaitStats: lockstat.WaitStats{Count: 2, Total: 25 * time.Microsecond, Max: 20 * time.Microsecond}},
			{Field: lockstat.FieldWaitQueue, WaitStats: lockstat.WaitStats{Count: 1, Total: 5 * time.Microsecond, Max: 5 * time.Microsecond}},
		},
	}
	sc := socketContention(sw)
	want := evidence.SocketRef{Local: "10.0.0.2:9000", Port: 9000, Protocol: "udp", Inode: 11, NetNS: 7, Field: "sk_receive_queue.lock"}
	if sc.Socket != want || sc.Count != 3 || sc.TotalNs != 30000 || sc.MaxNs != 20000 {
		t.Errorf("socketContention = %+v", sc)
	}
	if len(sc.ByLock) != 2 || sc.ByLock[1] != (evidence.SocketLockWait{Field: "socket.wq.wait.lock", Count: 1, TotalNs: 5000, MaxNs: 5000}) {
		t.Errorf("by lock = %+v", sc.ByLock)
	}
	if got := lockSplit(sc.ByLock); got != "sk_receive_queue.lock 83%, socket.wq.wait.lock 17%" {
		t.Errorf("lockSplit = %q", got)
	}
	// Another namespace: no address, so the port and namespace name it.
	sw.Socket.Local, sw.Socket.OtherNetNS = netip.AddrPort{}, true
	if sc := socketContention(sw); sc.Socket.Local != "" || !sc.Socket.OtherNetNS {
		t.Errorf("other namespace: %+v", sc.Socket)
	}
}

func TestSocketLabel(t *testing.T) {
	for _, c := range []struct {
		ref  evidence.SocketRef
		want string
	}{
		{evidence.SocketRef{Local: "10.0.0.2:9000", Protocol: "udp", Port: 9000, Inode: 11, PID: 42, Comm: "server"},
			"10.0.0.2:9000 (inode 11, pid 42 server)"},
		{evidence.SocketRef{Local: "[::1]:80", Protocol: "tcp", Port: 80, Inode: 12}, "tcp [::1]:80 (inode 12)"},
		{evidence.SocketRef{Protocol: "udp", Port: 53, Inode: 13, NetNS: 4026532290, OtherNetNS: true, PID: 7, Comm: "dns"},
			"udp port 53 in netns 4026532290 (inode 13, pid 7 dns)"},
		{evidence.SocketRef{Protocol: "udp", Port: 7000, Inode: 14}, "udp port 7000 (inode 14)"},
	} {
		if got := socketLabel(c.ref); got != c.want {
			t.Errorf("socketLabel(%+v) = %q, want %q", c.ref, got, c.want)
		}
	}
	if got := lockSplit(nil); got != "" {
		t.Errorf("lockSplit(nil) = %q", got)
	}
}
