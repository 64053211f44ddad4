package sockets

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

func TestUDPLiveRecording(t *testing.T) {
	// Recorded as root with kptr_restrict=0: the pointer column is hashed.
	tab, err := NewFS("testdata/live").UDP()
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Sockets) != 5 || tab.AddressKind != AddressHashed {
		t.Fatalf("%d sockets, address kind %s", len(tab.Sockets), tab.AddressKind)
	}
	s := tab.Sockets[0]
	if s.Local != netip.MustParseAddrPort("127.0.0.1:5353") || s.State != 7 || s.RxQueueBytes != 0xA280 || s.Inode != 75880 {
		t.Errorf("socket 0 = %+v", s)
	}
	if c := tab.Sockets[3]; c.State != 1 || c.Remote != netip.MustParseAddrPort("127.0.0.1:5353") {
		t.Errorf("connected socket = %+v", c)
	}
	if v6 := tab.Sockets[4]; v6.Local != netip.MustParseAddrPort("[::1]:9001") {
		t.Errorf("udp6 = %v", v6.Local)
	}
	groups := tab.ReusePortGroups()
	if len(groups) != 1 || groups[0].Size != 2 || groups[0].Local.Port() != 9000 {
		t.Errorf("groups = %+v", groups)
	}
	if got := tab.OnPort(9000); len(got) != 2 {
		t.Errorf("OnPort(9000) = %d sockets", len(got))
	}
}

func TestUDPKernelAddresses(t *testing.T) {
	tab, err := NewFS("testdata/kptr1").UDP()
	if err != nil {
		t.Fatal(err)
	}
	if tab.AddressKind != AddressKernel {
		t.Fatalf("kind = %s", tab.AddressKind)
	}
	if s := tab.Sockets[1]; s.Address != 0xffff888104a1c480 || s.Local.Port() != 9000 || s.Drops != 183211 || s.UID != 1000 {
		t.Errorf("socket 1 = %+v", s)
	}
	g := tab.ReusePortGroups()
	if len(g) != 1 || g[0].Drops != 183223 || g[0].RxBytes != 0x34000 {
		t.Errorf("group = %+v", g)
	}
	hidden, err := NewFS("testdata/hidden").UDP()
	if err != nil || hidden.AddressKind != AddressHidden {
		t.Errorf("hidden: %s %v", hidden.AddressKind, err)
	}
}

func TestUDPRejectsMalformed(t *testing.T) {
	header := "  sl local rem st q tr when retr uid timeout inode ref pointer drops\n"
	for _, line := range []string{
		" 1: 0100007F 00000000:0000 07 0:0 00:0 0 0 0 1 2 0 0",
		" 1: 0100007F:14E9 00000000:0000 07 0:0 00:0 0 0 0 1 2 0",
		" 1: 0100007:14E9 00000000:0000 07 0:0 00:0 0 0 0 1 2 0 0",
		" 1: 0100007F:1FFFF 00000000:0000 07 0:0 00:0 0 0 0 1 2 0 0",
		" 1: 0100007F:14E9 00000000:0000 07 00 00:0 0 0 0 1 2 0 0",
		" 1: 0100007F:14E9 00000000:0000 07 0:0 00:0 0 x 0 1 2 0 0",
		" 1: 0100007F:14E9 00000000:0000 07 0:0 00:0 0 0 0 1 2 zz 0",
	} {
		if _, err := parseUDP(strings.NewReader(header + line + "\n")); err == nil {
			t.Errorf("accepted %q", line)
		}
	}
	if _, err := NewFS(t.TempDir()).UDP(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no /proc/net/udp: %v", err)
	}
}

func TestProcessSocketsAndThreads(t *testing.T) {
	fs := NewFS("testdata/live")
	tab, _ := fs.UDP()
	inodes, err := fs.SocketInodes(28552)
	if err != nil {
		t.Fatal(err)
	}
	if owned := tab.OwnedBy(inodes); len(owned) != 5 {
		t.Errorf("pid owns %d UDP sockets, want 5", len(owned))
	}
	threads, err := fs.Threads(28552)
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads = %+v %v", threads, err)
	}
	if th := threads[0]; th.Comm != "python3" || th.LastCPU < 0 || th.LastCPU > 1 || th.Allowed.List() != "0-1" {
		t.Errorf("thread = %+v", th)
	}
	if _, err := fs.SocketInodes(999999); !errors.Is(err, ErrNoProcess) {
		t.Errorf("dead pid: %v", err)
	}
	if _, err := fs.Threads(999999); !errors.Is(err, ErrNoProcess) {
		t.Errorf("dead pid threads: %v", err)
	}
}

func TestParseTaskStat(t *testing.T) {
	stat := "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 100 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0"
	th, err := parseTaskStat(stat)
	if err != nil || th.Comm != "a) b (c)" || th.LastCPU != 3 {
		t.Errorf("%+v %v", th, err)
	}
	if _, err := parseTaskStat("42 (x) S 1"); err == nil {
		t.Error("short stat accepted")
	}
}

// TestLiveOwnSockets binds a socket in this process and finds it through
// /proc by inode.
func TestLiveOwnSockets(t *testing.T) {
	testutil.RequireRoot(t)
	c1, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	port := c1.LocalAddr().(*net.UDPAddr).Port
	tab, err := Default.UDP()
	if err != nil {
		t.Fatal(err)
	}
	inodes, err := Default.SocketInodes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	mine := tab.OwnedBy(inodes)
	if len(mine) != 1 || int(mine[0].Local.Port()) != port {
		t.Fatalf("own sockets = %+v", mine)
	}
	threads, err := Default.Threads(os.Getpid())
	if err != nil || len(threads) == 0 || threads[0].Allowed.IsEmpty() {
		t.Errorf("threads = %+v %v", threads, err)
	}
}

func TestOwners(t *testing.T) {
	root := t.TempDir()
	link := func(pid, fd, target string) {
		dir := filepath.Join(root, "proc", pid, "fd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, fd)); err != nil {
			t.Fatal(err)
		}
	}
	link("300", "3", "socket:[11]")
	link("300", "4", "socket:[99]")
	link("20", "7", "socket:[11]")
	link("20", "8", "/dev/null")
	link("4", "0", "socket:[12]")
	if err := os.MkdirAll(filepath.Join(root, "proc", "sys"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := NewFS(root).Owners(map[uint64]bool{11: true, 12: true, 13: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]int{11: {20, 300}, 12: {4}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Owners = %v, want %v", got, want)
	}
}

// With no socket to find, Owners reads no process's descriptors: here a
// root whose /proc cannot be listed, which a walk would fail on.
func TestOwnersNothingToFind(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "proc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := NewFS(root).Owners(nil)
	if err != nil || len(got) != 0 {
		t.Errorf("Owners(nil) = %v, %v; want nothing read", got, err)
	}
}
