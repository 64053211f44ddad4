package asprof

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/internal/testutil"
)

func TestMarkerRoundTrip(t *testing.T) {
	m := marker{Owner: procID{4242, 123456}, PIDNS: 4026531836, Created: time.Unix(1700000000, 0), JVM: procID{77, 99}, JVMNSPID: 1, JVMUID: 65534, Lib: "/tmp/.perfscope-asprof-0123456789ab/libasyncProfiler.so"}
	got, err := parseMarker(m.encode())
	if err != nil || got != m {
		t.Fatalf("%+v %v, want %+v", got, err, m)
	}
	m.Lib = ""
	if got, err := parseMarker(m.encode()); err != nil || got != m {
		t.Fatalf("no library: %+v %v", got, err)
	}
	for _, bad := range []string{
		"",
		"owner 1 2\n",
		markerMagic + "\nowner 1 2\npidns 3\ncreated 4\n",                         // no jvm
		markerMagic + "\nowner 1\npidns 3\ncreated 4\njvm 1 2 3 4\n",              // short owner
		markerMagic + "\nowner -1 2\npidns 3\ncreated 4\njvm 1 2 3 4\n",           // negative
		markerMagic + "\nowner 0 2\npidns 3\ncreated 4\njvm 1 2 3 4\n",            // pid 0
		markerMagic + "\nowner 1 2\nowner 1 2\npidns 3\ncreated 4\njvm 1 2 3 4\n", // twice
		markerMagic + "\nowner 1 2\npidns 3\ncreated 4\njvm 1 2 3 4\nlib relative.so\n",
		markerMagic + "\nowner 1 2\npidns 3\ncreated 4\njvm 1 2 3 4\nrm -rf /\n",
	} {
		if _, err := parseMarker([]byte(bad)); !errors.Is(err, errBadMarker) {
			t.Errorf("%q: %v, want errBadMarker", bad, err)
		}
	}
}

func TestSessionNames(t *testing.T) {
	for name, want := range map[string]bool{
		".perfscope-asprof-0123456789ab":  true,
		".perfscope-asprof-8d16556469ad":  true,
		".perfscope-asprof-0123456789AB":  false,
		".perfscope-asprof-0123456789":    false,
		".perfscope-asprof-0123456789abc": false,
		".perfscope-asprof-../../etc":     false,
		"perfscope-asprof-0123456789ab":   false,
	} {
		if got := isSessionName(name); got != want {
			t.Errorf("%q: %v", name, got)
		}
	}
	for lib, want := range map[string]bool{
		"/tmp/.perfscope-asprof-0123456789ab/libasyncProfiler.so":   true,
		"/opt/async-profiler/lib/libasyncProfiler.so":               false,
		"/tmp/.perfscope-asprof-0123456789ab/x/libasyncProfiler.so": false,
		"/tmp/.perfscope-asprof-0123456789ab/libother.so":           false,
	} {
		if got := perfscopeLibrary(lib); got != want {
			t.Errorf("%s: %v", lib, got)
		}
	}
}

func TestParseMaps(t *testing.T) {
	maps := `55d0c0000000-55d0c0001000 r--p 00000000 fe:00 1234                       /usr/lib/jvm/java-17-openjdk-amd64/bin/java
7f3d583ae000-7f3d583b5000 r--p 00000000 fe:00 9986303                    /tmp/.perfscope-asprof-8d16556469ad/libasyncProfiler.so
7f3d583b5000-7f3d58409000 r-xp 00007000 fe:00 9986303                    /tmp/.perfscope-asprof-8d16556469ad/libasyncProfiler.so
7f21f0880000-7f21f0887000 r--p 00000000 fe:00 9986787                    /tmp/my dir/libasyncProfiler.so (deleted)
7f21f0890000-7f21f0897000 rw-p 00000000 00:00 0
7f21f08a0000-7f21f08a7000 r--p 00000000 fe:00 5                          [vdso]
`
	got := parseMaps(bufio.NewScanner(strings.NewReader(maps)))
	want := []mappedLibrary{{Path: "/tmp/.perfscope-asprof-8d16556469ad/libasyncProfiler.so"}, {Path: "/tmp/my dir/libasyncProfiler.so", Deleted: true}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("%+v", got)
	}
	if reusableLibrary(got) != want[0].Path || reusableLibrary(got[1:]) != want[1].Path || reusableLibrary(nil) != "" {
		t.Error("reusableLibrary")
	}
}

func TestJudge(t *testing.T) {
	me := self{id: procID{10, 1}, pidns: 5}
	target := jvmID{procID: procID{20, 2}, NSPID: 1}
	live := map[procID]bool{{11, 1}: true, {30, 3}: true}
	runs := func(p procID) bool { return live[p] }
	for _, tc := range []struct {
		name string
		m    *marker
		want verdict
	}{
		{"no owner file", nil, interrupted},
		{"target, owner runs", &marker{Owner: procID{11, 1}, PIDNS: 5, JVM: procID{20, 2}}, busy},
		{"target, owner gone", &marker{Owner: procID{12, 1}, PIDNS: 5, JVM: procID{20, 2}}, takeOver},
		{"target's pid reused by another JVM", &marker{Owner: procID{12, 1}, PIDNS: 5, JVM: procID{20, 9}}, sweep},
		{"owner's pid reused", &marker{Owner: procID{11, 7}, PIDNS: 5, JVM: procID{20, 2}}, takeOver},
		{"other JVM, owner runs", &marker{Owner: procID{11, 1}, PIDNS: 5, JVM: procID{30, 3}}, leave},
		{"other JVM runs, owner gone", &marker{Owner: procID{12, 1}, PIDNS: 5, JVM: procID{30, 3}}, orphaned},
		{"both gone", &marker{Owner: procID{12, 1}, PIDNS: 5, JVM: procID{31, 3}}, sweep},
		{"other pid namespace", &marker{Owner: procID{12, 1}, PIDNS: 6, JVM: procID{31, 3}}, leave},
		{"other pid namespace, the target", &marker{Owner: procID{12, 1}, PIDNS: 6, JVM: procID{99, 2}, JVMNSPID: 1}, busy},
	} {
		if got := judge(foundDir{m: tc.m}, me, target, runs); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// Sweeping perfscope's own /tmp targets no JVM.
	if got := judge(foundDir{m: &marker{Owner: procID{12, 1}, PIDNS: 5, JVM: procID{30, 3}}}, me, jvmID{}, runs); got != orphaned {
		t.Errorf("no target: %v", got)
	}
}

// testTmp is a directory standing in for /tmp, and its descriptor.
func testTmp(t *testing.T) (string, int) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o1777)
	fd, err := openTmp(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return dir, fd
}

func mustSelf(t *testing.T) self {
	t.Helper()
	me, err := currentSelf()
	if err != nil {
		t.Fatal(err)
	}
	return me
}

// deadProcess is a process that ran and was reaped.
func deadProcess(t *testing.T) procID {
	t.Helper()
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := procfs.Default.ProcessStartTicks(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return procID{cmd.Process.Pid, start}
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode()
}

// A session directory is private (0700, files 0600, the owner file
// included), names its owner, and is removed whole — but only what a
// session puts there.
func TestSessionDirIsPrivateAndRemoved(t *testing.T) {
	dir, tmp := testTmp(t)
	me := mustSelf(t)
	m := marker{Owner: me.id, PIDNS: me.pidns, Created: time.Now(), JVM: procID{1, 1}, JVMUID: me.euid}
	d, err := createSessionDir(tmp, me, m, true, me.euid, me.egid, jfrFile)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if err := d.writeFile(libraryName, []byte("ELF"), true); err != nil {
		t.Fatal(err)
	}
	if err := d.handOver(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, d.name)
	if got := mode(t, path); got != os.ModeDir|0o700 {
		t.Errorf("directory mode %v", got)
	}
	for _, f := range []string{markerFile, logFile, jfrFile, libraryName} {
		if got := mode(t, filepath.Join(path, f)); got != 0o600 {
			t.Errorf("%s: mode %v", f, got)
		}
	}
	got, err := d.readMarker()
	if err != nil || got.Lib != d.jvmPath(libraryName) || got.Owner != me.id {
		t.Fatalf("owner file %+v %v", got, err)
	}
	// Something perfscope did not put there keeps the directory.
	os.WriteFile(filepath.Join(path, "theirs"), nil, 0o600)
	if gone, err := d.remove(); gone || err == nil {
		t.Errorf("removed a directory holding another file: %v %v", gone, err)
	}
	if left, _ := os.ReadDir(path); len(left) != 1 || left[0].Name() != "theirs" {
		t.Errorf("left %v, want only theirs", left)
	}
	os.Remove(filepath.Join(path, "theirs"))
	if gone, err := d.remove(); !gone || err != nil {
		t.Errorf("remove: %v %v", gone, err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("still there: %v", err)
	}
}

// Anything named like a session directory that perfscope did not make is
// never touched: a symlink (to a directory holding a valid owner file), a
// directory others can enter, one whose owner file is a link or writable
// by others, one with a foreign file under the owner file's name.
func TestPlantedSessionDirsAreLeftAlone(t *testing.T) {
	dir, tmp := testTmp(t)
	me := mustSelf(t)
	gone := deadProcess(t)
	dead := marker{Owner: gone, PIDNS: me.pidns, Created: time.Now(), JVM: gone, JVMUID: me.euid}

	victim := t.TempDir()
	os.WriteFile(filepath.Join(victim, markerFile), dead.encode(), 0o600)
	os.WriteFile(filepath.Join(victim, libraryName), []byte("precious"), 0o600)
	os.Symlink(victim, filepath.Join(dir, dirPrefix+"000000000001"))

	open := filepath.Join(dir, dirPrefix+"000000000002")
	os.Mkdir(open, 0o755)
	os.WriteFile(filepath.Join(open, markerFile), dead.encode(), 0o600)
	os.WriteFile(filepath.Join(open, jfrFile), []byte("x"), 0o600)

	linked := filepath.Join(dir, dirPrefix+"000000000003")
	os.Mkdir(linked, 0o700)
	os.Symlink(filepath.Join(victim, markerFile), filepath.Join(linked, markerFile))
	os.WriteFile(filepath.Join(linked, jfrFile), []byte("x"), 0o600)

	writable := filepath.Join(dir, dirPrefix+"000000000004")
	os.Mkdir(writable, 0o700)
	os.WriteFile(filepath.Join(writable, markerFile), dead.encode(), 0o600)
	os.Chmod(filepath.Join(writable, markerFile), 0o666)
	os.WriteFile(filepath.Join(writable, jfrFile), []byte("x"), 0o600)

	notOurs := filepath.Join(dir, "perfscope-asprof-000000000005")
	os.Mkdir(notOurs, 0o700)
	os.WriteFile(filepath.Join(notOurs, markerFile), dead.encode(), 0o600)

	r, err := reclaim(context.Background(), tmp, me, nil, nil, procfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(victim, libraryName), filepath.Join(victim, markerFile), filepath.Join(open, jfrFile), filepath.Join(linked, jfrFile), filepath.Join(writable, jfrFile), notOurs} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was touched: %v", p, err)
		}
	}
	if len(r.notes) != 0 {
		t.Errorf("notes %q", r.notes)
	}
}

// Sweeping a /tmp removes the sessions whose perfscope and JVM are both
// gone and interrupted setups, reports a dead perfscope's session in a
// JVM that still runs, and leaves a running perfscope's session alone.
func TestReclaimSweeps(t *testing.T) {
	dir, tmp := testTmp(t)
	me := mustSelf(t)
	gone := deadProcess(t)
	make := func(m marker) string {
		d, err := createSessionDir(tmp, me, m, true, me.euid, me.egid, jfrFile)
		if err != nil {
			t.Fatal(err)
		}
		d.writeFile(libraryName, []byte("ELF"), true)
		d.close()
		return filepath.Join(dir, d.name)
	}
	deadDead := make(marker{Owner: gone, PIDNS: me.pidns, Created: time.Now(), JVM: gone, JVMUID: me.euid})
	deadLive := make(marker{Owner: gone, PIDNS: me.pidns, Created: time.Now(), JVM: me.id, JVMUID: me.euid})
	liveDead := make(marker{Owner: me.id, PIDNS: me.pidns, Created: time.Now(), JVM: gone, JVMUID: me.euid})
	interruptedDir := filepath.Join(dir, dirPrefix+"00000000000a")
	os.Mkdir(interruptedDir, 0o700)
	os.WriteFile(filepath.Join(interruptedDir, markerFile), []byte(markerMagic+"\nowner 12"), 0o600)

	r, err := reclaim(context.Background(), tmp, me, nil, nil, procfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{deadDead: false, deadLive: true, liveDead: true, interruptedDir: false} {
		_, err := os.Lstat(p)
		if got := err == nil; got != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), got, want)
		}
	}
	if len(r.notes) != 2 || !strings.Contains(r.notes[0]+r.notes[1], "--stop") || !strings.Contains(r.notes[0]+r.notes[1], "removed") {
		t.Errorf("notes %q", r.notes)
	}
}

// Setting up sessions in one /tmp is serialised: a second run waits for
// the first, and gives up when interrupted.
func TestTmpLock(t *testing.T) {
	dir, tmp := testTmp(t)
	unlock, err := lockTmp(context.Background(), tmp, "tmp")
	if err != nil {
		t.Fatal(err)
	}
	other, err := openTmp(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(other)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := lockTmp(ctx, other, "tmp"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v", err)
	}
	unlock()
	unlock2, err := lockTmp(context.Background(), other, "tmp")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
}

// As root against a JVM of another user: the directory and the files the
// JVM writes are handed to that user, the owner file stays root's, and
// such a directory is recognised — while one the JVM's user made with an
// owner file of its own (a forgery) is never touched.
func TestSessionDirOfAnotherUser(t *testing.T) {
	testutil.RequireRoot(t)
	const nobody = 65534
	dir, tmp := testTmp(t)
	me := mustSelf(t)
	gone := deadProcess(t)
	m := marker{Owner: gone, PIDNS: me.pidns, Created: time.Now(), JVM: gone, JVMUID: nobody}
	d, err := createSessionDir(tmp, me, m, true, nobody, nobody, jfrFile)
	if err != nil {
		t.Fatal(err)
	}
	d.writeFile(libraryName, []byte("ELF"), true)
	if err := d.handOver(); err != nil {
		t.Fatal(err)
	}
	d.close()
	real := filepath.Join(dir, d.name)
	for f, uid := range map[string]uint32{"": nobody, markerFile: 0, logFile: nobody, jfrFile: nobody, libraryName: nobody} {
		st, err := os.Lstat(filepath.Join(real, f))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Sys().(*syscall.Stat_t).Uid; got != uid {
			t.Errorf("%q: uid %d, want %d", f, got, uid)
		}
	}

	forged := filepath.Join(dir, dirPrefix+"0000000000ff")
	os.Mkdir(forged, 0o700)
	os.WriteFile(filepath.Join(forged, markerFile), m.encode(), 0o600)
	os.WriteFile(filepath.Join(forged, jfrFile), []byte("theirs"), 0o600)
	for _, p := range []string{forged, filepath.Join(forged, markerFile), filepath.Join(forged, jfrFile)} {
		os.Chown(p, nobody, nobody)
	}

	r, err := reclaim(context.Background(), tmp, me, nil, nil, procfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(real); !os.IsNotExist(err) {
		t.Errorf("the dead session handed to uid %d is still there: %v", nobody, err)
	}
	if _, err := os.Lstat(filepath.Join(forged, jfrFile)); err != nil {
		t.Errorf("a directory with an owner file of the JVM's user was touched: %v", err)
	}
	if len(r.notes) != 1 {
		t.Errorf("notes %q", r.notes)
	}
}

// BenchmarkSessionDirLifecycle is what a session's directory adds to a
// run: under the /tmp's lock, creating it with its owner file, the log,
// the recording and a 550 KB library, listing a /tmp of 200 entries (ten
// of them other live sessions) for sessions to take over or sweep, and
// removing it at the end.
func BenchmarkSessionDirLifecycle(b *testing.B) {
	dir := b.TempDir()
	tmp, err := openTmp(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(tmp)
	me, err := currentSelf()
	if err != nil {
		b.Fatal(err)
	}
	m := marker{Owner: me.id, PIDNS: me.pidns, Created: time.Now(), JVM: me.id, JVMUID: me.euid}
	for i := 0; i < 190; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%d", i)), nil, 0o600)
	}
	for i := 0; i < 10; i++ {
		d, err := createSessionDir(tmp, me, m, true, me.euid, me.egid, jfrFile)
		if err != nil {
			b.Fatal(err)
		}
		d.close()
	}
	lib := make([]byte, 550<<10)
	other := jvmID{procID: procID{PID: 1, Start: 1}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		unlock, err := lockTmp(context.Background(), tmp, "tmp")
		if err != nil {
			b.Fatal(err)
		}
		d, err := createSessionDir(tmp, me, m, true, me.euid, me.egid, jfrFile)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.writeFile(libraryName, lib, true); err != nil {
			b.Fatal(err)
		}
		found, err := listSessionDirs(tmp, d.name, me)
		if err != nil || len(found) != 10 {
			b.Fatalf("%d found, %v", len(found), err)
		}
		for _, f := range found {
			judge(f, me, other, func(p procID) bool { return procfs.Default.ProcessRuns(p.PID, p.Start) })
			f.d.close()
		}
		unlock()
		if gone, err := d.remove(); !gone || err != nil {
			b.Fatal(gone, err)
		}
		d.close()
	}
}
