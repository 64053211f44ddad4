package netdev

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestInterfaceReferenceHost(t *testing.T) {
	it, err := NewFS("testdata/ixgbe-ens1f0").Interface("ens1f0")
	if err != nil {
		t.Fatal(err)
	}
	if it.Index != 2 || !it.Up || it.Virtual || it.Driver != "ixgbe" || it.MTU != 1500 {
		t.Errorf("%+v", it)
	}
	if it.NUMANode == nil || *it.NUMANode != 0 {
		t.Errorf("NUMA node = %v, want 0", it.NUMANode)
	}
	if len(it.RX) != 20 || len(it.TX) != 20 {
		t.Fatalf("%d rx, %d tx queues, want 20 each", len(it.RX), len(it.TX))
	}
	// Sorted numerically, not as strings (rx-10 after rx-9).
	if it.RX[10].Index != 10 || it.TX[19].Index != 19 {
		t.Errorf("queue order: rx[10]=%d tx[19]=%d", it.RX[10].Index, it.TX[19].Index)
	}
	// Makita's RPS: rx-6 → CPUs 6 and 16.
	if q := it.RX[6]; !q.RPSKnown || q.RPSCPUs.List() != "6,16" || q.RPSFlowCnt != 0 {
		t.Errorf("rx-6 = %+v", q)
	}
	if q := it.RX[0]; !q.RPSKnown || !q.RPSCPUs.IsEmpty() {
		t.Errorf("rx-0 RPS should be known and off: %+v", q)
	}
	if q := it.TX[17]; !q.XPSKnown || q.XPSCPUs.List() != "17" {
		t.Errorf("tx-17 = %+v", q)
	}
	irqs, err := NewFS("testdata/ixgbe-ens1f0").MSIIRQs("ens1f0")
	if err != nil || len(irqs) != 21 || irqs[0] != 65 || irqs[20] != 85 {
		t.Errorf("msi_irqs = %v %v", irqs, err)
	}
}

func TestInterfaceLoopbackAndDown(t *testing.T) {
	fs := NewFS("testdata/ixgbe-ens1f0")
	lo, err := fs.Interface("lo")
	if err != nil {
		t.Fatal(err)
	}
	// lo reports operstate "unknown" while up; it has no device, no NUMA
	// node, no IRQs, and its tx-0 has no readable xps_cpus.
	if !lo.Up || !lo.Virtual || lo.Driver != "" || lo.NUMANode != nil {
		t.Errorf("lo = %+v", lo)
	}
	if len(lo.TX) != 1 || lo.TX[0].XPSKnown || len(lo.RX) != 1 {
		t.Errorf("lo queues = %+v %+v", lo.RX, lo.TX)
	}
	if irqs, err := fs.MSIIRQs("lo"); irqs != nil || err != nil {
		t.Errorf("lo msi_irqs = %v %v", irqs, err)
	}
	d, err := fs.Interface("dummy0")
	if err != nil || d.Up || d.OperState != "down" {
		t.Errorf("dummy0 = %+v %v", d, err)
	}
	if d.RX[0].RPSFlowCnt != -1 {
		t.Errorf("absent rps_flow_cnt = %d, want -1", d.RX[0].RPSFlowCnt)
	}
}

func TestInterfaceVeth(t *testing.T) {
	vb, err := NewFS("testdata/veth4").Interface("vb")
	if err != nil {
		t.Fatal(err)
	}
	if !vb.Virtual || len(vb.RX) != 4 || vb.RX[1].RPSCPUs.List() != "1" || !vb.TX[3].XPSKnown || !vb.TX[3].XPSCPUs.IsEmpty() {
		t.Errorf("vb = %+v", vb)
	}
}

func TestInterfaceUnknown(t *testing.T) {
	fs := NewFS("testdata/ixgbe-ens1f0")
	for _, name := range []string{"eth9", "", "../net", "."} {
		if _, err := fs.Interface(name); !errors.Is(err, ErrNoInterface) {
			t.Errorf("Interface(%q) err = %v, want ErrNoInterface", name, err)
		}
	}
	names, err := fs.InterfaceNames()
	if err != nil || !slices.Equal(names, []string{"dummy0", "ens1f0", "lo"}) {
		t.Errorf("names = %v %v (bonding_masters must not be listed)", names, err)
	}
}

func TestFindInOtherNamespace(t *testing.T) {
	s := NamespaceSearch{FS: NewFS("testdata/netns"), MaxProcesses: 100}
	m, err := s.Find("vb")
	if err != nil || m == nil {
		t.Fatalf("vb not found: %v", err)
	}
	if m.PID != 4242 || m.Comm != "udpserver" || m.RunHint() != "nsenter --net=/proc/4242/ns/net perfscope" {
		t.Errorf("match = %+v hint %q", m, m.RunHint())
	}
	// eth0 is in our own namespace (pid 1 shares it): not "another" one.
	if m, err := s.Find("eth0"); m != nil || err != nil {
		t.Errorf("eth0: %+v %v", m, err)
	}
	if m, err := s.Find("nope"); m != nil || err != nil {
		t.Errorf("nope: %+v %v", m, err)
	}

	// Named namespaces are asked first and give the nicer hint.
	var asked []string
	s.NamedDirs = []string{"/run/netns"}
	s.ReadNamed = func(path string) ([]string, error) {
		asked = append(asked, path)
		return []string{"lo", "vb"}, nil
	}
	m, err = s.Find("vb")
	if err != nil || m == nil || m.Name != "pslab1" || m.RunHint() != "ip netns exec pslab1 perfscope" {
		t.Fatalf("named: %+v %v", m, err)
	}
	if len(asked) != 1 || !strings.HasSuffix(asked[0], "run/netns/pslab1") {
		t.Errorf("asked %v", asked)
	}

	// The process scan is bounded.
	s.ReadNamed = nil
	s.MaxProcesses = 1
	if m, _ := s.Find("vb"); m != nil {
		t.Errorf("found beyond the process bound: %+v", m)
	}
}

func TestParseNetDevRejects(t *testing.T) {
	if _, err := parseNetDev(strings.NewReader("h1\nh2\ngarbage\n")); err == nil {
		t.Error("accepted a line without ':'")
	}
}

func TestFixtureRootMissing(t *testing.T) {
	if _, err := NewFS(t.TempDir()).InterfaceNames(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v", err)
	}
}
