package apply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
)

func TestNewPlan(t *testing.T) {
	tests := []struct {
		name    string
		ids     []string
		want    []string
		wantErr string
	}{
		{name: "user order kept, duplicates once", ids: []string{"net.gro-udp", "net.rp-filter", "net.gro-udp"}, want: []string{"net.gro-udp", "net.rp-filter"}},
		{name: "unknown id lists the valid ones", ids: []string{"net.nope"}, wantErr: `"net.nope" is not a finding of this run (not an applicable setting; applicable IDs: net.audit, net.gro-udp, net.irq-affinity-ignores-hint`},
		{name: "code change refused", ids: []string{"net.gro-udp", "net.socket-lock-contention"}, wantErr: "recommends a code change, which perfscope never applies"},
		{name: "advice refused", ids: []string{"net.dead-rx-queues"}, wantErr: "recommends advice for a human decision"},
		// A setting whose fix exists only as command strings is shown,
		// never executed: there is no shell path left.
		{name: "strings-only setting refused", ids: []string{"net.strings-only"}, wantErr: "no changes perfscope can make and undo"},
		{name: "no ids", ids: nil, wantErr: "needs at least one finding ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(everyKind(), tt.ids)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrNotApplicable) {
					t.Fatalf("err = %v, want containing %q and wrapping ErrNotApplicable", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(p.IDs(), tt.want) {
				t.Fatalf("plan %v, %v; want %v", p.IDs(), err, tt.want)
			}
		})
	}
}

func applyAll(t *testing.T, sys *System, dir string) (ApplyResult, error) {
	t.Helper()
	p, err := NewPlan(everyKind(), allIDs())
	if err != nil {
		t.Fatal(err)
	}
	return Apply(context.Background(), p, ApplyOptions{Dir: dir, System: sys, Run: testRun(p.IDs()), Identity: testIdentity})
}

// TestApplyRevertEveryKind makes and undoes one change of every kind,
// with every value read back, and checks what the revert file records.
func TestApplyRevertEveryKind(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	res, err := applyAll(t, sys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 17 || len(res.Unchanged) != 0 {
		t.Fatalf("applied %d, unchanged %d", len(res.Applied), len(res.Unchanged))
	}
	et := sys.Ethtool.(*fakeEthtool)
	nft := sys.Nft.(*fakeNft)
	mods := sys.Modules.(*fakeModules)
	checks := map[string]bool{
		"rp_filter":    sys.file(t, "/proc/sys/net/ipv4/conf/"+hostile+"/rp_filter") == "0\n",
		"udp_mem":      sys.file(t, "/proc/sys/net/ipv4/udp_mem") == "4 5 6\n",
		"rps_cpus":     sys.file(t, "/sys/class/net/"+hostile+"/queues/rx-0/rps_cpus") == "3\n",
		"rps_flow_cnt": sys.file(t, "/sys/class/net/"+hostile+"/queues/rx-0/rps_flow_cnt") == "4096\n",
		"smp_affinity": sys.file(t, "/proc/irq/24/smp_affinity") == "2\n",
		"smt":          sys.file(t, "/sys/devices/system/cpu/smt/control") == "on\n",
		"irqbalance":   strings.HasSuffix(sys.file(t, "/etc/default/irqbalance"), "\nIRQBALANCE_ARGS=\"--hintpolicy=ignore --banirq=24\"\n"),
		"gro":          !et.features[hostile+"/rx-gro"],
		"ring":         et.params[diagnose.ChangeEthtoolRing]["rx"] == 4096 && et.params[diagnose.ChangeEthtoolRing]["tx"] == 512,
		"coalesce":     et.params[diagnose.ChangeEthtoolCoalesce]["rx-usecs"] == 50 && et.params[diagnose.ChangeEthtoolCoalesce]["adaptive-rx"] == 0,
		"channels":     et.params[diagnose.ChangeEthtoolChannels]["combined"] == 2,
		"rss":          slices.Equal(et.table, []uint32{0, 1, 2, 3}),
		"nft":          len(nft.tables) == 0,
		"modules":      !mods.loaded["iptable_filter"] && !mods.loaded["ip_tables"],
		"thread":       sys.Threads.(*fakeThreads).cpus[4300].List() == "0",
		"audit":        sys.Audit.(*fakeAudit).enabled == 0,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s not applied", what)
		}
	}
	// The revert file: private, parseable, with the saved table, module
	// file and thread identity.
	st, err := os.Stat(res.RevertFile)
	if err != nil || st.Mode().Perm() != 0o600 || filepath.Dir(res.RevertFile) != dir {
		t.Fatalf("revert file %s: %v %v", res.RevertFile, st.Mode(), err)
	}
	rf, err := ReadRevertFile(res.RevertFile)
	if err != nil {
		t.Fatal(err)
	}
	var nftEntry Entry
	for _, e := range rf.Changes {
		if e.Change.Kind == diagnose.ChangeNftTable {
			nftEntry = e
		}
	}
	if nftEntry.Saved == nil || len(nftEntry.Saved.Nft.Chains) != 2 {
		t.Fatalf("nft table not saved in the revert file: %+v", nftEntry)
	}
	if !slices.Contains(rf.Shell, `printf '%s' '{"nftables":[{"add":{"table":{"family":"ip","name":"x$(>pwnednft)"}}},{"add":{"chain":{"family":"ip","table":"x$(>pwnednft)","name":"INPUT","type":"filter","hook":"input","prio":0,"policy":"accept"}}},{"add":{"chain":{"family":"ip","table":"x$(>pwnednft)","name":"aux"}}}]}' | nft -j -f -`) {
		t.Errorf("shell rendition lacks the nft restore: %q", rf.Shell)
	}
	if !slices.Contains(rf.Shell, "modprobe iptable_filter forward=Y") {
		t.Errorf("shell rendition lacks the module reload: %q", rf.Shell)
	}

	rev, err := Revert(context.Background(), res.RevertFile, sys, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	if len(rev.Restored) != 17 {
		t.Fatalf("restored %d", len(rev.Restored))
	}
	fresh := fakeSystem(t)
	for _, p := range []string{"/proc/sys/net/ipv4/conf/" + hostile + "/rp_filter", "/sys/class/net/" + hostile + "/queues/rx-0/rps_cpus", "/proc/irq/24/smp_affinity", "/etc/default/irqbalance"} {
		if got, want := sys.file(t, p), fresh.file(t, p); strings.TrimSpace(got) != strings.TrimSpace(want) && !(strings.Contains(p, "rps_cpus") && got == "0\n") {
			t.Errorf("%s = %q after revert, want %q", p, got, want)
		}
	}
	if sys.file(t, "/etc/default/irqbalance") != fresh.file(t, "/etc/default/irqbalance") {
		t.Error("irqbalance file not restored byte for byte")
	}
	if !et.features[hostile+"/rx-gro"] || !slices.Equal(et.table, []uint32{0, 1, 0, 1}) || et.params[diagnose.ChangeEthtoolCoalesce]["adaptive-rx"] != 1 {
		t.Error("ethtool settings not restored")
	}
	if tbl, _ := nft.Table("ip", "x$(>pwnednft)"); tbl == nil || !tbl.Equal(fresh.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"]) {
		t.Errorf("nft table not recreated as saved: %+v", tbl)
	}
	if !mods.loaded["iptable_filter"] || !mods.loaded["ip_tables"] || mods.loads[0].Path != "/lib/modules/6.1.0-test/kernel/net/ipv4/netfilter/ip_tables.ko.xz" || mods.loads[1].Params != "forward=Y" {
		t.Errorf("modules not reloaded in order with their parameters: %+v", mods.loads)
	}
	if sys.Threads.(*fakeThreads).cpus[4300].List() != "0-1" || sys.Audit.(*fakeAudit).enabled != 1 {
		t.Error("thread affinity or audit not restored")
	}
	// A second revert finds everything at its old value.
	again, err := Revert(context.Background(), res.RevertFile, sys, testIdentity)
	if err != nil || len(again.Restored) != 0 || len(again.AlreadyOld) != 17 {
		t.Fatalf("second revert: restored %d, already old %d, %v", len(again.Restored), len(again.AlreadyOld), err)
	}
}

// TestApplyRefusesBeforeAnything: a change that could not be undone, or
// would change more than it names, stops the whole plan before the
// revert file is written.
func TestApplyRefusesBeforeAnything(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*System)
	}{
		{"nft table gained a rule", "now holds 1 rules", func(s *System) {
			tb := s.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"]
			tb.Rules = 1
			s.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"] = tb
		}},
		{"nft chain drops by policy", `chain "INPUT" drops by policy`, func(s *System) {
			tb := s.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"]
			tb.Chains = []NftChain{{Name: "INPUT", Type: "filter", Hook: tb.Chains[0].Hook, Priority: tb.Chains[0].Priority, Policy: "drop"}}
			s.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"] = tb
		}},
		{"nft table with a set", "does not restore", func(s *System) {
			tb := s.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"]
			tb.Sets = 1
			s.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"] = tb
		}},
		{"nft table with a comment", "a table comment", func(s *System) {
			tb := s.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"]
			tb.Unsupported = []string{"a table comment"}
			s.Nft.(*fakeNft).tables["ip/x$(>pwnednft)"] = tb
		}},
		{"other network namespaces", "host-wide and 1 other network namespaces exist", func(s *System) {
			s.Namespaces = fakeNamespaces{others: []string{"net:[4026532000] (pid 99)"}}
		}},
		{"legacy table drops by policy", "chain INPUT has policy DROP", func(s *System) {
			s.Iptables = fakeIptables{t: IptablesTable{Policies: map[string]string{"INPUT": "DROP"}}}
		}},
		{"legacy table with an empty user chain", "has user chains (perfscope-empty)", func(s *System) {
			s.Iptables = fakeIptables{t: IptablesTable{UserChains: []string{"perfscope-empty"}, Policies: map[string]string{"INPUT": "ACCEPT"}}}
		}},
		{"module file unknown", "could not be loaded back", func(s *System) {
			delete(s.Modules.(*fakeModules).files, "ip_tables")
		}},
		{"audit locked", "locked", func(s *System) { s.Audit.(*fakeAudit).enabled = 2 }},
		{"thread ended", "no longer exists", func(s *System) { delete(s.Threads.(*fakeThreads).ids, 4300) }},
		{"irqbalance arguments changed", "now passes", func(s *System) {
			os.WriteFile(filepath.Join(s.Root, "/etc/default/irqbalance"), []byte("IRQBALANCE_ARGS=\"--oneshot\"\n"), 0o644)
		}},
		{"driver without coalescing", ErrEthtoolUnsupported.Error(), func(s *System) {
			delete(s.Ethtool.(*fakeEthtool).params, diagnose.ChangeEthtoolCoalesce)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, dir := fakeSystem(t), t.TempDir()
			tc.edit(sys)
			_, err := applyAll(t, sys, dir)
			var re *RefusedError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("err = %v, want a refusal containing %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused apply wrote %v", entries)
			}
			if sys.file(t, "/proc/sys/net/ipv4/conf/"+hostile+"/rp_filter") != "1\n" || !sys.Ethtool.(*fakeEthtool).features[hostile+"/rx-gro"] {
				t.Error("a refused apply changed something")
			}
		})
	}
}

// TestApplyStopsAtFailureAndRevertsPartially: the failing change names
// the revert file; reverting restores what was made and skips the rest.
func TestApplyStopsAtFailureAndRevertsPartially(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	sys.Ethtool.(*fakeEthtool).failSet = "rx-gro"
	res, err := applyAll(t, sys, dir)
	var ce *ChangeError
	if !errors.As(err, &ce) || ce.Done != 7 || ce.RevertFile != res.RevertFile || !strings.Contains(err.Error(), "7 change(s) were made before it: undo them with perfscope udp --revert") {
		t.Fatalf("err = %v", err)
	}
	if !strings.HasPrefix(err.Error(), "ethtool -K 'v$(>pwned)' rx-gro off (finding net.gro-udp)") {
		t.Errorf("error does not name the change quoted: %v", err)
	}
	rev, err := Revert(context.Background(), res.RevertFile, sys, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	if len(rev.Restored) != 7 || len(rev.AlreadyOld) != 10 {
		t.Fatalf("restored %d, already old %d", len(rev.Restored), len(rev.AlreadyOld))
	}
	if sys.file(t, "/proc/sys/net/ipv4/conf/"+hostile+"/rp_filter") != "1\n" || len(sys.Nft.(*fakeNft).tables) != 1 {
		t.Error("partial apply not reverted")
	}
}

// TestApplyReadsBack: a write the kernel accepts but does not keep (a
// fixed feature, a read-only sysctl) is a failure, not a success.
func TestApplyReadsBack(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	f := diagnose.Finding{ID: "test.read-back", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting}}
	f.Recommendation.AddChanges(diagnose.EthtoolFeatureChange(hostile, "rx-fixed", true, false))
	p, _ := NewPlan([]diagnose.Finding{f}, []string{"test.read-back"})
	_, err := Apply(context.Background(), p, ApplyOptions{Dir: dir, System: sys, Run: testRun(p.IDs()), Identity: testIdentity})
	if err == nil || !strings.Contains(err.Error(), "read back on, not off") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("err = %v", err)
	}
}

// TestApplyNothingToDo: values already in place write no revert file.
func TestApplyNothingToDo(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	f := diagnose.Finding{ID: "net.audit", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting}}
	f.Recommendation.AddChanges(diagnose.AuditChange(0, 1))
	p, _ := NewPlan([]diagnose.Finding{f}, []string{"net.audit"})
	res, err := Apply(context.Background(), p, ApplyOptions{Dir: dir, System: sys, Run: testRun(p.IDs()), Identity: testIdentity})
	if err != nil || res.RevertFile != "" || len(res.Unchanged) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestApplyInterruptedWritesNothing: Ctrl-C during the measurement window
// cancels the context; --apply then writes no revert file for changes it
// never makes.
func TestApplyInterruptedWritesNothing(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, _ := NewPlan(everyKind(), allIDs())
	_, err := Apply(ctx, p, ApplyOptions{Dir: dir, System: sys, Run: testRun(p.IDs()), Identity: testIdentity})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("interrupted apply wrote %v", entries)
	}
}

// TestRevertLeavesOthersChangesAlone: a value someone changed after
// --apply is neither old nor new; it is reported, the rest restored.
func TestRevertLeavesOthersChangesAlone(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	res, err := applyAll(t, sys, dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(sys.Root, "/proc/irq/24/smp_affinity"), []byte("1\n"), 0o644)
	sys.Threads.(*fakeThreads).ids[4300] = ThreadIdentity{StartTime: 99, Comm: "other"} // TID reused
	rev, err := Revert(context.Background(), res.RevertFile, sys, testIdentity)
	if !errors.Is(err, ErrConflicts) || len(rev.Conflicts) != 1 || len(rev.Gone) != 1 || len(rev.Restored) != 15 {
		t.Fatalf("err = %v; conflicts %d gone %d restored %d", err, len(rev.Conflicts), len(rev.Gone), len(rev.Restored))
	}
	if sys.file(t, "/proc/irq/24/smp_affinity") != "1\n" || sys.Threads.(*fakeThreads).cpus[4300].List() != "0" {
		t.Error("revert overwrote a value it did not set")
	}
	// The log names every change once, by what happened to it.
	verbs := map[string]int{}
	for _, l := range rev.Log() {
		verbs[l.Verb]++
	}
	if verbs["reverted"] != 15 || verbs["gone"] != 1 || verbs["left as found"] != 1 || len(verbs) != 3 {
		t.Errorf("revert log verbs = %v", verbs)
	}
}

// TestRevertRefusesOtherPlaces: a revert file applies only on its host and
// in its network namespace.
func TestRevertRefusesOtherPlaces(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	res, err := applyAll(t, sys, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []Identity{{Host: "host-b", NetNS: testIdentity.NetNS}, {Host: testIdentity.Host, NetNS: "net:[4026532999]"}} {
		_, err := Revert(context.Background(), res.RevertFile, sys, id)
		if !errors.Is(err, ErrBadRevertFile) {
			t.Errorf("revert as %+v: %v", id, err)
		}
	}
	if sys.file(t, "/proc/sys/net/ipv4/conf/"+hostile+"/rp_filter") != "0\n" {
		t.Error("a refused revert changed something")
	}
}

func TestThreadAffinityValues(t *testing.T) {
	h := threadHandler{}
	if !h.same(diagnose.Change{}, "0-1", nil, state{value: cpuset.Of(0, 1).List()}) || h.same(diagnose.Change{}, "0", nil, state{value: "0-1"}) {
		t.Error("CPU lists compared wrongly")
	}
}

func TestSysfsValuesCompareAsTheKernelMeansThem(t *testing.T) {
	h := sysfsHandler{}
	mask := diagnose.Change{Path: "/sys/class/net/eth0/queues/rx-0/rps_cpus"}
	if !h.same(mask, "3", nil, state{value: "00000000,00000003"}) || h.same(mask, "3", nil, state{value: "1"}) {
		t.Error("cpumasks compared as text")
	}
	count := diagnose.Change{Path: "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt"}
	if !h.same(count, "0100", nil, state{value: "100"}) {
		t.Error("counts compared as text")
	}
}

// A cpumask sysctl reads back at the kernel's width: flow_limit_cpu_bitmap
// written as "00,00000004" on a 40-CPU host may print as "0000000004".
func TestMaskSysctlsCompareAsCPUSets(t *testing.T) {
	h := sysctlHandler{}
	flow := diagnose.SysctlChange("net.core.flow_limit_cpu_bitmap", "00000", "00,00000004")
	if err := flow.Validate(); err != nil {
		t.Fatal(err)
	}
	if !h.same(flow, "00,00000004", nil, state{value: "0000000004"}) || !h.same(flow, "00000", nil, state{value: "0"}) || h.same(flow, "4", nil, state{value: "6"}) {
		t.Error("cpumask sysctls compared as text")
	}
	if bad := diagnose.SysctlChange("net.core.flow_limit_cpu_bitmap", "0", "all"); bad.Validate() == nil {
		t.Error("a flow limit bitmap that is no mask validated")
	}
	budget := diagnose.SysctlChange("net.core.netdev_budget", "300", "600")
	if h.same(budget, "0600", nil, state{value: "600"}) {
		t.Error("a plain sysctl compared as a number or mask")
	}
}
