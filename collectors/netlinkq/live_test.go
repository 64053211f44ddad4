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
	name := fmt.Sprintf("psnapi%d", os.Getpid())
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
