package netlinkq

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

// A veth pair in a namespace of the test's own, with GRO on (veth then
// polls through NAPI instances of its own): the settings written to its
// sysfs come back per NAPI instance from napi-get, the threaded instances
// name live kernel threads, and qstats-get answers with no queue (veth
// reports no per-queue statistics) rather than an error.
func TestLiveNAPISettingsOfVeth(t *testing.T) {
	testutil.RequireRoot(t)
	name := vethNetns(t, "psnapi")
	if out, err := exec.Command("ip", "netns", "exec", name, "ethtool", "-K", "vb", "gro", "on").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K vb gro on: %v %s", err, out)
	}
	// sysfs shows the namespace's devices to a process inside it.
	write := "echo 3 > /sys/class/net/vb/napi_defer_hard_irqs && echo 150000 > /sys/class/net/vb/gro_flush_timeout && echo 1 > /sys/class/net/vb/threaded && cat /sys/class/net/vb/ifindex"
	out, err := exec.Command("ip", "netns", "exec", name, "sh", "-c", write).CombinedOutput()
	if err != nil {
		t.Fatalf("write vb's NAPI settings: %v %s", err, out)
	}
	var ifindex int
	fmt.Sscan(strings.TrimSpace(string(out)), &ifindex)
	var ns []NAPI
	var qs []QueueStats
	var qerr error
	if err := testutil.InNetns(name, func() (err error) {
		ns, err = NAPIs(ifindex)
		qs, qerr = QStats(ifindex)
		return err
	}); err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("kernel lacks it: %v", err)
		}
		t.Fatal(err)
	}
	if len(ns) != 2 {
		t.Fatalf("vb (ifindex %d) has NAPI instances %s, want 2", ifindex, napiText(ns))
	}
	for _, n := range ns {
		if n.DeferHardIRQs == nil {
			t.Skipf("this kernel reports no NAPI settings (6.13+): %s", napiText(ns))
		}
		if *n.DeferHardIRQs != 3 || n.GROFlushTimeoutNs == nil || *n.GROFlushTimeoutNs != 150000 {
			t.Errorf("NAPI %d settings %s, want defer 3 flush 150000", n.ID, napiText([]NAPI{n}))
		}
		if n.Threaded != "" && n.Threaded != "enabled" {
			t.Errorf("NAPI %d threaded %q, want enabled", n.ID, n.Threaded)
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", n.PID))
		if err != nil || !strings.HasPrefix(string(comm), "napi/vb-") {
			t.Errorf("NAPI %d thread %d: comm %q, %v", n.ID, n.PID, comm, err)
		}
	}
	if qerr != nil && !errors.Is(qerr, ErrUnavailable) {
		t.Errorf("qstats of veth: %v", qerr)
	}
	if len(qs) != 0 {
		t.Errorf("veth reported queue statistics %v", qs)
	}
}

// napi-set on one NAPI instance of a threaded veth in a namespace of the
// test's own: napi-get reads the new settings back on that instance only,
// writing the old ones restores it, and an unknown instance is an error
// that says so.
func TestLiveSetNAPIPerInstance(t *testing.T) {
	testutil.RequireRoot(t)
	name, ifindex := threadedVeth(t, "psnapiset")
	u32 := func(v uint32) *uint32 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	var before, during, after []NAPI
	var unknownErr error
	err := testutil.InNetns(name, func() error {
		var err error
		if before, err = NAPIs(ifindex); err != nil {
			return err
		}
		if len(before) != 2 || before[0].DeferHardIRQs == nil || before[0].GROFlushTimeoutNs == nil {
			return fmt.Errorf("vb's NAPI instances %s, want 2 with settings", napiText(before))
		}
		target := before[0]
		if err := SetNAPI(target.ID, NAPISettings{DeferHardIRQs: u32(7), GROFlushTimeoutNs: u64(200_000), IRQSuspendTimeoutNs: u64(20_000_000)}); err != nil {
			return err
		}
		if during, err = NAPIs(ifindex); err != nil {
			return err
		}
		old := NAPISettings{DeferHardIRQs: target.DeferHardIRQs, GROFlushTimeoutNs: target.GROFlushTimeoutNs, IRQSuspendTimeoutNs: target.IRQSuspendTimeoutNs}
		if old.IRQSuspendTimeoutNs == nil {
			old.IRQSuspendTimeoutNs = u64(0)
		}
		if err := SetNAPI(target.ID, old); err != nil {
			return err
		}
		if after, err = NAPIs(ifindex); err != nil {
			return err
		}
		unknownErr = SetNAPI(1<<31-1, NAPISettings{DeferHardIRQs: u32(1)})
		return nil
	})
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("kernel lacks napi-set: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before %s; during %s; after %s", napiText(before), napiText(during), napiText(after))
	byID := func(ns []NAPI, id uint32) NAPI {
		for _, n := range ns {
			if n.ID == id {
				return n
			}
		}
		t.Fatalf("NAPI %d gone: %s", id, napiText(ns))
		return NAPI{}
	}
	set, other := byID(during, before[0].ID), byID(during, before[1].ID)
	if *set.DeferHardIRQs != 7 || *set.GROFlushTimeoutNs != 200_000 || (set.IRQSuspendTimeoutNs != nil && *set.IRQSuspendTimeoutNs != 20_000_000) {
		t.Errorf("instance %d after napi-set: %s", set.ID, napiText([]NAPI{set}))
	}
	if *other.DeferHardIRQs != *before[1].DeferHardIRQs || *other.GROFlushTimeoutNs != *before[1].GROFlushTimeoutNs {
		t.Errorf("napi-set of instance %d changed instance %d: %s", set.ID, other.ID, napiText(during))
	}
	if set.PID == 0 {
		t.Errorf("instance %d is not threaded: %s", set.ID, napiText([]NAPI{set}))
	}
	restored := byID(after, before[0].ID)
	if *restored.DeferHardIRQs != *before[0].DeferHardIRQs || *restored.GROFlushTimeoutNs != *before[0].GROFlushTimeoutNs {
		t.Errorf("restoring gave %s, want %s", napiText([]NAPI{restored}), napiText(before[:1]))
	}
	if !errors.Is(unknownErr, os.ErrNotExist) {
		t.Errorf("napi-set of an unknown instance: %v, want not-exist", unknownErr)
	}
}

// vethNetns makes a namespace named prefix+pid holding a 2-queue veth pair
// va/vb, both up, deleted when the test ends.
func vethNetns(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s%d", prefix, os.Getpid())
	exec.Command("ip", "netns", "del", name).Run()
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "add", "va", "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", "vb", "numtxqueues", "2", "numrxqueues", "2"},
		{"-n", name, "link", "set", "va", "up"},
		{"-n", name, "link", "set", "vb", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	return name
}

// threadedVeth is vethNetns with GRO on vb (its NAPI instances) and
// threaded NAPI, and vb's ifindex.
func threadedVeth(t *testing.T, prefix string) (name string, ifindex int) {
	t.Helper()
	name = vethNetns(t, prefix)
	out, err := exec.Command("ip", "netns", "exec", name, "sh", "-c",
		"ethtool -K vb gro on && echo 1 > /sys/class/net/vb/threaded && cat /sys/class/net/vb/ifindex").CombinedOutput()
	if err != nil {
		t.Fatalf("threaded NAPI on vb: %v %s", err, out)
	}
	fmt.Sscan(strings.TrimSpace(string(out)), &ifindex)
	return name, ifindex
}
