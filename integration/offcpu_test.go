package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
)

type offcpuReport struct {
	Schema   string                `json:"schema"`
	Command  string                `json:"command"`
	Data     evidence.OffCPU       `json:"data"`
	Findings []struct{ ID string } `json:"findings"`
	Recipe   struct{ Name string } `json:"recipe"`
}

// startOffCPU starts `perfscope offcpu args...` and returns once its
// probe is attached: the process holds the four sched tracepoints' BPF
// links (the workload is started then, so every wait of it is seen).
func startOffCPU(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	return startWatching(t, append([]string{"offcpu"}, args...)...)
}

// startWatching starts perfscope with args and returns once it holds at
// least the off-CPU probe's four BPF links.
func startWatching(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(Perfscope(t), args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for bpfLinks(cmd.Process.Pid) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("perfscope offcpu attached no probe in 30 s: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, &out, &stderr
}

// bpfLinks counts the BPF links pid holds open.
func bpfLinks(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == "anon_inode:bpf_link" {
			n++
		}
	}
	return n
}

func finishOffCPU(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("perfscope offcpu: %v\n%s", err, stderr.String())
	}
}

// perfscope offcpu --pid on four threads contending on one mutex whose
// holder sleeps 10 ms: the lock's off-CPU time at its call site is what
// the program measured itself in pthread_mutex_lock (within 10 %), the
// holder releasing the lock is the waker, the lock is found serializing
// the pool, and nothing stays loaded after the run.
func TestOffCPULockConvoy(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	prog := testutil.StartLockConvoy(t, 4, 10*time.Millisecond, 15)
	cmd, out, stderr := startOffCPU(t, "--pid", strconv.Itoa(prog.PID()), "--duration", "5s", "--exact", "-o", "json")
	prog.Go(t)
	truth := prog.Wait(t, 20*time.Second)
	finishOffCPU(t, cmd, stderr)
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)

	var r offcpuReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	ev := r.Data
	if r.Command != "offcpu" || r.Recipe.Name != "offcpu" || ev.PID != prog.PID() || ev.Target != "pid" || ev.Coverage != nil {
		t.Errorf("envelope: command %q recipe %q pid %d target %q coverage %+v", r.Command, r.Recipe.Name, ev.PID, ev.Target, ev.Coverage)
	}
	var lockNs int64
	for _, reason := range ev.ByReason {
		t.Logf("reason %s: %v in %d waits, top site %s", reason.Reason, time.Duration(reason.Ns), reason.Waits, reason.TopSite)
		for _, s := range reason.Sites {
			if reason.Reason == "lock" && s.Site == testutil.WaitForLockFunction {
				lockNs = s.Ns
			}
		}
	}
	want := truth["waited_ns"]
	t.Logf("lock waits at %s: %v; the program measured %v", testutil.WaitForLockFunction, time.Duration(lockNs), time.Duration(want))
	if d := lockNs - want; want <= 0 || d < -want/10 || d > want/10 {
		t.Errorf("lock waits %v, the program measured %v (more than 10 %% apart)", time.Duration(lockNs), time.Duration(want))
	}
	if len(ev.Pools) != 1 || !strings.Contains(ev.Pools[0].TopSiteWaker, testutil.ReleaseLockFunction) {
		t.Errorf("pools %+v: want the lock's waits woken by the holder in %s", ev.Pools, testutil.ReleaseLockFunction)
	}
	found := false
	for _, f := range r.Findings {
		found = found || f.ID == "offcpu.lock-serializes-pool"
	}
	if !found {
		t.Errorf("findings %+v: want offcpu.lock-serializes-pool", r.Findings)
	}
}

// perfscope offcpu -o folded on three threads sleeping 10 ms 30 times
// each: the stacks through the sleeping function hold, in microseconds,
// the time the program measured in nanosleep (within 10 %).
func TestOffCPUFoldedMicroseconds(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	prog := testutil.StartSleepers(t, 3, 10*time.Millisecond, 30)
	cmd, out, stderr := startOffCPU(t, "--pid", strconv.Itoa(prog.PID()), "-d", "4s", "--exact", "-o", "folded")
	prog.Go(t)
	truth := prog.Wait(t, 20*time.Second)
	finishOffCPU(t, cmd, stderr)
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)

	var us int64
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("folded line %q", line)
		}
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("folded line %q: %v", line, err)
		}
		if strings.Contains(line[:i], ";"+testutil.SleepFunction+";") {
			us += n
		}
	}
	want := truth["slept_ns"] / 1000
	t.Logf("folded stacks through %s: %d µs; the program slept %d µs", testutil.SleepFunction, us, want)
	if d := us - want; want <= 0 || d < -want/10 || d > want/10 {
		t.Errorf("folded stacks through %s hold %d µs, the program slept %d µs (more than 10 %% apart)\n%s", testutil.SleepFunction, us, want, out.String())
	}
}

// A first Ctrl-C ends the window: the report of what was measured is
// printed, and the exit is 130 with a warning that it was cut.
func TestOffCPUInterrupted(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	cmd, out, stderr := startOffCPU(t, "-a", "-d", "60s", "--exact", "-o", "json")
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\n%s", err, stderr.String())
	}
	var r offcpuReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if r.Data.Totals.Threads == 0 || !strings.Contains(strings.Join(r.Data.Warnings, "\n"), "interrupted after") ||
		time.Duration(r.Data.DurationNs) > 30*time.Second {
		t.Errorf("threads %d, window %v, warnings %q: want the cut window reported", r.Data.Totals.Threads, time.Duration(r.Data.DurationNs), r.Data.Warnings)
	}
}

// profile --off-cpu: one window, two sections; the off-CPU one holds the
// known sleeps of the watched process, within 10 %.
func TestProfileOffCPUSection(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	prog := testutil.StartSleepers(t, 2, 10*time.Millisecond, 30)
	cmd, out, stderr := startWatching(t, "profile", "--pid", strconv.Itoa(prog.PID()), "-d", "5s", "--off-cpu", "-o", "json")
	// The profile's perf events start with the window, after the
	// off-CPU probe has attached.
	time.Sleep(time.Second)
	prog.Go(t)
	truth := prog.Wait(t, 20*time.Second)
	finishOffCPU(t, cmd, stderr)
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
	var r struct {
		Data struct {
			Profile *evidence.Profile `json:"profile"`
			OffCPU  *evidence.OffCPU  `json:"offcpu"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if r.Data.Profile == nil || r.Data.OffCPU == nil {
		t.Fatalf("sections: profile %v, offcpu %v\n%s", r.Data.Profile != nil, r.Data.OffCPU != nil, out.String())
	}
	var sleepNs int64
	for _, reason := range r.Data.OffCPU.ByReason {
		for _, s := range reason.Sites {
			if s.Site == testutil.SleepFunction {
				sleepNs += s.Ns
			}
		}
	}
	want := truth["slept_ns"]
	t.Logf("off-CPU at %s: %v; the program slept %v", testutil.SleepFunction, time.Duration(sleepNs), time.Duration(want))
	if d := sleepNs - want; want <= 0 || d < -want/10 || d > want/10 {
		t.Errorf("off-CPU at %s %v, the program slept %v (more than 10 %% apart)", testutil.SleepFunction, time.Duration(sleepNs), time.Duration(want))
	}
}
