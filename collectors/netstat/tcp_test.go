package netstat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/tcp618 was recorded on this project's VM (Linux 6.18, see
// testdata/tcp618/KERNEL) after its own load tests: its counters are a
// real host's, with accept-queue overflows, RTOs and loss probes in them.
func TestTCPCountersRecorded(t *testing.T) {
	c, err := NewFS("testdata/tcp618").TCPCounters()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Missing) != 0 {
		t.Errorf("6.18 lacks %v", c.Missing)
	}
	// The values the recording holds (nstat -az would print the same).
	for name, want := range map[string]uint64{
		"TcpExt.ListenOverflows": 2742, "TcpExt.ListenDrops": 2742, "TcpExt.TCPTimeouts": 2745,
		"TcpExt.TCPLossProbes": 6461, "TcpExt.TCPSynRetrans": 2742, "TcpExt.TCPAbortOnData": 10779,
		"Tcp.RetransSegs": 9185, "Tcp.OutRsts": 19441, "Tcp.PassiveOpens": 559139,
		"TcpExt.TCPBacklogDrop": 0, "TcpExt.PruneCalled": 0,
	} {
		if got, ok := c.Counter(name); !ok || got != want {
			t.Errorf("%s = %d (known %v), want %d", name, got, ok, want)
		}
	}
	if _, ok := c.Counter("TcpExt.NoSuchCounter"); ok {
		t.Error("an unknown counter reads as known")
	}
	prev := c
	prev.ListenOverflows -= 10
	prev.RetransSegs = c.RetransSegs + 1 // reset: counts from zero
	d := c.Sub(prev)
	if d.ListenOverflows != 10 || d.RetransSegs != c.RetransSegs || d.TCPTimeouts != 0 {
		t.Errorf("delta = %+v", d)
	}
}

// A kernel without a counter (TCPRcvQDrop came in 4.15) reports it as
// missing, not as zero.
func TestTCPCountersMissingAndMalformed(t *testing.T) {
	groups := map[string]map[string]uint64{}
	in := "Tcp: RtoAlgorithm MaxConn RetransSegs\nTcp: 1 -1 7\nTcpExt: ListenOverflows ListenDrops\nTcpExt: 3 4\n"
	if err := parseMIBGroups(strings.NewReader(in), groups); err != nil {
		t.Fatal(err)
	}
	c, err := tcpCountersFrom(groups)
	if err != nil {
		t.Fatal(err)
	}
	if c.RetransSegs != 7 || c.ListenOverflows != 3 || c.ListenDrops != 4 {
		t.Errorf("%+v", c)
	}
	if _, ok := c.Counter("TcpExt.TCPRcvQDrop"); ok {
		t.Error("TCPRcvQDrop absent from the file but known")
	}
	if v, ok := c.Counter("TcpExt.ListenDrops"); !ok || v != 4 {
		t.Errorf("ListenDrops = %d %v", v, ok)
	}
	if _, err := tcpCountersFrom(map[string]map[string]uint64{"Tcp": {}}); err == nil {
		t.Error("no TcpExt group accepted")
	}
	for _, bad := range []string{
		"TcpExt: A B\nTcpExt: 1\n",
		"TcpExt: A\nTcpExt: x\n",
		"TcpExt: A\n",
		"nocolon 1 2\n",
		"Tcp: MaxConn\nTcp: -x\n",
	} {
		if err := parseMIBGroups(strings.NewReader(bad), map[string]map[string]uint64{}); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestTCPSockstatAndSettingsRecorded(t *testing.T) {
	fs := NewFS("testdata/tcp618")
	s, err := fs.TCPSockstat()
	if err != nil {
		t.Fatal(err)
	}
	if s.MemPages <= 0 || s.Alloc <= 0 || s.InUse6 == nil {
		t.Errorf("sockstat = %+v", s)
	}
	set, err := fs.TCPSettings()
	if err != nil {
		t.Fatal(err)
	}
	if set.Somaxconn == nil || *set.Somaxconn != 4096 || set.MaxSynBacklog == nil || *set.MaxSynBacklog != 2048 ||
		set.Rmem == nil || set.Rmem[2] != 33554432 || set.Wmem == nil || set.Wmem[1] != 16384 ||
		set.Mem == nil || set.Mem[1] != 383869 || set.WindowScaling == nil || *set.WindowScaling != 1 ||
		set.Syncookies == nil || *set.Syncookies != 1 {
		t.Errorf("settings = %+v", set)
	}
	m, ok := TCPMemoryOf(s, set)
	if !ok || m.Pages != s.MemPages || m.PressurePages != 383869 || m.MaxPages != 575802 {
		t.Errorf("memory = %+v %v", m, ok)
	}
}

// Inside a network namespace tcp_mem is not shown and sockstat6 may be
// absent: both read as unknown.
func TestTCPSettingsNamespaceView(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/net/sockstat", "sockets: used 0\nTCP: inuse 0 orphan 0 tw 0 alloc 1 mem 116\n")
	write("proc/sys/net/core/somaxconn", "4096\n")
	write("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n")
	fs := NewFS(dir)
	s, err := fs.TCPSockstat()
	if err != nil || s.InUse6 != nil || s.MemPages != 116 {
		t.Errorf("sockstat = %+v %v", s, err)
	}
	set, err := fs.TCPSettings()
	if err != nil || set.Mem != nil || set.Somaxconn == nil || set.Rmem == nil || set.MaxSynBacklog != nil {
		t.Errorf("settings = %+v %v", set, err)
	}
	if _, ok := TCPMemoryOf(s, set); ok {
		t.Error("memory known without tcp_mem")
	}
	write("proc/sys/net/ipv4/tcp_wmem", "4096 16384\n")
	if _, err := fs.TCPSettings(); err == nil {
		t.Error("a two-value tcp_wmem accepted")
	}
	for _, bad := range []string{"TCP: inuse 1 orphan\n", "TCP: inuse x\n", "UDP: inuse 1 mem 2\n", "TCP: inuse 1\n"} {
		if _, err := parseTCPSockstat(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestTCPLive(t *testing.T) {
	if _, err := Default.TCPCounters(); err != nil {
		t.Fatal(err)
	}
	if _, err := Default.TCPSockstat(); err != nil {
		t.Fatal(err)
	}
	if _, err := Default.TCPSettings(); err != nil {
		t.Fatal(err)
	}
}
