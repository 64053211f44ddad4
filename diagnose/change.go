package diagnose

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/cpuset"
)

// ChangeKind names what a Change writes. perfscope executes each kind
// itself (apply) — a /proc/sys or sysfs write, an ethtool
// ioctl, an nftables netlink batch, a syscall — and never through a shell.
type ChangeKind string

const (
	// ChangeSysctl writes /proc/sys/KEY (Key in sysctl's dotted form).
	ChangeSysctl ChangeKind = "sysctl"
	// ChangeSysfs writes one of the sysfs/procfs files SysfsTargets
	// allows: rps_cpus, xps_cpus, rps_flow_cnt, smp_affinity, smt/control.
	ChangeSysfs ChangeKind = "sysfs"
	// ChangeEthtoolFeature turns one offload feature (its kernel name,
	// "rx-gro") on or off.
	ChangeEthtoolFeature ChangeKind = "ethtool-feature"
	// ChangeEthtoolRing, ChangeEthtoolCoalesce and ChangeEthtoolChannels
	// set the named parameters of ethtool -G, -C and -L.
	ChangeEthtoolRing     ChangeKind = "ethtool-ring"
	ChangeEthtoolCoalesce ChangeKind = "ethtool-coalesce"
	ChangeEthtoolChannels ChangeKind = "ethtool-channels"
	// ChangeEthtoolRSS writes the RSS indirection table (ethtool -X).
	ChangeEthtoolRSS ChangeKind = "ethtool-rss"
	// ChangeNftTable deletes an nftables table; the revert recreates it
	// from the description saved at --apply.
	ChangeNftTable ChangeKind = "nft-table"
	// ChangeIptablesTable unloads a legacy iptables table's module
	// (iptable_filter) after checking the table holds no rule and accepts
	// by policy; the revert loads it back.
	ChangeIptablesTable ChangeKind = "iptables-table"
	// ChangeModule unloads a kernel module; the revert loads it from the
	// file modules.dep names.
	ChangeModule ChangeKind = "module"
	// ChangeThreadAffinity sets one thread's allowed CPUs.
	ChangeThreadAffinity ChangeKind = "thread-affinity"
	// ChangeAudit sets the kernel audit "enabled" flag (0 or 1; never the
	// irreversible 2).
	ChangeAudit ChangeKind = "audit"
	// ChangeIrqbalanceBan adds --banirq for IRQs to irqbalance's
	// configuration file; the daemon reads it when restarted.
	ChangeIrqbalanceBan ChangeKind = "irqbalance-ban"
	// ChangeNAPI (change_napi.go) sets one NAPI instance's settings.
)

// Values of the presence-like kinds.
const (
	ValuePresent  = "present"
	ValueAbsent   = "absent"
	ValueLoaded   = "loaded"
	ValueUnloaded = "unloaded"
	ValueOn       = "on"
	ValueOff      = "off"
	ValueBanned   = "banned"
	ValueUnbanned = "unbanned"
)

// Change is one typed system change: what it targets, the value the run
// found (Old) and the value it sets (New). Only the target fields of its
// Kind are set. Values are canonical strings per kind (README, "Typed
// changes"), so JSON readers see them as the kernel or ethtool print them.
type Change struct {
	Kind ChangeKind `json:"kind"`
	// Key is a sysctl in sysctl(8)'s dotted form, a '.' inside a name
	// written '/' ("net.ipv4.conf.eth0/100.rp_filter").
	Key string `json:"key,omitempty"`
	// Path is the file of a sysfs or irqbalance-ban change.
	Path string `json:"path,omitempty"`
	// Iface is the network interface of the ethtool kinds.
	Iface string `json:"iface,omitempty"`
	// Feature is the kernel's name of an offload ("rx-gro").
	Feature string `json:"feature,omitempty"`
	// Family and Table name an nftables table (family ip, ip6, inet,
	// arp, bridge, netdev) or a legacy iptables table (family ipv4/ipv6).
	Family string `json:"family,omitempty"`
	Table  string `json:"table,omitempty"`
	// Module is a kernel module (module, iptables-table).
	Module string `json:"module,omitempty"`
	// TID is the thread of a thread-affinity change.
	TID int `json:"tid,omitempty"`
	// NAPIID is the NAPI instance of a napi change, and Queue the RX
	// queue of Iface it served when the run read it (absent when the run
	// did not learn it).
	NAPIID uint32 `json:"napi_id,omitempty"`
	Queue  *int   `json:"queue,omitempty"`
	// IRQs are the interrupts an irqbalance-ban change bans.
	IRQs []int `json:"irqs,omitempty"`
	// Args are the irqbalance arguments the configuration held when the
	// run read it (the ban is added to them).
	Args []string `json:"args,omitempty"`
	Old  string   `json:"old"`
	New  string   `json:"new"`
}

// --- constructors: one per kind, for rules ----------------------------------

// SysctlChange sets a sysctl. key is dotted ("net.core.rmem_max"); use
// SysctlKey to build one that contains an interface name.
func SysctlChange(key, old, new string) Change {
	return Change{Kind: ChangeSysctl, Key: key, Old: normalizeSysctl(old), New: normalizeSysctl(new)}
}

// SysctlKey joins sysctl path segments into the dotted form, writing a '.'
// inside a segment (a VLAN interface "eth0.100") as '/' as sysctl(8) does.
func SysctlKey(segments ...string) string {
	out := make([]string, len(segments))
	for i, s := range segments {
		out[i] = strings.ReplaceAll(s, ".", "/")
	}
	return strings.Join(out, ".")
}

// SysctlSegments splits a dotted key back into /proc/sys path segments.
func SysctlSegments(key string) []string {
	parts := strings.Split(key, ".")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "/", ".")
	}
	return parts
}

// normalizeSysctl joins a multi-value sysctl ("udp_mem" prints tabs) with
// single spaces, the form written and compared.
func normalizeSysctl(v string) string { return strings.Join(strings.Fields(v), " ") }

// QueueMaskChange sets rps_cpus ("rx", queue) or xps_cpus ("tx", queue)
// of iface. Masks are the kernel's hex cpumask text; an empty set is "0".
func QueueMaskChange(iface, dir string, queue int, old, new cpuset.Set, nrCPUs int) Change {
	file := "rps_cpus"
	if dir == "tx" {
		file = "xps_cpus"
	}
	return Change{Kind: ChangeSysfs, Iface: iface,
		Path: fmt.Sprintf("/sys/class/net/%s/queues/%s-%d/%s", iface, dir, queue, file),
		Old:  maskOrZero(old, nrCPUs), New: maskOrZero(new, nrCPUs)}
}

// RPSFlowCntChange sets rx-QUEUE/rps_flow_cnt (RFS per-queue flow table).
func RPSFlowCntChange(iface string, queue int, old, new int64) Change {
	return Change{Kind: ChangeSysfs, Iface: iface,
		Path: fmt.Sprintf("/sys/class/net/%s/queues/rx-%d/rps_flow_cnt", iface, queue),
		Old:  strconv.FormatInt(old, 10), New: strconv.FormatInt(new, 10)}
}

// IRQAffinityChange sets /proc/irq/IRQ/smp_affinity.
func IRQAffinityChange(irq int, old, new cpuset.Set, nrCPUs int) Change {
	return Change{Kind: ChangeSysfs, Path: fmt.Sprintf("/proc/irq/%d/smp_affinity", irq),
		Old: maskOrZero(old, nrCPUs), New: maskOrZero(new, nrCPUs)}
}

// SMTControlChange sets /sys/devices/system/cpu/smt/control ("on", "off").
func SMTControlChange(old, new string) Change {
	return Change{Kind: ChangeSysfs, Path: smtControl, Old: old, New: new}
}

// EthtoolFeatureChange turns feature (the kernel's name: "rx-gro",
// "rx-udp-gro-forwarding") of iface on or off.
func EthtoolFeatureChange(iface, feature string, old, new bool) Change {
	return Change{Kind: ChangeEthtoolFeature, Iface: iface, Feature: feature, Old: onOff(old), New: onOff(new)}
}

// EthtoolRingChange sets ring sizes (keys of RingParams: "rx", "tx", ...).
// old and new must name the same keys.
func EthtoolRingChange(iface string, old, new map[string]uint32) Change {
	return Change{Kind: ChangeEthtoolRing, Iface: iface, Old: FormatParams(old), New: FormatParams(new)}
}

// EthtoolCoalesceChange sets interrupt coalescing (keys of
// CoalesceParams: "rx-usecs", "adaptive-rx", ...).
func EthtoolCoalesceChange(iface string, old, new map[string]uint32) Change {
	return Change{Kind: ChangeEthtoolCoalesce, Iface: iface, Old: FormatParams(old), New: FormatParams(new)}
}

// EthtoolChannelsChange sets channel counts ("rx", "tx", "other",
// "combined").
func EthtoolChannelsChange(iface string, old, new map[string]uint32) Change {
	return Change{Kind: ChangeEthtoolChannels, Iface: iface, Old: FormatParams(old), New: FormatParams(new)}
}

// EthtoolRSSChange writes the RSS indirection table; old and new have the
// device's table size.
func EthtoolRSSChange(iface string, old, new []uint32) Change {
	return Change{Kind: ChangeEthtoolRSS, Iface: iface, Old: formatTable(old), New: formatTable(new)}
}

// EqualTable is the round-robin table of `ethtool -X IF equal n`.
func EqualTable(size, n int) []uint32 {
	t := make([]uint32, size)
	for i := range t {
		t[i] = uint32(i % max(n, 1))
	}
	return t
}

// NftTableDeleteChange deletes an nftables table.
func NftTableDeleteChange(family, table string) Change {
	return Change{Kind: ChangeNftTable, Family: family, Table: table, Old: ValuePresent, New: ValueAbsent}
}

// IptablesTableUnloadChange unloads the module of a legacy iptables table
// (family "ipv4" or "ipv6", table "filter", ...).
func IptablesTableUnloadChange(family, table string) Change {
	return Change{Kind: ChangeIptablesTable, Family: family, Table: table, Module: iptablesModule(family, table), Old: ValueLoaded, New: ValueUnloaded}
}

// ModuleUnloadChange unloads a kernel module.
func ModuleUnloadChange(module string) Change {
	return Change{Kind: ChangeModule, Module: module, Old: ValueLoaded, New: ValueUnloaded}
}

// ThreadAffinityChange sets the allowed CPUs of thread tid.
func ThreadAffinityChange(tid int, old, new cpuset.Set) Change {
	return Change{Kind: ChangeThreadAffinity, TID: tid, Old: old.List(), New: new.List()}
}

// AuditChange sets the kernel's audit enabled flag (0 or 1).
func AuditChange(old, new uint32) Change {
	return Change{Kind: ChangeAudit, Old: strconv.FormatUint(uint64(old), 10), New: strconv.FormatUint(uint64(new), 10)}
}

// IrqbalanceBanChange bans irqs in irqbalance's configuration file
// (/etc/default/irqbalance or /etc/sysconfig/irqbalance), keeping the
// arguments it already passes.
func IrqbalanceBanChange(configFile string, args []string, irqs []int) Change {
	irqs = slices.Clone(irqs)
	sort.Ints(irqs)
	return Change{Kind: ChangeIrqbalanceBan, Path: configFile, Args: slices.Clone(args), IRQs: slices.Compact(irqs), Old: ValueUnbanned, New: ValueBanned}
}

// Equal reports whether c and o are the same change.
func (c Change) Equal(o Change) bool {
	return c.Kind == o.Kind && c.Key == o.Key && c.Path == o.Path && c.Iface == o.Iface && c.Feature == o.Feature &&
		c.Family == o.Family && c.Table == o.Table && c.Module == o.Module && c.TID == o.TID &&
		c.NAPIID == o.NAPIID && equalQueue(c.Queue, o.Queue) && slices.Equal(c.IRQs, o.IRQs) && slices.Equal(c.Args, o.Args) && c.Old == o.Old && c.New == o.New
}

func equalQueue(a, b *int) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// AddChanges appends typed changes to a setting recommendation and renders
// each as the shell command a human would run: Apply in order, Revert in
// the order perfscope undoes them (last change first).
func (r *Recommendation) AddChanges(cs ...Change) {
	for _, c := range cs {
		r.Changes = append(r.Changes, c)
		r.Apply = append(r.Apply, c.Command(c.New))
		r.Revert = append([]string{c.Command(c.Old)}, r.Revert...)
	}
}

func onOff(b bool) string {
	if b {
		return ValueOn
	}
	return ValueOff
}

// --- parameters -------------------------------------------------------------

// RingParams, CoalesceParams and ChannelParams are the parameter names of
// the ethtool kinds, in the order of the kernel's structs and ethtool's
// command line.
var (
	RingParams     = []string{"rx", "rx-mini", "rx-jumbo", "tx"}
	CoalesceParams = []string{"rx-usecs", "rx-frames", "rx-usecs-irq", "rx-frames-irq",
		"tx-usecs", "tx-frames", "tx-usecs-irq", "tx-frames-irq", "stats-block-usecs",
		"adaptive-rx", "adaptive-tx", "pkt-rate-low", "rx-usecs-low", "rx-frames-low",
		"tx-usecs-low", "tx-frames-low", "pkt-rate-high", "rx-usecs-high", "rx-frames-high",
		"tx-usecs-high", "tx-frames-high", "sample-interval"}
	ChannelParams = []string{"rx", "tx", "other", "combined"}
)

// ParamNames are the names a kind's parameters may take (nil for kinds
// without parameters).
func ParamNames(k ChangeKind) []string {
	switch k {
	case ChangeEthtoolRing:
		return RingParams
	case ChangeEthtoolCoalesce:
		return CoalesceParams
	case ChangeEthtoolChannels:
		return ChannelParams
	}
	return nil
}

// FormatParams prints parameters as "name=value" words in name order.
func FormatParams(p map[string]uint32) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	words := make([]string, len(keys))
	for i, k := range keys {
		words[i] = fmt.Sprintf("%s=%d", k, p[k])
	}
	return strings.Join(words, " ")
}

// ParseParams reads FormatParams' text, accepting only names.
func ParseParams(text string, names []string) (map[string]uint32, error) {
	wide, err := parseNamedValues(text, names, "parameter", func(string) uint64 { return math.MaxUint32 })
	if err != nil {
		return nil, err
	}
	p := make(map[string]uint32, len(wide))
	for k, v := range wide {
		p[k] = uint32(v)
	}
	return p, nil
}

// parseNamedValues reads "name=value" words: each name one of names and
// given once, each value a decimal from 0 to max(name), at least one word.
// what names a word in errors ("parameter", "setting").
func parseNamedValues(text string, names []string, what string, max func(string) uint64) (map[string]uint64, error) {
	p := map[string]uint64{}
	for _, w := range strings.Fields(text) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || !slices.Contains(names, k) {
			return nil, fmt.Errorf("%s %q: want NAME=VALUE with NAME one of %s", what, w, strings.Join(names, ", "))
		}
		if _, dup := p[k]; dup {
			return nil, fmt.Errorf("%s %s given twice", what, k)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > max(k) {
			return nil, fmt.Errorf("%s %s: %q is not a number from 0 to %d", what, k, v, max(k))
		}
		p[k] = n
	}
	if len(p) == 0 {
		return nil, fmt.Errorf("no %ss", what)
	}
	return p, nil
}

// sameNames reports whether old and new name the same keys.
func sameNames[V any](old, new map[string]V) bool {
	if len(old) != len(new) {
		return false
	}
	for k := range new {
		if _, ok := old[k]; !ok {
			return false
		}
	}
	return true
}

func formatTable(t []uint32) string {
	words := make([]string, len(t))
	for i, q := range t {
		words[i] = strconv.FormatUint(uint64(q), 10)
	}
	return strings.Join(words, " ")
}

// ParseTable reads an RSS indirection table ("0 1 2 3 0 1 2 3").
func ParseTable(text string) ([]uint32, error) {
	f := strings.Fields(text)
	if len(f) == 0 || len(f) > MaxRSSTable {
		return nil, fmt.Errorf("indirection table of %d entries (want 1-%d)", len(f), MaxRSSTable)
	}
	t := make([]uint32, len(f))
	for i, w := range f {
		n, err := strconv.ParseUint(w, 10, 32)
		if err != nil || n >= MaxRSSTable {
			return nil, fmt.Errorf("indirection table entry %q is not a queue number", w)
		}
		t[i] = uint32(n)
	}
	return t, nil
}

// MaxRSSTable bounds indirection tables and queue numbers (devices have at
// most a few thousand entries).
const MaxRSSTable = 1 << 16
