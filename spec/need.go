package spec

// NeedKind is what a need asks of a container.
type NeedKind string

const (
	// Capability: a Linux capability in the container's effective set.
	Capability NeedKind = "capability"
	// Mount: a host path mounted into the container.
	Mount NeedKind = "mount"
	// Namespace: a host namespace shared with the container (hostPID,
	// hostNetwork).
	Namespace NeedKind = "namespace"
	// Writable: a kernel file system the container must be able to write
	// (only --apply).
	Writable NeedKind = "writable"
)

// Host namespaces, by their Kubernetes field names.
const (
	HostPID     = "hostPID"
	HostNetwork = "hostNetwork"
	// HostUTS is the host's UTS namespace (its host name): Kubernetes
	// has no field of its own for it and shares it with hostNetwork pods.
	HostUTS = "hostUTS"
)

// TracefsPath is where perfscope looks for tracefs and mounts it.
const TracefsPath = "/sys/kernel/tracing"

// Need is one thing a part asks of the container it runs in.
type Need struct {
	Kind NeedKind `json:"kind"`
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
	// Parts are the recipe parts that need it (filled in when needs are
	// merged).
	Parts []string `json:"parts,omitempty"`
}

// The needs parts share. Every capability here was removed from the
// observe run line on this project's machines and the section it names
// degraded (docs/containers.md).
var (
	NeedBPF = Need{Kind: Capability, Name: "CAP_BPF", Required: true,
		Why:     "create BPF maps and load the probes' programs",
		Without: "no probe loads: the part cannot run"}
	NeedPerfmon = Need{Kind: Capability, Name: "CAP_PERFMON", Required: true,
		Why:     "attach tracing programs (tp_btf, raw_tp, tracepoints) and perf events, read kernel memory from BPF",
		Without: "no probe attaches: the part cannot run"}
	NeedBTF = Need{Kind: Mount, Name: "/sys/kernel/btf", ReadOnly: true,
		Why:     "the kernel's BTF: typed tp_btf programs and CO-RE field offsets (which socket a contended lock belongs to)",
		Without: "probes fall back to raw_tp; lock contention loses its per-socket attribution where the kernel's layout cannot be read"}
	// NeedTracefs is never required: every probe attaches through tp_btf
	// or raw_tp first, which need no tracefs, and every kernel with
	// CAP_BPF (5.8) has raw_tp (4.17). It serves the classic-tracepoint
	// fallback for a kernel or LSM that refuses both, and doctor's
	// tracepoint list without BTF. A container cannot mount it (that needs
	// CAP_SYS_ADMIN), so the run lines bind the host's read-only: where the
	// host has none mounted, that is an empty directory and nothing else
	// changes.
	NeedTracefs = Need{Kind: Mount, Name: TracefsPath, ReadOnly: true,
		Why:     "classic tracepoints' ids, when tp_btf and raw_tp are refused; doctor's tracepoint list without BTF",
		Without: "no classic-tracepoint fallback if the kernel refused both tp_btf and raw_tp"}
	NeedSyslog = Need{Kind: Capability, Name: "CAP_SYSLOG",
		Why:     "read kernel symbol addresses in /proc/kallsyms (kptr_restrict, perf_event_paranoid ≥ 2) — only where the kernel cannot name its own frames (bpf_snprintf's %ps, Linux 5.13+)",
		Without: "on kernels before 5.13, kernel stacks and lock call sites print as raw addresses (0xffffffff…), so function groups and lock classes by name are lost; later kernels name them without it"}
	NeedPtrace = Need{Kind: Capability, Name: "CAP_SYS_PTRACE",
		Why:     "read other processes' /proc/PID/fd, maps and root (the host's processes hold every capability, so ptrace access checks need it)",
		Without: "sockets lose their owning process (pid, comm); user-space frames stay unsymbolized"}
	NeedHostPID = Need{Kind: Namespace, Name: HostPID, Required: false,
		Why:     "see the host's processes in /proc: socket owners, threads, the JVM",
		Without: "only the container's own processes are visible: owners, threads and user stacks of everything else are lost"}
	NeedHostNet = Need{Kind: Namespace, Name: HostNetwork,
		Why:     "the host's interfaces, /proc/net and per-namespace sysctls",
		Without: "the container's own network namespace is measured: interfaces, sockets, SNMP counters and network settings are the container's, not the node's"}
	NeedNetAdmin = Need{Kind: Capability, Name: "CAP_NET_ADMIN",
		Why:     "list the nftables ruleset over netlink (the netfilter part of the configuration)",
		Without: "config.netfilter_rules is unavailable (the empty-table and conntrack findings cannot fire)"}
	NeedDACRead = Need{Kind: Capability, Name: "CAP_DAC_READ_SEARCH",
		Why:     "read files of other users: a JVM's /tmp/hsperfdata_USER/PID (mode 0600), GC logs",
		Without: "JVMs running as another user than root have no GC counters; their GC logs are unreadable"}
	// NeedCgroupFS attributes processes and sockets to their cgroup,
	// container and pod (collectors/cgroup): the pod uid, container id and
	// runtime come from /proc/PID/cgroup (hostPID), the cgroup ids from the
	// host's hierarchy. Names come from the Kubernetes API
	// (deploy/kubernetes/rbac.yaml). The runtimes' state directories would
	// name containers too, but their OCI specs hold every container's
	// environment (its secrets): they are left out, and docs/kubernetes.md
	// says how to add them where the API cannot be reached.
	NeedCgroupFS = Need{Kind: Mount, Name: "/sys/fs/cgroup", ReadOnly: true,
		Why:     "the host's cgroup hierarchy: each process's cgroup id, and --cgroup given as a directory",
		Without: "workloads lose their cgroup id; the container's own cgroup namespace hides the others' directories"}
)

// WithAttribution is needs and the attribution mount.
func WithAttribution(needs ...Need) []Need { return append(needs, NeedCgroupFS) }

// NeedResults is the output directory a recipe writes what (flame graphs,
// folded stacks) into.
func NeedResults(what string) Need {
	return Need{Kind: Mount, Name: "/results", Why: what + " a recipe writes (its output directory parameter)",
		Without: "outputs cannot be written (the report on stdout is unaffected)"}
}

// ForOtherUsers is a capability the JVM attach needs only for JVMs that
// run as another user than root.
func ForOtherUsers(name, why string) Need {
	return Need{Kind: Capability, Name: name, Why: why, Without: "JVMs of other users than root cannot be attached"}
}
