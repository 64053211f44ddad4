package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/internal/testutil"
)

// napi-set on a real NAPI instance: a veth pair with GRO on (veth then
// polls through NAPI instances of its own) in a namespace of the test's
// own. --apply's path writes one instance, napi-get reads the new values
// on it and the old ones on its sibling; the revert brings them back; and
// once GRO is off (the device's NAPI instances are gone) the same plan is
// refused in one sentence with nothing changed.
func TestLiveNAPIApplyRevert(t *testing.T) {
	testutil.RequireRoot(t)
	ns := fmt.Sprintf("psnapiapply%d", os.Getpid())
	exec.Command("ip", "netns", "del", ns).Run()
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "-n", ns, "link", "add", "va", "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", "vb", "numtxqueues", "2", "numrxqueues", "2"},
		{"ip", "-n", ns, "link", "set", "va", "up"},
		{"ip", "-n", ns, "link", "set", "vb", "up"},
		{"ip", "netns", "exec", ns, "ethtool", "-K", "vb", "gro", "on"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v %s", args, err, out)
		}
	}
	var ifindex int
	if out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/vb/ifindex").Output(); err != nil {
		t.Fatal(err)
	} else {
		fmt.Sscan(strings.TrimSpace(string(out)), &ifindex)
	}
	read := func() (ns_ []netlinkq.NAPI) {
		t.Helper()
		if err := testutil.InNetns(ns, func() (err error) { ns_, err = netlinkq.NAPIs(ifindex); return err }); err != nil {
			t.Fatal(err)
		}
		return ns_
	}
	before := read()
	if len(before) != 2 {
		t.Fatalf("vb has NAPI instances %+v, want 2", before)
	}
	if before[0].DeferHardIRQs == nil || before[0].GROFlushTimeoutNs == nil {
		t.Fatalf("this kernel reports no per-NAPI settings (6.13+): %+v", before[0])
	}
	target, sibling := before[0], before[1]
	old := map[string]uint64{"defer-hard-irqs": uint64(*target.DeferHardIRQs), "gro-flush-timeout": *target.GROFlushTimeoutNs}
	set := map[string]uint64{"defer-hard-irqs": 3, "gro-flush-timeout": 170000}
	f := diagnose.Finding{ID: "net.napi-defer-irqs", Title: "defer", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting}}
	// The RX queue the instance serves, where veth reports it.
	var queue *int
	var queues []netlinkq.Queue
	if err := testutil.InNetns(ns, func() (err error) { queues, err = netlinkq.Queues(ifindex); return err }); err != nil {
		t.Fatal(err)
	}
	if q, ok := netlinkq.QueueNAPI(queues)[target.ID]; ok {
		queue = &q
	}
	t.Logf("NAPI %d serves RX queue %v (queues %+v)", target.ID, queue, queues)
	f.Recommendation.AddChanges(diagnose.NAPISettingsChange("vb", queue, target.ID, old, set))
	// threaded through napi-set (6.17+) on the sibling only.
	if sibling.Threaded != "disabled" {
		t.Fatalf("NAPI %d threaded %q before, want disabled", sibling.ID, sibling.Threaded)
	}
	f.Recommendation.AddChanges(diagnose.NAPISettingsChange("vb", nil, sibling.ID, map[string]uint64{"threaded": 0}, map[string]uint64{"threaded": 1}))
	plan, err := NewPlan([]diagnose.Finding{f}, []string{f.ID})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	id := Identity{Host: "test", NetNS: "net:[4026500000]"}
	run := RunInfo{Command: "udp", Version: "test", Interface: "vb", Findings: plan.IDs()}
	var res ApplyResult
	if err := testutil.InNetns(ns, func() (err error) {
		res, err = Apply(context.Background(), plan, ApplyOptions{Dir: dir, System: LiveSystem(), Run: run, Identity: id})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after := read()
	got := func(n netlinkq.NAPI) string {
		return fmt.Sprintf("defer %d flush %d", *n.DeferHardIRQs, *n.GROFlushTimeoutNs)
	}
	for _, n := range after {
		switch n.ID {
		case target.ID:
			if got(n) != "defer 3 flush 170000" {
				t.Errorf("NAPI %d after --apply: %s", n.ID, got(n))
			}
		case sibling.ID:
			if got(n) != got(sibling) || n.Threaded != "enabled" || n.PID == 0 {
				t.Errorf("sibling NAPI %d after --apply: %s threaded %s thread %d, was %s and unthreaded", n.ID, got(n), n.Threaded, n.PID, got(sibling))
			}
		}
		if n.ID == target.ID && n.Threaded != "disabled" {
			t.Errorf("NAPI %d threaded %q: the setting of its sibling reached it", n.ID, n.Threaded)
		}
	}
	var rev RevertResult
	if err := testutil.InNetns(ns, func() (err error) {
		rev, err = Revert(context.Background(), res.RevertFile, LiveSystem(), id)
		return err
	}); err != nil || len(rev.Restored) != 2 {
		t.Fatalf("revert: %+v %v", rev, err)
	}
	for _, n := range read() {
		if n.ID == target.ID && got(n) != got(target) {
			t.Errorf("NAPI %d after revert: %s, want %s", n.ID, got(n), got(target))
		}
		if n.ID == sibling.ID && (n.Threaded != "disabled" || n.PID != 0) {
			t.Errorf("NAPI %d after revert: threaded %s thread %d, want disabled", n.ID, n.Threaded, n.PID)
		}
	}

	// GRO off: veth's NAPI instances go away, and the id with them.
	if out, err := exec.Command("ip", "netns", "exec", ns, "ethtool", "-K", "vb", "gro", "off").CombinedOutput(); err != nil {
		t.Fatalf("gro off: %v %s", err, out)
	}
	if n := read(); len(n) != 0 {
		t.Fatalf("vb still has NAPI instances %+v with GRO off", n)
	}
	err = testutil.InNetns(ns, func() error {
		_, err := Apply(context.Background(), plan, ApplyOptions{Dir: t.TempDir(), System: LiveSystem(), Run: run, Identity: id})
		return err
	})
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), fmt.Sprintf("NAPI instance %d of vb no longer exists", target.ID)) {
		t.Fatalf("apply of a vanished NAPI id: %v", err)
	}
}
