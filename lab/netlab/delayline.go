package netlab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DelayConfig describes a delay line: how long each packet from the
// sender to the receiver is held, and how many packets may be held at
// once.
type DelayConfig struct {
	// Delay is added to every packet the sender sends to the receiver
	// (one way: the receiver's ACKs come back directly over the veth, so
	// a round trip is Delay plus the veth's few microseconds).
	Delay time.Duration
	// Queue bounds the packets held (default 8192); a packet that finds
	// it full is dropped and counted, as a router's full queue drops.
	Queue int
}

// DelayStats are what a delay line did.
type DelayStats struct {
	// Forwarded are packets sent on to the receiver after the delay.
	Forwarded uint64 `json:"forwarded"`
	// DroppedFull are packets dropped because the queue was full;
	// SendErrors those the sender's veth refused.
	DroppedFull uint64 `json:"dropped_full"`
	SendErrors  uint64 `json:"send_errors"`
	// NotIPv4 are packets not carried (the veth's Ethernet header says
	// IPv4; the lab's traffic is IPv4).
	NotIPv4 uint64 `json:"not_ipv4"`
	// ReadErrors are packets the TUN device could not hand over.
	ReadErrors uint64 `json:"read_errors"`
}

// DelayLine delays the sender's packets to the receiver without netem:
// in the sender's namespace a TUN device carries the route to the
// receiver's address; a goroutine reads each IP packet from it, holds it
// for Delay in a bounded queue, and another sends it out on the sender's
// veth through an AF_PACKET socket, with the Ethernet header the veth's
// peer expects. Close removes it; so does deleting the namespace.
type DelayLine struct {
	cfg  DelayConfig
	tun  *os.File
	pkt  int // AF_PACKET socket bound to the sender's veth
	hdr  [ethHeaderLen]byte
	free chan []byte
	held chan heldPacket
	wg   sync.WaitGroup
	once sync.Once

	forwarded, droppedFull, sendErrors, notIPv4, readErrors atomic.Uint64
}

type heldPacket struct {
	frame []byte // Ethernet header then the IP packet
	due   time.Time
}

// TunName is the delay line's TUN device in the sender namespace.
const TunName = "delay0"

const (
	ethHeaderLen = 14
	// tunMTU is the TUN device's MTU, the veth's: the kernel segments
	// (GSO) before handing packets to a TUN device without offloads, so
	// no packet read is larger.
	tunMTU = 1500
)

// StartDelayLine puts a delay line on the path from the lab's sender to
// its receiver. It needs CONFIG_TUN (/dev/net/tun).
func (l *Lab) StartDelayLine(ctx context.Context, cfg DelayConfig) (*DelayLine, error) {
	if cfg.Delay <= 0 {
		return nil, fmt.Errorf("delay line: delay %v: want a positive delay", cfg.Delay)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 8192
	}
	d := &DelayLine{cfg: cfg, pkt: -1}
	var peer net.HardwareAddr
	err := InNetns(l.ReceiverNS, func() error {
		ifc, err := net.InterfaceByName(l.ReceiverIf)
		if err != nil {
			return fmt.Errorf("delay line: receiver's %s: %w", l.ReceiverIf, err)
		}
		peer = ifc.HardwareAddr
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = InNetns(l.SenderNS, func() error {
		ifc, err := net.InterfaceByName(l.SenderIf)
		if err != nil {
			return fmt.Errorf("delay line: sender's %s: %w", l.SenderIf, err)
		}
		if len(ifc.HardwareAddr) != 6 || len(peer) != 6 {
			return fmt.Errorf("delay line: %s or its peer has no Ethernet address", l.SenderIf)
		}
		copy(d.hdr[0:6], peer)
		copy(d.hdr[6:12], ifc.HardwareAddr)
		binary.BigEndian.PutUint16(d.hdr[12:], unix.ETH_P_IP)
		// Protocol 0: the socket only sends; nothing received on the
		// veth is copied to it.
		d.pkt, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("delay line: AF_PACKET socket: %w", err)
		}
		if err := unix.Bind(d.pkt, &unix.SockaddrLinklayer{Ifindex: ifc.Index}); err != nil {
			return fmt.Errorf("delay line: bind AF_PACKET to %s: %w", l.SenderIf, err)
		}
		// The TUN device is created in the namespace of the thread that
		// opens /dev/net/tun.
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("delay line: open /dev/net/tun (CONFIG_TUN): %w", err)
		}
		ifr, err := unix.NewIfreq(TunName)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("delay line: TUNSETIFF %s: %w", TunName, err)
		}
		// Non-blocking, so that Go's poller wakes the reader and Close
		// ends its Read.
		d.tun = os.NewFile(uintptr(fd), TunName)
		return nil
	})
	if err != nil {
		d.closeFDs()
		return nil, err
	}
	// The route to the receiver's address goes through the TUN device,
	// with the veth's address as source so that the receiver answers
	// over the veth; the answers then arrive on another device than the
	// route to their source, which reverse-path filtering would drop.
	steps := [][]string{
		{"ip", "-n", l.SenderNS, "link", "set", TunName, "mtu", fmt.Sprint(tunMTU), "txqueuelen", "1000", "up"},
		{"ip", "-n", l.SenderNS, "route", "add", l.ReceiverAddr.String() + "/32", "dev", TunName, "src", l.SenderAddr.String()},
		{"ip", "netns", "exec", l.SenderNS, "sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0",
			"net.ipv4.conf." + l.SenderIf + ".rp_filter=0", "net.ipv4.conf." + TunName + ".rp_filter=0"},
	}
	for _, s := range steps {
		if err := runCommand(ctx, s); err != nil {
			d.Close()
			return nil, fmt.Errorf("delay line: %w", err)
		}
	}
	d.free = make(chan []byte, cfg.Queue)
	for i := 0; i < cfg.Queue; i++ {
		d.free <- make([]byte, ethHeaderLen+tunMTU)
	}
	d.held = make(chan heldPacket, cfg.Queue)
	d.wg.Add(2)
	go d.read()
	go d.send()
	return d, nil
}

// read takes each packet from the TUN device, stamps when it is due and
// queues it; without a free buffer (the queue is full) it drops it.
func (d *DelayLine) read() {
	defer d.wg.Done()
	defer close(d.held)
	spill := make([]byte, ethHeaderLen+tunMTU)
	for {
		var buf []byte
		select {
		case buf = <-d.free:
		default:
			buf = spill
		}
		n, err := d.tun.Read(buf[ethHeaderLen:])
		if err != nil && !errors.Is(err, unix.EFAULT) {
			return // closed, or the device went with its namespace
		}
		spilled := &buf[0] == &spill[0]
		switch {
		case err != nil:
			// A packet larger than the buffer (the kernel consumed it);
			// none exceeds the TUN MTU, so it is counted, not fatal.
			d.readErrors.Add(1)
		case n == 0 || buf[ethHeaderLen]>>4 != 4:
			// Not IPv4 (the kernel's own IPv6 neighbour discovery on
			// the new device): the Ethernet header says IPv4.
			d.notIPv4.Add(1)
		case spilled:
			d.droppedFull.Add(1)
		default:
			copy(buf, d.hdr[:])
			d.held <- heldPacket{frame: buf[:ethHeaderLen+n], due: time.Now().Add(d.cfg.Delay)}
			continue
		}
		if !spilled {
			d.free <- buf
		}
	}
}

// send sends each held packet when it is due: the delay is the same for
// all, so the queue is in order of due time.
func (d *DelayLine) send() {
	defer d.wg.Done()
	for p := range d.held {
		if wait := time.Until(p.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := unix.Write(d.pkt, p.frame); err != nil {
			d.sendErrors.Add(1)
		} else {
			d.forwarded.Add(1)
		}
		d.free <- p.frame[:cap(p.frame)]
	}
}

// Stats returns what the delay line has done so far.
func (d *DelayLine) Stats() DelayStats {
	return DelayStats{Forwarded: d.forwarded.Load(), DroppedFull: d.droppedFull.Load(), SendErrors: d.sendErrors.Load(), NotIPv4: d.notIPv4.Load(), ReadErrors: d.readErrors.Load()}
}

// Sub is s minus an earlier reading o.
func (s DelayStats) Sub(o DelayStats) DelayStats {
	return DelayStats{Forwarded: s.Forwarded - o.Forwarded, DroppedFull: s.DroppedFull - o.DroppedFull,
		SendErrors: s.SendErrors - o.SendErrors, NotIPv4: s.NotIPv4 - o.NotIPv4, ReadErrors: s.ReadErrors - o.ReadErrors}
}

// Close stops the delay line: the TUN device goes with its descriptor
// (and the route through it), the packets still held are sent, both
// goroutines return, then the AF_PACKET socket is closed.
func (d *DelayLine) Close() error {
	var err error
	d.once.Do(func() {
		if d.tun != nil {
			err = d.tun.Close()
		}
		d.wg.Wait()
		if d.pkt >= 0 {
			err = errors.Join(err, unix.Close(d.pkt))
			d.pkt = -1
		}
	})
	return err
}

func (d *DelayLine) closeFDs() {
	if d.tun != nil {
		d.tun.Close()
	}
	if d.pkt >= 0 {
		unix.Close(d.pkt)
		d.pkt = -1
	}
}
