package diagnose

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/perfscope/perfscope/collectors/cpuset"
)

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
	if err := c.validateFields(); err != nil {
		return err
	}
	switch c.Kind {
	case ChangeSysctl:
		return c.validateSysctl()
	case ChangeSysfs:
		return c.validateSysfs()
	case ChangeEthtoolFeature, ChangeEthtoolRing, ChangeEthtoolCoalesce, ChangeEthtoolChannels, ChangeEthtoolRSS:
		return c.validateEthtool()
	case ChangeNftTable, ChangeIptablesTable, ChangeModule:
		return c.validateUnload()
	case ChangeThreadAffinity:
		if c.TID <= 0 || c.TID > 1<<22 {
			return c.invalid("tid %d out of range", c.TID)
		}
		return c.both(func(v string) error {
			s, err := cpuset.ParseList(v)
			if err != nil || s.IsEmpty() || s.List() != v {
				return fmt.Errorf("%q is not a non-empty CPU list", v)
			}
			return nil
		})
	case ChangeAudit:
		return c.both(oneOf("0", "1"))
	case ChangeIrqbalanceBan:
		return c.validateIrqbalanceBan()
	case ChangeNAPI:
		return c.validateNAPI()
	}
	return nil
}

// fieldsOfKind are the target fields each kind sets; the others must be
// empty: a change targets one thing.
var fieldsOfKind = map[ChangeKind][]string{
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
	ChangeNAPI:            {"iface", "napi_id", "queue"},
}

// validateFields checks c's kind is known and sets no field of another
// kind.
func (c Change) validateFields() error {
	type field struct {
		name string
		set  bool
	}
	fields := []field{{"key", c.Key != ""}, {"path", c.Path != ""}, {"iface", c.Iface != ""}, {"feature", c.Feature != ""},
		{"family", c.Family != ""}, {"table", c.Table != ""}, {"module", c.Module != ""}, {"tid", c.TID != 0},
		{"irqs", c.IRQs != nil}, {"args", c.Args != nil},
		{"napi_id", c.NAPIID != 0}, {"queue", c.Queue != nil}}
	names, known := fieldsOfKind[c.Kind]
	if !known {
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidChange, c.Kind)
	}
	for _, f := range fields {
		if f.set && !slices.Contains(names, f.name) {
			return c.invalid("field %s does not belong to this kind", f.name)
		}
	}
	return nil
}

// invalid is Validate's error for c.
func (c Change) invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidChange, c.Kind, fmt.Sprintf(format, args...))
}

// both applies check to c's old and new values.
func (c Change) both(check func(string) error) error {
	if err := check(c.Old); err != nil {
		return c.invalid("old value: %v", err)
	}
	if err := check(c.New); err != nil {
		return c.invalid("new value: %v", err)
	}
	return nil
}

// oneOf is a value check accepting only values.
func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(values, ", "))
		}
		return nil
	}
}

// validateSysctl checks a sysctl change: a key under sysctlRoots, values
// of printable single-spaced text (hex cpumasks for mask sysctls).
func (c Change) validateSysctl() error {
	segs := SysctlSegments(c.Key)
	if len(segs) < 2 || !slices.Contains(sysctlRoots, segs[0]) {
		return c.invalid("key %q is not under %s", c.Key, strings.Join(sysctlRoots, ", "))
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") || len(s) > 64 {
			return c.invalid("key %q has an invalid segment %q", c.Key, s)
		}
	}
	return c.both(func(v string) error {
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
}

// validateSysfs checks a sysfs change: a path of sysfsTargets, values in
// that file's format.
func (c Change) validateSysfs() error {
	format, iface, err := SysfsFormat(c.Path)
	if err != nil {
		return err
	}
	if c.Iface != iface {
		return c.invalid("iface %q does not match the path's %q", c.Iface, iface)
	}
	switch format {
	case "cpumask":
		return c.both(func(v string) error {
			if !cpumaskValue.MatchString(v) || len(v) > 2304 {
				return fmt.Errorf("%q is not a hex cpumask", v)
			}
			if _, err := cpuset.ParseMask(v); err != nil {
				return err
			}
			return nil
		})
	case "count":
		return c.both(func(v string) error {
			if !countValue.MatchString(v) {
				return fmt.Errorf("%q is not a count", v)
			}
			return nil
		})
	default:
		return c.both(oneOf("on", "off", "forceoff"))
	}
}

// validateEthtool checks an ethtool change: a valid interface name, and a
// feature's on/off, the same parameters old and new (rings, coalescing,
// channels), or indirection tables of one size (RSS).
func (c Change) validateEthtool() error {
	if err := ValidIfaceName(c.Iface); err != nil {
		return err
	}
	switch c.Kind {
	case ChangeEthtoolFeature:
		if !featureName.MatchString(c.Feature) {
			return c.invalid("feature %q is not a kernel feature name", c.Feature)
		}
		return c.both(oneOf(ValueOn, ValueOff))
	case ChangeEthtoolRSS:
		old, err := ParseTable(c.Old)
		if err != nil {
			return c.invalid("old value: %v", err)
		}
		new, err := ParseTable(c.New)
		if err != nil {
			return c.invalid("new value: %v", err)
		}
		if len(old) != len(new) {
			return c.invalid("old table has %d entries, new %d", len(old), len(new))
		}
		return nil
	}
	old, err := ParseParams(c.Old, ParamNames(c.Kind))
	if err != nil {
		return c.invalid("old value: %v", err)
	}
	new, err := ParseParams(c.New, ParamNames(c.Kind))
	if err != nil {
		return c.invalid("new value: %v", err)
	}
	if !sameNames(old, new) {
		return c.invalid("old and new values must name the same parameters")
	}
	return nil
}

// validateUnload checks a change that removes something: an nftables
// table, an iptables table's module, a kernel module.
func (c Change) validateUnload() error {
	switch c.Kind {
	case ChangeNftTable:
		if !slices.Contains(NftFamilies, c.Family) {
			return c.invalid("family %q is not one of %s", c.Family, strings.Join(NftFamilies, ", "))
		}
		if c.Table == "" || len(c.Table) > 255 || strings.ContainsRune(c.Table, 0) {
			return c.invalid("table name of %d bytes (want 1-255, no NUL)", len(c.Table))
		}
		if c.Old != ValuePresent || c.New != ValueAbsent {
			return c.invalid("old must be %q and new %q", ValuePresent, ValueAbsent)
		}
		return nil
	case ChangeIptablesTable:
		if c.Family != "ipv4" && c.Family != "ipv6" {
			return c.invalid("family %q is not ipv4 or ipv6", c.Family)
		}
		if !slices.Contains(iptablesTables, c.Table) {
			return c.invalid("table %q is not one of %s", c.Table, strings.Join(iptablesTables, ", "))
		}
		if c.Module != iptablesModule(c.Family, c.Table) {
			return c.invalid("module %q is not the table's module %s", c.Module, iptablesModule(c.Family, c.Table))
		}
	default: // ChangeModule
		if !moduleName.MatchString(c.Module) {
			return c.invalid("module name %q", c.Module)
		}
	}
	if c.Old != ValueLoaded || c.New != ValueUnloaded {
		return c.invalid("old must be %q and new %q", ValueLoaded, ValueUnloaded)
	}
	return nil
}

// validateIrqbalanceBan checks an irqbalance-ban change: a known config
// file, distinct sorted IRQ numbers, arguments that can be written back
// inside double quotes.
func (c Change) validateIrqbalanceBan() error {
	if !slices.Contains(IrqbalanceConfigFiles, c.Path) {
		return c.invalid("path %q is not one of %s", c.Path, strings.Join(IrqbalanceConfigFiles, ", "))
	}
	if len(c.IRQs) == 0 || len(c.IRQs) > 4096 || !slices.IsSorted(c.IRQs) || len(slices.Compact(slices.Clone(c.IRQs))) != len(c.IRQs) || c.IRQs[0] < 0 || c.IRQs[len(c.IRQs)-1] >= 1<<22 {
		return c.invalid("irqs must be 1-4096 distinct sorted IRQ numbers")
	}
	for _, a := range c.Args {
		// The arguments are written back inside double quotes.
		if a == "" || len(a) > 256 || strings.ContainsAny(a, "\"$`\\'") || !sysctlValue.MatchString(a) || strings.ContainsAny(a, " ") {
			return c.invalid("irqbalance argument %q cannot be written back safely", a)
		}
	}
	if c.Old != ValueUnbanned || c.New != ValueBanned {
		return c.invalid("old must be %q and new %q", ValueUnbanned, ValueBanned)
	}
	return nil
}
