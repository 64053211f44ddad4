package diagnose

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/perfscope/perfscope/base/shellquote"
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
		slices.Equal(c.IRQs, o.IRQs) && slices.Equal(c.Args, o.Args) && c.Old == o.Old && c.New == o.New
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
	p := map[string]uint32{}
	for _, w := range strings.Fields(text) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || !slices.Contains(names, k) {
			return nil, fmt.Errorf("parameter %q: want NAME=VALUE with NAME one of %s", w, strings.Join(names, ", "))
		}
		if _, dup := p[k]; dup {
			return nil, fmt.Errorf("parameter %s given twice", k)
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %q is not a 32-bit unsigned number", k, v)
		}
		p[k] = uint32(n)
	}
	if len(p) == 0 {
		return nil, errors.New("no parameters")
	}
	return p, nil
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

// --- validation ---------------------------------------------------------------

// ErrInvalidChange wraps every reason Validate rejects a change.
var ErrInvalidChange = errors.New("invalid change")

const smtControl = "/sys/devices/system/cpu/smt/control"

// sysfsTarget is a file a sysfs change may write and how its values read.
type sysfsTarget struct {
	re     *regexp.Regexp
	format string // "cpumask", "count" or "smt"
}

// sysfsTargets are every file a sysfs change may write: a revert file, even
// a tampered one, can name nothing else. The interface segment is checked
// by ValidIfaceName separately.
var sysfsTargets = []sysfsTarget{
	{regexp.MustCompile(`^/sys/class/net/([^/]+)/queues/rx-([0-9]{1,5})/rps_cpus$`), "cpumask"},
	{regexp.MustCompile(`^/sys/class/net/([^/]+)/queues/tx-([0-9]{1,5})/xps_cpus$`), "cpumask"},
	{regexp.MustCompile(`^/sys/class/net/([^/]+)/queues/rx-([0-9]{1,5})/rps_flow_cnt$`), "count"},
	{regexp.MustCompile(`^/proc/irq/([0-9]{1,7})/smp_affinity$`), "cpumask"},
	{regexp.MustCompile(`^/sys/devices/system/cpu/smt/control$`), "smt"},
	{regexp.MustCompile(`^/sys/class/net/([^/]+)/napi_defer_hard_irqs$`), "count"},
	{regexp.MustCompile(`^/sys/class/net/([^/]+)/gro_flush_timeout$`), "count"},
}

// SysfsFormat is how the values of a sysfs path read ("cpumask", "count",
// "smt"), or an error when perfscope does not write that path.
func SysfsFormat(path string) (format, iface string, err error) {
	for _, t := range sysfsTargets {
		m := t.re.FindStringSubmatch(path)
		if m == nil {
			continue
		}
		if strings.HasPrefix(path, "/sys/class/net/") {
			iface = m[1]
			if err := ValidIfaceName(iface); err != nil {
				return "", "", err
			}
		}
		return t.format, iface, nil
	}
	return "", "", fmt.Errorf("%w: perfscope does not write %q (only rps_cpus, xps_cpus, rps_flow_cnt, napi_defer_hard_irqs, gro_flush_timeout, smp_affinity and smt/control)", ErrInvalidChange, path)
}

// ValidIfaceName applies the kernel's dev_valid_name: 1-15 bytes, not "."
// or "..", no '/', ':' or whitespace. Anything else — '$', quotes,
// backticks — is a legal name, and perfscope must handle it as data.
func ValidIfaceName(name string) error {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return fmt.Errorf("%w: interface name %q is not 1-15 bytes", ErrInvalidChange, name)
	}
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '/', ':', ' ', '\t', '\n', '\v', '\f', '\r', 0:
			return fmt.Errorf("%w: interface name %q holds %q", ErrInvalidChange, name, name[i])
		}
	}
	return nil
}

var (
	moduleName   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,55}$`)
	featureName  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	sysctlValue  = regexp.MustCompile(`^[\x20-\x7e]{0,256}$`)
	countValue   = regexp.MustCompile(`^[0-9]{1,10}$`)
	cpumaskValue = regexp.MustCompile(`^[0-9a-fA-F,]+$`)
)

// maskSysctls are sysctls whose values are hex cpumasks: checked as masks
// and compared by their CPUs ("4" and "00,00000004" are one mask), since
// the kernel prints them at its own width.
var maskSysctls = []string{"net.core.flow_limit_cpu_bitmap", "net.core.rps_default_mask"}

// SysctlIsMask reports whether key's values are cpumasks.
func SysctlIsMask(key string) bool { return slices.Contains(maskSysctls, key) }

// sysctlRoots are the sysctl trees perfscope may write.
var sysctlRoots = []string{"net"}

// NftFamilies are the nftables families a table may belong to.
var NftFamilies = []string{"ip", "ip6", "inet", "arp", "bridge", "netdev"}

// IrqbalanceConfigFiles are the files an irqbalance-ban change may edit.
var IrqbalanceConfigFiles = []string{"/etc/default/irqbalance", "/etc/sysconfig/irqbalance"}

var iptablesTables = []string{"filter", "mangle", "raw", "nat", "security"}

func iptablesModule(family, table string) string {
	if family == "ipv6" {
		return "ip6table_" + table
	}
	return "iptable_" + table
}

// Validate checks that c is a change perfscope knows how to make and undo,
// with every field in its kind's form. The revert-file reader calls it on
// every change, so a file can only ask for what a rule could have.
func (c Change) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidChange, c.Kind, fmt.Sprintf(format, args...))
	}
	// Fields of other kinds must be empty: a change targets one thing.
	type field struct {
		name string
		set  bool
	}
	fields := []field{{"key", c.Key != ""}, {"path", c.Path != ""}, {"iface", c.Iface != ""}, {"feature", c.Feature != ""},
		{"family", c.Family != ""}, {"table", c.Table != ""}, {"module", c.Module != ""}, {"tid", c.TID != 0},
		{"irqs", c.IRQs != nil}, {"args", c.Args != nil}}
	allowed := map[ChangeKind][]string{
		ChangeSysctl:          {"key"},
		ChangeSysfs:           {"path", "iface"},
		ChangeEthtoolFeature:  {"iface", "feature"},
		ChangeEthtoolRing:     {"iface"},
		ChangeEthtoolCoalesce: {"iface"},
		ChangeEthtoolChannels: {"iface"},
		ChangeEthtoolRSS:      {"iface"},
		ChangeNftTable:        {"family", "table"},
		ChangeIptablesTable:   {"family", "table", "module"},
		ChangeModule:          {"module"},
		ChangeThreadAffinity:  {"tid"},
		ChangeAudit:           {},
		ChangeIrqbalanceBan:   {"path", "irqs", "args"},
	}
	names, known := allowed[c.Kind]
	if !known {
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidChange, c.Kind)
	}
	for _, f := range fields {
		if f.set && !slices.Contains(names, f.name) {
			return bad("field %s does not belong to this kind", f.name)
		}
	}
	both := func(check func(string) error) error {
		if err := check(c.Old); err != nil {
			return bad("old value: %v", err)
		}
		if err := check(c.New); err != nil {
			return bad("new value: %v", err)
		}
		return nil
	}
	oneOf := func(values ...string) func(string) error {
		return func(v string) error {
			if !slices.Contains(values, v) {
				return fmt.Errorf("%q is not one of %s", v, strings.Join(values, ", "))
			}
			return nil
		}
	}
	switch c.Kind {
	case ChangeSysctl:
		segs := SysctlSegments(c.Key)
		if len(segs) < 2 || !slices.Contains(sysctlRoots, segs[0]) {
			return bad("key %q is not under %s", c.Key, strings.Join(sysctlRoots, ", "))
		}
		for _, s := range segs {
			if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") || len(s) > 64 {
				return bad("key %q has an invalid segment %q", c.Key, s)
			}
		}
		return both(func(v string) error {
			if !sysctlValue.MatchString(v) || v != normalizeSysctl(v) {
				return fmt.Errorf("%q is not printable single-spaced text of at most 256 bytes", v)
			}
			if SysctlIsMask(c.Key) {
				if _, err := cpuset.ParseMask(v); err != nil || !cpumaskValue.MatchString(v) {
					return fmt.Errorf("%q is not a hex cpumask", v)
				}
			}
			return nil
		})
	case ChangeSysfs:
		format, iface, err := SysfsFormat(c.Path)
		if err != nil {
			return err
		}
		if c.Iface != iface {
			return bad("iface %q does not match the path's %q", c.Iface, iface)
		}
		switch format {
		case "cpumask":
			return both(func(v string) error {
				if !cpumaskValue.MatchString(v) || len(v) > 2304 {
					return fmt.Errorf("%q is not a hex cpumask", v)
				}
				if _, err := cpuset.ParseMask(v); err != nil {
					return err
				}
				return nil
			})
		case "count":
			return both(func(v string) error {
				if !countValue.MatchString(v) {
					return fmt.Errorf("%q is not a count", v)
				}
				return nil
			})
		default:
			return both(oneOf("on", "off", "forceoff"))
		}
	case ChangeEthtoolFeature:
		if err := ValidIfaceName(c.Iface); err != nil {
			return err
		}
		if !featureName.MatchString(c.Feature) {
			return bad("feature %q is not a kernel feature name", c.Feature)
		}
		return both(oneOf(ValueOn, ValueOff))
	case ChangeEthtoolRing, ChangeEthtoolCoalesce, ChangeEthtoolChannels:
		if err := ValidIfaceName(c.Iface); err != nil {
			return err
		}
		old, err := ParseParams(c.Old, ParamNames(c.Kind))
		if err != nil {
			return bad("old value: %v", err)
		}
		new, err := ParseParams(c.New, ParamNames(c.Kind))
		if err != nil {
			return bad("new value: %v", err)
		}
		for k := range new {
			if _, ok := old[k]; !ok || len(old) != len(new) {
				return bad("old and new values must name the same parameters")
			}
		}
		return nil
	case ChangeEthtoolRSS:
		if err := ValidIfaceName(c.Iface); err != nil {
			return err
		}
		old, err := ParseTable(c.Old)
		if err != nil {
			return bad("old value: %v", err)
		}
		new, err := ParseTable(c.New)
		if err != nil {
			return bad("new value: %v", err)
		}
		if len(old) != len(new) {
			return bad("old table has %d entries, new %d", len(old), len(new))
		}
		return nil
	case ChangeNftTable:
		if !slices.Contains(NftFamilies, c.Family) {
			return bad("family %q is not one of %s", c.Family, strings.Join(NftFamilies, ", "))
		}
		if c.Table == "" || len(c.Table) > 255 || strings.ContainsRune(c.Table, 0) {
			return bad("table name of %d bytes (want 1-255, no NUL)", len(c.Table))
		}
		if c.Old != ValuePresent || c.New != ValueAbsent {
			return bad("old must be %q and new %q", ValuePresent, ValueAbsent)
		}
		return nil
	case ChangeIptablesTable:
		if c.Family != "ipv4" && c.Family != "ipv6" {
			return bad("family %q is not ipv4 or ipv6", c.Family)
		}
		if !slices.Contains(iptablesTables, c.Table) {
			return bad("table %q is not one of %s", c.Table, strings.Join(iptablesTables, ", "))
		}
		if c.Module != iptablesModule(c.Family, c.Table) {
			return bad("module %q is not the table's module %s", c.Module, iptablesModule(c.Family, c.Table))
		}
		if c.Old != ValueLoaded || c.New != ValueUnloaded {
			return bad("old must be %q and new %q", ValueLoaded, ValueUnloaded)
		}
		return nil
	case ChangeModule:
		if !moduleName.MatchString(c.Module) {
			return bad("module name %q", c.Module)
		}
		if c.Old != ValueLoaded || c.New != ValueUnloaded {
			return bad("old must be %q and new %q", ValueLoaded, ValueUnloaded)
		}
		return nil
	case ChangeThreadAffinity:
		if c.TID <= 0 || c.TID > 1<<22 {
			return bad("tid %d out of range", c.TID)
		}
		return both(func(v string) error {
			s, err := cpuset.ParseList(v)
			if err != nil || s.IsEmpty() || s.List() != v {
				return fmt.Errorf("%q is not a non-empty CPU list", v)
			}
			return nil
		})
	case ChangeAudit:
		return both(oneOf("0", "1"))
	case ChangeIrqbalanceBan:
		if !slices.Contains(IrqbalanceConfigFiles, c.Path) {
			return bad("path %q is not one of %s", c.Path, strings.Join(IrqbalanceConfigFiles, ", "))
		}
		if len(c.IRQs) == 0 || len(c.IRQs) > 4096 || !slices.IsSorted(c.IRQs) || len(slices.Compact(slices.Clone(c.IRQs))) != len(c.IRQs) || c.IRQs[0] < 0 || c.IRQs[len(c.IRQs)-1] >= 1<<22 {
			return bad("irqs must be 1-4096 distinct sorted IRQ numbers")
		}
		for _, a := range c.Args {
			// The arguments are written back inside double quotes.
			if a == "" || len(a) > 256 || strings.ContainsAny(a, "\"$`\\'") || !sysctlValue.MatchString(a) || strings.ContainsAny(a, " ") {
				return bad("irqbalance argument %q cannot be written back safely", a)
			}
		}
		if c.Old != ValueUnbanned || c.New != ValueBanned {
			return bad("old must be %q and new %q", ValueUnbanned, ValueBanned)
		}
		return nil
	}
	return nil
}

// --- the shell rendition -------------------------------------------------------

// Command renders setting c's target to value (c.New or c.Old) as the shell
// command a human would run, every variable word quoted. Where no command
// expresses the change exactly, the line is a shell comment saying what
// perfscope does instead, so pasting it runs nothing.
func (c Change) Command(value string) string {
	q := shellquote.Quote
	switch c.Kind {
	case ChangeSysctl:
		return shellquote.Join("sysctl", "-w", c.Key+"="+value)
	case ChangeSysfs:
		return "echo " + q(value) + " > " + q(c.Path)
	case ChangeEthtoolFeature:
		return shellquote.Join("ethtool", "-K", c.Iface, c.Feature, value)
	case ChangeEthtoolRing, ChangeEthtoolCoalesce, ChangeEthtoolChannels:
		flag := map[ChangeKind]string{ChangeEthtoolRing: "-G", ChangeEthtoolCoalesce: "-C", ChangeEthtoolChannels: "-L"}[c.Kind]
		args := []string{"ethtool", flag, c.Iface}
		p, err := ParseParams(value, ParamNames(c.Kind))
		if err != nil {
			return "# " + q(value) + ": " + err.Error()
		}
		for _, name := range ParamNames(c.Kind) {
			v, ok := p[name]
			if !ok {
				continue
			}
			text := strconv.FormatUint(uint64(v), 10)
			if strings.HasPrefix(name, "adaptive-") {
				text = onOff(v != 0)
			}
			args = append(args, name, text)
		}
		return shellquote.Join(args...)
	case ChangeEthtoolRSS:
		t, err := ParseTable(value)
		if err != nil {
			return "# " + err.Error()
		}
		return rssCommand(c.Iface, t)
	case ChangeNftTable:
		if value == ValueAbsent {
			return NftDeleteCommand(c.Family, c.Table)
		}
		return fmt.Sprintf("# perfscope udp --revert recreates nft table %s %s from the description saved in its revert file", c.Family, q(c.Table))
	case ChangeIptablesTable, ChangeModule:
		if value == ValueUnloaded {
			return shellquote.Join("modprobe", "-r", c.Module)
		}
		return shellquote.Join("modprobe", c.Module)
	case ChangeThreadAffinity:
		return shellquote.Join("taskset", "-p", "-c", value, strconv.Itoa(c.TID))
	case ChangeAudit:
		return shellquote.Join("auditctl", "-e", value)
	case ChangeIrqbalanceBan:
		if value == ValueBanned {
			return "printf '%s\\n' " + q(IrqbalanceBanLine(c)) + " >> " + q(c.Path) + "   # then: systemctl restart irqbalance"
		}
		return fmt.Sprintf("# perfscope udp --revert restores %s as it was before --apply (then: systemctl restart irqbalance)", q(c.Path))
	}
	return "# unknown change kind " + q(string(c.Kind))
}

// IrqbalanceVariable is the variable irqbalance's systemd units pass on
// the command line (Debian's and RHEL's both read IRQBALANCE_ARGS).
const IrqbalanceVariable = "IRQBALANCE_ARGS"

// IrqbalanceBanLine is the assignment an irqbalance-ban change appends: the
// arguments already configured plus one --banirq per IRQ, in double quotes
// (systemd's EnvironmentFile and a sourcing init script read it alike).
func IrqbalanceBanLine(c Change) string {
	words := slices.Clone(c.Args)
	for _, irq := range c.IRQs {
		words = append(words, fmt.Sprintf("--banirq=%d", irq))
	}
	return fmt.Sprintf("%s=%q", IrqbalanceVariable, strings.Join(words, " "))
}

// rssCommand is `ethtool -X IF equal N` for a round-robin table, else the
// per-queue weights (the same spread; entry order can differ, which the
// comment says — perfscope itself writes the exact table).
func rssCommand(iface string, t []uint32) string {
	used := 0
	for _, q := range t {
		used = max(used, int(q)+1)
	}
	if slices.Equal(t, EqualTable(len(t), used)) {
		return shellquote.Join("ethtool", "-X", iface, "equal", strconv.Itoa(used))
	}
	counts := make([]int, used)
	for _, q := range t {
		counts[q]++
	}
	args := []string{"ethtool", "-X", iface, "weight"}
	for _, n := range counts {
		args = append(args, strconv.Itoa(n))
	}
	return shellquote.Join(args...) + "   # same spread; perfscope writes the exact table"
}

// nftIdentifier is a name nft's own grammar reads without quotes.
var nftIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// NftDeleteCommand renders deleting a table with nft: its own syntax for
// plain names, its JSON input (which carries any UTF-8 name) otherwise.
func NftDeleteCommand(family, table string) string {
	if nftIdentifier.MatchString(table) {
		return shellquote.Join("nft", "delete", "table", family, table)
	}
	doc, ok := nftJSON(`{"nftables":[{"delete":{"table":{"family":%s,"name":%s}}}]}`, family, table)
	if !ok {
		return "# nft table " + shellquote.Quote(table) + " has a name no nft command can spell (not UTF-8); perfscope deletes it through netlink"
	}
	return NftJSONCommand(doc)
}

// NftIdentifier reports whether nft's syntax can name s without quoting.
func NftIdentifier(s string) bool { return nftIdentifier.MatchString(s) }

// NftJSONCommand feeds an nft JSON document to `nft -j -f -`.
func NftJSONCommand(doc string) string {
	return "printf '%s' " + shellquote.Quote(doc) + " | nft -j -f -"
}

// nftJSON formats a document with JSON-quoted names; ok is false when a
// name is not UTF-8, which JSON cannot carry.
func nftJSON(format string, names ...string) (string, bool) {
	args := make([]any, len(names))
	for i, n := range names {
		q, ok := jsonString(n)
		if !ok {
			return "", false
		}
		args[i] = q
	}
	return fmt.Sprintf(format, args...), true
}

// jsonString quotes s as a JSON string, control bytes as \u00XX, so the
// document stays one printable line.
func jsonString(s string) (string, bool) {
	if !utf8.ValidString(s) {
		return "", false
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (0x80 <= r && r < 0xa0):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), true
}

// NftJSON formats an nft JSON document, quoting each name; ok is false
// when a name is not UTF-8.
func NftJSON(format string, names ...string) (string, bool) { return nftJSON(format, names...) }
