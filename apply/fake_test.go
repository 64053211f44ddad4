package apply

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
)

// Fakes of the kernel parts, so that the apply and revert logic of every
// kind runs without root; the live executors are tested in network
// namespaces (live_test.go).

// hostile is an interface name a tenant can choose: legal for the kernel,
// code for a shell.
const hostile = "v$(>pwned)"

type fakeEthtool struct {
	features map[string]bool
	// fixed features accept a write and keep their value, as the kernel
	// does for a feature the driver cannot change.
	fixed   map[string]bool
	params  map[diagnose.ChangeKind]map[string]uint32
	table   []uint32
	failSet string
}

func (f *fakeEthtool) Feature(iface, name string) (bool, error) {
	v, ok := f.features[iface+"/"+name]
	if !ok {
		return false, fmt.Errorf("%s has no feature %q", iface, name)
	}
	return v, nil
}

func (f *fakeEthtool) SetFeature(iface, name string, on bool) error {
	if f.failSet == name {
		return ErrEthtoolUnsupported
	}
	if !f.fixed[name] {
		f.features[iface+"/"+name] = on
	}
	return nil
}

func (f *fakeEthtool) Params(kind diagnose.ChangeKind, iface string) (map[string]uint32, error) {
	p, ok := f.params[kind]
	if !ok {
		return nil, ErrEthtoolUnsupported
	}
	return maps.Clone(p), nil
}

func (f *fakeEthtool) SetParams(kind diagnose.ChangeKind, iface string, p map[string]uint32) error {
	maps.Copy(f.params[kind], p)
	return nil
}

func (f *fakeEthtool) RSSTable(string) ([]uint32, error) { return slices.Clone(f.table), nil }
func (f *fakeEthtool) SetRSSTable(_ string, t []uint32) error {
	f.table = slices.Clone(t)
	return nil
}

type fakeNft struct{ tables map[string]NftTable }

func (f *fakeNft) Table(family, name string) (*NftTable, error) {
	t, ok := f.tables[family+"/"+name]
	if !ok {
		return nil, nil
	}
	t.Chains = slices.Clone(t.Chains)
	return &t, nil
}

func (f *fakeNft) Delete(family, name string) error {
	delete(f.tables, family+"/"+name)
	return nil
}

func (f *fakeNft) Create(t NftTable) error {
	if _, ok := f.tables[t.Family+"/"+t.Name]; ok {
		return errors.New("exists")
	}
	f.tables[t.Family+"/"+t.Name] = t
	return nil
}

type fakeModules struct {
	loaded map[string]bool
	files  map[string]ModuleFile
	loads  []ModuleFile
}

func (f *fakeModules) Loaded(name string) (bool, error) { return f.loaded[name], nil }
func (f *fakeModules) File(name string) (ModuleFile, error) {
	m, ok := f.files[name]
	if !ok {
		return ModuleFile{}, fmt.Errorf("module %s is not in modules.dep", name)
	}
	return m, nil
}
func (f *fakeModules) Unload(name string) error { f.loaded[name] = false; return nil }
func (f *fakeModules) Load(m ModuleFile) error {
	f.loads = append(f.loads, m)
	f.loaded[moduleNameOf(m.Path)] = true
	return nil
}

type fakeThreads struct {
	ids  map[int]ThreadIdentity
	cpus map[int]cpuset.Set
}

func (f *fakeThreads) Identity(tid int) (ThreadIdentity, bool, error) {
	id, ok := f.ids[tid]
	return id, ok, nil
}
func (f *fakeThreads) Affinity(tid int) (cpuset.Set, error) { return f.cpus[tid], nil }
func (f *fakeThreads) SetAffinity(tid int, s cpuset.Set) error {
	f.cpus[tid] = s
	return nil
}

type fakeAudit struct{ enabled uint32 }

func (f *fakeAudit) Enabled() (uint32, error)  { return f.enabled, nil }
func (f *fakeAudit) SetEnabled(v uint32) error { f.enabled = v; return nil }

type fakeNamespaces struct{ others []string }

func (f fakeNamespaces) Others() ([]string, error) { return f.others, nil }

type fakeIptables struct{ t IptablesTable }

func (f fakeIptables) Table(string, string) (IptablesTable, error) { return f.t, nil }

// fakeSystem is a host with one of everything every kind changes.
func fakeSystem(t *testing.T) *System {
	t.Helper()
	s, err := fakeSystemAt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fakeSystemAt(root string) (*System, error) {
	files := map[string]string{
		"/proc/sys/net/ipv4/conf/" + hostile + "/rp_filter":       "1\n",
		"/proc/sys/net/ipv4/udp_mem":                              "1\t2\t3\n",
		"/sys/class/net/" + hostile + "/queues/rx-0/rps_cpus":     "00000000\n",
		"/sys/class/net/" + hostile + "/queues/rx-0/rps_flow_cnt": "0\n",
		"/proc/irq/24/smp_affinity":                               "3\n",
		"/sys/devices/system/cpu/smt/control":                     "off\n",
		"/etc/default/irqbalance":                                 "# irqbalance\nIRQBALANCE_ARGS=\"--hintpolicy=ignore\"\n",
	}
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			return nil, err
		}
	}
	hook, prio := uint32(1), int32(0)
	return &System{
		Root: root,
		Ethtool: &fakeEthtool{
			features: map[string]bool{hostile + "/rx-gro": true, hostile + "/rx-fixed": true},
			fixed:    map[string]bool{"rx-fixed": true},
			params: map[diagnose.ChangeKind]map[string]uint32{
				diagnose.ChangeEthtoolRing:     {"rx": 512, "rx-mini": 0, "rx-jumbo": 0, "tx": 512},
				diagnose.ChangeEthtoolCoalesce: {"rx-usecs": 3, "adaptive-rx": 1},
				diagnose.ChangeEthtoolChannels: {"rx": 0, "tx": 0, "other": 1, "combined": 4},
			},
			table: []uint32{0, 1, 0, 1},
		},
		Nft: &fakeNft{tables: map[string]NftTable{"ip/x$(>pwnednft)": {Family: "ip", Name: "x$(>pwnednft)",
			Chains: []NftChain{{Name: "INPUT", Type: "filter", Hook: &hook, Priority: &prio, Policy: "accept"}, {Name: "aux"}}}}},
		Iptables: fakeIptables{t: IptablesTable{Policies: map[string]string{"INPUT": "ACCEPT", "FORWARD": "ACCEPT", "OUTPUT": "ACCEPT"}}},
		Modules: &fakeModules{loaded: map[string]bool{"iptable_filter": true, "ip_tables": true}, files: map[string]ModuleFile{
			"iptable_filter": {Path: "/lib/modules/6.1.0-test/kernel/net/ipv4/netfilter/iptable_filter.ko.xz", Params: "forward=Y"},
			"ip_tables":      {Path: "/lib/modules/6.1.0-test/kernel/net/ipv4/netfilter/ip_tables.ko.xz"},
		}},
		Threads:    &fakeThreads{ids: map[int]ThreadIdentity{4300: {StartTime: 77, Comm: "udp-rx"}}, cpus: map[int]cpuset.Set{4300: cpuset.Range(0, 1)}},
		Audit:      &fakeAudit{enabled: 1},
		Namespaces: fakeNamespaces{},
	}, nil
}

func (s *System) file(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A revert file holds only changes its finding's rule can make
// (diagnose.Rule.Changes). Findings "test.*", which only these tests
// make, may hold any change of a valid form: they carry out the kinds and
// parameters no rule makes today (channel counts, adaptive coalescing,
// other offloads), on the fake host and the live one.
func init() {
	rules := changeShapes
	changeShapes = func(id string) ([]diagnose.ChangeShape, bool) {
		if strings.HasPrefix(id, "test.") {
			return anyChange, true
		}
		return rules(id)
	}
}

var anyChange = func() []diagnose.ChangeShape {
	var shapes []diagnose.ChangeShape
	for _, k := range []diagnose.ChangeKind{diagnose.ChangeSysctl, diagnose.ChangeSysfs, diagnose.ChangeEthtoolFeature, diagnose.ChangeEthtoolRing,
		diagnose.ChangeEthtoolCoalesce, diagnose.ChangeEthtoolChannels, diagnose.ChangeEthtoolRSS, diagnose.ChangeNftTable, diagnose.ChangeIptablesTable,
		diagnose.ChangeModule, diagnose.ChangeThreadAffinity, diagnose.ChangeAudit, diagnose.ChangeIrqbalanceBan} {
		shapes = append(shapes, diagnose.ChangeShape{Kind: k, Target: "<*>", Old: diagnose.KindForm, New: diagnose.KindForm})
	}
	return shapes
}()

// everyKind is one finding per group of kinds, with the values fakeSystem
// holds as the old ones.
func everyKind() []diagnose.Finding {
	setting := func(id string, cs ...diagnose.Change) diagnose.Finding {
		f := diagnose.Finding{ID: id, Title: id, Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting}}
		f.Recommendation.AddChanges(cs...)
		return f
	}
	return []diagnose.Finding{
		setting("net.rp-filter", diagnose.SysctlChange(diagnose.SysctlKey("net", "ipv4", "conf", hostile, "rp_filter"), "1", "0")),
		setting("net.udp-mem-pressure", diagnose.SysctlChange("net.ipv4.udp_mem", "1 2 3", "4 5 6")),
		setting("net.rps-needed", diagnose.QueueMaskChange(hostile, "rx", 0, cpuset.Set{}, cpuset.Range(0, 1), 2)),
		setting("net.rfs-off", diagnose.RPSFlowCntChange(hostile, 0, 0, 4096)),
		setting("net.irq-affinity-ignores-hint", diagnose.IrqbalanceBanChange("/etc/default/irqbalance", []string{"--hintpolicy=ignore"}, []int{24}),
			diagnose.IRQAffinityChange(24, cpuset.Range(0, 1), cpuset.Of(1), 2)),
		setting("net.smt-off", diagnose.SMTControlChange("off", "on")),
		setting("net.gro-udp", diagnose.EthtoolFeatureChange(hostile, "rx-gro", true, false)),
		setting("net.nic-ring-drops", diagnose.EthtoolRingChange(hostile, map[string]uint32{"rx": 512}, map[string]uint32{"rx": 4096})),
		// Kinds and parameters no rule makes today, which the mechanism
		// still carries out.
		setting("test.every-kind",
			diagnose.EthtoolCoalesceChange(hostile, map[string]uint32{"rx-usecs": 3, "adaptive-rx": 1}, map[string]uint32{"rx-usecs": 50, "adaptive-rx": 0}),
			diagnose.EthtoolChannelsChange(hostile, map[string]uint32{"combined": 4}, map[string]uint32{"combined": 2})),
		setting("net.rss-indirection-narrow", diagnose.EthtoolRSSChange(hostile, []uint32{0, 1, 0, 1}, diagnose.EqualTable(4, 4))),
		setting("net.netfilter-unused", diagnose.NftTableDeleteChange("ip", "x$(>pwnednft)"),
			diagnose.IptablesTableUnloadChange("ipv4", "filter"), diagnose.ModuleUnloadChange("ip_tables")),
		setting("net.thread-pinning", diagnose.ThreadAffinityChange(4300, cpuset.Range(0, 1), cpuset.Of(0))),
		setting("net.audit", diagnose.AuditChange(1, 0)),
		{ID: "net.socket-lock-contention", Recommendation: diagnose.Recommendation{Kind: diagnose.KindCode}},
		{ID: "net.dead-rx-queues", Recommendation: diagnose.Recommendation{Kind: diagnose.KindAdvice, Apply: []string{"ethtool -N eth0 rx-flow-hash udp4 sdfn"}}},
		{ID: "net.strings-only", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting, Apply: []string{"sysctl -w net.core.rmem_max=1"}, Revert: []string{"sysctl -w net.core.rmem_max=2"}}},
	}
}

func allIDs() []string {
	var ids []string
	for _, f := range everyKind() {
		if f.Recommendation.Applicable() {
			ids = append(ids, f.ID)
		}
	}
	return ids
}

var testIdentity = Identity{Host: "host-a", NetNS: "net:[4026531840]"}

func testRun(ids []string) RunInfo {
	return RunInfo{Command: "udp", Version: "test", Interface: hostile, Findings: ids}
}
