// Package privilege says what each part of a recipe needs when perfscope
// runs in a container — capabilities, mounts, the host's namespaces —,
// what the report loses without each, and what a container actually
// grants. `perfscope doctor --recipe NAME` compares the two and prints the
// least a Kubernetes pod needs; deploy/kubernetes grants exactly that.
//
// The table is measured, not guessed: every capability here was removed
// from the observe run line on this project's machines and the section it
// names degraded (README, "Running in a container or on Kubernetes").
package privilege

import (
	"sort"
	"strings"

	"github.com/perfscope/perfscope/recipes"
)

// Kind is what a need asks of the container.
type Kind string

const (
	// Capability: a Linux capability in the container's effective set.
	Capability Kind = "capability"
	// Mount: a host path mounted into the container.
	Mount Kind = "mount"
	// Namespace: a host namespace shared with the container (hostPID,
	// hostNetwork).
	Namespace Kind = "namespace"
	// Writable: a kernel file system the container must be able to write
	// (only --apply).
	Writable Kind = "writable"
)

// Host namespaces, by their Kubernetes field names.
const (
	HostPID     = "hostPID"
	HostNetwork = "hostNetwork"
	// HostUTS is the host's UTS namespace (its host name): Kubernetes
	// has no field of its own for it and shares it with hostNetwork pods.
	HostUTS = "hostUTS"
)

// Capability bits from include/uapi/linux/capability.h, by name.
var capBits = map[string]int{
	"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_KILL": 5,
	"CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_NET_ADMIN": 12, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21,
	"CAP_SYS_NICE": 23, "CAP_SYS_RESOURCE": 24, "CAP_AUDIT_CONTROL": 30, "CAP_SYSLOG": 34,
	"CAP_PERFMON": 38, "CAP_BPF": 39,
}

// CapBit is the capability's bit number; false for a name not known here.
func CapBit(name string) (int, bool) {
	b, ok := capBits[name]
	return b, ok
}

// Need is one thing a part asks of the container.
type Need struct {
	Kind Kind `json:"kind"`
	// Name is CAP_BPF, a path (/sys/kernel/btf) or hostPID/hostNetwork.
	Name string `json:"name"`
	// Required: without it the part cannot run at all; otherwise the
	// report loses what Without says and the rest still runs.
	Required bool `json:"required"`
	// ReadOnly: a mount that is only read.
	ReadOnly bool `json:"read_only,omitempty"`
	// Why is what perfscope does with it.
	Why string `json:"why"`
	// Without is what the report loses without it.
	Without string `json:"without"`
	// Parts are the recipe parts that need it (filled in by Needs).
	Parts []string `json:"parts,omitempty"`
}

// The needs every probe shares.
var (
	needBPF = Need{Kind: Capability, Name: "CAP_BPF", Required: true,
		Why:     "create BPF maps and load the probes' programs",
		Without: "no probe loads: the part cannot run"}
	needPerfmon = Need{Kind: Capability, Name: "CAP_PERFMON", Required: true,
		Why:     "attach tracing programs (tp_btf, raw_tp, tracepoints) and perf events, read kernel memory from BPF",
		Without: "no probe attaches: the part cannot run"}
	needBTF = Need{Kind: Mount, Name: "/sys/kernel/btf", ReadOnly: true,
		Why:     "the kernel's BTF: typed tp_btf programs and CO-RE field offsets (which socket a contended lock belongs to)",
		Without: "probes fall back to raw_tp; lock contention loses its per-socket attribution where the kernel's layout cannot be read"}
	// tracefs is never required: every probe attaches through tp_btf or
	// raw_tp first, which need no tracefs, and every kernel with CAP_BPF
	// (5.8) has raw_tp (4.17). It serves the classic-tracepoint fallback
	// for a kernel or LSM that refuses both, and doctor's tracepoint list
	// without BTF. A container cannot mount it (that needs CAP_SYS_ADMIN),
	// so the run lines bind the host's read-only: where the host has none
	// mounted, that is an empty directory and nothing else changes.
	needTracefs = Need{Kind: Mount, Name: TracefsPath, ReadOnly: true,
		Why:     "classic tracepoints' ids, when tp_btf and raw_tp are refused; doctor's tracepoint list without BTF",
		Without: "no classic-tracepoint fallback if the kernel refused both tp_btf and raw_tp"}
	needSyslog = Need{Kind: Capability, Name: "CAP_SYSLOG",
		Why:     "read kernel symbol addresses in /proc/kallsyms (kptr_restrict, perf_event_paranoid ≥ 2) — only where the kernel cannot name its own frames (bpf_snprintf's %ps, Linux 5.13+)",
		Without: "on kernels before 5.13, kernel stacks and lock call sites print as raw addresses (0xffffffff…), so function groups and lock classes by name are lost; later kernels name them without it"}
	needPtrace = Need{Kind: Capability, Name: "CAP_SYS_PTRACE",
		Why:     "read other processes' /proc/PID/fd, maps and root (the host's processes hold every capability, so ptrace access checks need it)",
		Without: "sockets lose their owning process (pid, comm); user-space frames stay unsymbolized"}
	needHostPID = Need{Kind: Namespace, Name: HostPID, Required: false,
		Why:     "see the host's processes in /proc: socket owners, threads, the JVM",
		Without: "only the container's own processes are visible: owners, threads and user stacks of everything else are lost"}
	needHostNet = Need{Kind: Namespace, Name: HostNetwork,
		Why:     "the host's interfaces, /proc/net and per-namespace sysctls",
		Without: "the container's own network namespace is measured: interfaces, sockets, SNMP counters and network settings are the container's, not the node's"}
	needNetAdmin = Need{Kind: Capability, Name: "CAP_NET_ADMIN",
		Why:     "list the nftables ruleset over netlink (the netfilter part of the configuration)",
		Without: "config.netfilter_rules is unavailable (the empty-table and conntrack findings cannot fire)"}
	needDACRead = Need{Kind: Capability, Name: "CAP_DAC_READ_SEARCH",
		Why:     "read files of other users: a JVM's /tmp/hsperfdata_USER/PID (mode 0600), GC logs",
		Without: "JVMs running as another user than root have no GC counters; their GC logs are unreadable"}
)

// needCgroupFS attributes processes and sockets to their cgroup,
// container and pod (collectors/cgroup): the pod uid, container id and
// runtime come from /proc/PID/cgroup (hostPID), the cgroup ids from the
// host's hierarchy. Names come from the Kubernetes API
// (deploy/kubernetes/rbac.yaml). The runtimes' state directories would
// name containers too, but their OCI specs hold every container's
// environment (its secrets): they are left out, and docs/kubernetes.md
// says how to add them where the API cannot be reached.
var needCgroupFS = Need{Kind: Mount, Name: "/sys/fs/cgroup", ReadOnly: true,
	Why:     "the host's cgroup hierarchy: each process's cgroup id, and --cgroup given as a directory",
	Without: "workloads lose their cgroup id; the container's own cgroup namespace hides the others' directories"}

// withAttribution is needs and the attribution mount.
func withAttribution(needs ...Need) []Need { return append(needs, needCgroupFS) }

// forOtherUsers is a capability the JVM attach needs only for JVMs that
// run as another user than root.
func forOtherUsers(name, why string) Need {
	return Need{Kind: Capability, Name: name, Why: why, Without: "JVMs of other users than root cannot be attached"}
}

// Parts maps each recipe part (the catalog's probe and collector names) to
// what it needs. A recipe needs the union of its parts.
var Parts = map[string][]Need{
	"softirq":  {needBPF, needPerfmon, needBTF, needTracefs},
	"netqueue": {needBPF, needPerfmon, needBTF, needTracefs, needHostNet},
	"lockstat": withAttribution(needBPF, needPerfmon, needBTF, needTracefs, needSyslog, needPtrace, needHostPID, needHostNet),
	"udpdrop":  {needBPF, needPerfmon, needBTF, needTracefs, needHostNet},
	"udpsock":  withAttribution(needBPF, needPerfmon, needBTF, needTracefs, needPtrace, needHostPID, needHostNet),
	// tcp: the tcpevents tracepoints, sock_diag of the host's network
	// namespace, and the listeners' and connections' owners through /proc.
	"tcp": withAttribution(needBPF, needPerfmon, needBTF, needTracefs, needPtrace, needHostPID, needHostNet),
	"cpuprofile": withAttribution(needBPF, needPerfmon, needBTF, needSyslog, needPtrace, needHostPID,
		Need{Kind: Mount, Name: "/results", Why: "flame graphs and folded stacks a recipe writes (its output directory parameter)",
			Without: "outputs cannot be written (the report on stdout is unaffected)"}),
	"offcpu": {needBPF, needPerfmon, needBTF, needTracefs, needSyslog, needPtrace, needHostPID,
		Need{Kind: Mount, Name: "/results", Why: "the off-CPU flame graph and folded stacks a recipe writes (its output directory parameter)",
			Without: "outputs cannot be written (the report on stdout is unaffected)"}},
	// goalloc: uprobes on the Go program's runtime (perf events of the
	// uprobe PMU), its binary and memory read through /proc/PID (exe,
	// maps, root, mem: MemProfileRate), the passive request count on the
	// syscall tracepoints (tp_btf), its workload, and the outputs.
	"goalloc": withAttribution(needBPF, needPerfmon, needBTF, needPtrace, needHostPID,
		Need{Kind: Mount, Name: "/results", Why: "the allocation flame graph and folded stacks a recipe writes (its output directory parameter)",
			Without: "outputs cannot be written (the report on stdout is unaffected)"}),
	"netcounters": withAttribution(needNetAdmin, needPtrace, needHostPID, needHostNet),
	"hsperfdata":  withAttribution(needPtrace, needHostPID, needDACRead),
	"async-profiler": {needHostPID,
		{Kind: Capability, Name: "CAP_SYS_PTRACE", Required: true,
			Why:     "reach the JVM's /tmp through /proc/PID/root to stage the library and speak the attach protocol",
			Without: "the JVM cannot be attached: the part cannot run"},
		forOtherUsers("CAP_KILL", "send the attach trigger (SIGQUIT) to a JVM running as another user"),
		forOtherUsers("CAP_SETUID", "connect as the JVM's user (JDK 8 accepts only its own uid)"),
		forOtherUsers("CAP_SETGID", "connect as the JVM's group"),
		{Kind: Capability, Name: "CAP_CHOWN",
			Why:     "hand the staging directory in the JVM's /tmp to the JVM's user, who writes the profile there",
			Without: "JVMs of other users than root cannot write their profile"},
		forOtherUsers("CAP_DAC_OVERRIDE", "copy the library into, and clean up, the staging directory owned by the JVM's user")},
	"gclog": {needDACRead,
		{Kind: Mount, Name: "/logs", ReadOnly: true, Why: "the GC log files the recipe reads (mount their directory)",
			Without: "the GC log section is empty"}},
}

// RecipeParts are the catalog names of every probe and collector a
// recipe names — enabled or not: the least a container must grant is what
// the recipe needs under any of its parameters' values. It reads the
// recipe's own definition (recipes.Find: a built-in or a file), so doctor,
// the manifests' test and `recipe run` agree on what a recipe is.
func RecipeParts(nameOrFile string) ([]string, error) {
	r, err := recipes.Find(nameOrFile)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, u := range append(append([]recipes.Use{}, r.Probes...), r.Collectors...) {
		if !seen[u.Name] {
			seen[u.Name] = true
			out = append(out, u.Name)
		}
	}
	return out, nil
}

// ForRecipe is what the recipe (a built-in's name or a file) needs.
func ForRecipe(nameOrFile string) ([]Need, error) {
	parts, err := RecipeParts(nameOrFile)
	if err != nil {
		return nil, err
	}
	return ForParts(parts...), nil
}

// RecipeNames are the built-ins.
func RecipeNames() []string { return recipes.BuiltinNames() }

// ForParts is the union of what the parts need: one Need per kind and
// name, required when any part requires it, read-only only when every
// part only reads it, and Without naming which parts lose what.
func ForParts(parts ...string) []Need {
	type merged struct {
		need    Need
		without []string
		losers  map[string][]string
	}
	byKey := map[string]*merged{}
	var order []string
	for _, p := range parts {
		for _, n := range Parts[p] {
			key := string(n.Kind) + ":" + n.Name
			m, ok := byKey[key]
			if !ok {
				m = &merged{need: n, losers: map[string][]string{}}
				m.need.Parts = nil
				byKey[key] = m
				order = append(order, key)
			} else {
				m.need.Required = m.need.Required || n.Required
				m.need.ReadOnly = m.need.ReadOnly && n.ReadOnly
				if !strings.Contains(m.need.Why, n.Why) {
					m.need.Why += "; " + n.Why
				}
			}
			m.need.Parts = append(m.need.Parts, p)
			if _, seen := m.losers[n.Without]; !seen {
				m.without = append(m.without, n.Without)
			}
			m.losers[n.Without] = append(m.losers[n.Without], p)
		}
	}
	out := make([]Need, 0, len(order))
	for _, k := range order {
		m := byKey[k]
		var lines []string
		for _, w := range m.without {
			lines = append(lines, strings.Join(m.losers[w], ", ")+": "+w)
		}
		m.need.Without = strings.Join(lines, "; ")
		out = append(out, m.need)
	}
	sort.SliceStable(out, func(i, j int) bool { return kindOrder(out[i].Kind) < kindOrder(out[j].Kind) })
	return out
}

func kindOrder(k Kind) int {
	switch k {
	case Capability:
		return 0
	case Namespace:
		return 1
	case Mount:
		return 2
	}
	return 3
}

// Apply is what `--apply` and `--revert` need on top of a recipe: the
// changes are sysctl and sysfs writes, /proc/irq affinity, ethtool and
// nftables over netlink, thread affinity and the audit status, and a
// container runtime mounts /proc/sys, /proc/irq and /sys read-only unless
// the container is privileged.
var Apply = []Need{
	{Kind: Capability, Name: "CAP_NET_ADMIN", Required: true, Why: "net.* sysctls, ethtool features, nftables, RPS/XPS masks",
		Without: "network changes are refused"},
	{Kind: Capability, Name: "CAP_SYS_ADMIN", Required: true, Why: "kernel.* sysctls and IRQ affinity",
		Without: "kernel settings and IRQ affinity are refused"},
	{Kind: Capability, Name: "CAP_SYS_NICE", Why: "thread CPU affinity of another process", Without: "thread-affinity changes are refused"},
	{Kind: Capability, Name: "CAP_AUDIT_CONTROL", Why: "turning syscall auditing off", Without: "the audit change is refused"},
	{Kind: Writable, Name: "/proc/sys", Required: true, Why: "sysctl writes", Without: "every sysctl change fails (read-only file system)"},
	{Kind: Writable, Name: "/proc/irq", Required: true, Why: "IRQ affinity", Without: "IRQ affinity changes fail"},
	{Kind: Writable, Name: "/sys", Required: true, Why: "RPS/XPS masks and flow limits under /sys/class/net", Without: "RPS and XPS changes fail"},
	{Kind: Mount, Name: "/results", Required: true, Why: "the revert file (kept to undo the change later)", Without: "--apply refuses to change anything without a revert file"},
	{Kind: Namespace, Name: HostUTS, Why: "the host's name, which the revert file records and --revert checks",
		Without: "--revert from another container refuses the revert file (another host name)"},
}

// CapabilityNames are the capability names in needs, sorted by bit.
func CapabilityNames(needs []Need) []string {
	var out []string
	for _, n := range needs {
		if n.Kind == Capability {
			out = append(out, n.Name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return capBits[out[i]] < capBits[out[j]] })
	return out
}

// Has reports whether needs has kind:name.
func Has(needs []Need, kind Kind, name string) bool {
	for _, n := range needs {
		if n.Kind == kind && n.Name == name {
			return true
		}
	}
	return false
}

// KnownCapabilities are the capabilities perfscope knows, by bit.
func KnownCapabilities() []string {
	var out []string
	for n := range capBits {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return capBits[out[i]] < capBits[out[j]] })
	return out
}
