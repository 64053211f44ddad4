package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/jvmapp"
)

// sampleClasses compiles the sample app for one test, outside /tmp so a
// JVM with a private /tmp (the namespace test) still finds it.
func sampleClasses(t *testing.T) (jvmapp.JDK, string) {
	t.Helper()
	jdk, err := jvmapp.FindJDK()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "perfscope-jvmapp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := jdk.Build(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	return jdk, dir
}

func startSample(t *testing.T, jvmArgs []string, wrap ...string) *jvmapp.App {
	t.Helper()
	jdk, dir := sampleClasses(t)
	args := append([]string{"-Xmx192m", "-Xms192m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1"}, jvmArgs...)
	app, err := jvmapp.Start(context.Background(), jvmapp.Config{Java: jdk.Java, ClassDir: dir, JVMArgs: args, Wrap: wrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Stop)
	// The JVM answers HTTP before hsperfdata says init is done only in
	// theory; wait for the counters so the preflight is deterministic.
	deadline := time.Now().Add(20 * time.Second)
	for !app.Healthy() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	return app
}

type jvmReport struct {
	Findings []struct {
		ID string `json:"id"`
	} `json:"findings"`
	Data struct {
		PID                 int     `json:"pid"`
		WindowNs            int64   `json:"window_ns"`
		NSPID               int     `json:"nspid"`
		Requests            int64   `json:"requests"`
		AllocBytesProfiler  int64   `json:"alloc_bytes_profiler"`
		AllocBytesEden      int64   `json:"alloc_bytes_eden"`
		BytesPerRequest     float64 `json:"bytes_per_request"`
		BytesPerRequestEden float64 `json:"bytes_per_request_eden"`
		EdenCapacity        int64   `json:"eden_capacity"`
		Sites               []struct {
			Frame   string `json:"frame"`
			Logging string `json:"logging"`
		} `json:"sites"`
		Logging struct {
			Bytes           int64            `json:"bytes"`
			Share           float64          `json:"share"`
			BytesPerRequest float64          `json:"bytes_per_request"`
			ByFramework     map[string]int64 `json:"by_framework"`
		} `json:"logging"`
		Load *struct {
			Completed int64 `json:"completed"`
			Failures  int64 `json:"failures"`
		} `json:"load"`
	} `json:"data"`
}

// perfscopeJVM runs the binary and returns its exit code, JSON report and
// stderr.
func perfscopeJVM(t *testing.T, env []string, args ...string) (int, jvmReport, string) {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), append([]string{"jvm", "-o", "json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Env = append(os.Environ(), env...)
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r jvmReport
	if code == 0 {
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("bad JSON: %v\n%s", err, out.String())
		}
	}
	return code, r, stderr.String()
}

func warmUp(t *testing.T, app *jvmapp.App, path string) {
	t.Helper()
	// Drive the handler until the JIT compiled it, so the measured window
	// is the steady state; perfscope's own load counts exactly.
	code, _, stderr := perfscopeJVM(t, nil, "--pid", fmt.Sprint(app.PID), "--event", "cpu", "--load", app.URL(path), "--requests", "1500")
	if code != 0 {
		t.Fatalf("warm-up run: exit %d: %s", code, stderr)
	}
}

func TestJVMBytesPerRequest(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSample(t, nil)
	pid := fmt.Sprint(app.PID)
	perRequest := map[string]jvmReport{}
	for _, ep := range []string{"/alloc?kb=0", "/alloc?kb=256", "/log"} {
		warmUp(t, app, ep)
		code, r, stderr := perfscopeJVM(t, nil, "--pid", pid, "--load", app.URL(ep), "--requests", "3000", "--concurrency", "4")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", ep, code, stderr)
		}
		if r.Data.Requests != 3000 || r.Data.Load == nil || r.Data.Load.Failures != 0 {
			t.Fatalf("%s: requests %d load %+v", ep, r.Data.Requests, r.Data.Load)
		}
		if r.Data.AllocBytesProfiler <= 0 || r.Data.AllocBytesEden <= 0 || r.Data.EdenCapacity <= 0 {
			t.Fatalf("%s: profiler %d eden %d capacity %d", ep, r.Data.AllocBytesProfiler, r.Data.AllocBytesEden, r.Data.EdenCapacity)
		}
		perRequest[ep] = r
		t.Logf("%s: %.1f KiB/request (profiler), %.1f KiB/request (Eden), logging %.1f KiB/request",
			ep, r.Data.BytesPerRequest/1024, r.Data.BytesPerRequestEden/1024, r.Data.Logging.BytesPerRequest/1024)
	}
	extra := perRequest["/alloc?kb=256"].Data.BytesPerRequest - perRequest["/alloc?kb=0"].Data.BytesPerRequest
	if want := 256.0 * 1024; extra < want*0.9 || extra > want*1.1 {
		t.Errorf("/alloc?kb=256 − /alloc?kb=0 = %.1f KiB per request, want 256 KiB ± 10%%", extra/1024)
	}
	extraEden := perRequest["/alloc?kb=256"].Data.BytesPerRequestEden - perRequest["/alloc?kb=0"].Data.BytesPerRequestEden
	if want := 256.0 * 1024; extraEden < want*0.8 || extraEden > want*1.2 {
		t.Errorf("hsperfdata Eden: /alloc?kb=256 − /alloc?kb=0 = %.1f KiB per request, want 256 KiB ± 20%%", extraEden/1024)
	}
	l := perRequest["/log"].Data.Logging
	if l.ByFramework["java.util.logging"] <= 0 || l.BytesPerRequest <= 0 || l.Share <= 0.05 {
		t.Errorf("/log: logging not reported: %+v", l)
	}
	if perRequest["/alloc?kb=0"].Data.Logging.Share > 0.01 {
		t.Errorf("/alloc?kb=0 reports logging: %+v", perRequest["/alloc?kb=0"].Data.Logging)
	}
	grouped := false
	for _, s := range perRequest["/log"].Data.Sites {
		grouped = grouped || s.Logging == "java.util.logging"
		if s.Logging == "" && strings.Contains(s.Frame, "java.util.logging") {
			t.Errorf("logging frame outside the logging group: %s", s.Frame)
		}
	}
	if !grouped {
		t.Error("no grouped java.util.logging site on /log")
	}
	if !app.Healthy() {
		t.Error("the sample app stopped answering")
	}
}

// The JVM runs in its own mount and pid namespaces with a private /tmp:
// perfscope reaches its hsperfdata and attach socket through
// /proc/PID/root under its namespaced pid.
func TestJVMInOtherNamespaces(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSample(t, nil, "unshare", "--mount", "--pid", "--fork", "--mount-proc", "sh", "-c", "mount -t tmpfs tmpfs /tmp && exec")
	code, r, stderr := perfscopeJVM(t, nil, "--pid", fmt.Sprint(app.PID), "--load", app.URL("/alloc?kb=64"), "--requests", "1000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if r.Data.NSPID != 1 || r.Data.PID != app.PID {
		t.Errorf("pid %d nspid %d, want host pid %d and nspid 1", r.Data.PID, r.Data.NSPID, app.PID)
	}
	if r.Data.BytesPerRequest < 64*1024 {
		t.Errorf("%.1f KiB per request for /alloc?kb=64", r.Data.BytesPerRequest/1024)
	}
	if _, err := os.Stat(fmt.Sprintf("/tmp/hsperfdata_root/%d", app.PID)); err == nil {
		t.Error("the namespaced JVM's hsperfdata is visible in the host /tmp: the namespace rig did not work")
	}
	leftovers, _ := filepath.Glob(fmt.Sprintf("/proc/%d/root/tmp/.perfscope-asprof-*", app.PID))
	if len(leftovers) > 0 {
		t.Errorf("left in the JVM's /tmp: %v", leftovers)
	}
}

// Each bad input gets its exit code and one sentence, and the JVM keeps
// running and serving.
func TestJVMBadInputLeavesTargetRunning(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	xrs := startSample(t, []string{"-Xrs"})
	noAttach := startSample(t, []string{"-XX:+DisableAttachMechanism"})
	healthy := startSample(t, nil)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	dead := exec.Command("true")
	dead.Run()

	// No async-profiler anywhere, and Maven offline (its settings come
	// from user.home, not $HOME): the fetch fails.
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".m2"), 0o755)
	os.WriteFile(filepath.Join(home, ".m2", "settings.xml"), []byte("<settings><offline>true</offline></settings>\n"), 0o644)
	offline := []string{"HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, "cache"), "PERFSCOPE_ASYNC_PROFILER=", "MAVEN_OPTS=-Duser.home=" + home, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

	for _, tc := range []struct {
		name    string
		pid     int
		env     []string
		code    int
		mention string
		app     *jvmapp.App
	}{
		{"dead pid", dead.ProcessState.Pid(), nil, 2, "no such process (not running)", nil},
		{"not a JVM", sleeper.Process.Pid, nil, 2, "not a HotSpot JVM", nil},
		// -Xrs: HotSpot opened the attach socket at start-up, so no
		// signal is needed and none is sent.
		{"-Xrs with its attach socket open", xrs.PID, nil, 0, "", xrs},
		{"attach disabled", noAttach.PID, nil, 3, "DisableAttachMechanism", noAttach},
		{"no network to fetch async-profiler", healthy.PID, offline, 3, "--async-profiler", healthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := perfscopeJVM(t, tc.env, "--pid", fmt.Sprint(tc.pid), "--duration", "1s")
			if code != tc.code || !strings.Contains(stderr, tc.mention) {
				t.Errorf("exit %d, want %d; stderr %q should mention %q", code, tc.code, stderr, tc.mention)
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines > 1 {
				t.Errorf("more than one sentence: %q", stderr)
			}
			if tc.app != nil {
				time.Sleep(300 * time.Millisecond)
				if !tc.app.Running() || !tc.app.Healthy() {
					t.Fatalf("the JVM (pid %d) no longer runs or answers", tc.pid)
				}
			}
			if tc.name == "not a JVM" && sleeper.ProcessState != nil {
				t.Fatal("the non-JVM process died")
			}
		})
	}
	if err := syscall.Kill(sleeper.Process.Pid, 0); err != nil {
		t.Errorf("the non-JVM process died: %v", err)
	}
}

// Ctrl-C mid-window stops async-profiler in the JVM and leaves no files:
// a second session can start (it could not if the profiler still ran).
func TestJVMInterruptStopsProfiler(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSample(t, nil)
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), "jvm", "--pid", fmt.Sprint(app.PID), "--duration", "60s", "--requests", "60000", "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the profiler runs in the JVM: its log file appears.
	waitProfilerStarted(t, app.PID, cmd, &stderr)
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGINT: %v: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("perfscope did not stop on SIGINT")
	}
	var r jvmReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("no report after SIGINT: %v", err)
	}
	// --requests 60000 was for 60 s: the measured part of the window is
	// charged its share (1000/s), not all of it, and the report says so.
	window := float64(r.Data.WindowNs) / 1e9
	if want := 1000 * window; math.Abs(float64(r.Data.Requests)-want) > 0.02*want+1 || !strings.Contains(stderr.String(), "scaled") {
		t.Errorf("requests %d over %.1fs, want about %.0f; stderr %q", r.Data.Requests, window, want, stderr.String())
	}
	if left := sessionDirsOf(app.PID); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	code, _, errOut := perfscopeJVM(t, nil, "--pid", fmt.Sprint(app.PID), "--duration", "1s")
	if code != 0 {
		t.Errorf("second session after SIGINT: exit %d: %s (profiler still running?)", code, errOut)
	}
	if !app.Healthy() {
		t.Error("the JVM stopped answering")
	}
}

// kill -9 mid-window: perfscope notices at once, reports what it measured,
// exits 4 and leaves nothing in the JVM's /tmp.
func TestJVMDiesMidRun(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	jdk, dir := sampleClasses(t)
	app, err := jvmapp.Start(context.Background(), jvmapp.Config{Java: jdk.Java, ClassDir: dir, JVMArgs: []string{"-Xmx128m", "-XX:+UseG1GC"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Stop)
	for deadline := time.Now().Add(20 * time.Second); !app.Healthy() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), "jvm", "--pid", fmt.Sprint(app.PID), "--duration", "30s", "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitProfilerStarted(t, app.PID, cmd, &stderr)
	time.Sleep(time.Second)
	killed := time.Now()
	syscall.Kill(app.PID, syscall.SIGKILL)
	err = cmd.Wait()
	took := time.Since(killed)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Errorf("exit %v, want 4; stderr %q", err, stderr.String())
	}
	if took > 5*time.Second {
		t.Errorf("perfscope took %v to notice the JVM died", took)
	}
	var r struct {
		Data struct {
			WindowNs int64 `json:"window_ns"`
			YoungGCs int64 `json:"young_gcs"`
		} `json:"data"`
		Error struct {
			ExitCode int    `json:"exit_code"`
			Message  string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("no JSON report: %v\n%s", err, out.String())
	}
	if r.Error.ExitCode != 4 || r.Data.WindowNs <= 0 || r.Data.WindowNs > int64(10*time.Second) || !strings.Contains(stderr.String(), "exited during the measurement") {
		t.Errorf("report %+v stderr %q", r, stderr.String())
	}
	if left := sessionDirsOf(app.PID); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// waitProfilerStarted waits until async-profiler runs in the JVM (it holds
// the recording perfscope named in the start command open), or kills the
// perfscope run cmd and fails.
func waitProfilerStarted(t *testing.T, pid int, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if recording(pid) {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("profiler never started: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Without --alloc-interval and without --load, the interval comes from
// the allocation rate before the window: a service taking a steady
// 200 requests/s of 32 KiB each (about 7 MB/s) gets about 2500 samples
// in a 5 s window and bytes per request within ±5 %, where async-profiler's
// 512 KiB gave about 65 samples and ±25 %; the figure holds at least the
// 32 KiB the handler allocates. The warm-up before (a closed loop, four
// times the rate) is over: the rate is read fresh, not since the last GC.
func TestJVMAllocIntervalFromTheRate(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSample(t, nil)
	warmUp(t, app, "/alloc?kb=32")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	loaded := make(chan int64, 1)
	go func() { loaded <- client(ctx, app, 200*30, 200, "/alloc?kb=32&i=") }()
	defer func() { stop(); <-loaded }()
	time.Sleep(3 * time.Second) // a steady rate before perfscope reads it
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), "jvm", "-o", "json", "--pid", fmt.Sprint(app.PID), "-d", "5s")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("perfscope jvm: %v\n%s", err, stderr.String())
	}
	var r struct {
		Data evidence.JVM `json:"data"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	d, a := r.Data, r.Data.AllocSampling
	if a == nil || d.BytesPerRequest == nil || d.BytesPerRequestError == nil || d.Requests == nil {
		t.Fatalf("no sampled bytes per request: %s", out.String())
	}
	t.Logf("interval %d (%s): %d samples, ±%.1f %%; %.0f ±%.0f B per request over %d requests",
		a.IntervalBytes, a.IntervalNote, a.Samples, 100*a.RelativeError, *d.BytesPerRequest, *d.BytesPerRequestError, *d.Requests)
	if !a.IntervalAuto || a.RateBefore <= 0 || a.Samples < 1500 || a.RelativeError > 0.05 {
		t.Errorf("interval %d auto %v from %.0f B/s: %d samples, ±%.1f %%: want about 2500 samples, ±4 %%",
			a.IntervalBytes, a.IntervalAuto, a.RateBefore, a.Samples, 100*a.RelativeError)
	}
	const handler = 32 << 10
	if got, err := *d.BytesPerRequest, *d.BytesPerRequestError; got+err < handler {
		t.Errorf("%.0f ±%.0f B per request: the handler alone allocates %d", got, err, handler)
	}
}
