package netconfig

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/internal/testutil"
)

// newNetns creates a network namespace for one test and removes it after.
func newNetns(t *testing.T) string {
	t.Helper()
	var b [3]byte
	rand.Read(b[:])
	name := "perfscope-nf-" + hex.EncodeToString(b[:])
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return name
}

func inNS(t *testing.T, ns string, argv ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// The native reader must agree with the tools (iptables-legacy-save, nft)
// on tables the test creates: legacy filter with rules and a user chain,
// legacy raw empty, an ip6 legacy table, and nft tables with and without
// rules.
func TestNativeRuleCountsAgreeWithTools(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"iptables-legacy", "iptables-legacy-save", "ip6tables-legacy", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (scripts/deps.sh test installs it): %v", tool, err)
		}
	}
	ns := newNetns(t)
	for _, c := range [][]string{
		{"iptables-legacy", "-t", "filter", "-A", "INPUT", "-p", "udp", "--dport", "53", "-j", "ACCEPT"},
		{"iptables-legacy", "-t", "filter", "-A", "INPUT", "-s", "10.1.0.0/16", "-j", "DROP"},
		{"iptables-legacy", "-t", "filter", "-N", "perfscope-chain"},
		{"iptables-legacy", "-t", "filter", "-A", "perfscope-chain", "-p", "tcp", "-j", "RETURN"},
		{"iptables-legacy", "-t", "filter", "-N", "perfscope-empty"},
		{"iptables-legacy", "-t", "filter", "-A", "FORWARD", "-j", "perfscope-chain"},
		{"iptables-legacy", "-t", "filter", "-P", "FORWARD", "DROP"},
		{"iptables-legacy", "-t", "raw", "-L", "-n"},
		{"ip6tables-legacy", "-t", "filter", "-A", "INPUT", "-p", "udp", "-j", "ACCEPT"},
		{"nft", "add", "table", "inet", "t1"},
		{"nft", "add", "chain", "inet", "t1", "in", "{ type filter hook input priority 0; }"},
		{"nft", "add", "rule", "inet", "t1", "in", "udp", "dport", "53", "accept"},
		{"nft", "add", "rule", "inet", "t1", "in", "counter"},
		{"nft", "add", "table", "ip", "empty"},
	} {
		inNS(t, ns, c...)
	}
	want := map[string]int{}
	for _, fam := range []struct{ tool, key string }{{"iptables-legacy-save", "ipv4"}, {"ip6tables-legacy-save", "ipv6"}} {
		for table, n := range CountIptablesSave(inNS(t, ns, fam.tool)) {
			want[fam.key+"/"+table] = n
		}
	}
	nft, err := CountNftJSON(inNS(t, ns, "nft", "-j", "list", "ruleset"))
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range nft {
		want["nft/"+k] = n
	}
	if want["ipv4/filter"] != 4 || want["ipv4/raw"] != 0 || want["nft/inet/t1"] != 2 {
		t.Fatalf("the tools disagree with the setup: %v", want)
	}
	var got map[string]int
	var source string
	err = testutil.InNetns(ns, func() error {
		var err error
		got, source, err = NativeRuleCounter{Sources: Sources{FS: procfs.Default}}.CountRules()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("native counts %v\ntools  %v", got, want)
	}
	if !strings.Contains(source, "x_tables") || !strings.Contains(source, "nftables") {
		t.Errorf("source %q", source)
	}
	// The table's shape, which --apply's guard of an unload reads with the
	// same reader: user chains and the built-in chains' policies.
	var filter, raw LegacyTable
	var t1, missing *NftTable
	if err := testutil.InNetns(ns, func() error {
		var err error
		if filter, err = ReadLegacyTable("ipv4", "filter"); err != nil {
			return err
		}
		if t1, err = ReadNftTable("inet", "t1"); err != nil {
			return err
		}
		if missing, err = ReadNftTable("ip", "no-such-table"); err != nil {
			return err
		}
		raw, err = ReadLegacyTable("ipv4", "raw")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(filter.Chains, []string{"perfscope-chain", "perfscope-empty"}) ||
		!maps.Equal(filter.Policies, map[string]string{"INPUT": "ACCEPT", "FORWARD": "DROP", "OUTPUT": "ACCEPT"}) {
		t.Errorf("filter: %+v", filter)
	}
	// The nft description --apply saves: the base chain's hook (input = 1),
	// priority and policy, and the two rules.
	if t1 == nil || t1.Rules != 2 || len(t1.Chains) != 1 || t1.Chains[0].Name != "in" || t1.Chains[0].Hook == nil || *t1.Chains[0].Hook != 1 ||
		*t1.Chains[0].Priority != 0 || t1.Chains[0].Policy != "accept" || t1.Chains[0].Type != "filter" || len(t1.Unsupported) != 0 {
		t.Errorf("nft inet t1: %+v", t1)
	}
	if missing != nil {
		t.Errorf("a table that does not exist: %+v", missing)
	}
	if raw.Rules != 0 || len(raw.Chains) != 0 || !maps.Equal(raw.Policies, map[string]string{"PREROUTING": "ACCEPT", "OUTPUT": "ACCEPT"}) {
		t.Errorf("raw: %+v", raw)
	}
	// Reading must not create a table: in a fresh namespace nothing is
	// listed before or after.
	fresh := newNetns(t)
	if err := testutil.InNetns(fresh, func() error {
		_, _, err := NativeRuleCounter{Sources: Sources{FS: procfs.Default}}.CountRules()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if names := strings.TrimSpace(inNS(t, fresh, "cat", "/proc/net/ip_tables_names")); names != "" {
		t.Errorf("counting created legacy tables: %q", names)
	}
}
