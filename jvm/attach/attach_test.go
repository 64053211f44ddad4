package attach

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/internal/testutil"
)

// fakeJVM is a process tree below a fixture root that looks like a HotSpot
// JVM to perfscope: /proc/PID/status, the JVM's /etc/passwd and
// hsperfdata, and (once triggered) an attach listener that answers like a
// given JDK.
type fakeJVM struct {
	root  string
	pid   int
	nspid int
	uid   int
	gid   int
}

const fakeSigCgtWithQuit = "0000000000000004"

func newFakeJVM(t *testing.T, uid, gid int, sigCgt string, mutate func([]byte)) *fakeJVM {
	t.Helper()
	root, err := os.MkdirTemp("", "perfscope-attach-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	// The uid-switching tests connect as the JVM's user: it must reach
	// the socket.
	os.Chmod(root, 0o755)
	f := &fakeJVM{root: root, pid: os.Getpid(), nspid: 7, uid: uid, gid: gid}
	proc := filepath.Join(root, "proc", fmt.Sprint(f.pid))
	for _, d := range []string{"cwd", "root/tmp/hsperfdata_app", "root/etc"} {
		if err := os.MkdirAll(filepath.Join(proc, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(proc, "root", "tmp"), 0o1777)
	status := fmt.Sprintf("Name:\tjava\nNStgid:\t%d\t%d\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nThreads:\t20\nSigCgt:\t%s\n",
		f.pid, f.nspid, uid, uid, uid, uid, gid, gid, gid, gid, sigCgt)
	write(t, filepath.Join(proc, "status"), status)
	write(t, filepath.Join(proc, "root/etc/passwd"), fmt.Sprintf("app:x:%d:%d::/:/bin/false\n", uid, gid))
	if mutate != nil {
		hs, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "collectors/hsperf/testdata/jdk17-g1.hsperf"))
		if err != nil {
			t.Fatal(err)
		}
		mutate(hs)
		write(t, filepath.Join(proc, "root/tmp/hsperfdata_app", fmt.Sprint(f.nspid)), string(hs))
	}
	return f
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// counterData finds a counter's value bytes in a little-endian hsperfdata
// image, so a test can turn a real capture into the JVM it needs.
func counterData(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	le := binary.LittleEndian
	off := int(le.Uint32(b[24:]))
	for i := 0; i < int(le.Uint32(b[28:])); i++ {
		length := int(le.Uint32(b[off:]))
		nameOff, dataOff := int(le.Uint32(b[off+4:])), int(le.Uint32(b[off+16:]))
		n := bytes.IndexByte(b[off+nameOff:], 0)
		if string(b[off+nameOff:off+nameOff+n]) == name {
			return b[off+dataOff : off+length]
		}
		off += length
	}
	t.Fatalf("counter %s not in fixture", name)
	return nil
}

func (f *fakeJVM) fs() hsperf.FS { return hsperf.FS{Root: f.root} }

func (f *fakeJVM) socketPath() string {
	return filepath.Join(f.root, "proc", fmt.Sprint(f.pid), "root/tmp", fmt.Sprintf(".java_pid%d", f.nspid))
}

// jdk says how the fake listener answers.
type jdk int

const (
	jdk8  jdk = 8  // peer must have the JVM's own uid/gid; load → "0\n<rc>\n"
	jdk17 jdk = 17 // root or own uid; load → "0\nreturn code: <rc>\n", failures as status
	jdk25 jdk = 25 // like 17, but failures come back as status 0 and text
)

type request struct {
	args     []string
	uid, gid uint32
}

// listen opens the fake attach socket and serves until the test ends.
func (f *fakeJVM) listen(t *testing.T, v jdk) <-chan request {
	t.Helper()
	l, err := net.Listen("unix", f.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(f.socketPath(), 0o600)
	os.Chown(f.socketPath(), f.uid, f.gid)
	t.Cleanup(func() { l.Close() })
	reqs := make(chan request, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.serve(c.(*net.UnixConn), v, reqs)
		}
	}()
	return reqs
}

func (f *fakeJVM) serve(c *net.UnixConn, v jdk, reqs chan<- request) {
	defer c.Close()
	raw, _ := c.SyscallConn()
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	r := bufio.NewReader(c)
	var args []string
	for i := 0; i < 5; i++ {
		s, err := r.ReadString(0)
		if err != nil {
			return
		}
		args = append(args, strings.TrimSuffix(s, "\x00"))
	}
	reqs <- request{args: args, uid: cred.Uid, gid: cred.Gid}
	sameUser := int(cred.Uid) == f.uid && int(cred.Gid) == f.gid
	if !sameUser && (v == jdk8 || cred.Uid != 0) {
		return // HotSpot closes the connection without a word
	}
	if args[0] != "1" {
		fmt.Fprint(c, "-1\nunsupported protocol\n")
		return
	}
	switch args[1] {
	case "load":
		ok := strings.HasPrefix(args[2], "/good")
		switch {
		case v == jdk8 && ok:
			fmt.Fprint(c, "0\n0\n")
		case v == jdk8:
			fmt.Fprint(c, "0\n-1\n")
		case ok:
			fmt.Fprint(c, "0\nreturn code: 0\n")
		case v == jdk17:
			fmt.Fprintf(c, "-1\n%s was not loaded.\n", args[2])
		default:
			fmt.Fprintf(c, "0\n%s was not loaded.\n", args[2])
		}
	case "jcmd":
		fmt.Fprintf(c, "0\nran %s\n", args[2])
	default:
		fmt.Fprintf(c, "-1\nOperation %s not recognized!\n", args[1])
	}
}

func TestPreflightRefusesHarmfulTargets(t *testing.T) {
	setByte := func(name string, v byte) func([]byte) {
		return func(b []byte) { counterData(t, b, name)[0] = v }
	}
	notInitialised := func(b []byte) {
		copy(counterData(t, b, "sun.rt.vmInitDoneTime"), make([]byte, 8))
	}
	for _, tc := range []struct {
		name   string
		sigCgt string
		mutate func([]byte)
		want   error
	}{
		{"attachable", fakeSigCgtWithQuit, func([]byte) {}, nil},
		{"-Xrs: SIGQUIT not caught", "0000000000000000", func([]byte) {}, ErrSignalNotCaught},
		{"attach disabled", fakeSigCgtWithQuit, setByte("sun.rt.jvmCapabilities", '0'), ErrAttachDisabled},
		{"still starting", fakeSigCgtWithQuit, notInitialised, ErrNotReady},
		{"no hsperfdata, no libjvm", fakeSigCgtWithQuit, nil, ErrNotJVM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeJVM(t, os.Getuid(), os.Getgid(), tc.sigCgt, tc.mutate)
			_, err := Preflight(f.fs(), f.pid)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Preflight: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Preflight(hsperf.FS{Root: t.TempDir()}, 4242); !errors.Is(err, ErrNoProcess) {
		t.Errorf("dead pid: %v", err)
	}
}

// A JVM run with -Xrs opens its attach socket at start-up: with the socket
// there it is attached to without any signal.
func TestXrsWithOpenSocketIsAttachable(t *testing.T) {
	f := newFakeJVM(t, os.Getuid(), os.Getgid(), "0000000000000000", func([]byte) {})
	reqs := f.listen(t, jdk17)
	tg, err := Preflight(f.fs(), f.pid)
	if err != nil {
		t.Fatalf("Preflight: %v", err)
	}
	if !tg.NoSignal {
		t.Error("NoSignal not set for a JVM that does not handle SIGQUIT")
	}
	if _, err := tg.Jcmd(context.Background(), "VM.flags"); err != nil {
		t.Fatal(err)
	}
	<-reqs
}

func TestResponseVariants(t *testing.T) {
	for _, v := range []jdk{jdk8, jdk17, jdk25} {
		t.Run(fmt.Sprintf("jdk%d", v), func(t *testing.T) {
			f := newFakeJVM(t, os.Getuid(), os.Getgid(), fakeSigCgtWithQuit, func([]byte) {})
			reqs := f.listen(t, v)
			tg, err := Preflight(f.fs(), f.pid)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := tg.Load(ctx, "/good/libagent.so", "start,event=alloc"); err != nil {
				t.Errorf("good load: %v", err)
			}
			req := <-reqs
			if want := []string{"1", "load", "/good/libagent.so", "true", "start,event=alloc"}; strings.Join(req.args, "|") != strings.Join(want, "|") {
				t.Errorf("request %q, want %q", req.args, want)
			}
			_, err = tg.Load(ctx, "/bad/libagent.so", "")
			var le *LoadError
			if !errors.As(err, &le) {
				t.Errorf("bad load: %v, want a LoadError", err)
			}
			out, err := tg.Jcmd(ctx, "VM.flags")
			if err != nil || out != "ran VM.flags\n" {
				t.Errorf("jcmd: %q %v", out, err)
			}
		})
	}
}

func TestArgumentLimit(t *testing.T) {
	f := newFakeJVM(t, os.Getuid(), os.Getgid(), fakeSigCgtWithQuit, func([]byte) {})
	f.listen(t, jdk17)
	tg, err := Preflight(f.fs(), f.pid)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tg.Load(context.Background(), "/good/lib.so", strings.Repeat("x", MaxArgLength+1))
	if !errors.Is(err, ErrArgTooLong) {
		t.Fatalf("1025-character option: %v", err)
	}
	if _, err := tg.Load(context.Background(), "/good/lib.so", strings.Repeat("x", MaxArgLength)); err != nil {
		t.Fatalf("1024-character option: %v", err)
	}
}

// A JDK 8 JVM running as an ordinary user refuses root's connection;
// perfscope acts as the JVM's user on one locked thread and is accepted.
func TestConnectsAsTheJVMsUser(t *testing.T) {
	testutil.RequireRoot(t)
	const nobody = 65534
	for _, v := range []jdk{jdk8, jdk17} {
		t.Run(fmt.Sprintf("jdk%d", v), func(t *testing.T) {
			f := newFakeJVM(t, nobody, nobody, fakeSigCgtWithQuit, func([]byte) {})
			reqs := f.listen(t, v)
			tg, err := Preflight(f.fs(), f.pid)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tg.Jcmd(context.Background(), "VM.version"); err != nil {
				t.Fatalf("as the JVM's user: %v", err)
			}
			if req := <-reqs; req.uid != nobody || req.gid != nobody {
				t.Errorf("connected as %d:%d, want %d:%d", req.uid, req.gid, nobody, nobody)
			}
			if unix.Geteuid() != 0 || unix.Getegid() != 0 {
				t.Fatalf("credentials leaked into the test's thread: %d:%d", unix.Geteuid(), unix.Getegid())
			}
			// As root (no switch), JDK 8 closes without a word.
			tg.uid, tg.gid = -1, -1
			_, err = tg.Jcmd(context.Background(), "VM.version")
			if v == jdk8 && !errors.Is(err, ErrRefused) {
				t.Errorf("JDK 8 as root: %v, want ErrRefused", err)
			}
			if v == jdk17 && err != nil {
				t.Errorf("JDK 17 accepts root: %v", err)
			}
		})
	}
}

// Without a socket, perfscope writes the trigger file and sends SIGQUIT;
// the fake JVM (this test process) opens its listener on seeing both.
func TestTriggerStartsListener(t *testing.T) {
	f := newFakeJVM(t, os.Getuid(), os.Getgid(), fakeSigCgtWithQuit, func([]byte) {})
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	defer signal.Stop(quit)
	trigger := filepath.Join(f.root, "proc", fmt.Sprint(f.pid), "cwd", fmt.Sprintf(".attach_pid%d", f.nspid))
	go func() {
		select {
		case <-quit:
		case <-time.After(10 * time.Second):
			return
		}
		if _, err := os.Stat(trigger); err != nil {
			t.Errorf("SIGQUIT arrived without a trigger file: %v", err)
			return
		}
		f.listen(t, jdk17)
	}()
	tg, err := Preflight(f.fs(), f.pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Jcmd(context.Background(), "VM.version"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(trigger); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("trigger file left behind: %v", err)
	}
}

func TestNoListenerTimesOut(t *testing.T) {
	f := newFakeJVM(t, os.Getuid(), os.Getgid(), fakeSigCgtWithQuit, func([]byte) {})
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	defer signal.Stop(quit)
	tg, err := Preflight(f.fs(), f.pid)
	if err != nil {
		t.Fatal(err)
	}
	tg.ListenTimeout = 200 * time.Millisecond
	if _, err := tg.Jcmd(context.Background(), "VM.version"); !errors.Is(err, ErrNoListener) {
		t.Fatalf("%v, want ErrNoListener", err)
	}
}

func TestParseLoad(t *testing.T) {
	for _, tc := range []struct {
		r      Response
		out    string
		wantRC int
		fail   bool
	}{
		{Response{0, "0\n"}, "", 0, false},
		{Response{0, "return code: 0\n"}, "", 0, false},
		{Response{0, "return code: 0\nProfiling started\n"}, "Profiling started\n", 0, false},
		{Response{0, "return code: 200\n"}, "", 200, true},
		{Response{0, "100\n"}, "", 100, true},
		{Response{-1, "x was not loaded\n"}, "", 0, true},
		{Response{0, "x was not loaded\n"}, "", -1, true},
	} {
		out, err := parseLoad(tc.r)
		var le *LoadError
		if tc.fail != errors.As(err, &le) || out != tc.out {
			t.Errorf("%+v: out %q err %v", tc.r, out, err)
			continue
		}
		if tc.fail && le.Status == 0 && le.ReturnCode != tc.wantRC {
			t.Errorf("%+v: return code %d, want %d", tc.r, le.ReturnCode, tc.wantRC)
		}
	}
}
