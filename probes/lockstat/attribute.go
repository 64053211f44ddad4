package lockstat

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/perfscope/perfscope/collectors/sockets"
)

// SockField names the lock of a socket that a contended address is.
type SockField string

const (
	// FieldReceiveQueue is sk_receive_queue.lock: the queue softirqs
	// append datagrams to.
	FieldReceiveQueue SockField = "sk_receive_queue.lock"
	// FieldReaderQueue is udp_sock's reader_queue.lock: the queue the
	// reader splices sk_receive_queue into and dequeues from.
	FieldReaderQueue SockField = "reader_queue.lock"
	// FieldSockLock is sk_lock.slock (lock_sock, release_sock).
	FieldSockLock SockField = "sk_lock.slock"
	// FieldWaitQueue is the socket's wait-queue lock (socket.wq.wait.lock),
	// taken by sock_def_readable to wake the reader of each datagram.
	FieldWaitQueue SockField = "socket.wq.wait.lock"
)

var sockFields = map[lockstatLockstatSockField]SockField{
	lockstatLockstatSockFieldLOCKSTAT_FIELD_RECEIVE_QUEUE: FieldReceiveQueue,
	lockstatLockstatSockFieldLOCKSTAT_FIELD_READER_QUEUE:  FieldReaderQueue,
	lockstatLockstatSockFieldLOCKSTAT_FIELD_SOCK_LOCK:     FieldSockLock,
	lockstatLockstatSockFieldLOCKSTAT_FIELD_WAIT_QUEUE:    FieldWaitQueue,
}

// Owner is the socket a contended lock belongs to. The BPF program finds
// it when the lock is first contended — the lock address minus the offset
// of each socket lock (from the running kernel's BTF), kept only if the
// candidate socket's struct socket points back at it — and records what
// user space can join on without kernel addresses: inodes and the port.
type Owner struct {
	Field SockField `json:"field"`
	// Protocol is "udp", "udplite" or "tcp".
	Protocol string `json:"protocol"`
	IPv6     bool   `json:"ipv6"`
	// Port is the local port (0 for a socket not bound yet).
	Port uint16 `json:"port"`
	// Inode is the socket's inode: the "inode" column of /proc/net/udp and
	// the N of "socket:[N]" in /proc/PID/fd.
	Inode uint64 `json:"inode"`
	// NetNS is the inode of the socket's network namespace, as in
	// "net:[N]" of /proc/PID/ns/net (0: kernel without network namespaces).
	NetNS uint32 `json:"netns"`
}

var protocolNames = map[uint16]string{6: "tcp", 17: "udp", 136: "udplite"}

func ownerOf(v lockstatLockOwner) Owner {
	proto, ok := protocolNames[v.Protocol]
	if !ok {
		proto = fmt.Sprintf("proto(%d)", v.Protocol)
	}
	field, ok := sockFields[v.Field]
	if !ok {
		field = SockField(fmt.Sprintf("field(%d)", v.Field))
	}
	const afInet6 = 10
	return Owner{Field: field, Protocol: proto, IPv6: v.Family == afInet6, Port: v.Port, Inode: v.SockInode, NetNS: v.NetnsInode}
}

// SocketRef is a socket contended locks belong to: the kernel's Owner
// joined, by inode, with /proc.
type SocketRef struct {
	Owner
	// Local is the bound address from /proc/net/udp or udp6 of perfscope's
	// network namespace; invalid when the socket is not listed there
	// (another namespace, TCP, or closed before the table was read).
	Local netip.AddrPort `json:"local"`
	// OtherNetNS is set when the socket lives in another network
	// namespace than perfscope (its /proc/net/udp is not the one read).
	OtherNetNS bool `json:"other_netns"`
	// PIDs are the processes holding the socket open (any namespace).
	PIDs []int `json:"pids"`
}

// SocketDirectory resolves kernel-identified owners to sockets of /proc.
type SocketDirectory struct {
	netns   uint32
	byInode map[uint64]sockets.UDPSocket
	pids    map[uint64][]int
}

// NewSocketDirectory joins owners against table (the UDP sockets of
// perfscope's network namespace, whose inode is netns) and pids (socket
// inode → processes holding it, see SocketOwners; may be nil).
func NewSocketDirectory(netns uint32, table sockets.UDPTable, pids map[uint64][]int) *SocketDirectory {
	d := &SocketDirectory{netns: netns, byInode: map[uint64]sockets.UDPSocket{}, pids: pids}
	for _, s := range table.Sockets {
		d.byInode[s.Inode] = s
	}
	return d
}

// Resolve names the socket of o. A socket of another namespace keeps the
// port and namespace the kernel recorded.
func (d *SocketDirectory) Resolve(o Owner) SocketRef {
	ref := SocketRef{Owner: o, PIDs: d.pids[o.Inode]}
	// Without network namespaces (NetNS 0) there is only one.
	ref.OtherNetNS = o.NetNS != 0 && d.netns != 0 && o.NetNS != d.netns
	if s, ok := d.byInode[o.Inode]; ok && !ref.OtherNetNS {
		ref.Local = s.Local
	}
	return ref
}

// FieldWait is the contention on one lock of a socket.
type FieldWait struct {
	Field SockField `json:"field"`
	WaitStats
}

// SocketWait is the contention on the locks of one socket.
type SocketWait struct {
	Socket SocketRef
	WaitStats
	// ByField splits it by lock, most total wait first; Socket.Field is the
	// first one.
	ByField []FieldWait
}

// SocketWaits groups the per-lock waits of d by the socket owning each
// lock, most total wait first. Locks that are no socket's are left out.
func (d Snapshot) SocketWaits(dir *SocketDirectory) []SocketWait {
	type sockKey struct {
		inode uint64
		netns uint32
		port  uint16
	}
	bySock := map[sockKey]*SocketWait{}
	byField := map[sockKey]map[SockField]WaitStats{}
	for addr, w := range d.Locks {
		o, ok := d.Owners[addr]
		if !ok || w.Count == 0 {
			continue
		}
		k := sockKey{o.Inode, o.NetNS, o.Port}
		sw := bySock[k]
		if sw == nil {
			sw = &SocketWait{Socket: dir.Resolve(o)}
			bySock[k] = sw
			byField[k] = map[SockField]WaitStats{}
		}
		sw.WaitStats = sw.add(w)
		byField[k][o.Field] = byField[k][o.Field].add(w)
	}
	var out []SocketWait
	for k, sw := range bySock {
		for f, w := range byField[k] {
			sw.ByField = append(sw.ByField, FieldWait{Field: f, WaitStats: w})
		}
		sort.Slice(sw.ByField, func(i, j int) bool {
			a, b := sw.ByField[i], sw.ByField[j]
			if a.Total != b.Total {
				return a.Total > b.Total
			}
			return a.Field < b.Field
		})
		sw.Socket.Field = sw.ByField[0].Field
		out = append(out, *sw)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		return out[i].Socket.Inode < out[j].Socket.Inode
	})
	return out
}

// Inodes are the socket inodes of the owners in s.
func (s Snapshot) Inodes() map[uint64]bool {
	out := map[uint64]bool{}
	for _, o := range s.Owners {
		out[o.Inode] = true
	}
	return out
}

// SocketOwners finds, for each inode, the pids whose /proc/PID/fd holds
// it (sockets.FS.Owners).
func SocketOwners(fs sockets.FS, inodes map[uint64]bool) (map[uint64][]int, error) {
	return fs.Owners(inodes)
}
