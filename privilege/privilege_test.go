package privilege

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/spec"
)

// Every probe and collector of the recipes' catalog — so every part a
// built-in or user recipe can name — has its needs listed, and every
// part needs at least the probes' pair or reads nothing privileged.
func TestEveryRecipePartIsKnown(t *testing.T) {
	for _, c := range append(append([]recipes.Component{}, recipes.Probes...), recipes.Collectors...) {
		if len(Parts[c.Name]) == 0 {
			t.Errorf("catalog %s has no needs listed", c.Name)
		}
		if c.Probe && !Has(Parts[c.Name], Capability, "CAP_BPF") {
			t.Errorf("probe %s: no CAP_BPF", c.Name)
		}
	}
	for _, name := range RecipeNames() {
		parts, err := RecipeParts(name)
		if err != nil || len(parts) == 0 {
			t.Errorf("recipe %s: parts %v, %v", name, parts, err)
		}
	}
	for part, needs := range Parts {
		for _, n := range needs {
			if n.Kind == Capability {
				if _, ok := CapBit(n.Name); !ok {
					t.Errorf("%s: unknown capability %s", part, n.Name)
				}
			}
			if n.Why == "" || n.Without == "" {
				t.Errorf("%s: %s says neither why nor what is lost", part, n.Name)
			}
		}
	}
}

func TestForRecipeUnion(t *testing.T) {
	needs, err := ForRecipe("udp-rx")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(CapabilityNames(needs), ",")
	if got != "CAP_NET_ADMIN,CAP_SYS_PTRACE,CAP_SYSLOG,CAP_PERFMON,CAP_BPF" {
		t.Errorf("udp-rx capabilities = %s", got)
	}
	for _, n := range needs {
		if n.Name == "CAP_SYS_ADMIN" {
			t.Error("udp-rx must not need CAP_SYS_ADMIN")
		}
		if n.Name == HostNetwork && !strings.Contains(n.Without, "netqueue, lockstat, udpdrop, udpsock, netcounters:") {
			t.Errorf("hostNetwork's loss does not name every part: %s", n.Without)
		}
		if n.Name == "CAP_BPF" && (!n.Required || len(n.Parts) != 6) {
			t.Errorf("CAP_BPF: %+v", n)
		}
	}
	softirq, _ := ForRecipe("softirq-balance")
	if got := strings.Join(CapabilityNames(softirq), ","); got != "CAP_PERFMON,CAP_BPF" {
		t.Errorf("softirq-balance capabilities = %s", got)
	}
	if Has(softirq, Namespace, HostPID) || Has(softirq, Namespace, HostNetwork) {
		t.Error("softirq-balance is system-wide in the kernel: no host namespace needed")
	}
	if _, err := ForRecipe("nope"); err == nil || !errors.Is(err, measure.ErrBadInput) || !strings.Contains(err.Error(), "udp-rx") {
		t.Errorf("unknown recipe: %v", err)
	}
}

func TestPodAndRunLine(t *testing.T) {
	needs, _ := ForRecipe("udp-rx")
	pod := Pod(needs)
	sc := pod.Containers[0].SecurityContext
	if !pod.HostPID || !pod.HostNetwork || sc.Privileged != nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		strings.Join(sc.Capabilities.Drop, ",") != "ALL" || len(sc.Capabilities.Add) != 5 || sc.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("observe pod: %+v %+v", pod, sc)
	}
	mounts := map[string]bool{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m.ReadOnly
	}
	if ro, ok := mounts["/sys/kernel/btf"]; !ok || !ro {
		t.Errorf("btf mount: %v", mounts)
	}
	if len(pod.Volumes) != len(pod.Containers[0].VolumeMounts) {
		t.Errorf("volumes and mounts differ: %+v", pod)
	}
	line := RunLine(needs)
	for _, want := range []string{"--cap-drop ALL", "--cap-add BPF", "--read-only", "--pid=host", "--net=host", "-v /sys/kernel/btf:/sys/kernel/btf:ro"} {
		if !strings.Contains(line, want) {
			t.Errorf("run line lacks %q: %s", want, line)
		}
	}
	apply := Pod(append(needs, Apply...))
	if s := apply.Containers[0].SecurityContext; s.Privileged == nil || !*s.Privileged || s.Capabilities != nil {
		t.Errorf("apply pod must be privileged: %+v", s)
	}
	if l := RunLine(append(needs, Apply...)); !strings.Contains(l, "--privileged") || strings.Contains(l, "--cap-drop") {
		t.Errorf("apply run line: %s", l)
	}
}

// The observe container recorded on this machine (podman, the run line
// of the README): what doctor finds in it.
func TestInspectObserveContainer(t *testing.T) {
	env, err := Inspect(procfs.FS{Root: "testdata/observe"}, "6.18.0")
	if err != nil {
		t.Fatal(err)
	}
	if !env.InContainer || env.Runtime != "podman" || !env.HostPID || env.HostNetwork == nil || !*env.HostNetwork ||
		env.Seccomp != 2 || !env.RootReadOnly() {
		t.Fatalf("%+v", env)
	}
	for _, c := range []string{"CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN", "CAP_SYSLOG", "CAP_SYS_PTRACE"} {
		if !env.Capable(c) {
			t.Errorf("%s not effective", c)
		}
	}
	if env.Capable("CAP_SYS_ADMIN") || env.Capable("CAP_DAC_OVERRIDE") {
		t.Error("dropped capabilities reported effective")
	}
	env.access = func(string, uint32) error { return unix.EROFS }
	needs, _ := ForRecipe("udp-rx")
	for _, s := range env.Check(needs) {
		// Recorded before the cgroup hierarchy was a need (optional: it
		// names cgroup ids); the run line then had no such mount.
		if !s.Met && s.Need.Name != "/results" && s.Need.Name != spec.NeedCgroupFS.Name {
			t.Errorf("%s not met: %s", s.Need.Name, s.Detail)
		}
	}
	// --apply in the observe container: /proc/sys is read-only, no
	// SYS_ADMIN.
	missing := map[string]bool{}
	for _, s := range env.Check(Apply) {
		if !s.Met {
			missing[s.Need.Name] = true
		}
	}
	for _, want := range []string{"CAP_SYS_ADMIN", "/proc/sys", "/proc/irq", "/sys", HostUTS} {
		if !missing[want] {
			t.Errorf("apply in the observe container: %s reported met", want)
		}
	}
	jvm, _ := ForRecipe("jvm-alloc")
	for _, s := range env.Check(jvm) {
		if s.Need.Name == "CAP_KILL" && s.Met {
			t.Error("CAP_KILL reported met")
		}
	}
}

func TestInspectPrivilegedContainer(t *testing.T) {
	env, err := Inspect(procfs.FS{Root: "testdata/privileged"}, "6.18.0")
	if err != nil {
		t.Fatal(err)
	}
	if !env.InContainer || env.Seccomp != 0 || env.RootReadOnly() || !env.Capable("CAP_SYS_ADMIN") {
		t.Fatalf("%+v", env)
	}
	if env.HostUTS == nil || !*env.HostUTS {
		t.Errorf("--uts=host not seen: %v", env.HostUTS)
	}
	for _, s := range env.Check(Apply) {
		if !s.Met && s.Need.Kind != Writable && s.Need.Kind != Mount {
			t.Errorf("apply in the privileged container: %s not met: %s", s.Need.Name, s.Detail)
		}
	}
	if line := RunLine(Apply); !strings.Contains(line, "--privileged") || !strings.Contains(line, "--uts=host") {
		t.Errorf("apply run line %q", line)
	}
	m, _ := procfs.MountAt(env.Mounts, "/proc/sys/net/core/rmem_max")
	if m.ReadOnly || m.MountPoint != "/proc" {
		t.Errorf("/proc/sys in a privileged container: %+v", m)
	}
}

func TestNeedsForKernel(t *testing.T) {
	needs, _ := ForRecipe("softirq-balance")
	if Has(NeedsForKernel(needs, "6.18.0"), Capability, "CAP_SYS_RESOURCE") {
		t.Error("6.18 charges BPF memory to the memory cgroup")
	}
	if !Has(NeedsForKernel(needs, "5.10.0-28-amd64"), Capability, "CAP_SYS_RESOURCE") {
		t.Error("5.10 needs CAP_SYS_RESOURCE for RLIMIT_MEMLOCK")
	}
	gc, _ := ForRecipe("gc-pressure")
	if Has(NeedsForKernel(gc, "5.4.0"), Capability, "CAP_SYS_RESOURCE") {
		t.Error("a recipe without probes needs no memlock")
	}
}

// tracefs is never required: where the host has none mounted, the
// observe container is told so (and not to add the -v it already has); a
// container without the -v is told to add it; on the host root mounts it
// itself when it falls back to classic tracepoints.
func TestTracefsNeed(t *testing.T) {
	var need Need
	for _, n := range Parts["softirq"] {
		if n.Name == TracefsPath {
			need = n
		}
	}
	if need.Kind != Mount || need.Required {
		t.Fatalf("softirq's tracefs need: %+v", need)
	}
	check := func(env Environment) Status {
		t.Helper()
		return env.Check([]Need{need})[0]
	}
	inspect := func(root string) Environment {
		t.Helper()
		env, err := Inspect(procfs.FS{Root: root}, "6.18.0")
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	if s := check(inspect("testdata/observe")); !s.Met {
		t.Errorf("host with tracefs: %+v", s)
	}
	noHost := inspect(testutil.WithoutHostTracefs(t, "testdata/observe"))
	if s := check(noHost); s.Met || !strings.Contains(s.Detail, "the host has no tracefs") || !strings.HasPrefix(s.Fix, "on the host: mount -t tracefs") {
		t.Errorf("bound, but the host has no tracefs: %+v", s)
	}
	var unbound []procfs.Mount
	for _, m := range noHost.Mounts {
		if m.MountPoint != TracefsPath {
			unbound = append(unbound, m)
		}
	}
	noHost.Mounts = unbound
	if s := check(noHost); s.Met || !strings.HasPrefix(s.Fix, "-v /sys/kernel/tracing:/sys/kernel/tracing:ro") {
		t.Errorf("not bound into the container: %+v", s)
	}
	host := Environment{fs: procfs.FS{Root: t.TempDir()}, HostPID: true, CapEff: 1 << capBits["CAP_SYS_ADMIN"]}
	if s := check(host); !s.Met || !strings.Contains(s.Detail, "private mount namespace") {
		t.Errorf("root on a host without tracefs: %+v", s)
	}
	host.CapEff = 1<<capBits["CAP_BPF"] | 1<<capBits["CAP_PERFMON"]
	if s := check(host); s.Met || !strings.Contains(s.Fix, "mount -t tracefs") {
		t.Errorf("CAP_BPF+CAP_PERFMON on a host without tracefs: %+v", s)
	}
}
