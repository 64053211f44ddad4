package lockstat

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/perfscope/perfscope/collectors/sockets"
)

func TestMemberOffsetThroughAnonymousMembers(t *testing.T) {
	u32 := &btf.Int{Name: "u32", Size: 4}
	spinlock := &btf.Struct{Name: "spinlock", Size: 4, Members: []btf.Member{{Name: "raw", Type: u32}}}
	head := &btf.Struct{Name: "sk_buff_head", Size: 24, Members: []btf.Member{
		{Name: "next", Type: u32, Offset: 0}, {Name: "qlen", Type: u32, Offset: 128}, {Name: "lock", Type: spinlock, Offset: 160},
	}}
	anon := &btf.Union{Size: 24, Members: []btf.Member{{Name: "sk_receive_queue", Type: head}}}
	sock := &btf.Struct{Name: "sock", Size: 400, Members: []btf.Member{
		{Name: "__sk_common", Type: u32}, {Name: "", Type: anon, Offset: 8 * 184},
	}}
	off, ok := memberOffset(sock, []string{"sk_receive_queue", "lock"})
	if !ok || off != 184+20 {
		t.Errorf("offset = %d, %v; want 204", off, ok)
	}
	if _, ok := memberOffset(sock, []string{"sk_receive_queue", "nope"}); ok {
		t.Error("found a member that does not exist")
	}
}

func TestLockOffsetsFromKernelBTF(t *testing.T) {
	if _, err := btf.LoadKernelSpec(); err != nil {
		t.Skipf("no kernel BTF: %v", err)
	}
	offs, err := KernelLockOffsets()
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]uint64{}
	for _, o := range offs {
		fields[o.Field] = o.Offset
	}
	if fields["sk_receive_queue.lock"] == 0 || fields["sk_lock.slock"] == 0 {
		t.Errorf("offsets %v", offs)
	}
}

func TestAttribute(t *testing.T) {
	offsets := []LockOffset{{"sk_receive_queue.lock", 0xa4}, {"reader_queue.lock", 0x3b4}}
	table := sockets.UDPTable{AddressKind: sockets.AddressKernel, Sockets: []sockets.UDPSocket{
		{Local: netip.MustParseAddrPort("127.0.0.1:9000"), Inode: 11, Address: 0xffff888004a1c000},
		{Local: netip.MustParseAddrPort("[::]:53"), Inode: 12, Address: 0xffff888004a1d000},
	}}
	a, err := NewAttributor(offsets, table, map[uint64][]int{11: {42}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lock  uint64
		port  uint16
		field string
		ok    bool
	}{
		{0xffff888004a1c0a4, 9000, "sk_receive_queue.lock", true},
		{0xffff888004a1d3b4, 53, "reader_queue.lock", true},
		{0xffff888004a1c0a8, 0, "", false},
		{0x10, 0, "", false},
	} {
		ref, field, ok := a.Attribute(c.lock)
		if ok != c.ok || ref.Port != c.port || field != c.field {
			t.Errorf("Attribute(%#x) = %+v, %q, %v", c.lock, ref, field, ok)
		}
	}
	ref, _, _ := a.Attribute(0xffff888004a1c0a4)
	if ref.Family != "udp" || len(ref.PIDs) != 1 || ref.PIDs[0] != 42 || ref.Inode != 11 {
		t.Errorf("ref = %+v", ref)
	}
	if ref, _, _ := a.Attribute(0xffff888004a1d3b4); ref.Family != "udp6" {
		t.Errorf("v6 family = %s", ref.Family)
	}
	if _, err := NewAttributor(offsets, sockets.UDPTable{AddressKind: sockets.AddressHashed}, nil); err != ErrNoSocketAddresses {
		t.Errorf("hashed addresses: err = %v", err)
	}
}

func TestSubWindows(t *testing.T) {
	site := SiteKey{StackID: 3, Flags: FlagSpin}
	prev := Snapshot{Sites: map[SiteKey]WaitStats{site: {Count: 2, Total: 20, Max: 15}},
		Locks: map[uint64]WaitStats{0x100: {Count: 9, Total: 90}, 0x200: {Count: 1, Total: 5}}}
	cur := Snapshot{Sites: map[SiteKey]WaitStats{site: {Count: 5, Total: 50, Max: 15}, {StackID: NoStack}: {Count: 1, Total: time.Microsecond}},
		Locks: map[uint64]WaitStats{0x100: {Count: 3, Total: 30}, 0x200: {Count: 1, Total: 5}}, Lost: Lost{StackCollisions: 2}}
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
	if d.Lost.Total() != 2 {
		t.Errorf("lost %+v", d.Lost)
	}
}
