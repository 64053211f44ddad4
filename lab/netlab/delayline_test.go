package netlab

import (
	"context"
	"io"
	"net"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"golang.org/x/sys/unix"
)

// delayLab is a one-queue lab with a delay line, both removed when the
// test ends.
func delayLab(t *testing.T, cfg DelayConfig) (*Lab, *DelayLine) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	ctx := context.Background()
	l, err := New(ctx, Config{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d, err := l.StartDelayLine(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return l, d
}

// A round trip through the delay line takes the delay (the data one way
// through the TUN device, the answer back over the veth), as a timed
// ping-pong and the kernel's own RTT estimate both see; closing it
// removes the TUN device and its route.
func TestDelayLineDelaysTheSendersPackets(t *testing.T) {
	const delay = 30 * time.Millisecond
	l, d := delayLab(t, DelayConfig{Delay: delay, Queue: 64})

	var ln net.Listener
	if err := InNetns(l.ReceiverNS, func() (err error) {
		ln, err = net.Listen("tcp4", l.ReceiverAddr.String()+":9100")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo
	}()
	var c net.Conn
	if err := InNetns(l.SenderNS, func() (err error) {
		c, err = net.DialTimeout("tcp4", l.ReceiverAddr.String()+":9100", 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != l.SenderAddr.String() {
		t.Errorf("client's address %s, want the veth's %s (the route's src)", got, l.SenderAddr)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var rtts []time.Duration
	b := make([]byte, 1)
	for i := 0; i < 15; i++ {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	median := rtts[len(rtts)/2]
	t.Logf("ping-pong round trips: min %v, median %v, max %v", rtts[0], median, rtts[len(rtts)-1])
	// The lower bound is the point; the upper one only catches a line
	// that holds packets for several delays (a busy CI may add a few ms).
	if rtts[0] < delay || median > 3*delay {
		t.Errorf("round trips %v..%v (median %v), want about %v", rtts[0], rtts[len(rtts)-1], median, delay)
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	raw.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if err != nil {
		t.Fatal(err)
	}
	if rtt := time.Duration(info.Rtt) * time.Microsecond; rtt < delay || rtt > 3*delay {
		t.Errorf("tcp_info rtt %v, want about %v", rtt, delay)
	}
	if s := d.Stats(); s.Forwarded < 15 || s.SendErrors != 0 {
		t.Errorf("stats %+v: want every ping forwarded", s)
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "-n", l.SenderNS, "link", "show", TunName).CombinedOutput(); err == nil {
		t.Errorf("%s still exists after Close:\n%s", TunName, out)
	}
}

// A packet that finds the queue full is dropped and counted, and the
// line keeps going.
func TestDelayLineDropsWhenFull(t *testing.T) {
	l, d := delayLab(t, DelayConfig{Delay: 200 * time.Millisecond, Queue: 4})
	// 20 UDP datagrams at once to a port nobody listens on: 4 are held,
	// the rest dropped.
	if err := InNetns(l.SenderNS, func() error {
		c, err := net.Dial("udp4", l.ReceiverAddr.String()+":9101")
		if err != nil {
			return err
		}
		defer c.Close()
		for i := 0; i < 20; i++ {
			c.Write([]byte("x"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	s := d.Stats()
	if s.DroppedFull == 0 || s.Forwarded == 0 || s.Forwarded+s.DroppedFull != 20 {
		t.Errorf("stats %+v: want 20 datagrams, some dropped at the full queue, the others forwarded", s)
	}
}
