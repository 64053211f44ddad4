package apply

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/internal/testutil"
)

// Names a tenant can give its devices and tables inside a network
// namespace: each is legal for the kernel and code for a shell.
const (
	liveIfA     = "v$(>pwned)"
	liveIfB     = "q'\";|`id`"
	liveNftA    = "x$(>pwnednft)"
	liveNftB    = "a/../../../tmp/x"
	liveEnvFlag = "PERFSCOPE_NETAPPLY_LIVE"
)

// TestLiveChangesInNetns applies and reverts every kind this machine's
// kernel supports — sysctls, sysfs queue files, ethtool features and
// channels, nftables tables, thread affinity, audit — natively, inside a
// throwaway network namespace whose device and table names hold shell
// metacharacters, with every value read back and checked independently.
// The work runs in this test binary re-executed through `ip netns exec`,
// which gives it the namespace's own /sys.
func TestLiveChangesInNetns(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	for _, tool := range []string{"ip", "nft", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("needs %s (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	var b [3]byte
	rand.Read(b[:])
	ns := "perfscope-apply-" + hex.EncodeToString(b[:])
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run("ip", "-n", ns, "link", "add", liveIfA, "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", liveIfB, "numtxqueues", "2", "numrxqueues", "2")
	run("ip", "-n", ns, "link", "set", liveIfA, "up")
	run("ip", "-n", ns, "link", "set", liveIfB, "up")

	cwd := t.TempDir()
	// /tmp/x is the traversal's target, outside the test's own files: a
	// file of that name left there by someone else is not the test's, so
	// only one created or written by the run counts.
	before, beforeErr := os.Lstat("/tmp/x")
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestLiveHelper$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), liveEnvFlag+"=1", "PERFSCOPE_NETAPPLY_DIR="+t.TempDir())
	cmd.Dir = cwd
	out, err := cmd.CombinedOutput()
	t.Logf("in namespace %s:\n%s", ns, out)
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestLiveHelper")) {
		t.Fatalf("the changes in the namespace failed: %v", err)
	}
	// Nothing a shell would have run: no file named by the redirections.
	for _, p := range []string{filepath.Join(cwd, "pwned"), filepath.Join(cwd, "pwnednft")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists: a name was executed", p)
		}
	}
	if after, err := os.Lstat("/tmp/x"); err == nil && (beforeErr != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime())) {
		t.Errorf("/tmp/x was created or written by the run: a name was used as a path")
	}
}

// TestLiveHelper is the namespace side of TestLiveChangesInNetns.
func TestLiveHelper(t *testing.T) {
	if os.Getenv(liveEnvFlag) != "1" {
		t.Skip("run by TestLiveChangesInNetns inside its network namespace")
	}
	sys := LiveSystem()
	read := func(c diagnose.Change) string {
		t.Helper()
		h, err := sys.handler(c.Kind)
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.read(sys, c)
		if err != nil {
			t.Fatalf("read %+v: %v", c, err)
		}
		return st.value
	}
	other := func(v string, choices ...string) string {
		if v == choices[0] {
			return choices[1]
		}
		return choices[0]
	}

	// nft tables created independently of perfscope (nft's JSON input
	// carries any name), to be deleted and recreated.
	nft := func(stdin string, args ...string) string {
		t.Helper()
		c := exec.Command("nft", args...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("nft %q: %v: %s", args, err, out)
		}
		return string(out)
	}
	doc, _ := diagnose.NftJSON(`{"nftables":[{"add":{"table":{"family":"ip","name":%s}}},{"add":{"chain":{"family":"ip","table":%s,"name":%s,"type":"filter","hook":"input","prio":-5,"policy":"accept"}}},{"add":{"chain":{"family":"ip","table":%s,"name":%s}}},{"add":{"table":{"family":"inet","name":%s}}}]}`,
		liveNftA, liveNftA, "in put", liveNftA, "a'b", liveNftB)
	nft(doc, "-j", "-f", "-")
	rulesetBefore := stripHandles(t, nft("", "-j", "list", "ruleset"))

	// A thread to pin: a child process's main thread.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()

	rp := diagnose.SysctlChange(diagnose.SysctlKey("net", "ipv4", "conf", liveIfA, "rp_filter"), "", "")
	rp.Old = read(rp)
	rp.New = other(rp.Old, "1", "2")
	al := diagnose.SysctlChange("net.ipv4.conf.all.accept_local", "", "")
	al.Old = read(al)
	al.New = other(al.Old, "1", "0")
	rps := diagnose.QueueMaskChange(liveIfA, "rx", 0, cpuset.Set{}, cpuset.Of(0), 0)
	rps.Old = read(rps)
	flow := diagnose.RPSFlowCntChange(liveIfA, 0, 0, 256)
	flow.Old = read(flow)
	xps := diagnose.QueueMaskChange(liveIfB, "tx", 1, cpuset.Set{}, cpuset.Of(runtime.NumCPU()-1), 0)
	xps.Old = read(xps)
	gro := diagnose.EthtoolFeatureChange(liveIfA, "rx-gro", false, false)
	gro.Old = read(gro)
	gro.New = other(gro.Old, "on", "off")
	fwd := diagnose.EthtoolFeatureChange(liveIfB, "rx-udp-gro-forwarding", false, false)
	fwd.Old = read(fwd)
	fwd.New = other(fwd.Old, "on", "off")
	ch := diagnose.EthtoolChannelsChange(liveIfA, map[string]uint32{"rx": 2}, map[string]uint32{"rx": 1})
	all := runtime.NumCPU() - 1
	pin := diagnose.ThreadAffinityChange(sleeper.Process.Pid, cpuset.Range(0, all), cpuset.Of(all))
	pin.Old = read(pin)
	changes := []diagnose.Change{rp, al, rps, flow, xps, gro, fwd, ch,
		diagnose.NftTableDeleteChange("ip", liveNftA), diagnose.NftTableDeleteChange("inet", liveNftB), pin}
	// Audit is host-wide: flipped for the moment between apply and revert
	// (never to 2, which locks it until reboot).
	if v := read(diagnose.AuditChange(0, 0)); v == "0" || v == "1" {
		a := diagnose.AuditChange(0, 0)
		a.Old, a.New = v, other(v, "1", "0")
		changes = append(changes, a)
	} else {
		t.Logf("audit enabled=%s: left alone", v)
	}
	f := diagnose.Finding{ID: "test.live", Title: "every kind", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting}}
	f.Recommendation.AddChanges(changes...)
	for _, c := range f.Recommendation.Apply {
		t.Logf("apply: %s", c)
	}
	p, err := NewPlan([]diagnose.Finding{f}, []string{"test.live"})
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("PERFSCOPE_NETAPPLY_DIR")
	res, err := Apply(context.Background(), p, ApplyOptions{Dir: dir, System: sys, Run: testRun([]string{"test.live"})})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied)+len(res.Unchanged) != len(changes) {
		t.Fatalf("applied %d, unchanged %d of %d", len(res.Applied), len(res.Unchanged), len(changes))
	}
	// Independent checks: the kernel's files, ethtool, nft.
	file := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := file("/proc/sys/net/ipv4/conf/" + liveIfA + "/rp_filter"); got != rp.New {
		t.Errorf("rp_filter = %s, want %s", got, rp.New)
	}
	if got := file("/sys/class/net/" + liveIfA + "/queues/rx-0/rps_flow_cnt"); got != "256" {
		t.Errorf("rps_flow_cnt = %s", got)
	}
	ek, _ := exec.Command("ethtool", "-k", liveIfA).Output()
	if want := "generic-receive-offload: " + gro.New; !strings.Contains(string(ek), want) {
		t.Errorf("ethtool -k does not show %q:\n%s", want, ek)
	}
	el, _ := exec.Command("ethtool", "-l", liveIfA).Output()
	if !strings.Contains(string(el), "Current hardware settings:\nRX:\t\t1") {
		t.Errorf("ethtool -l after apply:\n%s", el)
	}
	if tables := nft("", "list", "tables"); strings.Contains(tables, "pwnednft") || strings.Contains(tables, "tmp") {
		t.Errorf("tables not deleted:\n%s", tables)
	}
	if got := read(pin); got != pin.New {
		t.Errorf("thread affinity %s", got)
	}

	// A driver without the operation: refused before anything changes.
	co := diagnose.Finding{ID: "net.coalesce", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting}}
	co.Recommendation.AddChanges(diagnose.EthtoolCoalesceChange(liveIfA, map[string]uint32{"rx-usecs": 0}, map[string]uint32{"rx-usecs": 50}),
		diagnose.EthtoolRingChange(liveIfA, map[string]uint32{"rx": 256}, map[string]uint32{"rx": 512}))
	cp, _ := NewPlan([]diagnose.Finding{co}, []string{"net.coalesce"})
	if _, err := Apply(context.Background(), cp, ApplyOptions{Dir: dir, System: sys, Run: testRun([]string{"net.coalesce"})}); !errors.Is(err, ErrEthtoolUnsupported) {
		t.Errorf("coalescing on veth: %v", err)
	}

	rev, err := Revert(context.Background(), res.RevertFile, sys, Identity{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rev.Restored) != len(res.Applied) {
		t.Errorf("restored %d of %d", len(rev.Restored), len(res.Applied))
	}
	for _, c := range changes {
		if got := read(c); got != c.Old && !(c.Kind == diagnose.ChangeSysfs && sameMask(got, c.Old)) {
			t.Errorf("%s: %s after revert, want %s", c.Command(c.Old), got, c.Old)
		}
	}
	if after := stripHandles(t, nft("", "-j", "list", "ruleset")); after != rulesetBefore {
		t.Errorf("nft ruleset not restored:\nbefore %s\nafter  %s", rulesetBefore, after)
	}

	// Legacy iptables, read through getsockopt: policies and rule counts
	// (the guard of an unload).
	if _, err := exec.LookPath("iptables-legacy"); err == nil {
		exec.Command("iptables-legacy", "-P", "FORWARD", "DROP").Run()
		exec.Command("iptables-legacy", "-A", "OUTPUT", "-o", liveIfB, "-j", "ACCEPT").Run()
		tb, err := sockoptIptables{}.Table("ipv4", "filter")
		if err != nil || tb.Rules != 1 || tb.Policies["FORWARD"] != "DROP" || tb.Policies["INPUT"] != "ACCEPT" || len(tb.Policies) != 3 {
			t.Errorf("iptables filter: %+v %v", tb, err)
		}
		exec.Command("ip6tables-legacy", "-P", "INPUT", "DROP").Run()
		tb, err = sockoptIptables{}.Table("ipv6", "filter")
		if err != nil || tb.Rules != 0 || tb.Policies["INPUT"] != "DROP" {
			t.Errorf("ip6tables filter: %+v %v", tb, err)
		}
	}
	// From inside a namespace the host's is another one: modules stay.
	if others, err := (procNamespaces{root: "/"}).Others(); err != nil || len(others) == 0 {
		t.Errorf("other namespaces seen from a namespace: %v %v", others, err)
	}
}

// stripHandles drops nft's handles (new objects get new ones) and its
// metainfo from a JSON ruleset, in a stable order, for comparing before
// and after.
func stripHandles(t *testing.T, js string) string {
	t.Helper()
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("nft -j: %v: %s", err, js)
	}
	var kept []string
	for _, obj := range doc.Nftables {
		if _, ok := obj["metainfo"]; ok {
			continue
		}
		for _, v := range obj {
			delete(v, "handle")
		}
		out, _ := json.Marshal(obj)
		kept = append(kept, string(out))
	}
	// Recreated objects are listed in creation order.
	slices.Sort(kept)
	return strings.Join(kept, "\n")
}
