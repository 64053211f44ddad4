package cpuprofile

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/internal/testutil"
)

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"0-1", []int{0, 1}},
		{"0-2,5,7-8", []int{0, 1, 2, 5, 7, 8}},
	} {
		got, err := parseCPUList(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "0-x"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) succeeded", bad)
		}
	}
}

func TestFramesAreRootFirstWithRootFrame(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/proc", 0o755); err != nil {
		t.Fatal(err)
	}
	kallsyms := "ffffffff81000000 T entry_SYSCALL_64\nffffffff81001000 T do_syscall_64\nffffffff81002000 T __x64_sys_read\n"
	if err := os.WriteFile(dir+"/proc/kallsyms", []byte(kallsyms), 0o644); err != nil {
		t.Fatal(err)
	}
	sym := symbols.New(symbols.FS{Root: dir})
	s := Sample{PID: 7, TID: 8, CPU: 1, Comm: "a;b",
		// Leaf first, as the kernel records them; the process has no maps
		// in the fixture so user frames are unknown.
		KernelStack: []uint64{0xffffffff81002010, 0xffffffff81001010, 0xffffffff81000010},
		UserStack:   []uint64{0x1000, 0x2000},
		Count:       3,
	}
	want := []string{"a:b-7/8", "[unknown]", "[unknown]", "entry_SYSCALL_64_[k]", "do_syscall_64_[k]", "__x64_sys_read_[k]"}
	if got := Frames(sym, s, RootThread); !reflect.DeepEqual(got, want) {
		t.Errorf("frames = %q\nwant %q", got, want)
	}
	for root, first := range map[RootFrame]string{RootComm: "a:b", RootProcess: "a:b-7", RootCPU: "cpu-1", RootNone: "[unknown]"} {
		if got := Frames(sym, s, root); got[0] != first {
			t.Errorf("root %d: first frame %q, want %q", root, got[0], first)
		}
	}
}

// startProfiler opens and starts a profiler that is closed when t ends.
func startProfiler(t *testing.T, opts Options) *Profiler {
	t.Helper()
	p, err := Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	return p
}

func profileFor(t *testing.T, opts Options, d time.Duration) Profile {
	t.Helper()
	p := startProfiler(t, opts)
	time.Sleep(d)
	if err := p.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	prof, err := p.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return prof
}

// The busy loop's function must be the hottest user frame of its process,
// and --pid must keep every other process out.
func TestBusyLoopIsTopUserFrame(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	spinner := testutil.StartSpinner(t, 3)
	pid := spinner.Process.Pid
	time.Sleep(100 * time.Millisecond) // past exec and dynamic loading

	cpuBefore := cpuTime(t, pid)
	prof := profileFor(t, Options{PID: pid, Frequency: 199}, 1500*time.Millisecond)
	ran := cpuTime(t, pid) - cpuBefore
	if prof.Total() == 0 {
		t.Fatalf("no samples of pid %d (lost: %+v)", pid, prof.Lost)
	}
	sym := symbols.New(symbols.Default)
	self := map[string]uint64{}
	for _, s := range prof.Samples {
		if s.PID != pid {
			t.Fatalf("sample of pid %d (%s) in a profile filtered to pid %d", s.PID, s.Comm, pid)
		}
		if len(s.UserStack) == 0 {
			continue
		}
		self[sym.User(s.PID, s.UserStack[:1])[0]] += s.Count
	}
	top, topN := "", uint64(0)
	for name, n := range self {
		if n > topN {
			top, topN = name, n
		}
	}
	if top != testutil.SpinFunction {
		t.Errorf("top user frame = %q (%d of %d samples), want spin_here_forever; all: %v", top, topN, prof.Total(), self)
	}
	// cpu-clock samples a thread only while it runs, so the spinner's
	// own CPU time over the window sets the expectation (199 Hz × CPU
	// seconds) whatever else loads the machine. Far fewer means samples
	// are being dropped; the 10 ms tick granularity of the CPU time and
	// the window edges allow for half.
	if want := ran.Seconds() * 199; float64(prof.Total()) < want/2 {
		t.Errorf("%d samples for %v of CPU at 199 Hz; want ≥ %.0f", prof.Total(), ran, want/2)
	}
	t.Logf("%d samples, lost %+v, top %s %d", prof.Total(), prof.Lost, top, topN)
}

func TestKernelOnlyRecordsNoUserStacks(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	spinner := testutil.StartSpinner(t, 2)
	prof := profileFor(t, Options{Stacks: KernelOnly, Frequency: 199}, 500*time.Millisecond)
	found := false
	for _, s := range prof.Samples {
		if s.UserStack != nil {
			t.Fatalf("kernel-only profile has a user stack for %s", s.Comm)
		}
		if s.PID == 0 {
			t.Fatalf("idle task sampled without IncludeIdle")
		}
		found = found || s.PID == spinner.Process.Pid
	}
	if !found {
		t.Errorf("system-wide profile has no sample of the busy process %d", spinner.Process.Pid)
	}
}

func TestProfilerLeavesNothingBehind(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	beforeFDs := openFDs(t)

	p, err := Open(Options{Frequency: 99})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		p.Close()
		t.Fatal(err)
	}
	if p.CPUs() == 0 || p.AttachMode() == "" {
		t.Errorf("started on %d CPUs with attach mode %q", p.CPUs(), p.AttachMode())
	}
	if err := p.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := p.Snapshot(); err != nil {
		t.Error(err)
	}
	if _, err := p.Drain(); err == nil {
		t.Error("Drain of a profiler opened without Continuous succeeded")
	}
	if err := p.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
	if after := openFDs(t); after > beforeFDs {
		t.Errorf("%d file descriptors open after Close, %d before", after, beforeFDs)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && !strings.HasPrefix(target, "/proc/") {
			n++
		}
	}
	return n
}

// cpuTime is the user+system CPU time pid has used, from /proc/PID/stat
// (fields 14 and 15, in USER_HZ = 100 ticks).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	utime, _ := strconv.ParseUint(f[14-3], 10, 64)
	stime, _ := strconv.ParseUint(f[15-3], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// PIDs reads the processes noted since Start in batches; after Stop it
// must name exactly the processes the snapshot holds samples of, however
// many batches the read spans, and then nothing more.
func TestPIDsNameEverySampledProcess(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	spinner := testutil.StartSpinner(t, 3)
	defer func(n int) { pidBatch = n }(pidBatch)
	pidBatch = 4 // a dozen stacks span several batches
	p := startProfiler(t, Options{Frequency: 999})
	time.Sleep(1500 * time.Millisecond)
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	pids, err := p.PIDs()
	if err != nil {
		t.Fatalf("PIDs: %v", err)
	}
	prof, err := p.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	got := map[int]bool{}
	for _, pid := range pids {
		if got[pid] {
			t.Errorf("pid %d named twice", pid)
		}
		got[pid] = true
	}
	want := map[int]bool{}
	for _, s := range prof.Samples {
		want[s.PID] = true
	}
	for pid := range want {
		if !got[pid] {
			t.Errorf("pid %d has samples but PIDs did not name it", pid)
		}
	}
	for pid := range got {
		if !want[pid] {
			t.Errorf("PIDs named pid %d, which has no samples", pid)
		}
	}
	if !got[spinner.Process.Pid] {
		t.Errorf("the spinner (pid %d) is not among %d pids", spinner.Process.Pid, len(pids))
	}
	if again, err := p.PIDs(); err != nil || len(again) != 0 {
		t.Errorf("PIDs after a stopped profiler's PIDs = %v, %v; want none", again, err)
	}
	t.Logf("%d processes in %d sampled stacks", len(pids), len(prof.Samples))
}

// PIDs names each process once per sampling since the previous call: a
// short-lived one after it has exited (the reason PIDs exists), a busy one
// not again while it is stopped, and again once it runs; emptying the
// noted processes must not take anything away from the counts.
func TestPIDsNamesNewProcessesOnce(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	p := startProfiler(t, Options{Frequency: 999})
	named := func(what string, pid int) bool {
		t.Helper()
		pids, err := p.PIDs()
		if err != nil {
			t.Fatalf("PIDs (%s): %v", what, err)
		}
		found := false
		for _, n := range pids {
			if n == 0 {
				t.Errorf("PIDs (%s) named the idle task", what)
			}
			found = found || n == pid
		}
		return found
	}

	// A bounded shell loop of a few hundred milliseconds, gone before
	// PIDs is asked.
	short := exec.Command("sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done")
	if err := short.Run(); err != nil {
		t.Fatalf("short-lived loop: %v", err)
	}
	if !named("after the short-lived loop exited", short.Process.Pid) {
		t.Errorf("the exited loop (pid %d) was not named", short.Process.Pid)
	}
	if named("right after", short.Process.Pid) {
		t.Errorf("the exited loop (pid %d) was named twice", short.Process.Pid)
	}

	spinner := testutil.StartSpinner(t, 5)
	pid := spinner.Process.Pid
	cpuBefore := cpuTime(t, pid)
	time.Sleep(500 * time.Millisecond)
	if !named("while the spinner runs", pid) {
		t.Fatalf("the running spinner (pid %d) was not named", pid)
	}
	if err := spinner.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A stopped process is not sampled: once a call has taken what was
	// noted before the stop took effect, the next must not name it.
	time.Sleep(100 * time.Millisecond)
	named("the spinner stopping", pid)
	time.Sleep(100 * time.Millisecond)
	if named("while the spinner is stopped", pid) {
		t.Errorf("the stopped spinner (pid %d) was named again", pid)
	}
	if err := spinner.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if !named("once the spinner runs again", pid) {
		t.Errorf("the resumed spinner (pid %d) was not named again", pid)
	}
	ran := cpuTime(t, pid) - cpuBefore
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	prof, err := p.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	counted := map[int]uint64{}
	for _, s := range prof.Samples {
		counted[s.PID] += s.Count
	}
	if counted[short.Process.Pid] == 0 {
		t.Errorf("no samples counted of the short-lived loop (pid %d)", short.Process.Pid)
	}
	// As in TestBusyLoopIsTopUserFrame: 999 Hz × the spinner's CPU time,
	// half of it for the 10 ms granularity of that time and the edges.
	if want := ran.Seconds() * 999; float64(counted[pid]) < want/2 {
		t.Errorf("%d samples of the spinner for %v of CPU at 999 Hz; want ≥ %.0f (lost %+v)", counted[pid], ran, want/2, prof.Lost)
	}
	t.Logf("short-lived loop %d samples, spinner %d samples for %v of CPU, lost %+v", counted[short.Process.Pid], counted[pid], ran, prof.Lost)
}

// manyStacksC spends its time at the bottom of 1024 different call
// paths: ten levels, each through left or right as one bit of the path
// says, so its samples carry about a thousand distinct user stacks.
const manyStacksC = `
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

void left(int level, unsigned path);
void right(int level, unsigned path);

static void step(int level, unsigned path) {
	if (level == 0) {
		for (unsigned long i = 0; i < 20000; i++)
			sink += i;
		return;
	}
	if (path & 1)
		right(level - 1, path >> 1);
	else
		left(level - 1, path >> 1);
	sink++; /* not a tail call: every level keeps its frame */
}

__attribute__((noinline)) void left(int level, unsigned path) { step(level, path); sink++; }
__attribute__((noinline)) void right(int level, unsigned path) { step(level, path); sink++; }

int main(int argc, char **argv) {
	alarm(15);
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	double seconds = argc > 1 ? atof(argv[1]) : 2;
	for (unsigned path = 0;; path = (path + 1) % 1024) {
		left(10, path);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 > seconds)
			return 0;
	}
}
`

// TestManyDistinctStacksAllCounted: a process with hundreds of distinct
// stacks, profiled into a stack map with room for a few thousand, loses
// no sample. A BPF_MAP_TYPE_STACK_TRACE of the same size keeps one stack
// per bucket of hash & (entries - 1) and refuses the others landing
// there: with ~1000 stacks in 4096 buckets about a hundred collide, and every
// later sample of a refused stack was lost (CI once lost 744 of a hot
// loop's 800 samples that way).
func TestManyDistinctStacksAllCounted(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	bin := testutil.BuildC(t, manyStacksC)
	for _, c := range []struct {
		entries int
		full    bool // more distinct stacks than entries: losses, counted
	}{{4096, false}, {64, true}} {
		cmd := exec.Command(bin, "3")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := startProfiler(t, Options{PID: cmd.Process.Pid, Frequency: 999, StackEntries: c.entries})
		time.Sleep(2 * time.Second)
		if err := p.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
		cmd.Process.Kill()
		cmd.Wait()
		prof, err := p.Snapshot()
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		stacks := map[string]bool{}
		var samples uint64
		for _, s := range prof.Samples {
			if len(s.UserStack) == 0 {
				t.Errorf("a sample of the user-mode loop without its user stack: %+v", s)
			}
			stacks[fmt.Sprint(s.UserStack)] = true
			samples += s.Count
		}
		t.Logf("stack map of %d: %d samples, %d distinct user stacks, lost %+v", c.entries, samples, len(stacks), prof.Lost)
		if !c.full {
			if len(stacks) < 500 {
				t.Fatalf("%d distinct user stacks; the test needs hundreds to mean anything", len(stacks))
			}
			if prof.Lost.Total() != 0 {
				t.Errorf("lost %d samples (%+v) with %d distinct stacks in a map of %d", prof.Lost.Total(), prof.Lost, len(stacks), c.entries)
			}
			continue
		}
		// Full: no more stacks than entries were kept, and what did not
		// fit is counted as such, not as a fault.
		if len(stacks) > c.entries || prof.Lost.UserStacksFull == 0 || prof.Lost.UserStackFaults > prof.Lost.UserStacksFull/10 {
			t.Errorf("stack map of %d: %d distinct stacks kept, lost %+v; want at most %d kept and the rest counted as full",
				c.entries, len(stacks), prof.Lost, c.entries)
		}
	}
}
