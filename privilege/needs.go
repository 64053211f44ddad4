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

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/spec"
)

// Kind is what a need asks of the container.
type Kind = spec.NeedKind

// The kinds of needs.
const (
	Capability = spec.Capability
	Mount      = spec.Mount
	Namespace  = spec.Namespace
	Writable   = spec.Writable
)

// Host namespaces, by their Kubernetes field names.
const (
	HostPID     = spec.HostPID
	HostNetwork = spec.HostNetwork
	HostUTS     = spec.HostUTS
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

// Need is one thing a part asks of the container. Each part declares its
// own in its spec (measure.Catalog).
type Need = spec.Need

// Parts maps each recipe part (the catalog's probe and collector names) to
// what it needs, from the parts' specs. A recipe needs the union of its
// parts.
var Parts = measure.NeedsOf()

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
