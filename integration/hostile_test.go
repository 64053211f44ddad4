package integration

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

// perfscope killed with SIGKILL while classic tracepoints are attached
// leaves no tracefs mount: it mounts tracefs only in a private mount
// namespace of its own. The test runs in a throwaway mount namespace
// (unshare -m) without tracefs, so the host's mounts are never touched.
func TestTracefsMountNeverOutlivesSIGKILL(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	script := `umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null
grep -c ' tracefs ' /proc/self/mounts
"$1" softirq --attach-method tracepoint --duration 20s -o json >/dev/null 2>&1 &
pid=$!
sleep 3
echo during $(grep -c ' tracefs ' /proc/self/mounts)
kill -9 $pid; wait $pid 2>/dev/null
echo after $(grep -c ' tracefs ' /proc/self/mounts)`
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", Perfscope(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 5 || lines[0] != "0" || lines[2] != "0" || lines[4] != "0" {
		t.Fatalf("tracefs mounts (before, during, after SIGKILL) = %q; want 0, 0, 0", out)
	}
}

// A lab killed with SIGKILL: its server and flood die with it (parent-death
// signal), and the next lab run removes its namespaces and temporary
// directory — and only those (another lab's, whose owner lives, stay).
func TestLabUDPKilledIsCleanedUpByNextRun(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	bin := Perfscope(t)
	before := labLeftovers(t)
	cmd, stderr := startLabMeasuring(t, bin)
	time.Sleep(time.Second)
	killed := cmd.Process.Pid
	cmd.Process.Kill()
	cmd.Wait()
	left := labLeftovers(t)
	if len(left) <= len(before) {
		t.Fatalf("the killed lab left nothing to clean (before %v, after %v): did it start?\n%s", before, left, stderr.String())
	}
	// Its children get SIGKILL from the kernel when it dies.
	time.Sleep(500 * time.Millisecond)
	if out, _ := exec.Command("pgrep", "-f", bin+" lab udp-").Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("lab tools still running after the lab was killed: pids %s", out)
		for _, pid := range strings.Fields(string(out)) { // ours: our binary's unique path
			exec.Command("kill", "-9", pid).Run()
		}
	}

	next := exec.Command(bin, "lab", "udp", "--scenario", "single-socket", "--duration", "1s")
	out, err := next.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("next lab run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("removed what lab process %d (no longer running) left", killed)) {
		t.Errorf("next run did not report removing the killed lab's leftovers:\n%s", out)
	}
	// The killed lab's leftovers are gone and nothing new is left. What
	// was there before may be gone too: another test's lab that finished,
	// or one whose owner died and the next run rightly removed.
	after := labLeftovers(t)
	for _, l := range left {
		if slices.Contains(after, l) && !slices.Contains(before, l) {
			t.Errorf("the killed lab's %s is still there after the next run (before %v, after %v)", l, before, after)
		}
	}
	for _, l := range after {
		if !slices.Contains(before, l) {
			t.Errorf("the next run left %s behind", l)
		}
	}
}

// Without privilege, the probe commands print one sentence (as doctor and
// profile do), not the BPF library's internals blaming MEMLOCK.
func TestUnprivilegedProbeCommandsSayOneSentence(t *testing.T) {
	testutil.RequireRoot(t) // to drop to nobody
	bin := Perfscope(t)
	for _, args := range [][]string{{"softirq", "--duration", "1s"}, {"udp", "--iface", "lo", "--duration", "1s"}} {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("%v as nobody: %v, want exit 3\n%s", args, err, out)
		}
		s := strings.TrimSpace(string(out))
		if strings.Contains(s, "\n") || strings.Contains(s, "MEMLOCK") || len(s) > 200 {
			t.Errorf("%v as nobody: want one short sentence, got %q", args, s)
		}
	}
}
