// Package netnstest builds the small network-namespace rigs the collectors'
// root tests read live: a multi-queue veth pair whose ends live in two
// namespaces created for the test and deleted in t.Cleanup.
package netnstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Pair is a veth pair: A in namespace NSA, B in namespace NSB, both up.
type Pair struct {
	NSA, NSB string
	A, B     string
}

var serial atomic.Int32

// NewVethPair creates two namespaces joined by a veth with queues RX and TX
// queues on each end, and turns on GRO and rx-udp-gro-forwarding on B so
// that B receives through per-queue NAPI. Everything is deleted when t ends.
func NewVethPair(t testing.TB, queues int) Pair {
	t.Helper()
	n := serial.Add(1)
	p := Pair{
		NSA: fmt.Sprintf("pscolA%d_%d", os.Getpid(), n),
		NSB: fmt.Sprintf("pscolB%d_%d", os.Getpid(), n),
		A:   "va", B: "vb",
	}
	t.Cleanup(func() {
		// Deleting a namespace destroys the veth end inside it and its peer.
		exec.Command("ip", "netns", "del", p.NSA).Run()
		exec.Command("ip", "netns", "del", p.NSB).Run()
	})
	q := fmt.Sprint(queues)
	Run(t, "ip", "netns", "add", p.NSA)
	Run(t, "ip", "netns", "add", p.NSB)
	Run(t, "ip", "-n", p.NSA, "link", "add", p.A, "numtxqueues", q, "numrxqueues", q, "type", "veth",
		"peer", "name", p.B, "netns", p.NSB, "numtxqueues", q, "numrxqueues", q)
	Run(t, "ip", "-n", p.NSA, "addr", "add", "10.199.0.1/24", "dev", p.A)
	Run(t, "ip", "-n", p.NSB, "addr", "add", "10.199.0.2/24", "dev", p.B)
	Run(t, "ip", "-n", p.NSA, "link", "set", p.A, "up")
	Run(t, "ip", "-n", p.NSB, "link", "set", p.B, "up")
	Run(t, "ip", "netns", "exec", p.NSB, "ethtool", "-K", p.B, "gro", "on", "rx-udp-gro-forwarding", "on")
	return p
}

// Run runs a command and fails t with its output if it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// In runs fn on an OS thread that has entered namespace ns. The thread is
// never returned to the runtime's pool (its goroutine ends locked), so no
// other goroutine can inherit the namespace.
func In(t testing.TB, ns string, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		defer func() { done <- nil }()
		fn()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// SendUDP sends n small datagrams from namespace ns to addr ("10.199.0.2:9"),
// from several source ports so that they spread over the veth's queues.
func SendUDP(t testing.TB, ns, addr string, n int) {
	t.Helper()
	var sendErr error
	In(t, ns, func() {
		for i := 0; i < n && sendErr == nil; i++ {
			var c net.Conn
			if c, sendErr = net.Dial("udp", addr); sendErr != nil {
				return
			}
			_, sendErr = c.Write([]byte("perfscope collector test"))
			c.Close()
		}
	})
	if sendErr != nil {
		t.Fatalf("send UDP to %s in %s: %v", addr, ns, sendErr)
	}
}
