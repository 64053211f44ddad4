package cgroup

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/internal/testutil"
)

// udpServer builds testdata/udpserver statically (it runs in a scratch
// image too) and returns its path.
func udpServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "udpserver")
	build := exec.Command("go", "build", "-o", bin, "./testdata/udpserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the UDP server: %v\n%s", err, out)
	}
	return bin
}

// v2Mount is where this host mounts the cgroup v2 hierarchy:
// /sys/fs/cgroup on a v2 host, /sys/fs/cgroup/unified on a hybrid one.
func v2Mount(t *testing.T) string {
	t.Helper()
	m, err := Default.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range m.V2 {
		if mt.Root == "/" && !mt.ReadOnly {
			return mt.MountPoint
		}
	}
	t.Fatal("no writable cgroup v2 hierarchy is mounted here")
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func randomUID() string {
	h := randomHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// kernelCgroupID is the id the kernel's file handle for a cgroup
// directory carries (kernfs encodes the cgroup id in it): what
// bpf_get_current_cgroup_id returns, read independently of stat(2).
func kernelCgroupID(t *testing.T, dir string) uint64 {
	t.Helper()
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, dir, 0)
	if err != nil {
		t.Fatalf("name_to_handle_at %s: %v", dir, err)
	}
	if len(h.Bytes()) != 8 {
		t.Fatalf("cgroup file handle of %d bytes", len(h.Bytes()))
	}
	return binary.NativeEndian.Uint64(h.Bytes())
}

// socketOwner finds the UDP socket on port in pid's network namespace and
// checks pid holds it: the socket's owner, by inode, as the lock and drop
// probes attribute sockets.
func socketOwner(t *testing.T, pid, port int) {
	t.Helper()
	fs := sockets.Default
	inodes, err := fs.SocketInodes(pid)
	if err != nil {
		t.Fatal(err)
	}
	udp, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/udp", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(udp), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		_, hexPort, _ := strings.Cut(f[1], ":")
		p, _ := strconv.ParseUint(hexPort, 16, 16)
		ino, _ := strconv.ParseUint(f[9], 10, 64)
		if int(p) == port && inodes[ino] {
			return
		}
	}
	t.Errorf("pid %d holds no UDP socket on port %d (its socket inodes: %v)", pid, port, inodes)
}

// A UDP server put in a pod-shaped cgroup of the v2 hierarchy (the
// kubelet's systemd driver with containerd), with containerd's task state
// for it under a temporary root, comes back attributed to its pod and
// container by name, in the JSON form too; the filters find it.
func TestLivePodShapedCgroup(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t) // kubepods.slice may be another root test's too
	mount := v2Mount(t)
	uid, id := randomUID(), randomHex(32)
	rel := []string{"kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice", "cri-containerd-" + id + ".scope"}
	var created []string
	t.Cleanup(func() {
		for i := len(created) - 1; i >= 0; i-- {
			var err error
			for try := 0; try < 50; try++ {
				if err = os.Remove(created[i]); err == nil || !errors.Is(err, unix.EBUSY) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) {
				t.Errorf("remove cgroup %s: %v", created[i], err)
			}
		}
	})
	dir := mount
	for _, c := range rel {
		dir = filepath.Join(dir, c)
		err := os.Mkdir(dir, 0o755)
		switch {
		case err == nil:
			created = append(created, dir)
		case errors.Is(err, os.ErrExist):
		default:
			t.Fatalf("create cgroup %s: %v", dir, err)
		}
	}

	// containerd's task state for the container, as the CRI plugin
	// writes it.
	state := t.TempDir()
	spec := map[string]any{"ociVersion": "1.1.0", "annotations": map[string]string{
		"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.container-name": "dns",
		"io.kubernetes.cri.sandbox-name": "resolver-5f6d7-abcde", "io.kubernetes.cri.sandbox-namespace": "edge",
		"io.kubernetes.cri.sandbox-uid": uid, "io.kubernetes.cri.sandbox-id": randomHex(32)}}
	b, _ := json.Marshal(spec)
	os.MkdirAll(filepath.Join(state, "k8s.io", id), 0o755)
	os.WriteFile(filepath.Join(state, "k8s.io", id, "config.json"), b, 0o644)

	// The server starts inside the leaf cgroup (clone3 CLONE_INTO_CGROUP).
	cg, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	cmd := exec.Command(udpServer(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the UDP server in %s: %v", dir, err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	port, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("UDP server: %q %v", line, err)
	}
	pid := cmd.Process.Pid

	fs := FS{Root: "/", State: &StateDirs{ContainerdTasks: []string{state}}}
	x := NewIndex(fs, nil)
	w, err := x.Attribute(pid)
	if err != nil {
		t.Fatal(err)
	}
	path := "/" + strings.Join(rel, "/")
	leafID := kernelCgroupID(t, dir)
	if str(w.CgroupPath) != path || str(w.CgroupHierarchy) != "v2" || w.CgroupID == nil || *w.CgroupID != leafID {
		t.Errorf("cgroup %s (%s) id %v, want %s (v2) id %d", str(w.CgroupPath), str(w.CgroupHierarchy), w.CgroupID, path, leafID)
	}
	if str(w.ContainerID) != id || str(w.Runtime) != "containerd" || str(w.PodUID) != uid || str(w.QOSClass) != "Burstable" {
		t.Errorf("container %s (%s) pod %s (%s)", str(w.ContainerID), str(w.Runtime), str(w.PodUID), str(w.QOSClass))
	}
	if str(w.Namespace) != "edge" || str(w.Pod) != "resolver-5f6d7-abcde" || str(w.Container) != "dns" || str(w.NamesFrom) != "containerd state" {
		t.Errorf("names %s/%s/%s from %s", str(w.Namespace), str(w.Pod), str(w.Container), str(w.NamesFrom))
	}
	j, _ := json.Marshal(w)
	for _, want := range []string{`"namespace":"edge"`, `"pod":"resolver-5f6d7-abcde"`, `"container":"dns"`, `"pod_uid":"` + uid + `"`,
		fmt.Sprintf(`"cgroup_id":%d`, leafID), `"systemd_unit":null`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON %s lacks %s", j, want)
		}
	}
	socketOwner(t, pid, port)

	for _, f := range []Filter{must(PodFilter("edge/resolver-5f6d7-abcde")), must(PodFilter(uid)), must(ContainerFilter(id[:12])),
		must(ContainerFilter("dns")), must(CgroupFilter(filepath.Join(mount, "kubepods.slice", "kubepods-burstable.slice", rel[2])))} {
		sel, err := x.Select(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(sel.Processes) != 1 || sel.Processes[0].PID != pid || len(sel.CgroupIDs) != 1 || sel.CgroupIDs[0] != leafID {
			t.Errorf("%s: pids %v cgroup ids %v, want [%d] [%d]", f, sel.PIDs(), sel.CgroupIDs, pid, leafID)
		}
	}
	if _, err := x.Select(must(PodFilter("edge/other"))); !errors.Is(err, ErrNoMatch) {
		t.Errorf("--pod edge/other: %v", err)
	}
}

// A Podman container's server process comes back attributed to its
// container id, runtime and name, on this host's own cgroup layout.
func TestLivePodmanContainer(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/deps.sh test installs it): %v", tool, err)
		}
	}
	dir, err := os.MkdirTemp("/var/tmp", "perfscope-cgroup-podman-")
	if err != nil {
		t.Fatal(err)
	}
	storage := filepath.Join(dir, "root")
	conf := filepath.Join(dir, "containers.conf")
	// This machine's default nofile/nproc limits are above what the
	// kernel lets a container start with.
	os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n"), 0o644)
	podman := func(args ...string) *exec.Cmd {
		cmd := exec.Command("podman", append([]string{"--root", storage, "--runroot", filepath.Join(dir, "run"), "--runtime", "runc",
			"--cgroup-manager", "cgroupfs", "--events-backend", "none"}, args...)...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
		return cmd
	}
	t.Cleanup(func() {
		podman("rm", "-af", "-t", "0").Run()
		podman("rmi", "-af").Run()
		os.RemoveAll(dir)
	})
	// An image of the UDP server alone.
	img := filepath.Join(dir, "image")
	os.MkdirAll(img, 0o755)
	build := exec.Command("sh", "-c", `cp "$1" "$2/server" && tar -C "$2" -cf "$2.tar" server`, "sh", udpServer(t), img)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("image tree: %v\n%s", err, out)
	}
	if out, err := podman("import", img+".tar", "localhost/perfscope-cgroup:test").CombinedOutput(); err != nil {
		t.Fatalf("podman import: %v\n%s", err, out)
	}
	name := "perfscope-cgroup-" + randomHex(4)
	run := podman("run", "-d", "--name", name, "--network", "none", "localhost/perfscope-cgroup:test", "/server", "--forever")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	if len(id) != 64 {
		t.Fatalf("podman run printed %q, want a container id", out)
	}
	out, err = podman("inspect", "--format", "{{.State.Pid}}", id).Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		t.Fatalf("container pid %q", out)
	}
	var port int
	for try := 0; try < 100 && port == 0; try++ {
		logs, _ := podman("logs", id).Output()
		port, _ = strconv.Atoi(strings.TrimSpace(string(logs)))
		if port == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if port == 0 {
		t.Fatal("the server in the container did not print its port")
	}

	x := NewIndex(FS{Root: "/", State: &StateDirs{ContainersStorage: []string{storage}}}, nil)
	w, err := x.Attribute(pid)
	if err != nil {
		t.Fatal(err)
	}
	if str(w.ContainerID) != id || str(w.Runtime) != "podman" || str(w.Container) != name || str(w.NamesFrom) != "podman state" {
		t.Errorf("container %s runtime %s name %s from %s, want %s podman %s", str(w.ContainerID), str(w.Runtime), str(w.Container),
			str(w.NamesFrom), id, name)
	}
	if w.PodUID != nil || w.Pod != nil {
		t.Errorf("a Podman container in no pod: pod %s %s", str(w.PodUID), str(w.Pod))
	}
	// Wherever the runtime placed it, a v2 cgroup has the kernel's id.
	m, _ := Default.Membership(pid)
	if m.V2 != nil && *m.V2 != "/" {
		d := filepath.Join(v2Mount(t), *m.V2)
		if w.CgroupID == nil || *w.CgroupID != kernelCgroupID(t, d) {
			t.Errorf("cgroup id %v, the kernel's for %s is %d", w.CgroupID, d, kernelCgroupID(t, d))
		}
	}
	socketOwner(t, pid, port)
	for _, f := range []Filter{must(ContainerFilter(id[:12])), must(ContainerFilter(name))} {
		sel, err := x.Select(f)
		if err != nil || len(sel.Processes) != 1 || sel.Processes[0].PID != pid {
			t.Errorf("%s: %v %v, want [%d]", f, sel.PIDs(), err, pid)
		}
	}
}
