package netconfig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/internal/testutil"
)

type fixedRules struct {
	counts map[string]int
	err    error
}

func (f fixedRules) CountRules() (map[string]int, string, error) { return f.counts, "fixture", f.err }

func referenceHostSources() Sources {
	return Sources{
		FS:      procfs.FS{Root: "testdata/ixgbe-ens1f0"},
		Ethtool: ethtool.Recorded{Dir: "testdata/ixgbe-ens1f0/ethtool"},
		Audit:   func() (AuditStatus, error) { return AuditStatus{Enabled: 1, PID: 900}, nil },
		Rules:   fixedRules{counts: CountIptablesSave(readFile("testdata/iptables-save.txt"))},
	}
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestSnapshotReferenceHost is Makita's starting point: 20 queues of which RSS
// uses 16, IRQs on node 0 against ixgbe's hints, GRO on, an empty
// iptables filter table loaded, rp_filter on, audit on.
func TestSnapshotReferenceHost(t *testing.T) {
	c, err := referenceHostSources().Snapshot("ens1f0")
	if err != nil {
		t.Fatal(err)
	}
	if c.Driver == nil || c.Driver.Driver != "ixgbe" || c.Channels == nil || c.Channels.Combined != 20 {
		t.Errorf("driver %+v channels %+v", c.Driver, c.Channels)
	}
	if c.RSS == nil || len(c.RSS.QueuesUsed()) != 16 {
		t.Errorf("rss = %+v", c.RSS)
	}
	if c.Offloads.GRO == nil || !*c.Offloads.GRO || c.Offloads.UDPGROForwarding != nil {
		t.Errorf("offloads = %+v", c.Offloads)
	}
	if len(c.IRQs) != 21 {
		t.Fatalf("%d IRQs, want 20 queues + link", len(c.IRQs))
	}
	q16 := c.IRQs[16]
	if q16.Queue != 16 || q16.Affinity == nil || !q16.Affinity.HintIgnored() {
		t.Errorf("irq of queue 16 = %+v", q16)
	}
	if c.IRQs[20].Kind != "other" {
		t.Errorf("link IRQ = %+v", c.IRQs[20])
	}
	if !c.Irqbalance.Running || c.Irqbalance.HintPolicy != "" {
		t.Errorf("irqbalance = %+v", c.Irqbalance)
	}
	if c.Topology.NodeCPUs(1).List() != "5-9,15-19" || c.Interface.NUMANode == nil {
		t.Errorf("topology %+v node %v", c.Topology.Nodes, c.Interface.NUMANode)
	}
	nf := c.Netfilter
	if !nf.ModulesListed || nf.Modules["iptable_filter"] != ModuleLoaded || nf.Modules["nf_tables"] != ModuleAbsent || !nf.Loaded() {
		t.Errorf("netfilter modules = %+v", nf)
	}
	if total, ok := nf.TotalRules(); !ok || nf.RuleCounts["filter"] != 0 || total != 1 {
		t.Errorf("rules = %v %v", nf.RuleCounts, ok)
	}
	if c.RPFilter.EffectiveRPFilter == nil || *c.RPFilter.EffectiveRPFilter != 1 || c.RPFilter.AcceptLocal["all"] != 0 {
		t.Errorf("rp_filter = %+v", c.RPFilter)
	}
	if c.Audit.Enabled == nil || *c.Audit.Enabled != 1 || !c.Audit.AuditdRunning {
		t.Errorf("audit = %+v", c.Audit)
	}
	if c.Core.RmemMax == nil || *c.Core.RmemMax != 212992 || c.Core.NetdevBudgetUsecs == nil {
		t.Errorf("core = %+v", c.Core)
	}
	if len(c.Unavailable) != 0 {
		t.Errorf("unavailable = %v", c.Unavailable)
	}
	// Unknowns are explicit in JSON: null, never 0.
	b, err := json.Marshal(c)
	if err != nil || !strings.Contains(string(b), `"rx_udp_gro_forwarding":null`) || !strings.Contains(string(b), `"rmem_max_bytes":212992`) {
		t.Errorf("json: %v\n%.400s", err, b)
	}
}

func TestSnapshotDegrades(t *testing.T) {
	src := referenceHostSources()
	src.Ethtool = ethtool.Recorded{Dir: t.TempDir()} // driver answers nothing
	src.Audit = func() (AuditStatus, error) { return AuditStatus{}, syscall.EPERM }
	src.Rules = fixedRules{err: errors.New("unknown: neither iptables-save nor nft is installed")}
	src.FS = procfs.FS{Root: "testdata/ixgbe-ens1f0"}
	c, err := src.Snapshot("ens1f0")
	if err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"driver", "channels", "rss", "features", "audit", "netfilter_rules"} {
		if c.Unavailable[section] == "" {
			t.Errorf("section %s not marked unavailable: %v", section, c.Unavailable)
		}
	}
	if c.Audit.Enabled != nil || c.Netfilter.RuleCounts != nil || c.Offloads.GRO != nil || c.RSS != nil {
		t.Errorf("unknowns must be nil: %+v", c)
	}
	// Without ethtool's bus-info the IRQs are still found by name.
	if len(c.IRQs) != 21 {
		t.Errorf("%d IRQs", len(c.IRQs))
	}
	if _, err := src.Snapshot("eth9"); !errors.Is(err, netdev.ErrNoInterface) {
		t.Errorf("unknown iface: %v", err)
	}
}

func TestSnapshotLoopbackVirtual(t *testing.T) {
	c, err := referenceHostSources().Snapshot("lo")
	if err != nil {
		t.Fatal(err)
	}
	if c.Unavailable["irqs"] != "virtual device: no IRQs" || c.RPFilter.EffectiveRPFilter == nil || *c.RPFilter.EffectiveRPFilter != 1 {
		t.Errorf("lo: %+v %v", c.Unavailable, c.RPFilter)
	}
}

func TestRuleCountParsers(t *testing.T) {
	ipt := CountIptablesSave(readFile("testdata/iptables-save.txt"))
	if ipt["filter"] != 0 || ipt["nat"] != 1 || len(ipt) != 2 {
		t.Errorf("iptables-save = %v", ipt)
	}
	nft, err := CountNftJSON(readFile("testdata/nft.json"))
	if err != nil || nft["inet/filter"] != 0 || nft["ip/nat"] != 1 {
		t.Errorf("nft = %v %v", nft, err)
	}
	if _, err := CountNftJSON("not json"); err == nil {
		t.Error("bad nft output accepted")
	}
}

// TestSnapshotLive reads the project machine's loopback with every live
// source: nothing may fail hard, and unknowns must say why.
func TestSnapshotLive(t *testing.T) {
	testutil.RequireRoot(t)
	c, err := Live().Snapshot("lo")
	if err != nil {
		t.Fatal(err)
	}
	if c.Core.RmemMax == nil || c.Topology.Online.IsEmpty() || c.Offloads.GRO == nil {
		t.Errorf("live lo: %+v", c)
	}
	if c.Audit.Enabled == nil && c.Unavailable["audit"] == "" {
		t.Error("audit unknown without a reason")
	}
	if c.Netfilter.RuleCounts == nil && c.Unavailable["netfilter_rules"] == "" {
		t.Error("rule counts unknown without a reason")
	}
	t.Logf("unavailable: %v; netfilter %+v; audit %+v", c.Unavailable, c.Netfilter, c.Audit)
}

func TestRmemWritable(t *testing.T) {
	dir := t.TempDir()
	core := filepath.Join(dir, "proc/sys/net/core")
	if err := os.MkdirAll(core, 0o755); err != nil {
		t.Fatal(err)
	}
	s := Sources{FS: procfs.FS{Root: dir}}
	if got := s.sysctlWritable("net.core.rmem_default", "net.core.rmem_max"); got != nil {
		t.Errorf("absent sysctls: %v, want nil", *got)
	}
	os.WriteFile(filepath.Join(core, "rmem_default"), []byte("212992\n"), 0o644)
	os.WriteFile(filepath.Join(core, "rmem_max"), []byte("212992\n"), 0o644)
	if got := s.sysctlWritable("net.core.rmem_default", "net.core.rmem_max"); got == nil || !*got {
		t.Errorf("0644 files: %v, want writable", got)
	}
	// What a network namespace shows: the host's value, read-only.
	os.Chmod(filepath.Join(core, "rmem_default"), 0o444)
	if got := s.sysctlWritable("net.core.rmem_default", "net.core.rmem_max"); got == nil || *got {
		t.Errorf("a 0444 file: %v, want read-only", got)
	}
}
