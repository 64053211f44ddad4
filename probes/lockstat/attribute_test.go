package lockstat

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/sockets"
)

func TestOwnerOf(t *testing.T) {
	o := ownerOf(lockstatLockOwner{SockInode: 11, NetnsInode: 4026531833, Field: lockstatLockstatSockFieldLOCKSTAT_FIELD_WAIT_QUEUE,
		Port: 9000, Family: 10, Protocol: 17})
	want := Owner{Field: FieldWaitQueue, Protocol: "udp", IPv6: true, Port: 9000, Inode: 11, NetNS: 4026531833}
	if o != want {
		t.Errorf("ownerOf = %+v, want %+v", o, want)
	}
	o = ownerOf(lockstatLockOwner{Field: 9, Family: 2, Protocol: 6})
	if o.Protocol != "tcp" || o.IPv6 || o.Field != "field(9)" {
		t.Errorf("ownerOf(tcp, unknown field) = %+v", o)
	}
	if o := ownerOf(lockstatLockOwner{Protocol: 33}); o.Protocol != "proto(33)" {
		t.Errorf("unknown protocol named %q", o.Protocol)
	}
}

// Three locks of one socket (receive queue, reader queue, wakeup), one of
// a socket in another namespace, one of a socket /proc/net/udp no longer
// lists, and a lock that is no socket's.
func TestSocketWaits(t *testing.T) {
	const here, there = 4026531833, 4026532290
	udp := func(f SockField, port uint16, inode uint64, netns uint32) Owner {
		return Owner{Field: f, Protocol: "udp", Port: port, Inode: inode, NetNS: netns}
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	d := Snapshot{
		Locks: map[uint64]WaitStats{
			0x1000: {Count: 10, Total: ms(30), Max: ms(5)},
			0x1010: {Count: 5, Total: ms(10), Max: ms(7)},
			0x2000: {Count: 20, Total: ms(50), Max: ms(3)},
			0x3000: {Count: 2, Total: ms(4), Max: ms(2)},
			0x4000: {Count: 1, Total: ms(1), Max: ms(1)},
			0x5000: {Count: 99, Total: ms(99), Max: ms(9)},
			0x6000: {}, // owned, but no contention in the window
		},
		Owners: map[uint64]Owner{
			0x1000: udp(FieldReceiveQueue, 9000, 11, here),
			0x1010: udp(FieldReaderQueue, 9000, 11, here),
			0x2000: udp(FieldWaitQueue, 9000, 11, here),
			0x3000: udp(FieldReceiveQueue, 53, 12, there),
			0x4000: udp(FieldReceiveQueue, 7000, 13, here),
			0x6000: udp(FieldSockLock, 6000, 14, here),
		},
	}
	table := sockets.UDPTable{Sockets: []sockets.UDPSocket{
		{Local: netip.MustParseAddrPort("10.0.0.2:9000"), Inode: 11},
		// Same inode number in the table as the other namespace's socket
		// would be a different socket: it must not lend its address.
		{Local: netip.MustParseAddrPort("10.0.0.2:53"), Inode: 12},
	}}
	dir := NewSocketDirectory(here, table, map[uint64][]int{11: {42, 43}, 12: {77}})
	got := d.SocketWaits(dir)
	if len(got) != 3 {
		t.Fatalf("%d sockets, want 3: %+v", len(got), got)
	}

	s := got[0]
	if s.Socket.Port != 9000 || s.Socket.Local != netip.MustParseAddrPort("10.0.0.2:9000") || s.Socket.OtherNetNS ||
		!reflect.DeepEqual(s.Socket.PIDs, []int{42, 43}) {
		t.Errorf("socket 9000 = %+v", s.Socket)
	}
	if s.Count != 35 || s.Total != ms(90) || s.Max != ms(7) {
		t.Errorf("socket 9000 waits %+v, want 35 / 90ms / max 7ms", s.WaitStats)
	}
	wantFields := []SockField{FieldWaitQueue, FieldReceiveQueue, FieldReaderQueue}
	for i, f := range s.ByField {
		if f.Field != wantFields[i] {
			t.Errorf("ByField[%d] = %s, want %s (by total wait)", i, f.Field, wantFields[i])
		}
	}
	if s.Socket.Field != FieldWaitQueue {
		t.Errorf("Socket.Field = %s, want the most-waited lock", s.Socket.Field)
	}

	if o := got[1].Socket; o.Port != 53 || !o.OtherNetNS || o.Local.IsValid() || o.NetNS != there || !reflect.DeepEqual(o.PIDs, []int{77}) {
		t.Errorf("other-namespace socket = %+v", o)
	}
	if o := got[2].Socket; o.Port != 7000 || o.OtherNetNS || o.Local.IsValid() || o.PIDs != nil {
		t.Errorf("closed socket = %+v", o)
	}
}

// A kernel without network namespaces records 0: every socket is local.
func TestResolveWithoutNetNS(t *testing.T) {
	table := sockets.UDPTable{Sockets: []sockets.UDPSocket{{Local: netip.MustParseAddrPort("[::1]:9001"), Inode: 5}}}
	ref := NewSocketDirectory(0, table, nil).Resolve(Owner{Port: 9001, Inode: 5})
	if ref.OtherNetNS || ref.Local.Port() != 9001 {
		t.Errorf("Resolve = %+v", ref)
	}
}

func TestSubWindows(t *testing.T) {
	site := SiteKey{StackID: 3, Flags: FlagSpin}
	owner := Owner{Field: FieldReceiveQueue, Port: 9000, Inode: 11}
	prev := Snapshot{Sites: map[SiteKey]WaitStats{site: {Count: 2, Total: 20, Max: 15}},
		Locks: map[uint64]WaitStats{0x100: {Count: 9, Total: 90}, 0x200: {Count: 1, Total: 5}}, Lost: Lost{OwnerFull: 1}}
	cur := Snapshot{Sites: map[SiteKey]WaitStats{site: {Count: 5, Total: 50, Max: 15}, {StackID: NoStack}: {Count: 1, Total: time.Microsecond}},
		Locks:  map[uint64]WaitStats{0x100: {Count: 3, Total: 30}, 0x200: {Count: 1, Total: 5}},
		Owners: map[uint64]Owner{0x100: owner}, Lost: Lost{StackCollisions: 2, OwnerFull: 4}}
	d := cur.Sub(prev)
	if w := d.Sites[site]; w.Count != 3 || w.Total != 30 || w.Max != 15 {
		t.Errorf("site delta %+v", w)
	}
	if _, ok := d.Locks[0x200]; ok {
		t.Error("idle lock kept")
	}
	// 0x100 was evicted and re-added: its count restarted below prev.
	if w := d.Locks[0x100]; w.Count != 3 {
		t.Errorf("re-added lock delta %+v", w)
	}
	if d.Owners[0x100] != owner {
		t.Errorf("owners not carried: %+v", d.Owners)
	}
	if d.Lost.Total() != 5 || d.Lost.OwnerFull != 3 {
		t.Errorf("lost %+v", d.Lost)
	}
}
