package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"go.yaml.in/yaml/v3"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/privilege"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/report"
)

// Check statuses.
const (
	statusOK      = report.StatusOK
	statusWarn    = report.StatusWarn
	statusMissing = report.StatusMissing
)

// DoctorCheck is one line of `perfscope doctor`.
type DoctorCheck = report.DoctorCheck

type doctorOptions struct {
	Output string
	// Recipe checks what that recipe needs against this container's
	// grants; Apply adds what --apply needs; Kubernetes prints only the
	// least pod spec for the recipe.
	Recipe     string
	Apply      bool
	Kubernetes bool
	format     report.Format
	fs         procfs.FS
	// checks and inspect are injectable so tests can run the command
	// without a kernel or a container.
	checks  func(procfs.FS) []DoctorCheck
	inspect func(procfs.FS) (privilege.Environment, error)
}

func newDoctorCmd(g *Globals) *cobra.Command {
	return doctorCmd(g, &doctorOptions{fs: procfs.Default, checks: hostChecks, inspect: inspectEnvironment})
}

func inspectEnvironment(fs procfs.FS) (privilege.Environment, error) {
	return privilege.Inspect(fs, report.KernelRelease())
}

// doctorCmd binds flags to o; tests pass options with fake checks.
func doctorCmd(g *Globals, o *doctorOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this kernel and these privileges can run perfscope's probes",
		Long: `doctor asks the kernel directly what perfscope can use here: it loads and
attaches a minimal program of each type (tracepoint, raw_tp, tp_btf,
perf_event, kprobe, fentry), looks up every tracepoint perfscope uses, and
reads the privileges and sysctls that decide the rest. Nothing is changed.

In a container it also says which capabilities, mounts and host namespaces
are missing. --recipe NAME checks what that recipe needs, says which report
sections degrade without each missing grant, and prints the docker/podman
run line that grants exactly that; --kubernetes prints the least pod spec
(securityContext, host namespaces, volumes) for the recipe instead.

Exit code 3 when no tracepoint attach method works, privileges are missing,
or the recipe needs something the container does not grant.`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := report.ParseFormat("doctor", o.Output)
			if err != nil {
				return asUsage(err)
			}
			o.format = f
			if o.Recipe != "" {
				if _, err := privilege.ForRecipe(o.Recipe); err != nil {
					return err // recipes' errors carry their exit code
				}
			} else if o.Kubernetes || o.Apply {
				return usageError("--kubernetes and --apply describe a recipe's needs: add --recipe NAME (%s)", strings.Join(privilege.RecipeNames(), ", "))
			}
			return o.run(g)
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("doctor")+" (with --kubernetes, text is the pod spec's YAML)")
	cmd.Flags().StringVar(&o.Recipe, "recipe", "", "check what this recipe (a built-in or a file) needs here: "+strings.Join(privilege.RecipeNames(), ", "))
	cmd.Flags().BoolVar(&o.Apply, "apply", false, "with --recipe: also what --apply/--revert need")
	cmd.Flags().BoolVar(&o.Kubernetes, "kubernetes", false, "with --recipe: print only the least Kubernetes pod spec for it")
	_ = cmd.RegisterFlagCompletionFunc("recipe", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return privilege.RecipeNames(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// recipeNeeds is what o.Recipe (and --apply) needs on this kernel.
func (o *doctorOptions) recipeNeeds() []privilege.Need {
	needs, _ := privilege.ForRecipe(o.Recipe)
	if o.Apply {
		needs = append(needs, privilege.Apply...)
	}
	return privilege.NeedsForKernel(needs, report.KernelRelease())
}

func (o *doctorOptions) run(g *Globals) error {
	if o.Kubernetes {
		return o.printPod(g)
	}
	checks := o.checks(o.fs)
	data := report.DoctorData{Checks: checks}
	env, envErr := o.inspect(o.fs)
	if envErr != nil {
		data.Checks = append(data.Checks, DoctorCheck{Category: "container", Name: "environment", Status: statusWarn, Detail: envErr.Error()})
	} else {
		data.Checks = append(data.Checks, containerChecks(env, checks)...)
	}
	var recipeMissing []string
	if o.Recipe != "" {
		needs := o.recipeNeeds()
		data.Recipe = o.Recipe
		data.RunLine = "docker run " + privilege.RunLine(needs) + " IMAGE recipe run " + o.Recipe
		if o.Apply {
			// --apply and --revert belong to perfscope udp.
			data.RunLine = "docker run " + privilege.RunLine(needs) + " IMAGE udp --iface IFACE --apply FINDING --revert-dir /results"
		}
		data.Kubernetes = privilege.Pod(needs)
		if envErr == nil {
			var rc []DoctorCheck
			rc, recipeMissing = recipeChecks(o.Recipe, env, needs, checks)
			data.Checks = append(data.Checks, rc...)
		}
	}
	r := report.New("doctor", Version(), g.Started)
	r.Data = data
	if err := report.Render(g.Out, r, o.format); err != nil {
		return err
	}
	if err := doctorVerdict(data.Checks); err != nil {
		return err
	}
	if len(recipeMissing) > 0 {
		return unavailableError("recipe %s cannot run here: missing %s", o.Recipe, strings.Join(recipeMissing, ", "))
	}
	return nil
}

// printPod prints the least pod spec for the recipe, as YAML (text) or
// JSON, for kubectl and for deploy/kubernetes' test.
func (o *doctorOptions) printPod(g *Globals) error {
	pod := privilege.Pod(o.recipeNeeds())
	if o.format == report.JSON {
		return report.WriteJSON(g.Out, pod)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(pod); err != nil {
		return err
	}
	apply := ""
	if o.Apply {
		apply = " --apply"
	}
	_, err := fmt.Fprintf(g.Out, "# perfscope doctor --recipe %s%s --kubernetes: the least a pod needs to run it\n%s", o.Recipe, apply, b.String())
	return err
}

// containerChecks say what kind of place perfscope runs in. Outside a
// container there is one line.
func containerChecks(env privilege.Environment, host []DoctorCheck) []DoctorCheck {
	const cat = "container"
	if !env.InContainer {
		return []DoctorCheck{{Category: cat, Name: "container", Status: statusOK, Detail: "not in a container"}}
	}
	detail := "yes: " + env.Evidence
	if env.Runtime != "" {
		detail = env.Runtime + ": " + env.Evidence
	}
	out := []DoctorCheck{{Category: cat, Name: "container", Status: statusOK, Detail: detail}}
	var caps []string
	for _, name := range privilege.KnownCapabilities() {
		if env.Capable(name) {
			caps = append(caps, strings.TrimPrefix(name, "CAP_"))
		}
	}
	out = append(out, DoctorCheck{Category: cat, Name: "capabilities", Status: statusOK, Detail: strings.Join(caps, ", ")})
	if env.Capable("CAP_SYS_ADMIN") {
		out = append(out, DoctorCheck{Category: cat, Name: "CAP_SYS_ADMIN", Status: statusWarn, Detail: "granted",
			Affects: "nothing a recipe needs but bpf_stats (perfscope's own BPF run time) and mounting tracefs",
			Fix:     "--cap-drop ALL and add only what `perfscope doctor --recipe NAME` lists"})
	}
	seccomp := DoctorCheck{Category: cat, Name: "seccomp", Status: statusOK}
	switch env.Seccomp {
	case 0:
		seccomp.Detail = "off (unconfined or privileged)"
	case 2:
		seccomp.Detail = "a filter (the runtime's profile)"
		if env.Capable("CAP_BPF") && env.Capable("CAP_PERFMON") && !tracingAttaches(host) {
			seccomp.Status = statusMissing
			seccomp.Detail += " refuses bpf() or perf_event_open although CAP_BPF and CAP_PERFMON are granted"
			seccomp.Affects = "every probe"
			seccomp.Fix = "a runtime whose default profile allows them with CAP_BPF/CAP_PERFMON (Docker ≥ 23, containerd ≥ 1.7), or --security-opt seccomp=unconfined"
		}
	default:
		seccomp.Detail = "not reported by this kernel"
	}
	out = append(out, seccomp)
	root := DoctorCheck{Category: cat, Name: "root file system", Status: statusOK, Detail: "read-only"}
	if !env.RootReadOnly() {
		root.Status, root.Detail = statusWarn, "writable"
		root.Affects = "nothing: perfscope writes only to the directories you name"
		root.Fix = "--read-only (Kubernetes: readOnlyRootFilesystem: true)"
	}
	out = append(out, root)
	return out
}

// typedAttach is the first of tp_btf and raw_tp that attached — the
// methods that need no tracefs —, or "".
func typedAttach(checks []DoctorCheck) string {
	for _, m := range []string{"tp_btf", "raw_tp"} {
		for _, c := range checks {
			if c.Category == "program types" && c.Name == m && c.Status == statusOK {
				return m
			}
		}
	}
	return ""
}

// tracingAttaches: one of the tracepoint program types attached.
func tracingAttaches(checks []DoctorCheck) bool {
	for _, c := range checks {
		if c.Category == "program types" && c.Status == statusOK &&
			(c.Name == "tracepoint" || c.Name == "raw_tp" || c.Name == "tp_btf") {
			return true
		}
	}
	return false
}

// recipeChecks are one line per need of the recipe, and the required
// needs that are not met. host (the kernel's checks) says whether a
// missing fallback loses anything here.
func recipeChecks(recipe string, env privilege.Environment, needs []privilege.Need, host []DoctorCheck) ([]DoctorCheck, []string) {
	var out []DoctorCheck
	var missing []string
	for _, s := range env.Check(needs) {
		c := DoctorCheck{Category: "recipe " + recipe, Name: s.Need.Name, Status: statusOK, Detail: s.Detail + " — " + s.Need.Why}
		if !s.Met {
			c.Status, c.Affects, c.Fix = statusWarn, "degrades "+s.Need.Without, s.Fix
			c.Detail = s.Detail
			if s.Need.Kind == privilege.Mount && s.Need.Name == privilege.TracefsPath {
				if m := typedAttach(host); m != "" {
					c.Affects = "nothing while " + m + " attaches, as it does here; " + s.Need.Without
				}
			}
			if s.Need.Required {
				c.Status = statusMissing
				missing = append(missing, s.Need.Name)
			}
		}
		out = append(out, c)
	}
	return out, missing
}

// doctorVerdict fails with exit 3 when perfscope cannot attach anything.
func doctorVerdict(checks []DoctorCheck) error {
	attachable := false
	var missing []string
	for _, c := range checks {
		if c.Category == "program types" && c.Status == statusOK &&
			(c.Name == "tracepoint" || c.Name == "raw_tp" || c.Name == "tp_btf") {
			attachable = true
		}
		if c.Category == "privileges" && c.Status == statusMissing {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) > 0 {
		return unavailableError("missing privileges: %s", strings.Join(missing, ", "))
	}
	if !attachable {
		return unavailableError("no tracepoint program type can be attached on this kernel")
	}
	return nil
}

// hostChecks runs every check against the live kernel.
func hostChecks(fs procfs.FS) []DoctorCheck {
	var out []DoctorCheck
	add := func(c DoctorCheck) { out = append(out, c) }

	add(DoctorCheck{Category: "kernel", Name: "version", Status: statusOK, Detail: report.KernelRelease()})
	if _, err := os.Stat(fs.Path("/sys/kernel/btf/vmlinux")); err == nil {
		add(DoctorCheck{Category: "kernel", Name: "BTF", Status: statusOK, Detail: "/sys/kernel/btf/vmlinux present"})
	} else {
		add(DoctorCheck{Category: "kernel", Name: "BTF", Status: statusMissing, Detail: "no /sys/kernel/btf/vmlinux",
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
		add(DoctorCheck{Category: "kernel", Name: "tracefs", Status: statusOK, Detail: "mounted at " + tracefs})
	} else {
		add(DoctorCheck{Category: "kernel", Name: "tracefs", Status: statusWarn, Detail: "not mounted",
			Affects: "classic tracepoints only (tp_btf and raw_tp need no tracefs)",
			Fix:     "perfscope mounts it when it falls back to classic tracepoints and unmounts it after; or: mount -t tracefs nodev /sys/kernel/tracing"})
	}

	tps, btfErr := probes.CheckTracepoints()
	for _, tp := range tps {
		c := DoctorCheck{Category: "tracepoints", Name: tp.Hook.String(), Affects: tp.UsedFor}
		switch {
		case tp.InBTF || (tp.InTracefs != nil && *tp.InTracefs):
			c.Status, c.Detail = statusOK, "present"
		case btfErr != nil && tp.InTracefs == nil:
			c.Status, c.Detail = statusWarn, "unknown: no kernel BTF and tracefs not mounted"
			c.Fix = "mount tracefs to check"
		default:
			c.Status, c.Detail = statusMissing, "not in this kernel"
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
		c := DoctorCheck{Category: "program types", Name: pc.Type, Affects: affects[pc.Type]}
		switch {
		case pc.OK():
			c.Status, c.Detail = statusOK, "loads and attaches"
		case pc.Refused():
			c.Status, c.Detail = statusMissing, fmt.Sprintf("refused by the kernel at %s (EPERM)", pc.Stage)
			c.Fix = "lockdown, an LSM or seccomp forbids it; perfscope does not need it"
		default:
			c.Status, c.Detail = statusMissing, fmt.Sprintf("not available: %s failed: %v", pc.Stage, rootCause(pc.Err))
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

func privilegeChecks(fs procfs.FS) []DoctorCheck {
	st, err := fs.Status(0)
	if err != nil {
		return []DoctorCheck{{Category: "privileges", Name: "capabilities", Status: statusWarn, Detail: "cannot read /proc/self/status: " + err.Error()}}
	}
	var out []DoctorCheck
	root := st.UID[1] == 0
	who := fmt.Sprintf("euid %d", st.UID[1])
	if root {
		who = "root (euid 0)"
	}
	out = append(out, DoctorCheck{Category: "privileges", Name: "user", Status: statusOK, Detail: who})
	bpfOK := st.Capable(procfs.CapSysAdmin) || (st.Capable(procfs.CapBPF) && st.Capable(procfs.CapPerfmon))
	// Only loading probes is required; the others degrade a section, and
	// a least-privilege container must not fail doctor for lacking them.
	capCheck := func(name string, ok, required bool, affects, fix string) DoctorCheck {
		c := DoctorCheck{Category: "privileges", Name: name, Affects: affects}
		switch {
		case ok:
			c.Status, c.Detail = statusOK, "effective"
		case required:
			c.Status, c.Detail, c.Fix = statusMissing, "not effective", fix
		default:
			c.Status, c.Detail, c.Fix = statusWarn, "not effective", fix
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
		out = append(out, DoctorCheck{Category: "privileges", Name: "CAP_SYS_RESOURCE", Status: statusOK,
			Detail: "absent; fine on kernels ≥ 5.11, which charge BPF memory to the memory cgroup instead of RLIMIT_MEMLOCK"})
	}
	return out
}

func sysctlChecks(fs procfs.FS) []DoctorCheck {
	var out []DoctorCheck
	if mode, ok := fs.Lockdown(); ok {
		c := DoctorCheck{Category: "kernel settings", Name: "lockdown", Detail: mode, Status: statusOK}
		if mode == "confidentiality" {
			c.Status = statusMissing
			c.Affects = "reading kernel memory from BPF and kernel stacks"
			c.Fix = "boot with lockdown=integrity or none"
		}
		out = append(out, c)
	} else {
		out = append(out, DoctorCheck{Category: "kernel settings", Name: "lockdown", Status: statusOK, Detail: "lockdown LSM not active"})
	}

	kr, _, _ := fs.SysctlInt("kernel.kptr_restrict")
	readable, err := fs.KallsymsReadable()
	c := DoctorCheck{Category: "kernel settings", Name: "kptr_restrict", Detail: fmt.Sprintf("%d", kr), Status: statusOK,
		Affects: "kernel symbol names in stacks and lock call sites"}
	switch {
	case err != nil:
		c.Status, c.Detail = statusWarn, fmt.Sprintf("%d; /proc/kallsyms unreadable: %v", kr, err)
	case !readable:
		c.Status, c.Detail = statusWarn, fmt.Sprintf("%d; /proc/kallsyms shows zero addresses to this process", kr)
		c.Fix = "run as root (CAP_SYSLOG) or sysctl kernel.kptr_restrict=0"
	default:
		c.Detail += "; /proc/kallsyms addresses visible"
	}
	out = append(out, c)

	if v, ok, _ := fs.SysctlInt("kernel.perf_event_paranoid"); ok {
		st, _ := fs.Status(0)
		c := DoctorCheck{Category: "kernel settings", Name: "perf_event_paranoid", Detail: fmt.Sprintf("%d", v), Status: statusOK,
			Affects: "CPU profiles without CAP_PERFMON"}
		if v > 2 && !st.Capable(procfs.CapPerfmon) && !st.Capable(procfs.CapSysAdmin) {
			c.Status, c.Fix = statusWarn, "run as root or sysctl kernel.perf_event_paranoid=2"
		}
		out = append(out, c)
	}
	if v, ok, _ := fs.SysctlInt("kernel.unprivileged_bpf_disabled"); ok {
		out = append(out, DoctorCheck{Category: "kernel settings", Name: "unprivileged_bpf_disabled", Status: statusOK,
			Detail: fmt.Sprintf("%d (perfscope needs CAP_BPF regardless)", v)})
	}
	if v, ok, _ := fs.SysctlInt("net.core.bpf_jit_enable"); ok {
		c := DoctorCheck{Category: "kernel settings", Name: "bpf_jit_enable", Detail: fmt.Sprintf("%d", v), Status: statusOK,
			Affects: "probe overhead: the interpreter is several times slower than the JIT"}
		if v == 0 {
			c.Status, c.Fix = statusWarn, "sysctl net.core.bpf_jit_enable=1"
		}
		out = append(out, c)
	} else {
		out = append(out, DoctorCheck{Category: "kernel settings", Name: "bpf_jit_enable", Status: statusOK, Detail: "no sysctl (JIT always on)"})
	}
	if closer, err := probes.EnableStats(); err == nil {
		closer.Close()
		out = append(out, DoctorCheck{Category: "kernel settings", Name: "bpf_stats", Status: statusOK,
			Detail: "can be enabled for a run (perfscope reports its own BPF cost)"})
	} else {
		out = append(out, DoctorCheck{Category: "kernel settings", Name: "bpf_stats", Status: statusWarn, Detail: rootCause(err),
			Affects: "perfscope's own overhead: BPF runs and run times report 0 (bpf_stats_unavailable says why)",
			Fix:     "needs Linux ≥ 5.8 and CAP_SYS_ADMIN, which the least-privilege container run lines leave out on purpose"})
	}
	return out
}
