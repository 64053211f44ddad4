package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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

// cgroup2Mount is where the unified hierarchy is mounted (/sys/fs/cgroup
// on a pure v2 host, /sys/fs/cgroup/unified on a hybrid one like this).
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if ok && strings.HasPrefix(post, "cgroup2 ") {
			if f := strings.Fields(pre); len(f) > 4 && f[3] == "/" {
				return f[4]
			}
		}
	}
	t.Fatal("no cgroup2 file system is mounted")
	return ""
}

// podCgroup is a cgroup v2 path shaped as the kubelet's systemd driver
// and containerd name a Burstable pod's container.
type podCgroup struct {
	uid, id string
	// dirs are the directories created, outermost first.
	dirs []string
}

func (c podCgroup) leaf() string { return c.dirs[len(c.dirs)-1] }

// path is the container's cgroup as /proc/PID/cgroup names it.
func (c podCgroup) path(mount string) string { return strings.TrimPrefix(c.leaf(), mount) }

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// newPodCgroup creates the pod-shaped cgroups below mount (those that do
// not exist yet) and removes them, innermost first, when the test ends:
// the processes moved there must be gone by then.
func newPodCgroup(t *testing.T, mount string) podCgroup {
	t.Helper()
	u := randomHex(t, 16)
	uid := u[:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:]
	c := podCgroup{uid: uid, id: randomHex(t, 32)}
	parts := []string{"kubepods.slice", "kubepods-burstable.slice",
		"kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice", "cri-containerd-" + c.id + ".scope"}
	dir := mount
	var created []string
	for _, p := range parts {
		dir = filepath.Join(dir, p)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			created = append(created, dir)
		} else if !errors.Is(err, os.ErrExist) {
			t.Fatal(err)
		}
		c.dirs = append(c.dirs, dir)
	}
	t.Cleanup(func() {
		// Only this test's processes can be in its random pod: end any
		// still there, or the kernel keeps the cgroup.
		if b, err := os.ReadFile(filepath.Join(c.leaf(), "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		for i := len(created) - 1; i >= 0; i-- {
			// The kernel refuses while a process (even a dying one) is in
			// the cgroup: retry briefly. Another test's pod may share
			// the outer slices: leave those that are not empty.
			for try := 0; try < 50; try++ {
				err := os.Remove(created[i])
				if err == nil || errors.Is(err, os.ErrNotExist) || !errors.Is(err, syscall.EBUSY) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if _, err := os.Stat(c.leaf()); err == nil {
			t.Errorf("cgroup %s left behind", c.leaf())
		}
	})
	return c
}

// startInCgroup starts a UDP server (socat, from Debian) on 127.0.0.1:port
// in the cgroup leaf: a shell moves itself there and then execs socat, so
// every socket socat opens belongs to a process of the pod.
func startInCgroup(t *testing.T, leaf string, port int) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("socat"); err != nil {
		t.Fatalf("socat is not installed (scripts/deps.sh test installs it): %v", err)
	}
	script := `echo $$ > "$1/cgroup.procs" && exec socat -u UDP4-RECV:"$2",bind=127.0.0.1,so-rcvbuf=4096 OPEN:/dev/null`
	cmd := exec.Command("sh", "-c", script, "sh", leaf, strconv.Itoa(port))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Bound: the port answers (bound) within 5 s.
	for i := 0; i < 100; i++ {
		if b, _ := os.ReadFile(filepath.Join(leaf, "cgroup.procs")); strings.TrimSpace(string(b)) == strconv.Itoa(cmd.Process.Pid) && udpBound(port) {
			return cmd
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("socat did not bind 127.0.0.1:%d in its cgroup: %s", port, stderr.String())
	return nil
}

// freeTCPPort is a loopback TCP port free now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// udpBound is true when a UDP socket is bound to 127.0.0.1:port.
func udpBound(port int) bool {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return false
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	return strings.Contains(string(b), want)
}

// freeUDPPort is a port no UDP socket of loopback holds now.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// sendFor sends small datagrams to port until ctx ends (at most 2,000/s,
// at most 100,000 in all): enough to overflow socat's 4 KiB receive
// buffer now and then, so the port also drops.
func sendFor(ctx context.Context, port int) {
	c, err := net.Dial("udp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return
	}
	defer c.Close()
	payload := bytes.Repeat([]byte("p"), 512)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := 0; i < 100000; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.Write(payload)
			c.Write(payload)
		}
	}
}

// runPerfscope runs the binary while datagrams flow, returning its exit
// code, stdout and stderr.
func runPerfscope(t *testing.T, port int, args ...string) (int, []byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go sendFor(ctx, port)
	cmd := exec.CommandContext(ctx, Perfscope(t), args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.Bytes(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.Bytes(), stderr.String()
}

// checkPodWorkload checks the attribution of a socket of the pod-shaped
// cgroup: no names (nothing here runs containerd or the Kubernetes API),
// but the pod uid, container id and runtime from the cgroup path, the
// path itself and its id.
func checkPodWorkload(t *testing.T, what string, w *evidence.Workload, c podCgroup, path string) {
	t.Helper()
	if w == nil {
		t.Fatalf("%s: no workload", what)
	}
	str := func(p *string) string {
		if p == nil {
			return "<null>"
		}
		return *p
	}
	if str(w.PodUID) != c.uid || str(w.ContainerID) != c.id || str(w.Runtime) != "containerd" ||
		str(w.CgroupPath) != path || str(w.CgroupHierarchy) != "v2" || str(w.QOSClass) != "Burstable" {
		b, _ := json.Marshal(w)
		t.Errorf("%s: workload %s, want pod %s, container %s (containerd), cgroup %s", what, b, c.uid, c.id, path)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(c.leaf(), &st); err == nil && (w.CgroupID == nil || *w.CgroupID != st.Ino) {
		t.Errorf("%s: cgroup id %v, want the directory's inode %d", what, w.CgroupID, st.Ino)
	}
	if w.Namespace != nil || w.Pod != nil || w.Container != nil {
		t.Errorf("%s: names %s/%s/%s learned from nowhere", what, str(w.Namespace), str(w.Pod), str(w.Container))
	}
}

// A UDP server in a pod-shaped cgroup (the kubelet's systemd driver and
// containerd's naming) comes back attributed to that pod and container in
// perfscope udp's and recipe run's JSON and text, and --pod, --container
// and --cgroup keep the run to it; a pod that is not there is exit 2 in
// one sentence. The cgroups are removed afterwards.
func TestUDPAttributesPodCgroup(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	mount := cgroup2Mount(t)
	c := newPodCgroup(t, mount)
	port := freeUDPPort(t)
	srv := startInCgroup(t, c.leaf(), port)
	path := c.path(mount)
	pid := srv.Process.Pid
	base := []string{"udp", "--iface", "lo", "--port", strconv.Itoa(port), "--duration", "2s", "--no-profile", "--exact"}

	decode := func(what string, out []byte) udpReport {
		t.Helper()
		var r udpReport
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		return r
	}
	socketOf := func(what string, r udpReport) evidence.UDPSocket {
		t.Helper()
		for _, s := range r.Data.Sockets.Sockets {
			if s.Port == port {
				if s.PID != pid {
					t.Errorf("%s: socket owner pid %d, want socat's %d", what, s.PID, pid)
				}
				return s
			}
		}
		t.Fatalf("%s: no socket on port %d: %+v", what, port, r.Data.Sockets)
		return evidence.UDPSocket{}
	}

	t.Run("json", func(t *testing.T) {
		// socat stopped, its 4 KiB buffer fills and the port drops: the
		// drops happen in softirq context, on whatever task runs, and
		// must still be the pod's.
		srv.Process.Signal(syscall.SIGSTOP)
		code, out, stderr := runPerfscope(t, port, append(base, "-o", "json")...)
		srv.Process.Signal(syscall.SIGCONT)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		r := decode("udp", out)
		checkPodWorkload(t, "socket", socketOf("udp", r).Workload, c, path)
		dropped := false
		for _, d := range r.Data.Drops.ByPort {
			if d.Port == port {
				dropped = true
				checkPodWorkload(t, "drops on the port", d.Workload, c, path)
			}
		}
		if !dropped {
			t.Errorf("no drops on port %d with its reader stopped: %+v", port, r.Data.Drops.ByPort)
		}
	})

	// serve's drops carry the pod's labels: the pod uid (no name was
	// learned) and the container id's first 12 digits.
	t.Run("serve", func(t *testing.T) {
		srv.Process.Signal(syscall.SIGSTOP)
		defer srv.Process.Signal(syscall.SIGCONT)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		go sendFor(ctx, port)
		lport := freeTCPPort(t)
		serve := exec.CommandContext(ctx, Perfscope(t), "serve", "--recipe", "udp-rx", "--set", "iface=lo", "--set", "profile=false",
			"--listen", fmt.Sprintf("127.0.0.1:%d", lport), "--interval", "2s", "--top-workloads", "5")
		serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var stderr bytes.Buffer
		serve.Stderr = &stderr
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
		// The exposition writes labels sorted by name.
		want := fmt.Sprintf(`perfscope_udp_drops_total{container="%s",namespace="",pod="%s",port="%d",reason="kfree_skb:SOCKET_RCVBUFF"}`, c.id[:12], c.uid, port)
		for i := 0; i < 60; i++ {
			time.Sleep(time.Second)
			m, err := scrapeMetrics(fmt.Sprintf("http://127.0.0.1:%d", lport))
			if err != nil {
				continue
			}
			if m[want] > 0 {
				return
			}
		}
		t.Errorf("serve never exposed %s; stderr:\n%s", want, stderr.String())
	})

	t.Run("text", func(t *testing.T) {
		code, out, stderr := runPerfscope(t, port, base...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		label := "pod-" + c.uid + "/" + c.id[:12]
		if !strings.Contains(string(out), label) {
			t.Errorf("the text report does not name %s:\n%s", label, out)
		}
	})

	for _, f := range [][]string{{"--pod", c.uid}, {"--container", c.id[:16]}, {"--container", "containerd://" + c.id}, {"--cgroup", path}, {"--cgroup", c.leaf()}} {
		t.Run("filter "+f[0], func(t *testing.T) {
			args := append([]string{"udp", "--iface", "lo", "--duration", "2s", "--no-profile", "--exact", "-o", "json"}, f...)
			code, out, stderr := runPerfscope(t, port, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", f, code, stderr)
			}
			r := decode("udp "+strings.Join(f, " "), out)
			if !strings.HasPrefix(r.Data.Filter, f[0]+" ") || len(r.Data.FilterPIDs) != 1 || r.Data.FilterPIDs[0] != pid {
				t.Errorf("filter %q pids %v, want %s selecting socat (%d)", r.Data.Filter, r.Data.FilterPIDs, f[0], pid)
			}
			for _, s := range r.Data.Sockets.Sockets {
				if s.PID != pid {
					t.Errorf("socket %s of pid %d kept by %v", s.Local, s.PID, f)
				}
			}
			checkPodWorkload(t, "filtered socket", socketOf("udp "+f[0], r).Workload, c, path)
		})
	}

	t.Run("recipe run", func(t *testing.T) {
		code, out, stderr := runPerfscope(t, port, "recipe", "run", "udp-rx", "--set", "iface=lo", "--set", "duration=2s",
			"--set", "profile=false", "--exact", "--pod", c.uid, "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		r := decode("recipe run", out)
		checkPodWorkload(t, "recipe run's socket", socketOf("recipe run", r).Workload, c, path)
	})

	// A busy loop in the same container: profile --pod keeps its samples
	// (and socat's), every stack rooted at the container with
	// --per-container, and counts the rest as filtered out.
	t.Run("profile", func(t *testing.T) {
		// Bounded (a few minutes at most) and one process: killing it ends it.
		spin := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && i=0 && while [ $i -lt 100000000 ]; do i=$((i+1)); done`, "sh", c.leaf())
		if err := spin.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { spin.Process.Kill(); spin.Wait() }()
		code, out, stderr := runPerfscope(t, port, "profile", "--pod", c.uid, "--per-container", "--duration", "2s", "--event", "cpu-clock", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var r struct {
			Data evidence.Profile `json:"data"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		d := r.Data
		label := "pod-" + c.uid + "/" + c.id[:12]
		if d.Target != "workload" || d.Filter != "--pod "+c.uid || d.Samples == 0 || d.RootFrames != "container" {
			t.Fatalf("target %q filter %q samples %d root %q", d.Target, d.Filter, d.Samples, d.RootFrames)
		}
		if len(d.Workloads) != 1 || d.Workloads[0].Label != label || d.Workloads[0].Samples != d.Samples {
			t.Errorf("workloads %+v, want all %d samples in %s", d.Workloads, d.Samples, label)
		} else {
			checkPodWorkload(t, "profile workload", &d.Workloads[0].Workload, c, path)
		}
		for _, f := range d.Folded {
			if !strings.HasPrefix(f.Stack, label+";") {
				t.Errorf("a stack outside the pod: %.120s", f.Stack)
				break
			}
		}
	})

	t.Run("no such pod", func(t *testing.T) {
		other := "00000000-0000-4000-8000-000000000000"
		code, out, stderr := runPerfscope(t, port, "udp", "--iface", "lo", "--duration", "1s", "--pod", other)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || len(out) != 0 || len(lines) != 1 || !strings.Contains(stderr, "--pod "+other) || !strings.Contains(stderr, "pod") {
			t.Errorf("--pod %s: exit %d, stdout %q, stderr %q; want exit 2 and one sentence", other, code, out, stderr)
		}
	})
}
