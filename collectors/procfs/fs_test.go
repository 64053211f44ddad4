package procfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSoftirqsFixtures(t *testing.T) {
	fs := FS{Root: "testdata/offline3"}
	s, err := fs.Softirqs()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CPUs; len(got) != 3 || got[2] != 3 {
		t.Fatalf("CPUs = %v, want [0 1 3] (CPU2 offline)", got)
	}
	if v, ok := s.ByCPU("NET_RX", 3); !ok || v != 7000000 {
		t.Errorf("NET_RX on CPU3 = %d,%v", v, ok)
	}
	if _, ok := s.ByCPU("NET_RX", 2); ok {
		t.Error("offline CPU2 reported")
	}
	if len(s.Vectors) != 10 || s.Vectors[3] != "NET_RX" {
		t.Errorf("vectors = %v", s.Vectors)
	}

	// A live recording from a 2-CPU VM parses too.
	live, err := FS{Root: "testdata/vm2cpu"}.Softirqs()
	if err != nil || len(live.CPUs) != 2 {
		t.Fatalf("vm2cpu: %v %v", live.CPUs, err)
	}
}

func TestSoftirqsDelta(t *testing.T) {
	prev, _ := parseSoftirqs(strings.NewReader("   CPU0 CPU1\nNET_RX: 10 20\n"))
	cur, _ := parseSoftirqs(strings.NewReader("   CPU0 CPU1\nNET_RX: 15 90\n"))
	d := cur.Sub(prev)
	if d.Counts["NET_RX"][0] != 5 || d.Counts["NET_RX"][1] != 70 {
		t.Errorf("delta = %v", d.Counts["NET_RX"])
	}
}

func TestSoftirqsRejectsMalformed(t *testing.T) {
	for _, in := range []string{"", "CPU0 CPU1\nNET_RX: 1\n", "CPUx\nNET_RX: 1\n", "CPU0\nNET_RX: abc\n"} {
		if _, err := parseSoftirqs(strings.NewReader(in)); err == nil {
			t.Errorf("accepted %q", in)
		}
	}
}

func TestStatFixture(t *testing.T) {
	st, err := FS{Root: "testdata/offline3"}.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.PerCPU) != 3 || st.BootTime != 1700000000 {
		t.Fatalf("%+v", st)
	}
	c3, ok := st.CPU(3)
	if !ok || c3.SoftIRQ != 3*time.Second || c3.IRQ != 100*time.Millisecond {
		t.Errorf("cpu3 = %+v", c3)
	}
	if got := c3.Total(); got != 15*time.Second+100*time.Millisecond {
		t.Errorf("cpu3 total = %v", got)
	}
	d := st.Sub(Stat{PerCPU: []CPUTimes{{CPU: 3, SoftIRQ: time.Second}}})
	if len(d.PerCPU) != 1 || d.PerCPU[0].SoftIRQ != 2*time.Second {
		t.Errorf("delta = %+v", d.PerCPU)
	}
}

func TestSysctl(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(dir+"/proc/sys/net/core", 0o755)
	os.WriteFile(dir+"/proc/sys/net/core/rmem_max", []byte("212992\n"), 0o644)
	fs := FS{Root: dir}
	v, ok, err := fs.SysctlInt("net.core.rmem_max")
	if err != nil || !ok || v != 212992 {
		t.Errorf("rmem_max = %d %v %v", v, ok, err)
	}
	if _, ok, err := fs.SysctlInt("net.core.absent"); ok || err != nil {
		t.Errorf("absent sysctl: ok=%v err=%v", ok, err)
	}
}

func TestProcessStartLive(t *testing.T) {
	start, err := Default.ProcessStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if age := time.Since(start); age < -20*time.Millisecond || age > time.Hour {
		t.Errorf("this test process started %v ago", age)
	}
	// A command name with spaces and parentheses must not shift fields.
	line := "42 (a b) c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 123456 19"
	if v, err := parseStartTime(line); err != nil || v != 123456 {
		t.Errorf("starttime = %d, %v", v, err)
	}
}

// A process runs while its pid has its start time and it is not a zombie.
func TestProcessRuns(t *testing.T) {
	root := t.TempDir()
	fs := FS{Root: root}
	write := func(pid int, state string, start int) {
		dir := filepath.Join(root, "proc", strconv.Itoa(pid))
		os.MkdirAll(dir, 0o755)
		line := fmt.Sprintf("%d (java (x)) %s 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 %d 19\n", pid, state, start)
		os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644)
	}
	write(10, "S", 500)
	write(11, "Z", 500)
	for _, tc := range []struct {
		pid   int
		start uint64
		want  bool
	}{{10, 500, true}, {10, 501, false}, {11, 500, false}, {12, 500, false}, {0, 0, false}} {
		if got := fs.ProcessRuns(tc.pid, tc.start); got != tc.want {
			t.Errorf("pid %d start %d: %v, want %v", tc.pid, tc.start, got, tc.want)
		}
	}
}

func TestStatusParse(t *testing.T) {
	in := `Name:	java
Uid:	1000	1000	1000	1000
Gid:	1001	1001	1001	1001
NStgid:	4242	1
Threads:	23
SigCgt:	0000000181005ccf
CapEff:	000001ffffffffff
Cpus_allowed_list:	0-3
`
	s, err := parseStatus(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.UID[1] != 1000 || s.GID[0] != 1001 || s.Threads != 23 || s.CpusAllowedList != "0-3" {
		t.Errorf("%+v", s)
	}
	if len(s.NStgid) != 2 || s.NStgid[1] != 1 {
		t.Errorf("NStgid = %v", s.NStgid)
	}
	// SIGQUIT is 3: bit 2 of 0x...ccf (1100 1100 1111) is set.
	if !s.Catches(3) {
		t.Error("SIGQUIT handler not seen")
	}
	if !s.Capable(CapBPF) || !s.Capable(CapSysAdmin) {
		t.Error("caps not parsed")
	}
	if got := parseLockdown("none [integrity] confidentiality"); got != "integrity" {
		t.Errorf("lockdown = %q", got)
	}
}

// A VLAN's name has a dot: its per-interface sysctls are read by path,
// never by turning the dot into a directory.
func TestInterfaceSysctlKeepsDotsInNames(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(dir+"/proc/sys/net/ipv4/conf/eth0.100", 0o755)
	os.WriteFile(dir+"/proc/sys/net/ipv4/conf/eth0.100/rp_filter", []byte("1\n"), 0o644)
	fs := FS{Root: dir}
	v, ok, err := fs.SysctlInt(InterfaceSysctl("ipv4", "eth0.100", "rp_filter"))
	if err != nil || !ok || v != 1 {
		t.Errorf("eth0.100 rp_filter = %d %v %v", v, ok, err)
	}
}
