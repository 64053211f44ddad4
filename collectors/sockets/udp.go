// Package sockets reads UDP sockets and the processes and threads that own
// them: /proc/net/udp and udp6 (addresses, queues, drops, inodes),
// /proc/PID/fd (which sockets a process holds), SO_REUSEPORT groups, and
// each thread's last CPU and allowed CPUs.
package sockets

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// FS reads below a root ("/" live, a fixture in tests).
type FS struct{ procfs.FS }

// NewFS reads below root.
func NewFS(root string) FS { return FS{procfs.FS{Root: root}} }

// Default reads the live system.
var Default = NewFS("/")

// UDPSocket is one row of /proc/net/udp or udp6.
type UDPSocket struct {
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	// State is the TCP-style state number: 7 (TCP_CLOSE) for unconnected
	// sockets, 1 (ESTABLISHED) for connected ones.
	State uint8 `json:"state"`
	// TxQueue and RxQueue are the bytes of memory charged to the socket's
	// send and receive queues (sk_wmem_alloc, sk_rmem_alloc).
	TxQueueBytes uint64 `json:"tx_queue_bytes"`
	RxQueueBytes uint64 `json:"rx_queue_bytes"`
	UID          uint32 `json:"uid"`
	Inode        uint64 `json:"inode"`
	Ref          uint64 `json:"ref"`
	// Address is the "pointer" column: the kernel address of struct sock
	// only when UDPTable.AddressKind is AddressKernel.
	Address uint64 `json:"address"`
	// Drops is sk_drops: datagrams dropped at this socket since it was
	// created (receive buffer full, checksum, filter).
	Drops uint64 `json:"drops"`
}

// UDPTable is the UDP sockets of the namespace.
type UDPTable struct {
	Sockets []UDPSocket `json:"sockets"`
	// AddressKind says what the pointer column holds. The kernel prints it
	// with %pK: real addresses only for CAP_SYSLOG with kptr_restrict=1,
	// hashed values with kptr_restrict=0 (even to root), zeros otherwise.
	// perfscope reads the table as it is and never changes the sysctl;
	// nothing in it depends on the addresses (sockets are joined by inode).
	AddressKind AddressKind `json:"address_kind"`
}

// AddressKind classifies the pointer column of /proc/net/udp.
type AddressKind string

const (
	AddressKernel AddressKind = "kernel"
	AddressHashed AddressKind = "hashed"
	AddressHidden AddressKind = "hidden"
)

// kernelSpace is the lowest kernel address on x86-64 and arm64; hashed
// pointers are 32-bit values and never reach it.
const kernelSpace = 0xffff000000000000

func classifyAddresses(socks []UDPSocket) AddressKind {
	kind := AddressHidden
	for _, s := range socks {
		switch {
		case s.Address >= kernelSpace:
			return AddressKernel
		case s.Address != 0:
			kind = AddressHashed
		}
	}
	return kind
}

// UDP reads /proc/net/udp and /proc/net/udp6 (either may be absent: IPv6
// disabled, or a fixture with one family).
func (fs FS) UDP() (UDPTable, error) {
	var t UDPTable
	found := false
	for _, p := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		f, err := fs.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return t, err
		}
		socks, err := parseUDP(f)
		f.Close()
		if err != nil {
			return t, fmt.Errorf("%s: %w", p, err)
		}
		found = true
		t.Sockets = append(t.Sockets, socks...)
	}
	if !found {
		return t, fmt.Errorf("/proc/net/udp: %w", os.ErrNotExist)
	}
	t.AddressKind = classifyAddresses(t.Sockets)
	return t, nil
}

func parseUDP(r io.Reader) ([]UDPSocket, error) {
	var out []UDPSocket
	sc := bufio.NewScanner(r)
	header := true
	for sc.Scan() {
		if header {
			header = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 13 {
			return nil, fmt.Errorf("line %q: %d fields, want 13", sc.Text(), len(f))
		}
		s, err := parseUDPLine(f)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseUDPLine(f []string) (UDPSocket, error) {
	var s UDPSocket
	var err error
	if s.Local, err = parseAddrPort(f[1]); err != nil {
		return s, err
	}
	if s.Remote, err = parseAddrPort(f[2]); err != nil {
		return s, err
	}
	st, err := strconv.ParseUint(f[3], 16, 8)
	if err != nil {
		return s, fmt.Errorf("state %q", f[3])
	}
	s.State = uint8(st)
	tx, rx, ok := strings.Cut(f[4], ":")
	if !ok {
		return s, fmt.Errorf("queues %q", f[4])
	}
	if s.TxQueueBytes, err = strconv.ParseUint(tx, 16, 64); err != nil {
		return s, fmt.Errorf("tx_queue %q", tx)
	}
	if s.RxQueueBytes, err = strconv.ParseUint(rx, 16, 64); err != nil {
		return s, fmt.Errorf("rx_queue %q", rx)
	}
	uid, err := strconv.ParseUint(f[7], 10, 32)
	if err != nil {
		return s, fmt.Errorf("uid %q", f[7])
	}
	s.UID = uint32(uid)
	// f[8] is the timeout (always 0 for UDP).
	for _, p := range []struct {
		dst  *uint64
		text string
		base int
	}{{&s.Inode, f[9], 10}, {&s.Ref, f[10], 10}, {&s.Address, f[11], 16}, {&s.Drops, f[12], 10}} {
		if *p.dst, err = strconv.ParseUint(p.text, p.base, 64); err != nil {
			return s, fmt.Errorf("field %q: %w", p.text, err)
		}
	}
	return s, nil
}

// parseAddrPort reads "0100007F:0035" or the 32-hex-digit IPv6 form. The
// kernel prints the address as its in-memory 32-bit words in host order
// (little-endian on every architecture perfscope supports) and the port
// in plain hex.
func parseAddrPort(text string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(text, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q has no port", text)
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", a)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q", p)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// OnPort returns the sockets bound to local port.
func (t UDPTable) OnPort(port uint16) []UDPSocket {
	var out []UDPSocket
	for _, s := range t.Sockets {
		if s.Local.Port() == port {
			out = append(out, s)
		}
	}
	return out
}

// ReusePortGroup is several UDP sockets bound to the same local address and
// port.
type ReusePortGroup struct {
	Local   netip.AddrPort `json:"local"`
	Inodes  []uint64       `json:"inodes"`
	Size    int            `json:"size"`
	Drops   uint64         `json:"drops"`
	RxBytes uint64         `json:"rx_queue_bytes"`
}

// ReusePortGroups infers SO_REUSEPORT groups: the kernel refuses a second
// bind to an address:port in use unless every socket set SO_REUSEPORT (same
// owner) or SO_REUSEADDR. For unicast servers SO_REUSEADDR on UDP is rare
// and the inference holds; multicast receivers sharing a group port with
// SO_REUSEADDR would also be listed — confirm with sock_diag when it
// matters. Connected sockets (state ≠ 7) are left out: they are per-peer
// sockets, not a listening group.
func (t UDPTable) ReusePortGroups() []ReusePortGroup {
	byLocal := map[netip.AddrPort]*ReusePortGroup{}
	var order []netip.AddrPort
	for _, s := range t.Sockets {
		if s.State != 7 || s.Local.Port() == 0 {
			continue
		}
		g := byLocal[s.Local]
		if g == nil {
			g = &ReusePortGroup{Local: s.Local}
			byLocal[s.Local] = g
			order = append(order, s.Local)
		}
		g.Inodes = append(g.Inodes, s.Inode)
		g.Size++
		g.Drops += s.Drops
		g.RxBytes += s.RxQueueBytes
	}
	var out []ReusePortGroup
	for _, k := range order {
		if g := byLocal[k]; g.Size > 1 {
			out = append(out, *g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Local.Port() < out[j].Local.Port() })
	return out
}
