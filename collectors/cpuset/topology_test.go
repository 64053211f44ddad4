package cpuset

import (
	"testing"
)

func TestTopologyReferenceHost(t *testing.T) {
	// Makita's server: 2 sockets × 10 cores, hyper-threading off, node 0
	// holding CPUs 0-4 and 10-14.
	topo, err := NewFS("testdata/ixgbe-ens1f0").Topology()
	if err != nil {
		t.Fatal(err)
	}
	if topo.Online.List() != "0-19" || topo.NrCPUIDs() != 40 {
		t.Errorf("online %s, nr_cpu_ids %d", topo.Online, topo.NrCPUIDs())
	}
	if len(topo.Nodes) != 2 || topo.NodeCPUs(1).List() != "5-9,15-19" {
		t.Fatalf("nodes = %+v", topo.Nodes)
	}
	if topo.NodeOf(16) != 1 || topo.NodeOf(12) != 0 || topo.NodeOf(30) != -1 {
		t.Errorf("NodeOf 16/12/30 = %d/%d/%d", topo.NodeOf(16), topo.NodeOf(12), topo.NodeOf(30))
	}
	if !topo.SMT.Known || topo.SMT.Active || !topo.SMT.Available() {
		t.Errorf("SMT = %+v, want known, off, available", topo.SMT)
	}
	if got := topo.Siblings[7]; got.List() != "7" {
		t.Errorf("siblings of 7 = %s", got)
	}
}

func TestTopologySMTOn(t *testing.T) {
	topo, err := NewFS("testdata/smt4").Topology()
	if err != nil {
		t.Fatal(err)
	}
	if !topo.SMT.Active || topo.Siblings[2].List() != "0,2" {
		t.Errorf("SMT %+v siblings %v", topo.SMT, topo.Siblings)
	}
}

func TestTopologyLiveRecording(t *testing.T) {
	// Recorded on the project's 2-CPU VM, where SMT is "notsupported".
	topo, err := NewFS("testdata/vm2cpu").Topology()
	if err != nil {
		t.Fatal(err)
	}
	if topo.Online.Len() != 2 || topo.SMT.Available() || len(topo.Nodes) != 1 {
		t.Errorf("%+v", topo)
	}
}

func TestTopologyMissingOptionalSources(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/sys/devices/system/cpu/online", "0-1\n")
	topo, err := NewFS(dir).Topology()
	if err != nil {
		t.Fatal(err)
	}
	if topo.SMT.Known || len(topo.Nodes) != 0 || topo.NrCPUIDs() != 2 {
		t.Errorf("%+v", topo)
	}
	if _, err := NewFS(t.TempDir()).Topology(); err == nil {
		t.Error("no online file: want an error")
	}
}

func TestReadMask(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/rps", "00000000,00010040\n")
	writeFile(t, dir+"/bad", "zz\n")
	fs := NewFS(dir)
	if s, err := fs.ReadMask("/rps"); err != nil || s.List() != "6,16" {
		t.Errorf("rps = %v %v", s, err)
	}
	if _, err := fs.ReadMask("/bad"); err == nil {
		t.Error("bad mask accepted")
	}
}
