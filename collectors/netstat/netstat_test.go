package netstat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUDPSNMPLive(t *testing.T) {
	s, err := NewFS("testdata/vm2cpu").UDPSNMP()
	if err != nil {
		t.Fatal(err)
	}
	if !s.UDP6Known || s.UDP.OutDatagrams == 0 {
		t.Errorf("%+v", s)
	}
	prev := UDPSNMP{UDP: UDPCounters{OutDatagrams: 1, RcvbufErrors: s.UDP.RcvbufErrors + 5}}
	d := s.Sub(prev)
	if d.UDP.OutDatagrams != s.UDP.OutDatagrams-1 || d.UDP.RcvbufErrors != s.UDP.RcvbufErrors {
		t.Errorf("delta = %+v (a counter below prev counts from zero)", d.UDP)
	}
}

func TestParseSNMP(t *testing.T) {
	in := "Ip: Forwarding\nIp: 1\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 270000 3 1832 269000 1829 0 0 0 0\nUdpLite: InDatagrams\nUdpLite: 0\n"
	c, err := parseSNMP(strings.NewReader(in), "Udp")
	if err != nil || c.InDatagrams != 270000 || c.RcvbufErrors != 1829 || c.InErrors != 1832 {
		t.Errorf("%+v %v", c, err)
	}
	for _, bad := range []string{"Udp: InDatagrams NoPorts\nUdp: 1\n", "Udp: InDatagrams\nUdp: x\n", "Ip: 1\n"} {
		if _, err := parseSNMP(strings.NewReader(bad), "Udp"); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	c6, err := parseSNMP6(strings.NewReader("Ip6InReceives 5\nUdp6InDatagrams  12\nUdp6RcvbufErrors 4\n"))
	if err != nil || c6.InDatagrams != 12 || c6.RcvbufErrors != 4 {
		t.Errorf("%+v %v", c6, err)
	}
	if _, err := parseSNMP6(strings.NewReader("Ip6InReceives 5\n")); err == nil {
		t.Error("snmp6 without Udp6 accepted")
	}
}

func TestSoftnetLayouts(t *testing.T) {
	// 6.18: 15 columns with the CPU number in column 13.
	cur, err := NewFS("testdata/vm2cpu").Softnet()
	if err != nil || len(cur) != 2 || !cur[1].CPUKnown || cur[1].CPU != 1 || cur[1].FlowLimitCount != 0 {
		t.Fatalf("vm2cpu = %+v %v", cur, err)
	}
	// Before 5.10: 11 columns, CPU by position.
	old, err := NewFS("testdata/old").Softnet()
	if err != nil || len(old) != 2 || old[1].CPUKnown || old[1].CPU != 1 || old[1].Dropped != 0x135c || old[1].TimeSqueeze != 0x2a0f7 || old[1].ReceivedRPS != 0x5f1e2a0 {
		t.Fatalf("old = %+v %v", old, err)
	}
	d := SubSoftnet(old, []SoftnetCPU{{CPU: 1, Dropped: 0x1000, TimeSqueeze: 7}})
	if d[1].Dropped != 0x35c || d[1].TimeSqueeze != 0x2a0f0 || d[0].Processed != old[0].Processed {
		t.Errorf("delta = %+v", d)
	}
	for _, bad := range []string{"00 01\n", "zz 0 0 0 0 0 0 0 0 0 0\n"} {
		if _, err := parseSoftnet(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// The reads counter sums Udp and Udp6 InDatagrams of the recorded files,
// works without snmp6 (IPv6 off), and refuses a file it cannot parse when
// it opens, not on a later read.
func TestUDPReadsCounter(t *testing.T) {
	fs := NewFS("testdata/vm2cpu")
	s, err := fs.UDPSNMP()
	if err != nil {
		t.Fatal(err)
	}
	c, err := fs.OpenUDPReadsCounter()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 { // the kept-open files read again
		if n, err := c.Packets(); err != nil || n != s.UDP.InDatagrams+s.UDP6.InDatagrams {
			t.Fatalf("reads %d, %v; want %d + %d", n, err, s.UDP.InDatagrams, s.UDP6.InDatagrams)
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	snmp := "Udp: InDatagrams NoPorts\nUdp: 41 2\n"
	if err := os.WriteFile(filepath.Join(dir, "proc/net/snmp"), []byte(snmp), 0o644); err != nil {
		t.Fatal(err)
	}
	v4, err := NewFS(dir).OpenUDPReadsCounter()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := v4.Packets(); err != nil || n != 41 {
		t.Errorf("IPv4 only: %d, %v", n, err)
	}
	v4.Close()
	if err := os.WriteFile(filepath.Join(dir, "proc/net/snmp"), []byte("Ip: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := NewFS(dir).OpenUDPReadsCounter(); err == nil {
		c.Close()
		t.Error("a /proc/net/snmp without a Udp group opened")
	}
}
