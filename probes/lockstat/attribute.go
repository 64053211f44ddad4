package lockstat

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"

	"github.com/cilium/ebpf/btf"

	"github.com/perfscope/perfscope/collectors/sockets"
)

// LockOffset is where one lock sits inside a socket structure.
type LockOffset struct {
	// Field is the lock's path, e.g. "sk_receive_queue.lock".
	Field  string
	Offset uint64
}

// socketLocks are the socket locks contention can be attributed to:
// struct sock starts struct udp_sock, so all offsets are from the socket
// address /proc/net/udp prints.
var socketLocks = []struct {
	structName string
	path       []string
	field      string
}{
	{"sock", []string{"sk_receive_queue", "lock"}, "sk_receive_queue.lock"},
	{"udp_sock", []string{"reader_queue", "lock"}, "reader_queue.lock"},
	{"sock", []string{"sk_lock", "slock"}, "sk_lock.slock"},
}

// LockOffsets computes the offsets of the socket locks from kernel BTF. A
// lock missing from this kernel (reader_queue before 4.13) is left out.
func LockOffsets(kernel *btf.Spec) ([]LockOffset, error) {
	var out []LockOffset
	for _, l := range socketLocks {
		var s *btf.Struct
		if err := kernel.TypeByName(l.structName, &s); err != nil {
			if errors.Is(err, btf.ErrNotFound) {
				continue
			}
			return nil, fmt.Errorf("find struct %s in kernel BTF: %w", l.structName, err)
		}
		off, ok := memberOffset(s, l.path)
		if !ok {
			continue
		}
		out = append(out, LockOffset{Field: l.field, Offset: off})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("kernel BTF names none of the socket locks")
	}
	return out, nil
}

// memberOffset is the byte offset of a member path inside a struct,
// descending into anonymous structs and unions on the way.
func memberOffset(t btf.Type, path []string) (uint64, bool) {
	if len(path) == 0 {
		return 0, true
	}
	var members []btf.Member
	switch c := btf.UnderlyingType(t).(type) {
	case *btf.Struct:
		members = c.Members
	case *btf.Union:
		members = c.Members
	default:
		return 0, false
	}
	for _, m := range members {
		if m.Name == path[0] {
			rest, ok := memberOffset(m.Type, path[1:])
			return uint64(m.Offset.Bytes()) + rest, ok
		}
		if m.Name == "" {
			if rest, ok := memberOffset(m.Type, path); ok {
				return uint64(m.Offset.Bytes()) + rest, true
			}
		}
	}
	return 0, false
}

// SocketRef is the UDP socket a contended lock belongs to.
type SocketRef struct {
	// Addr is the kernel address of struct sock.
	Addr  uint64
	Local netip.AddrPort
	Port  uint16
	Inode uint64
	// Family is "udp" or "udp6", the /proc/net file that lists it.
	Family string
	// PIDs are the processes holding the socket open.
	PIDs []int
}

// Attributor maps lock addresses to sockets.
type Attributor struct {
	offsets []LockOffset
	byAddr  map[uint64]SocketRef
}

// ErrNoSocketAddresses means /proc/net/udp did not show real socket
// addresses (not root, or kernel.kptr_restrict=2), so no lock can be
// attributed.
var ErrNoSocketAddresses = errors.New("/proc/net/udp shows no kernel socket addresses (needs root and kernel.kptr_restrict < 2)")

// NewAttributor prepares attribution against the sockets of table (read
// with sockets.FS.UDP at the end of the window, so the sockets are the
// ones alive then; real addresses need kernel.kptr_restrict=1). owners maps socket inodes to the
// pids holding them (see SocketOwners); it may be nil.
func NewAttributor(offsets []LockOffset, table sockets.UDPTable, owners map[uint64][]int) (*Attributor, error) {
	if table.AddressKind != sockets.AddressKernel {
		return nil, ErrNoSocketAddresses
	}
	a := &Attributor{offsets: offsets, byAddr: map[uint64]SocketRef{}}
	for _, s := range table.Sockets {
		family := "udp"
		if s.Local.Addr().Is6() {
			family = "udp6"
		}
		a.byAddr[s.Address] = SocketRef{Addr: s.Address, Local: s.Local, Port: s.Local.Port(), Inode: s.Inode,
			Family: family, PIDs: owners[s.Inode]}
	}
	return a, nil
}

// Attribute finds the socket whose lock is at lockAddr: lockAddr minus a
// lock's offset must be a socket /proc/net/udp lists. field names the lock.
func (a *Attributor) Attribute(lockAddr uint64) (ref SocketRef, field string, ok bool) {
	if a == nil {
		return SocketRef{}, "", false
	}
	for _, o := range a.offsets {
		if lockAddr < o.Offset {
			continue
		}
		if ref, ok := a.byAddr[lockAddr-o.Offset]; ok {
			return ref, o.Field, true
		}
	}
	return SocketRef{}, "", false
}

// SocketOwners finds, for each inode, the pids whose /proc/PID/fd holds
// it. Processes that exit meanwhile are skipped.
func SocketOwners(fs sockets.FS, inodes map[uint64]bool) (map[uint64][]int, error) {
	entries, err := os.ReadDir(fs.Path("/proc"))
	if err != nil {
		return nil, err
	}
	out := map[uint64][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		held, err := fs.SocketInodes(pid)
		if err != nil {
			continue
		}
		for ino := range held {
			if inodes[ino] {
				out[ino] = append(out[ino], pid)
			}
		}
	}
	return out, nil
}

// KernelLockOffsets is LockOffsets of the running kernel, for callers
// outside probes/ (which do not import cilium/ebpf).
func KernelLockOffsets() ([]LockOffset, error) {
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("load kernel BTF: %w", err)
	}
	return LockOffsets(kernel)
}
