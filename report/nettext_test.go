package report

import (
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

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

func TestLockSplit(t *testing.T) {
	locks := []evidence.SocketLockWait{{Field: "sk_receive_queue.lock", TotalNs: 25000}, {Field: "socket.wq.wait.lock", TotalNs: 5000}}
	if got := lockSplit(locks); got != "sk_receive_queue.lock 83%, socket.wq.wait.lock 17%" {
		t.Errorf("lockSplit = %q", got)
	}
}

func TestFeedersBusiestFirst(t *testing.T) {
	got := feeders(evidence.UDPSocket{WakeupsByCPU: map[int]uint64{0: 380, 1: 619, 2: 1}})
	if !strings.HasPrefix(got, "1 61.9%") || !strings.Contains(got, ", 0 38.0%") || strings.Contains(got, "2 ") {
		t.Errorf("feeders = %q, want CPU 1 then CPU 0, CPU 2 (0.1%%) left out", got)
	}
	if got := feeders(evidence.UDPSocket{}); got != "-" {
		t.Errorf("no wakeups: %q", got)
	}
}
