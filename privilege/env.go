package privilege

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/spec"
)

// Environment is what the process perfscope runs in grants: its
// capabilities, namespaces, mounts and seccomp mode, as read from /proc.
type Environment struct {
	// InContainer and Runtime say whether perfscope runs in a container
	// and which runtime left its mark ("docker", "podman", "kubernetes";
	// "" when none did); Evidence says how that was decided.
	InContainer bool
	Runtime     string
	Evidence    string
	// CapEff is the effective capability set.
	CapEff uint64
	// HostPID: the process is in the initial pid namespace. HostNetwork
	// and HostUTS: its network and UTS namespaces are the initial ones
	// (kthreadd's); nil when that cannot be read (without hostPID).
	HostPID     bool
	HostNetwork *bool
	HostUTS     *bool
	Mounts      []procfs.Mount
	// Seccomp is 0 (off), 2 (a filter: the runtime's profile) or -1.
	Seccomp    int
	NoNewPrivs bool
	// Kernel is the running kernel's release.
	Kernel string
	// fs reads the files the mount needs look for.
	fs procfs.FS
	// access is unix.Access, replaced in tests.
	access func(path string, mode uint32) error
}

// Inspect reads the environment of the current process below fs's root.
func Inspect(fs procfs.FS, kernel string) (Environment, error) {
	env := Environment{fs: fs, Kernel: kernel, Seccomp: -1, access: unix.Access}
	st, err := fs.Status(0)
	if err != nil {
		return env, fmt.Errorf("read /proc/self/status: %w", err)
	}
	env.CapEff, env.Seccomp, env.NoNewPrivs = st.CapEff, st.Seccomp, st.NoNewPrivs
	// In a child pid namespace NStgid lists one id per level.
	env.HostPID = len(st.NStgid) <= 1
	if env.Mounts, err = fs.Mounts(); err != nil {
		return env, fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	if env.HostPID {
		env.HostNetwork, env.HostUTS = sameAsHost(fs, "net"), sameAsHost(fs, "uts")
	}
	env.detectContainer()
	return env, nil
}

// detectContainer decides from the marks runtimes leave: Kubernetes'
// service variables, podman's /run/.containerenv, Docker's /.dockerenv,
// then a mount namespace other than pid 1's (with hostPID) or a pid
// namespace of its own.
func (env *Environment) detectContainer() {
	exists := func(p string) bool { _, err := os.Stat(env.fs.Path(p)); return err == nil }
	switch {
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		env.InContainer, env.Runtime, env.Evidence = true, "kubernetes", "KUBERNETES_SERVICE_HOST is set"
	case exists("/run/.containerenv"):
		env.InContainer, env.Runtime, env.Evidence = true, "podman", "/run/.containerenv exists"
	case exists("/.dockerenv"):
		env.InContainer, env.Runtime, env.Evidence = true, "docker", "/.dockerenv exists"
	case !env.HostPID:
		env.InContainer, env.Evidence = true, "a pid namespace of its own"
	default:
		// kthreadd first: its namespace links read without ptrace rights.
		self, err := os.Readlink(env.fs.Path("/proc/self/ns/mnt"))
		for _, pid := range []string{"2", "1"} {
			init, err2 := os.Readlink(env.fs.Path("/proc/" + pid + "/ns/mnt"))
			if err != nil || err2 != nil {
				continue
			}
			if self != init {
				env.InContainer, env.Evidence = true, "a mount namespace other than the host's"
			}
			break
		}
	}
}

// Capable reports whether the named capability is effective.
func (env Environment) Capable(name string) bool {
	b, ok := capBits[name]
	return ok && env.CapEff&(1<<uint(b)) != 0
}

// RootReadOnly: the container's root file system is mounted read-only.
func (env Environment) RootReadOnly() bool {
	m, ok := procfs.MountAt(env.Mounts, "/")
	return ok && m.ReadOnly
}

// writableProbe is a file whose writability stands for a kernel file
// system's: the runtime mounts each read-only as a whole.
var writableProbe = map[string]string{
	"/proc/sys": "/proc/sys/net/core/rmem_max",
	"/proc/irq": "/proc/irq/default_smp_affinity",
	"/sys":      "/sys/class/net/lo/queues/rx-0/rps_cpus",
}

// Status is one need checked against the environment.
type Status struct {
	Need   Need
	Met    bool
	Detail string
	Fix    string
}

// Check says which of needs the environment meets. Mounts and namespaces
// are judged only in a container: on the host every path and namespace is
// the host's own.
func (env Environment) Check(needs []Need) []Status {
	var out []Status
	for _, n := range needs {
		s := Status{Need: n}
		switch n.Kind {
		case Capability:
			s.Met = env.Capable(n.Name)
			s.Detail = "effective"
			if !s.Met {
				s.Detail = "not in the effective set"
				s.Fix = fmt.Sprintf("--cap-add %s (Kubernetes: securityContext.capabilities.add: [%s])", strings.TrimPrefix(n.Name, "CAP_"), strings.TrimPrefix(n.Name, "CAP_"))
			}
		case Namespace:
			s.Met, s.Detail, s.Fix = env.checkNamespace(n.Name)
		case Mount:
			s.Met, s.Detail, s.Fix = env.checkMount(n)
		case Writable:
			s.Met, s.Detail, s.Fix = env.checkWritable(n.Name)
		}
		out = append(out, s)
	}
	return out
}

// sameAsHost says whether this process's namespace of kind is the
// initial one; nil when either link cannot be read.
func sameAsHost(fs procfs.FS, kind string) *bool {
	self, err := os.Readlink(fs.Path("/proc/self/ns/" + kind))
	if err != nil {
		return nil
	}
	// kthreadd (pid 2) lives in the initial namespaces and, unlike an
	// init holding every capability, its namespace links read without
	// CAP_SYS_PTRACE.
	for _, pid := range []string{"2", "1"} {
		if init, err := os.Readlink(fs.Path("/proc/" + pid + "/ns/" + kind)); err == nil {
			same := init == self
			return &same
		}
	}
	return nil
}

func (env Environment) checkNamespace(name string) (bool, string, string) {
	if !env.InContainer {
		return true, "not in a container", ""
	}
	switch name {
	case HostPID:
		if env.HostPID {
			return true, "the host's pid namespace", ""
		}
		return false, "a pid namespace of its own", "--pid=host (Kubernetes: hostPID: true)"
	case HostNetwork:
		return sharedWithHost(env.HostNetwork, "network namespace", "--net=host (Kubernetes: hostNetwork: true)")
	case HostUTS:
		return sharedWithHost(env.HostUTS, "UTS namespace (host name)", "--uts=host (Kubernetes: hostNetwork: true)")
	}
	return false, "unknown namespace " + name, ""
}

// sharedWithHost checks a namespace read by sameAsHost.
func sharedWithHost(same *bool, what, fix string) (bool, string, string) {
	switch {
	case same == nil:
		return false, "unknown: the host's " + what + " cannot be read (needs hostPID)", fix
	case *same:
		return true, "the host's " + what, ""
	}
	return false, "a " + what + " other than the host's", fix
}

// mountProbe is the file that shows a mount need is met.
var mountProbe = map[string]string{
	"/sys/kernel/btf": "/sys/kernel/btf/vmlinux",
}

func (env Environment) checkMount(n Need) (bool, string, string) {
	if n.Name == TracefsPath {
		return env.checkTracefs(n)
	}
	probe := n.Name
	if p, ok := mountProbe[n.Name]; ok {
		probe = p
	}
	fix := fmt.Sprintf("-v %s:%s%s (Kubernetes: a hostPath volume)", n.Name, n.Name, map[bool]string{true: ":ro"}[n.ReadOnly])
	if _, err := os.Stat(env.fs.Path(probe)); err != nil {
		if !env.InContainer && (n.Name == "/results" || n.Name == "/logs") {
			// On the host these are whatever directory the user names.
			return true, "not in a container: any directory you name", ""
		}
		return false, fmt.Sprintf("%s is not there", probe), fix
	}
	m, _ := procfs.MountAt(env.Mounts, n.Name)
	if !n.ReadOnly && m.ReadOnly {
		return false, fmt.Sprintf("mounted read-only (%s)", m.MountPoint), fix
	}
	return true, fmt.Sprintf("%s present", probe), ""
}

// TracefsPath is where perfscope looks for tracefs and mounts it.
const TracefsPath = spec.TracefsPath

// checkTracefs judges tracefs, which only the classic-tracepoint fallback
// reads. On the host, root mounts it itself in a private mount namespace
// when it falls back (probes.WithTracefs). A container sees it only through
// a bind mount of the host's, which is an empty sysfs directory when the
// host has not mounted tracefs: adding the -v line again would not help.
func (env Environment) checkTracefs(n Need) (bool, string, string) {
	events := TracefsPath + "/events"
	if _, err := os.Stat(env.fs.Path(events)); err == nil {
		return true, events + " present", ""
	}
	if !env.InContainer {
		if env.Capable("CAP_SYS_ADMIN") {
			return true, "not mounted; perfscope mounts it in a private mount namespace when it falls back to classic tracepoints", ""
		}
		return false, "not mounted, and mounting it needs CAP_SYS_ADMIN", "as root: mount -t tracefs nodev " + TracefsPath
	}
	if m, ok := procfs.MountAt(env.Mounts, TracefsPath); ok && strings.TrimSuffix(m.MountPoint, "/") == TracefsPath && m.FSType != "tracefs" {
		return false, fmt.Sprintf("mounted into the container, but the host has no tracefs at %s (an empty %s directory)", TracefsPath, m.FSType),
			"on the host: mount -t tracefs nodev " + TracefsPath
	}
	return false, events + " is not there", fmt.Sprintf("-v %s:%s:ro (Kubernetes: a hostPath volume)", TracefsPath, TracefsPath)
}

func (env Environment) checkWritable(name string) (bool, string, string) {
	probe := writableProbe[name]
	if probe == "" {
		probe = name
	}
	fix := "--privileged (Kubernetes: securityContext.privileged: true): runtimes mount it read-only otherwise"
	if err := env.access(env.fs.Path(probe), unix.W_OK); err != nil {
		return false, fmt.Sprintf("%s: %v", probe, err), fix
	}
	return true, probe + " writable", ""
}

// NeedsForKernel adds what an older kernel needs: before 5.11 BPF memory
// counts against RLIMIT_MEMLOCK, which only CAP_SYS_RESOURCE can raise.
func NeedsForKernel(needs []Need, release string) []Need {
	if !Has(needs, Capability, "CAP_BPF") || !kernelBefore(release, 5, 11) {
		return needs
	}
	return append(needs, Need{Kind: Capability, Name: "CAP_SYS_RESOURCE", Required: true,
		Why:     "raise RLIMIT_MEMLOCK: kernels before 5.11 charge BPF maps to it",
		Without: "maps larger than the memlock limit fail to load"})
}

func kernelBefore(release string, major, minor int) bool {
	var a, b int
	if _, err := fmt.Sscanf(release, "%d.%d", &a, &b); err != nil {
		return false
	}
	return a < major || (a == major && b < minor)
}
