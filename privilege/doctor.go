package privilege

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/report"
)

// The checks of `perfscope doctor`: the kernel's program types and
// tracepoints, the privileges and sysctls, the container, and a recipe's
// needs, each one line of the report.

// ContainerChecks say what kind of place perfscope runs in. Outside a
// container there is one line.
func ContainerChecks(env Environment, host []report.DoctorCheck) []report.DoctorCheck {
	const cat = "container"
	if !env.InContainer {
		return []report.DoctorCheck{{Category: cat, Name: "container", Status: report.StatusOK, Detail: "not in a container"}}
	}
	detail := "yes: " + env.Evidence
	if env.Runtime != "" {
		detail = env.Runtime + ": " + env.Evidence
	}
	out := []report.DoctorCheck{{Category: cat, Name: "container", Status: report.StatusOK, Detail: detail}}
	var caps []string
	for _, name := range KnownCapabilities() {
		if env.Capable(name) {
			caps = append(caps, strings.TrimPrefix(name, "CAP_"))
		}
	}
	out = append(out, report.DoctorCheck{Category: cat, Name: "capabilities", Status: report.StatusOK, Detail: strings.Join(caps, ", ")})
	if env.Capable("CAP_SYS_ADMIN") {
		out = append(out, report.DoctorCheck{Category: cat, Name: "CAP_SYS_ADMIN", Status: report.StatusWarn, Detail: "granted",
			Affects: "nothing a recipe needs but bpf_stats (perfscope's own BPF run time) and mounting tracefs",
			Fix:     "--cap-drop ALL and add only what `perfscope doctor --recipe NAME` lists"})
	}
	seccomp := report.DoctorCheck{Category: cat, Name: "seccomp", Status: report.StatusOK}
	switch env.Seccomp {
	case 0:
		seccomp.Detail = "off (unconfined or privileged)"
	case 2:
		seccomp.Detail = "a filter (the runtime's profile)"
		if env.Capable("CAP_BPF") && env.Capable("CAP_PERFMON") && !tracingAttaches(host) {
			seccomp.Status = report.StatusMissing
			seccomp.Detail += " refuses bpf() or perf_event_open although CAP_BPF and CAP_PERFMON are granted"
			seccomp.Affects = "every probe"
			seccomp.Fix = "a runtime whose default profile allows them with CAP_BPF/CAP_PERFMON (Docker ≥ 23, containerd ≥ 1.7), or --security-opt seccomp=unconfined"
		}
	default:
		seccomp.Detail = "not reported by this kernel"
	}
	out = append(out, seccomp)
	root := report.DoctorCheck{Category: cat, Name: "root file system", Status: report.StatusOK, Detail: "read-only"}
	if !env.RootReadOnly() {
		root.Status, root.Detail = report.StatusWarn, "writable"
		root.Affects = "nothing: perfscope writes only to the directories you name"
		root.Fix = "--read-only (Kubernetes: readOnlyRootFilesystem: true)"
	}
	out = append(out, root)
	return out
}

// typedAttach is the first of tp_btf and raw_tp that attached — the
// methods that need no tracefs —, or "".
func typedAttach(checks []report.DoctorCheck) string {
	for _, m := range []string{"tp_btf", "raw_tp"} {
		for _, c := range checks {
			if c.Category == "program types" && c.Name == m && c.Status == report.StatusOK {
				return m
			}
		}
	}
	return ""
}

// tracingAttaches: one of the tracepoint program types attached.
func tracingAttaches(checks []report.DoctorCheck) bool {
	for _, c := range checks {
		if c.Category == "program types" && c.Status == report.StatusOK &&
			(c.Name == "tracepoint" || c.Name == "raw_tp" || c.Name == "tp_btf") {
			return true
		}
	}
	return false
}

// RecipeChecks are one line per need of the recipe, and the required
// needs that are not met. host (the kernel's checks) says whether a
// missing fallback loses anything here.
func RecipeChecks(recipe string, env Environment, needs []Need, host []report.DoctorCheck) ([]report.DoctorCheck, []string) {
	var out []report.DoctorCheck
	var missing []string
	for _, s := range env.Check(needs) {
		c := report.DoctorCheck{Category: "recipe " + recipe, Name: s.Need.Name, Status: report.StatusOK, Detail: s.Detail + " — " + s.Need.Why}
		if !s.Met {
			c.Status, c.Affects, c.Fix = report.StatusWarn, "degrades "+s.Need.Without, s.Fix
			c.Detail = s.Detail
			if s.Need.Kind == Mount && s.Need.Name == TracefsPath {
				if m := typedAttach(host); m != "" {
					c.Affects = "nothing while " + m + " attaches, as it does here; " + s.Need.Without
				}
			}
			if s.Need.Required {
				c.Status = report.StatusMissing
				missing = append(missing, s.Need.Name)
			}
		}
		out = append(out, c)
	}
	return out, missing
}

// HostChecks runs every check against the live kernel.
func HostChecks(fs procfs.FS) []report.DoctorCheck {
	var out []report.DoctorCheck
	add := func(c report.DoctorCheck) { out = append(out, c) }

	add(report.DoctorCheck{Category: "kernel", Name: "version", Status: report.StatusOK, Detail: report.KernelRelease()})
	if _, err := os.Stat(fs.Path("/sys/kernel/btf/vmlinux")); err == nil {
		add(report.DoctorCheck{Category: "kernel", Name: "BTF", Status: report.StatusOK, Detail: "/sys/kernel/btf/vmlinux present"})
	} else {
		add(report.DoctorCheck{Category: "kernel", Name: "BTF", Status: report.StatusMissing, Detail: "no /sys/kernel/btf/vmlinux",
			Affects: "tp_btf programs and CO-RE field offsets (socket attribution of lock contention)",
			Fix:     "use a kernel built with CONFIG_DEBUG_INFO_BTF=y"})
	}
	tracefs := ""
	for _, d := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(fs.Path(d + "/events")); err == nil {
			tracefs = d
			break
		}
	}
	if tracefs != "" {
		add(report.DoctorCheck{Category: "kernel", Name: "tracefs", Status: report.StatusOK, Detail: "mounted at " + tracefs})
	} else {
		add(report.DoctorCheck{Category: "kernel", Name: "tracefs", Status: report.StatusWarn, Detail: "not mounted",
			Affects: "classic tracepoints only (tp_btf and raw_tp need no tracefs)",
			Fix:     "perfscope mounts it when it falls back to classic tracepoints and unmounts it after; or: mount -t tracefs nodev /sys/kernel/tracing"})
	}

	tps, btfErr := probes.CheckTracepoints(measure.CatalogHooks())
	// A tracepoint several probes attach is one check, naming every use.
	uses := map[string][]string{}
	for _, tp := range tps {
		name := tp.Hook.String()
		if !slices.Contains(uses[name], tp.UsedFor) {
			uses[name] = append(uses[name], tp.UsedFor)
		}
	}
	for _, tp := range tps {
		name := tp.Hook.String()
		if uses[name] == nil {
			continue // checked already
		}
		c := report.DoctorCheck{Category: "tracepoints", Name: name, Affects: strings.Join(uses[name], "; ")}
		delete(uses, name)
		switch {
		case tp.InBTF || (tp.InTracefs != nil && *tp.InTracefs):
			c.Status, c.Detail = report.StatusOK, "present"
		case btfErr != nil && tp.InTracefs == nil:
			c.Status, c.Detail = report.StatusWarn, "unknown: no kernel BTF and tracefs not mounted"
			c.Fix = "mount tracefs to check"
		default:
			c.Status, c.Detail = report.StatusMissing, "not in this kernel"
			c.Fix = "that section reports \"unavailable\"; a newer kernel has it"
		}
		add(c)
	}

	affects := map[string]string{
		"tracepoint": "fallback attach method for every probe",
		"raw_tp":     "second-choice attach method for every probe",
		"tp_btf":     "preferred attach method (typed arguments)",
		"perf_event": "CPU profiles (profile, udp --flame)",
		"kprobe":     "nothing required: perfscope uses tracepoints only",
		"fentry":     "nothing required: perfscope uses tracepoints only",
	}
	for _, pc := range probes.CheckProgramTypes() {
		c := report.DoctorCheck{Category: "program types", Name: pc.Type, Affects: affects[pc.Type]}
		switch {
		case pc.OK():
			c.Status, c.Detail = report.StatusOK, "loads and attaches"
		case pc.Refused():
			c.Status, c.Detail = report.StatusMissing, fmt.Sprintf("refused by the kernel at %s (EPERM)", pc.Stage)
			c.Fix = "lockdown, an LSM or seccomp forbids it; perfscope does not need it"
		default:
			c.Status, c.Detail = report.StatusMissing, fmt.Sprintf("not available: %s failed: %v", pc.Stage, rootCause(pc.Err))
			if pc.Type == "kprobe" && errors.Is(pc.Err, os.ErrNotExist) {
				// Neither the kprobe PMU nor tracefs' kprobe_events exists.
				c.Detail = "not available: the kernel has no kprobe PMU and no kprobe_events"
				c.Fix = "the kernel is built without CONFIG_KPROBES; perfscope does not need it"
			}
		}
		add(c)
	}

	out = append(out, privilegeChecks(fs)...)
	out = append(out, sysctlChecks(fs)...)
	return out
}

// rootCause is the innermost error message, without the wrapping context
// the check line already says.
func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
			u = j.Unwrap()[len(j.Unwrap())-1]
		}
		err = u
	}
}

func privilegeChecks(fs procfs.FS) []report.DoctorCheck {
	st, err := fs.Status(0)
	if err != nil {
		return []report.DoctorCheck{{Category: "privileges", Name: "capabilities", Status: report.StatusWarn, Detail: "cannot read /proc/self/status: " + err.Error()}}
	}
	var out []report.DoctorCheck
	root := st.UID[1] == 0
	who := fmt.Sprintf("euid %d", st.UID[1])
	if root {
		who = "root (euid 0)"
	}
	out = append(out, report.DoctorCheck{Category: "privileges", Name: "user", Status: report.StatusOK, Detail: who})
	bpfOK := st.Capable(procfs.CapSysAdmin) || (st.Capable(procfs.CapBPF) && st.Capable(procfs.CapPerfmon))
	// Only loading probes is required; the others degrade a section, and
	// a least-privilege container must not fail doctor for lacking them.
	capCheck := func(name string, ok, required bool, affects, fix string) report.DoctorCheck {
		c := report.DoctorCheck{Category: "privileges", Name: name, Affects: affects}
		switch {
		case ok:
			c.Status, c.Detail = report.StatusOK, "effective"
		case required:
			c.Status, c.Detail, c.Fix = report.StatusMissing, "not effective", fix
		default:
			c.Status, c.Detail, c.Fix = report.StatusWarn, "not effective", fix
		}
		return c
	}
	out = append(out,
		capCheck("CAP_BPF + CAP_PERFMON", bpfOK, true, "loading any probe",
			"run as root, or grant CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) to the process/container"),
		capCheck("CAP_NET_ADMIN", st.Capable(procfs.CapNetAdmin), false, "the nftables ruleset in the network configuration, --apply of network settings",
			"run as root or add CAP_NET_ADMIN"),
		capCheck("CAP_SYS_PTRACE", st.Capable(procfs.CapSysPtrace), false, "socket owners, user-space symbols, jvm attach (other processes' /proc/PID/fd, maps and root)",
			"run as root or add CAP_SYS_PTRACE"),
		capCheck("CAP_SYSLOG", st.Capable(procfs.CapSyslog), false, "kernel symbol names in stacks and lock call sites on kernels before 5.13 (/proc/kallsyms addresses); later kernels name their own frames (bpf_snprintf %ps)",
			"run as root or add CAP_SYSLOG"),
	)
	if !st.Capable(procfs.CapSysResource) {
		out = append(out, report.DoctorCheck{Category: "privileges", Name: "CAP_SYS_RESOURCE", Status: report.StatusOK,
			Detail: "absent; fine on kernels ≥ 5.11, which charge BPF memory to the memory cgroup instead of RLIMIT_MEMLOCK"})
	}
	return out
}

func sysctlChecks(fs procfs.FS) []report.DoctorCheck {
	var out []report.DoctorCheck
	if mode, ok := fs.Lockdown(); ok {
		c := report.DoctorCheck{Category: "kernel settings", Name: "lockdown", Detail: mode, Status: report.StatusOK}
		if mode == "confidentiality" {
			c.Status = report.StatusMissing
			c.Affects = "reading kernel memory from BPF and kernel stacks"
			c.Fix = "boot with lockdown=integrity or none"
		}
		out = append(out, c)
	} else {
		out = append(out, report.DoctorCheck{Category: "kernel settings", Name: "lockdown", Status: report.StatusOK, Detail: "lockdown LSM not active"})
	}

	kr, _, _ := fs.SysctlInt("kernel.kptr_restrict")
	readable, err := fs.KallsymsReadable()
	c := report.DoctorCheck{Category: "kernel settings", Name: "kptr_restrict", Detail: fmt.Sprintf("%d", kr), Status: report.StatusOK,
		Affects: "kernel symbol names in stacks and lock call sites"}
	switch {
	case err != nil:
		c.Status, c.Detail = report.StatusWarn, fmt.Sprintf("%d; /proc/kallsyms unreadable: %v", kr, err)
	case !readable:
		c.Status, c.Detail = report.StatusWarn, fmt.Sprintf("%d; /proc/kallsyms shows zero addresses to this process", kr)
		c.Fix = "run as root (CAP_SYSLOG) or sysctl kernel.kptr_restrict=0"
	default:
		c.Detail += "; /proc/kallsyms addresses visible"
	}
	out = append(out, c)

	if v, ok, _ := fs.SysctlInt("kernel.perf_event_paranoid"); ok {
		st, _ := fs.Status(0)
		c := report.DoctorCheck{Category: "kernel settings", Name: "perf_event_paranoid", Detail: fmt.Sprintf("%d", v), Status: report.StatusOK,
			Affects: "CPU profiles without CAP_PERFMON"}
		if v > 2 && !st.Capable(procfs.CapPerfmon) && !st.Capable(procfs.CapSysAdmin) {
			c.Status, c.Fix = report.StatusWarn, "run as root or sysctl kernel.perf_event_paranoid=2"
		}
		out = append(out, c)
	}
	if v, ok, _ := fs.SysctlInt("kernel.unprivileged_bpf_disabled"); ok {
		out = append(out, report.DoctorCheck{Category: "kernel settings", Name: "unprivileged_bpf_disabled", Status: report.StatusOK,
			Detail: fmt.Sprintf("%d (perfscope needs CAP_BPF regardless)", v)})
	}
	if v, ok, _ := fs.SysctlInt("net.core.bpf_jit_enable"); ok {
		c := report.DoctorCheck{Category: "kernel settings", Name: "bpf_jit_enable", Detail: fmt.Sprintf("%d", v), Status: report.StatusOK,
			Affects: "probe overhead: the interpreter is several times slower than the JIT"}
		if v == 0 {
			c.Status, c.Fix = report.StatusWarn, "sysctl net.core.bpf_jit_enable=1"
		}
		out = append(out, c)
	} else {
		out = append(out, report.DoctorCheck{Category: "kernel settings", Name: "bpf_jit_enable", Status: report.StatusOK, Detail: "no sysctl (JIT always on)"})
	}
	if closer, err := probes.EnableStats(); err == nil {
		closer.Close()
		out = append(out, report.DoctorCheck{Category: "kernel settings", Name: "bpf_stats", Status: report.StatusOK,
			Detail: "can be enabled for a run (perfscope reports its own BPF cost)"})
	} else {
		out = append(out, report.DoctorCheck{Category: "kernel settings", Name: "bpf_stats", Status: report.StatusWarn, Detail: rootCause(err),
			Affects: "perfscope's own overhead: BPF runs and run times report 0 (bpf_stats_unavailable says why)",
			Fix:     "needs Linux ≥ 5.8 and CAP_SYS_ADMIN, which the least-privilege container run lines leave out on purpose"})
	}
	return out
}

// RecipeNeeds is what recipe (and, with apply, --apply and --revert)
// needs on this kernel.
func RecipeNeeds(recipe string, apply bool) []Need {
	needs, _ := ForRecipe(recipe)
	if apply {
		needs = append(needs, Apply...)
	}
	return NeedsForKernel(needs, report.KernelRelease())
}

// Doctor is `perfscope doctor`'s data: the kernel's checks, the
// container's (or why it could not be inspected) and, with recipe, what
// the recipe needs here, the docker run line and the pod spec granting
// it; missing are the recipe's required needs that are not met.
func Doctor(checks []report.DoctorCheck, env Environment, envErr error, recipe string, apply bool) (data report.DoctorData, missing []string) {
	data.Checks = checks
	if envErr != nil {
		data.Checks = append(data.Checks, report.DoctorCheck{Category: "container", Name: "environment", Status: report.StatusWarn, Detail: envErr.Error()})
	} else {
		data.Checks = append(data.Checks, ContainerChecks(env, checks)...)
	}
	if recipe == "" {
		return data, nil
	}
	needs := RecipeNeeds(recipe, apply)
	data.Recipe = recipe
	data.RunLine = "docker run " + RunLine(needs) + " IMAGE recipe run " + recipe
	if apply {
		// --apply and --revert belong to perfscope udp.
		data.RunLine = "docker run " + RunLine(needs) + " IMAGE udp --iface IFACE --apply FINDING --revert-dir /results"
	}
	data.Kubernetes = Pod(needs)
	if envErr == nil {
		var rc []report.DoctorCheck
		rc, missing = RecipeChecks(recipe, env, needs, checks)
		data.Checks = append(data.Checks, rc...)
	}
	return data, missing
}

// Verdict is doctor's exit: unavailable (3) when privileges are missing,
// when no tracepoint program type attaches, or when recipe cannot run
// here for want of missing.
func Verdict(checks []report.DoctorCheck, recipe string, missing []string) error {
	var privileges []string
	for _, c := range checks {
		if c.Category == "privileges" && c.Status == report.StatusMissing {
			privileges = append(privileges, c.Name)
		}
	}
	switch {
	case len(privileges) > 0:
		return measure.Unavailable("missing privileges: %s", strings.Join(privileges, ", "))
	case !tracingAttaches(checks):
		return measure.Unavailable("no tracepoint program type can be attached on this kernel")
	case len(missing) > 0:
		return measure.Unavailable("recipe %s cannot run here: missing %s", recipe, strings.Join(missing, ", "))
	}
	return nil
}
