package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/lab/jvmapp"
)

// nobody is the unprivileged user the JVMs of these tests run as: the
// session directory must belong to the JVM's user, and to nobody else.
const nobody = 65534

// temurin is the second JDK on the project's machines.
const temurin = "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java"

// startSampleAs starts the sample app with java (the default JDK when
// empty) as an unprivileged user, optionally wrapped like startSample.
func startSampleAs(t *testing.T, java string, wrap ...string) *jvmapp.App {
	t.Helper()
	jdk, dir := sampleClasses(t)
	if java == "" {
		java = jdk.Java
	}
	// The app writes the port it bound into its class directory.
	os.Chmod(dir, 0o1777)
	app, err := jvmapp.Start(context.Background(), jvmapp.Config{Java: java, ClassDir: dir, Wrap: wrap,
		JVMArgs: []string{"-Xmx192m", "-Xms192m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1"},
		User:    &syscall.Credential{Uid: nobody, Gid: nobody}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Stop)
	for deadline := time.Now().Add(20 * time.Second); !app.Healthy() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	return app
}

// sessionDirsOf lists the session directories whose owner file names the
// JVM pid, as seen from here (through its root while it runs, else in
// this /tmp).
func sessionDirsOf(pid int) []string {
	tmp := fmt.Sprintf("/proc/%d/root/tmp", pid)
	if _, err := os.Stat(tmp); err != nil {
		tmp = "/tmp"
	}
	owners, _ := filepath.Glob(filepath.Join(tmp, ".perfscope-asprof-*", "owner"))
	var dirs []string
	for _, o := range owners {
		b, _ := os.ReadFile(o)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, fmt.Sprintf("jvm %d ", pid)) {
				dirs = append(dirs, filepath.Dir(o))
			}
		}
	}
	return dirs
}

// recordingDir is the directory (seen from here) of the perfscope session
// whose recording the JVM holds open: async-profiler opens it when
// profiling starts and closes it when profiling stops. "" when none.
func recordingDir(pid int) string {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if strings.Contains(link, "/.perfscope-asprof-") && strings.HasSuffix(link, ".jfr") {
			return fmt.Sprintf("/proc/%d/root%s", pid, filepath.Dir(link))
		}
	}
	return ""
}

func recording(pid int) bool { return recordingDir(pid) != "" }

// profilerStatus asks async-profiler in the JVM, through the attach
// protocol, whether it profiles: "Profiling is running for N seconds",
// "Profiler is not active", or "not loaded".
func profilerStatus(t *testing.T, pid int) string {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	lib := ""
	for _, line := range strings.Split(string(maps), "\n") {
		if i := strings.Index(line, "/"); i > 0 && strings.Contains(line, "/libasyncProfiler.so") {
			lib = strings.TrimSuffix(line[i:], " (deleted)")
			break
		}
	}
	if lib == "" {
		return "not loaded"
	}
	target, err := attach.Preflight(hsperf.Default, pid)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(fmt.Sprintf("/proc/%d/root/tmp", pid), "perfscope-test-status-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, _ := os.Stat(fmt.Sprintf("/proc/%d", pid))
	uid := st.Sys().(*syscall.Stat_t).Uid
	os.Chown(dir, int(uid), int(uid))
	inJVM := "/tmp/" + filepath.Base(dir)
	if _, err := target.Load(context.Background(), lib, "status,file="+inJVM+"/status,log="+inJVM+"/log"); err != nil {
		t.Fatalf("status through %s: %v", lib, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// startPerfscopeJVM starts a perfscope jvm run in the background.
func startPerfscopeJVM(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(Perfscope(t), append([]string{"jvm"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, &out
}

// waitFor polls cond every millisecond until it holds, or fails.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func hasSocket(pid int) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.HasPrefix(link, "socket:") {
			return true
		}
	}
	return false
}

// checkPrivate checks that a running session's directory and files are
// the JVM user's and nobody else's, its owner file perfscope's.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	check := func(p string, wantMode os.FileMode, wantUID uint32) {
		st, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%v", err)
			return
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; st.Mode() != wantMode || uid != wantUID {
			t.Errorf("%s: mode %v uid %d, want %v uid %d", p, st.Mode(), uid, wantMode, wantUID)
		}
	}
	check(dir, os.ModeDir|0o700, nobody)
	check(filepath.Join(dir, "owner"), 0o600, 0)
	for _, f := range []string{"libasyncProfiler.so", "profile.jfr", "agent.log"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			check(filepath.Join(dir, f), 0o600, nobody)
		}
	}
}

// A perfscope killed with SIGKILL at any moment of its run leaves a session
// the next run on the JVM takes over: it measures, and afterwards
// async-profiler no longer runs in the JVM and the killed run's files are
// gone. While a run profiles, its directory is 0700 and its files 0600.
// Both JDKs on the machine, the JVM running as an unprivileged user.
func TestJVMKilledPerfscopeIsTakenOver(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	jdks := map[string]string{"jdk17": ""}
	if _, err := os.Stat(temurin); err == nil {
		jdks["temurin25"] = temurin
	}
	for name, java := range jdks {
		t.Run(name, func(t *testing.T) {
			app := startSampleAs(t, java)
			pid := fmt.Sprint(app.PID)
			warmUp(t, app, "/alloc?kb=16")
			for _, moment := range []string{"session created", "profiler started", "mid-window", "during stop"} {
				t.Run(moment, func(t *testing.T) {
					duration := "60s"
					if moment == "during stop" {
						duration = "3s"
					}
					cmd, _ := startPerfscopeJVM(t, "--pid", pid, "--duration", duration, "--requests", "1000", "--count", "off", "-o", "json")
					var dir string
					switch moment {
					case "session created":
						waitFor(t, "the session directory's owner file", 60*time.Second, func() bool {
							if dirs := sessionDirsOf(app.PID); len(dirs) == 1 {
								dir = dirs[0]
							}
							return dir != ""
						})
					default:
						waitFor(t, "the recording", 60*time.Second, func() bool {
							dir = recordingDir(app.PID)
							return dir != ""
						})
					}
					switch moment {
					case "profiler started", "mid-window":
						checkPrivate(t, dir)
						if moment == "mid-window" {
							time.Sleep(3 * time.Second) // past the 2 s settle
						}
					case "during stop":
						// The start command's connection closes once its
						// reply is read; then perfscope holds no socket
						// until the stop command.
						waitFor(t, "the start command's end", 5*time.Second, func() bool { return !hasSocket(cmd.Process.Pid) })
						// Frozen, the JVM cannot answer the stop command:
						// perfscope is killed while it waits for the reply.
						syscall.Kill(app.PID, syscall.SIGSTOP)
						waitFor(t, "the stop command", 30*time.Second, func() bool { return hasSocket(cmd.Process.Pid) })
					}
					cmd.Process.Kill()
					cmd.Wait()
					syscall.Kill(app.PID, syscall.SIGCONT)
					code, r, stderr := perfscopeJVM(t, nil, "--pid", pid, "--load", app.URL("/alloc?kb=16"), "--requests", "400", "--count", "off")
					if code != 0 {
						t.Fatalf("next run: exit %d: %s", code, stderr)
					}
					if r.Data.Requests != 400 || r.Data.AllocBytesProfiler <= 0 {
						t.Errorf("next run measured requests %d, %d bytes", r.Data.Requests, r.Data.AllocBytesProfiler)
					}
					if moment != "session created" && !strings.Contains(stderr, fmt.Sprintf("perfscope pid %d ended without stopping its session", cmd.Process.Pid)) {
						t.Errorf("the takeover was not reported: %q", stderr)
					}
					if status := profilerStatus(t, app.PID); status != "Profiler is not active" {
						t.Errorf("async-profiler after the next run: %q", status)
					}
					if recording(app.PID) {
						t.Error("the JVM still holds a recording open")
					}
					if _, err := os.Lstat(dir); dir != "" && !errors.Is(err, os.ErrNotExist) {
						t.Errorf("the killed run's directory %s is still there: %v", dir, err)
					}
					if left := sessionDirsOf(app.PID); len(left) > 0 {
						t.Errorf("left in the JVM's /tmp: %v", left)
					}
					if !app.Healthy() {
						t.Fatal("the JVM stopped answering")
					}
				})
			}
		})
	}
}

type stopReport struct {
	Data struct {
		PID       int      `json:"pid"`
		Stopped   bool     `json:"stopped"`
		RanForNs  int64    `json:"ran_for_ns"`
		OwnerPIDs []int    `json:"owner_pids"`
		Removed   []string `json:"removed"`
		Notes     []string `json:"notes"`
	} `json:"data"`
}

func perfscopeStop(t *testing.T, args ...string) (int, stopReport, string) {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), append([]string{"jvm"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r stopReport
	if strings.Contains(strings.Join(args, " "), "json") && code == 0 {
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("bad JSON: %v\n%s", err, out.String())
		}
	}
	return code, r, out.String() + stderr.String()
}

// `perfscope jvm --stop PID` stops what a killed perfscope left running
// and removes its files; with nothing left it says so (exit 0); a session
// whose perfscope still runs is left alone, by --stop and by a run (exit 3,
// naming that perfscope's pid).
func TestJVMStopLeftover(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSampleAs(t, "")
	pid := fmt.Sprint(app.PID)

	live, _ := startPerfscopeJVM(t, "--pid", pid, "--duration", "60s", "--requests", "1000", "--count", "off", "-o", "json")
	waitFor(t, "the recording", 60*time.Second, func() bool { return recording(app.PID) })
	owner := fmt.Sprintf("perfscope pid %d is profiling this JVM", live.Process.Pid)
	if code, _, out := perfscopeStop(t, "--stop", pid); code != 3 || !strings.Contains(out, owner) {
		t.Errorf("--stop beside a live run: exit %d %q, want 3 naming pid %d", code, out, live.Process.Pid)
	}
	if code, _, stderr := perfscopeJVM(t, nil, "--pid", pid, "--duration", "1s", "--count", "off"); code != 3 || !strings.Contains(stderr, owner) {
		t.Errorf("a second run beside a live run: exit %d %q, want 3 naming pid %d", code, stderr, live.Process.Pid)
	}
	if status := profilerStatus(t, app.PID); !strings.HasPrefix(status, "Profiling is running") {
		t.Errorf("the live run's profiler was disturbed: %q", status)
	}
	dir := sessionDirsOf(app.PID)
	time.Sleep(time.Second) // async-profiler counts whole seconds
	live.Process.Kill()
	live.Wait()

	code, r, out := perfscopeStop(t, "--stop", pid, "-o", "json")
	if code != 0 || !r.Data.Stopped || len(r.Data.OwnerPIDs) != 1 || r.Data.OwnerPIDs[0] != live.Process.Pid || len(r.Data.Removed) != 1 || r.Data.RanForNs <= 0 {
		t.Errorf("--stop after the kill: exit %d %+v %s", code, r.Data, out)
	}
	if status := profilerStatus(t, app.PID); status != "Profiler is not active" {
		t.Errorf("async-profiler after --stop: %q", status)
	}
	if len(dir) != 1 {
		t.Fatalf("session directories while the run ran: %v", dir)
	}
	if _, err := os.Lstat(dir[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there: %v", dir[0], err)
	}
	if code, _, out := perfscopeStop(t, "--stop", pid); code != 0 || !strings.Contains(out, "nothing to stop") {
		t.Errorf("--stop with nothing left: exit %d %q", code, out)
	}
	for _, args := range [][]string{{"--stop", pid, "--duration", "5s"}, {"--stop", pid, "--pid", "1"}, {"--stop", "-3"}} {
		if code, _, out := perfscopeStop(t, args...); code != 2 {
			t.Errorf("%q: exit %d %q, want 2", args, code, out)
		}
	}
	if left := sessionDirsOf(app.PID); len(left) > 0 {
		t.Errorf("left in the JVM's /tmp: %v", left)
	}
	if !app.Healthy() {
		t.Fatal("the JVM stopped answering")
	}
}

// The session a killed perfscope left in a JVM that later exited is
// removed by the next perfscope jvm run on any JVM sharing its /tmp; while
// that JVM runs, the run only says how to stop it.
func TestJVMSweepsSessionsOfExitedJVMs(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	orphan := startSampleAs(t, "")
	other := startSampleAs(t, "")
	killed, _ := startPerfscopeJVM(t, "--pid", fmt.Sprint(orphan.PID), "--duration", "60s", "--requests", "1000", "--count", "off")
	waitFor(t, "the recording", 60*time.Second, func() bool { return recording(orphan.PID) })
	dirs := sessionDirsOf(orphan.PID)
	killed.Process.Kill()
	killed.Wait()
	if len(dirs) != 1 {
		t.Fatalf("session directories: %v", dirs)
	}
	// Seen from here: the JVMs share this /tmp.
	dir := filepath.Join("/tmp", filepath.Base(dirs[0]))

	code, _, stderr := perfscopeJVM(t, nil, "--pid", fmt.Sprint(other.PID), "--duration", "1s", "--count", "off")
	if code != 0 || !strings.Contains(stderr, fmt.Sprintf("`perfscope jvm --stop %d`", orphan.PID)) {
		t.Errorf("run beside a live orphaned session: exit %d %q", code, stderr)
	}
	if _, err := os.Lstat(dir); err != nil {
		t.Fatalf("the session of a JVM that still runs was removed: %v", err)
	}
	orphan.Stop()
	code, _, stderr = perfscopeJVM(t, nil, "--pid", fmt.Sprint(other.PID), "--duration", "1s", "--count", "off")
	if code != 0 || !strings.Contains(stderr, "removed "+filepath.Join("/tmp", filepath.Base(dir))) {
		t.Errorf("run after the JVM exited: exit %d %q", code, stderr)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s of an exited JVM is still there: %v", dir, err)
	}
}

// A perfscope that recorded no owner file (the versions before owner
// files) left async-profiler running from /tmp/.perfscope-asprof-<digest>/
// with its recording beside the library, in a directory it shared with the
// sessions of other JVMs: a run says how to stop it (exit 3), `--stop`
// stops it and removes this JVM's files — only those — and the next run
// measures. The JVM has a /tmp of its own, so that the directory, named
// after the library, is not shared with other runs on this machine.
func TestJVMStopsUnownedSession(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSample(t, nil, "unshare", "--mount", "--fork", "sh", "-c", "mount -t tmpfs tmpfs /tmp && exec")
	pid := fmt.Sprint(app.PID)
	lib, err := asprof.Locator{}.Library(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	name := ".perfscope-asprof-" + hex.EncodeToString(sum[:6])
	dir := fmt.Sprintf("/proc/%d/root/tmp/%s", app.PID, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "libasyncProfiler.so"), b, 0o644)
	others := filepath.Join(dir, "fedcba987654.jfr")
	os.WriteFile(others, []byte("another JVM's recording"), 0o644)
	target, err := attach.Preflight(hsperf.Default, app.PID)
	if err != nil {
		t.Fatal(err)
	}
	inJVM := "/tmp/" + name
	if _, err := target.Load(context.Background(), inJVM+"/libasyncProfiler.so", "start,event=alloc,jfr,file="+inJVM+"/0123456789ab.jfr,log="+inJVM+"/0123456789ab.log"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the recording", 10*time.Second, func() bool {
		st, err := os.Stat(filepath.Join(dir, "0123456789ab.jfr"))
		return err == nil && st.Size() > 0
	})

	if code, _, stderr := perfscopeJVM(t, nil, "--pid", pid, "--duration", "1s", "--count", "off"); code != 3 || !strings.Contains(stderr, "`perfscope jvm --stop "+pid+"`") {
		t.Errorf("run: exit %d %q, want 3 pointing at --stop", code, stderr)
	}
	code, r, out := perfscopeStop(t, "--stop", pid, "-o", "json")
	if code != 0 || !r.Data.Stopped || len(r.Data.OwnerPIDs) != 0 || len(r.Data.Notes) != 1 || !strings.Contains(r.Data.Notes[0], "the directory stays") {
		t.Errorf("--stop: exit %d %+v %s", code, r.Data, out)
	}
	if status := profilerStatus(t, app.PID); status != "Profiler is not active" {
		t.Errorf("async-profiler after --stop: %q", status)
	}
	for _, f := range []string{"0123456789ab.jfr", "0123456789ab.log"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", f, err)
		}
	}
	if _, err := os.Lstat(others); err != nil {
		t.Errorf("another session's file was removed: %v", err)
	}
	os.Remove(others)
	if code, r, out := perfscopeStop(t, "--stop", pid, "-o", "json"); code != 0 || r.Data.Stopped || len(r.Data.Removed) != 1 {
		t.Errorf("--stop once only the library is left: exit %d %+v %s", code, r.Data, out)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there: %v", dir, err)
	}
	code, jr, stderr := perfscopeJVM(t, nil, "--pid", pid, "--load", app.URL("/alloc?kb=16"), "--requests", "400", "--count", "off")
	if code != 0 || jr.Data.AllocBytesProfiler <= 0 {
		t.Errorf("next run: exit %d, %d bytes: %s", code, jr.Data.AllocBytesProfiler, stderr)
	}
	if status := profilerStatus(t, app.PID); status != "Profiler is not active" {
		t.Errorf("async-profiler after the next run: %q", status)
	}
}
