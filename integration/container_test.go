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
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/netlab"
)

// observeCaps is the README's observe run line for the udp recipes: what
// `perfscope doctor --recipe udp-rx` lists, and nothing else.
var observeCaps = []string{"BPF", "PERFMON", "NET_ADMIN", "SYSLOG", "SYS_PTRACE"}

// podman runs containers with a storage and configuration of its own, so
// the test neither uses nor leaves anything in the machine's: no daemon
// runs, and the storage goes with the test's temporary directory.
type podman struct {
	t                          *testing.T
	root, runroot, conf, image string
	seccomp                    string
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/deps.sh test installs it): %v", tool, err)
		}
	}
	dir, err := os.MkdirTemp("/var/tmp", "perfscope-podman-")
	if err != nil {
		t.Fatal(err)
	}
	p := &podman{t: t, root: filepath.Join(dir, "root"), runroot: filepath.Join(dir, "run"), conf: filepath.Join(dir, "containers.conf"),
		seccomp: filepath.Join(dir, "seccomp.json"), image: "localhost/perfscope:itest"}
	// This machine's default nofile/nproc limits are above what the
	// kernel lets a container start with.
	os.WriteFile(p.conf, []byte("[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n"), 0o644)
	p.writeSeccomp()
	t.Cleanup(func() {
		p.cmd("rm", "-af").Run()
		p.cmd("rmi", "-af").Run()
		os.RemoveAll(dir)
	})
	return p
}

// writeSeccomp derives the runtime's default profile as Docker ≥ 23 and
// containerd ≥ 1.7 ship it: bpf() gated by CAP_BPF and perf_event_open by
// CAP_PERFMON instead of CAP_SYS_ADMIN alone (moby#43987). podman 4.3's
// profile predates that; the observe run line must not need SYS_ADMIN.
func (p *podman) writeSeccomp() {
	b, err := os.ReadFile("/usr/share/containers/seccomp.json")
	if err != nil {
		p.t.Fatalf("podman's default seccomp profile: %v", err)
	}
	var prof map[string]any
	if err := json.Unmarshal(b, &prof); err != nil {
		p.t.Fatal(err)
	}
	var rules []any
	for _, r := range prof["syscalls"].([]any) {
		rule := r.(map[string]any)
		if rule["action"] != "SCMP_ACT_ALLOW" {
			var keep []any
			for _, n := range rule["names"].([]any) {
				if n != "bpf" && n != "perf_event_open" {
					keep = append(keep, n)
				}
			}
			if len(keep) == 0 {
				continue
			}
			rule["names"] = keep
		}
		rules = append(rules, rule)
	}
	rules = append(rules,
		map[string]any{"names": []string{"bpf"}, "action": "SCMP_ACT_ALLOW", "includes": map[string]any{"caps": []string{"CAP_BPF"}}},
		map[string]any{"names": []string{"perf_event_open"}, "action": "SCMP_ACT_ALLOW", "includes": map[string]any{"caps": []string{"CAP_PERFMON"}}})
	prof["syscalls"] = rules
	out, _ := json.Marshal(prof)
	os.WriteFile(p.seccomp, out, 0o644)
}

func (p *podman) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", append([]string{"--root", p.root, "--runroot", p.runroot, "--runtime", "runc",
		"--cgroup-manager", "cgroupfs", "--events-backend", "none"}, args...)...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+p.conf)
	return cmd
}

// build lays out the image's tree with scripts/dist.sh from this checkout
// and builds the Dockerfile's `local` target from it: the same image as
// the default target, without pulling a base image.
func (p *podman) build() {
	p.t.Helper()
	dist := p.t.TempDir()
	cmd := exec.Command("bash", "scripts/dist.sh", runtime.GOARCH)
	cmd.Dir = testutil.RepoRoot()
	cmd.Env = append(os.Environ(), "DIST_DIR="+dist, "VERSION=itest")
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("dist: %v\n%s", err, out)
	}
	build := p.cmd("build", "--target", "local", "--build-arg", "TARGETARCH="+runtime.GOARCH, "-t", p.image,
		"-f", filepath.Join(testutil.RepoRoot(), "Dockerfile"), dist)
	if out, err := build.CombinedOutput(); err != nil {
		p.t.Fatalf("podman build: %v\n%s", err, out)
	}
}

// observe is the run options of the observe line: every capability
// dropped but caps, read-only root, the host's pid namespace, BTF and
// tracefs read-only (an empty directory where the host has no tracefs
// mounted), results to a mounted directory.
func (p *podman) observe(results string, caps []string, network string) []string {
	return []string{"--rm", "--cap-drop", "ALL", "--cap-add", strings.Join(caps, ","), "--security-opt", "seccomp=" + p.seccomp,
		"--read-only", "--pid=host", "--network", network,
		"-v", "/sys/kernel/btf:/sys/kernel/btf:ro", "-v", "/sys/kernel/tracing:/sys/kernel/tracing:ro", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro",
		"-v", results + ":/results"}
}

// run runs perfscope in a container and returns its exit code, stdout and
// stderr.
func (p *podman) run(opts []string, args ...string) (int, []byte, string) {
	p.t.Helper()
	var out, stderr bytes.Buffer
	cmd := p.cmd(append(append(append([]string{"run"}, opts...), p.image), args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.Bytes(), stderr.String()
	case err != nil:
		p.t.Fatal(err)
	}
	return 0, out.Bytes(), stderr.String()
}

type containerUDPReport struct {
	Recipe struct {
		Name       string
		Parameters map[string]string
	} `json:"recipe"`
	Findings []struct {
		ID string `json:"id"`
	} `json:"findings"`
	Data     evidence.NetEvidence `json:"data"`
	Overhead evidence.Overhead    `json:"overhead"`
}

// The image built from this checkout runs the built-in recipes
// softirq-balance and udp-rx (`perfscope recipe run`) with the documented
// observe capability set — not CAP_SYS_ADMIN — against the netns rig,
// loses nothing without CAP_SYSLOG on a kernel that names its own frames, profiles a JVM on the
// host with the library it carries, and applies and reverts a typed change
// in the rig's namespace from the privileged apply line.
func TestContainerImage(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	p := newPodman(t)
	p.build()
	results := t.TempDir()

	t.Run("version", func(t *testing.T) {
		code, out, stderr := p.run([]string{"--rm", "--network", "none", "--read-only"}, "version")
		want := "bundled: /usr/local/lib/perfscope/async-profiler/4.1/"
		if code != 0 || !strings.Contains(string(out), want) {
			t.Fatalf("version: exit %d, %q %s (want %q)", code, out, stderr, want)
		}
	})

	t.Run("doctor", func(t *testing.T) {
		code, out, stderr := p.run(p.observe(results, observeCaps, "host"), "doctor", "--recipe", "udp-rx", "-o", "json")
		if code != 0 {
			t.Fatalf("doctor --recipe udp-rx under the observe line: exit %d: %s\n%s", code, stderr, out)
		}
		var r struct {
			Data struct {
				Checks []struct{ Category, Name, Status, Detail string }
			}
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		// tracefs serves only the classic-tracepoint fallback. On a host
		// that has not mounted it (a fresh VM) the run line binds an empty
		// directory: doctor warns and says so, and udp-rx still runs
		// ("udp-rx on the rig" below, under the same line).
		_, err := os.Stat("/sys/kernel/tracing/events")
		hostTracefs := err == nil
		seen := map[string]string{}
		for _, c := range r.Data.Checks {
			seen[c.Category+"/"+c.Name] = c.Status + ": " + c.Detail
			if c.Category != "recipe udp-rx" || c.Status == "ok" {
				continue
			}
			if c.Name == "/sys/kernel/tracing" && !hostTracefs && c.Status == "warn" && strings.Contains(c.Detail, "the host has no tracefs") {
				continue
			}
			t.Errorf("udp-rx need %s not met under its own run line: %s: %s", c.Name, c.Status, c.Detail)
		}
		if got := seen["recipe udp-rx//sys/kernel/tracing"]; got == "" {
			t.Error("doctor has no line for udp-rx's tracefs need")
		}
		if got := seen["container/capabilities"]; got != "ok: NET_ADMIN, SYS_PTRACE, SYSLOG, PERFMON, BPF" {
			t.Errorf("capabilities: %s", got)
		}
		if got := seen["container/container"]; !strings.HasPrefix(got, "ok: ") || strings.Contains(got, "not in a container") {
			t.Errorf("container: %s", got)
		}
		if got := seen["container/root file system"]; got != "ok: read-only" {
			t.Errorf("root file system: %s", got)
		}
	})

	t.Run("softirq-balance", func(t *testing.T) {
		code, out, stderr := p.run(p.observe(results, []string{"BPF", "PERFMON"}, "host"), "recipe", "run", "softirq-balance",
			"--set", "duration=2s", "-o", "json")
		if code != 0 {
			t.Fatalf("recipe run softirq-balance in the container: exit %d: %s", code, stderr)
		}
		var r struct {
			Recipe   struct{ Name string }    `json:"recipe"`
			Data     evidence.SoftirqEvidence `json:"data"`
			Overhead evidence.Overhead        `json:"overhead"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if r.Recipe.Name != "softirq-balance" {
			t.Errorf("recipe %q in the report", r.Recipe.Name)
		}
		if len(r.Data.CPUs) != runtime.NumCPU() || len(r.Data.Totals) == 0 {
			t.Fatalf("softirq: %d CPUs, totals %+v", len(r.Data.CPUs), r.Data.Totals)
		}
		// Run for run when the probe ran throughout; when the budget
		// sampled it (another flood on the machine makes softirqs costly),
		// its counts are estimates and agree within their own 95 % bound.
		// Sampled without a bound (one window), the report says so and
		// there is nothing to hold the counts to.
		tol, bounded := 0.03, true
		if e := r.Data.Estimate; e != nil {
			if bounded = e.RelError != nil; bounded {
				tol += *e.RelError
			} else {
				t.Logf("softirq counts sampled in %d window(s) without a bound: not compared", e.Windows)
			}
		}
		for _, v := range r.Data.Totals {
			if bounded && v.ProcCount > 100 && math.Abs(v.Diff) > tol {
				t.Errorf("%s: probe %d vs /proc/softirqs %d (%+.1f %%, allowed ±%.1f %%)", v.Vector, v.Probe, v.ProcCount, v.Diff*100, tol*100)
			}
		}
		// Without CAP_SYS_ADMIN bpf_stats cannot be enabled, and under the
		// budget they stay off anyway: the report says why instead of
		// printing zeros as a measurement.
		if r.Overhead.StatsUnavailable == "" && r.Overhead.StatsOff == "" {
			t.Error("the report does not say why bpf_stats did not measure")
		}
	})

	t.Run("udp-rx on the rig", func(t *testing.T) {
		ctx, lab := rig(t)
		bin := Perfscope(t)
		listen := fmt.Sprintf("%s:%d", lab.ReceiverAddr, labPort)
		srv := lab.Command(ctx, lab.ReceiverNS, bin, "lab", "udp-server", "--listen", listen, "--threads", "2", "--rcvbuf", "4096", "--for", "2m")
		if err := lab.Start(srv); err != nil {
			t.Fatal(err)
		}
		flood := lab.Command(ctx, lab.SenderNS, bin, "lab", "udp-flood", "--target", listen, "--senders", "2", "--flows", "16", "--duration", "2m", "--max-packets", "500000000")
		if err := lab.Start(flood); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		rig := "ns:/run/netns/" + lab.ReceiverNS
		udp := func(caps []string) containerUDPReport {
			t.Helper()
			code, out, stderr := p.run(p.observe(results, caps, rig), "recipe", "run", "udp-rx", "--set", "iface="+lab.ReceiverIf,
				"--set", fmt.Sprint("port=", labPort), "--set", "duration=3s", "-o", "json")
			if code != 0 && code != 1 {
				t.Fatalf("recipe run udp-rx in the container (caps %v): exit %d: %s", caps, code, stderr)
			}
			var r containerUDPReport
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			return r
		}
		r := udp(observeCaps)
		if r.Recipe.Name != "udp-rx" || r.Recipe.Parameters["iface"] != lab.ReceiverIf {
			t.Errorf("recipe in the report: %+v", r.Recipe)
		}
		d := r.Data
		if drops, _ := d.Drops.OnPort(labPort); drops == 0 {
			t.Errorf("no drops on port %d: %+v", labPort, d.Drops)
		}
		found := false
		for _, f := range r.Findings {
			found = found || f.ID == "net.udp-rcvbuf"
		}
		if !found {
			t.Errorf("no net.udp-rcvbuf finding: %+v", r.Findings)
		}
		// CAP_SYS_PTRACE and the host's pid namespace name the socket's
		// owner; the kernel's lock call sites are named either way.
		owner := false
		for _, s := range d.Locks.Sockets {
			owner = owner || (s.Socket.Port == labPort && s.Socket.PID != 0)
		}
		if len(d.Locks.Sockets) > 0 && !owner {
			t.Errorf("socket lock contention without its owner process: %+v", d.Locks.Sockets)
		}
		if hex := hexSites(d.Locks); hex > 0 {
			t.Errorf("%d lock sites are raw addresses with CAP_SYSLOG granted", hex)
		}
		if d.Queues.Unavailable != "" || len(d.Queues.RX) != 4 {
			t.Errorf("queues of the rig's veth: %+v", d.Queues)
		}
		// What doctor says CAP_SYSLOG is for, measured: on this kernel
		// (5.13+) the kernel names its own frames with bpf_snprintf's %ps,
		// so without CAP_SYSLOG (and with /proc/kallsyms showing zeros)
		// the lock sites keep their names; only older kernels lose them.
		noSyslog := udp([]string{"BPF", "PERFMON", "NET_ADMIN", "SYS_PTRACE"})
		if hex := hexSites(noSyslog.Data.Locks); hex > 0 {
			t.Errorf("%d lock sites are raw addresses without CAP_SYSLOG although the kernel can name them", hex)
		}
	})

	t.Run("apply and revert from the privileged line", func(t *testing.T) {
		ctx, lab := rig(t)
		rx, queue := lab.ReceiverNS, "/sys/class/net/"+lab.ReceiverIf+"/queues/rx-0/"
		read := func(file string) string {
			t.Helper()
			out, err := lab.Run(ctx, rx, "cat", queue+file)
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(out)
		}
		// RPS on for rx-0 of the rig's veth and RFS off: net.rfs-off is a
		// finding of the configuration alone, and its typed change is a
		// sysfs write inside the namespace this test created (the
		// host-wide rps_sock_flow_entries is not visible there).
		if _, err := lab.Run(ctx, rx, "sh", "-c", `echo 1 > "$1"`, "sh", queue+"rps_cpus"); err != nil {
			t.Fatal(err)
		}
		before := read("rps_flow_cnt")
		hostEntries, _ := os.ReadFile("/proc/sys/net/core/rps_sock_flow_entries")
		revertDir := t.TempDir()
		// The README's apply line, in the rig's namespace instead of the
		// host's: the host's UTS namespace keeps the host name the revert
		// file is checked against.
		apply := []string{"--rm", "--privileged", "--pid=host", "--uts=host", "--network", "ns:/run/netns/" + rx, "-v", revertDir + ":/results"}
		code, out, stderr := p.run(apply, "udp", "--iface", lab.ReceiverIf, "--duration", "1s", "--no-profile", "-o", "json",
			"--apply", "net.rfs-off", "--revert-dir", "/results")
		if code != 0 && code != 1 {
			t.Fatalf("udp --apply net.rfs-off in the privileged container: exit %d: %s\n%s", code, stderr, out)
		}
		_, rest, ok := strings.Cut(stderr, "revert file: ")
		file, _, _ := strings.Cut(rest, " ")
		file = strings.TrimSpace(file)
		if !ok || !strings.HasPrefix(file, "/results/") {
			t.Fatalf("no revert file announced in /results:\n%s", stderr)
		}
		if _, err := os.Stat(filepath.Join(revertDir, filepath.Base(file))); err != nil {
			t.Fatalf("the revert file is not in the mounted directory: %v", err)
		}
		if got := read("rps_flow_cnt"); got == before || got == "0" {
			t.Fatalf("rps_flow_cnt %s after --apply net.rfs-off (was %s)\n%s", got, before, stderr)
		}
		code, out, stderr = p.run(apply, "udp", "--revert", file)
		if code != 0 {
			t.Fatalf("--revert %s in the privileged container: exit %d: %s\n%s", file, code, stderr, out)
		}
		if got := read("rps_flow_cnt"); got != before {
			t.Errorf("rps_flow_cnt %s after --revert, was %s", got, before)
		}
		if after, _ := os.ReadFile("/proc/sys/net/core/rps_sock_flow_entries"); string(after) != string(hostEntries) {
			t.Errorf("the host's rps_sock_flow_entries changed: %q -> %q", hostEntries, after)
		}
	})

	// A podman container's UDP server, measured by perfscope on the host:
	// its socket comes back attributed to the container's id and podman,
	// and --container with the short id podman prints keeps the run to it.
	t.Run("podman container attributed", func(t *testing.T) {
		port := freeUDPPort(t)
		name := "perfscope-attr-" + strconv.Itoa(port)
		run := p.cmd("run", "-d", "--name", name, "--network", "host", "--read-only", "--cap-drop", "ALL", p.image,
			"lab", "udp-server", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--threads", "1", "--for", "60s")
		out, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("podman run: %v\n%s", err, out)
		}
		id := strings.TrimSpace(string(out))
		defer p.cmd("rm", "-f", name).Run()
		for i := 0; i < 100 && !udpBound(port); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		code, js, stderr := runPerfscope(t, port, "udp", "--iface", "lo", "--container", id[:12], "--duration", "2s", "--no-profile", "--exact", "-o", "json")
		if code != 0 {
			t.Fatalf("perfscope udp --container %s: exit %d: %s", id[:12], code, stderr)
		}
		var r udpReport
		if err := json.Unmarshal(js, &r); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range r.Data.Sockets.Sockets {
			if s.Port != port {
				continue
			}
			found = true
			w := s.Workload
			if w == nil || w.ContainerID == nil || *w.ContainerID != id || w.Runtime == nil || *w.Runtime != "podman" {
				b, _ := json.Marshal(w)
				t.Errorf("socket of container %s: workload %s", id, b)
			}
		}
		if !found {
			t.Errorf("no socket on port %d in %+v", port, r.Data.Sockets)
		}
	})

	t.Run("jvm with the bundled library", func(t *testing.T) {
		app := startSample(t, nil)
		caps := append(append([]string(nil), observeCaps...), "KILL", "SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE")
		code, out, stderr := p.run(p.observe(results, caps, "host"), "jvm", "--pid", fmt.Sprint(app.PID), "-o", "json",
			"--load", app.URL("/alloc?kb=64"), "--requests", "600")
		if code != 0 {
			t.Fatalf("jvm from the container: exit %d: %s", code, stderr)
		}
		var r jvmReport
		var bound struct {
			Data struct {
				Error *float64 `json:"bytes_per_request_error"`
			} `json:"data"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &bound); err != nil {
			t.Fatal(err)
		}
		// Each request allocates at least the 64 KiB it asked for; the
		// figure is sampled, so within its own reported error (a busy
		// machine read 62.2 KiB, 5 % low, at the default interval).
		if r.Data.Requests != 600 || r.Data.AllocBytesProfiler <= 0 || bound.Data.Error == nil ||
			r.Data.BytesPerRequest+*bound.Data.Error < 64*1024 {
			t.Errorf("jvm: requests %d, profiler bytes %d, %.0f B/request ± %v", r.Data.Requests, r.Data.AllocBytesProfiler, r.Data.BytesPerRequest, bound.Data.Error)
		}
		if !app.Healthy() {
			t.Error("the JVM stopped answering")
		}
	})
}

// hexSites counts lock sites named by a raw kernel address.
func hexSites(l evidence.LockSection) int {
	n := 0
	for _, s := range l.Sites {
		if strings.HasPrefix(s.Site, "0xffff") {
			n++
		}
	}
	return n
}

// rig is a netns rig (4-queue veth between two namespaces of its own) for
// one subtest, closed with it.
func rig(t *testing.T) (context.Context, *netlab.Lab) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	lab, err := netlab.New(ctx, netlab.Config{Queues: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	return ctx, lab
}
