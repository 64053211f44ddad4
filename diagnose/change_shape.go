package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ChangeShape is one form of typed change a rule can make. Each rule that
// makes changes declares their shapes beside it (Rule.Changes); the
// revert-file reader accepts a change only in a shape its finding's rule
// declares, so a file edited after --apply can ask for nothing that rule
// could not have asked for (net.ipv4.ip_forward under net.rp-filter, a
// module other than netfilter's). The rules' table tests check every
// change a rule makes against its declaration, and that each declared
// shape is made by some case, so the two cannot drift apart.
type ChangeShape struct {
	Kind ChangeKind
	// Target is a pattern of what the change acts on (Change.Target):
	// text, with <iface> for the run's interface (in a sysctl key in the
	// key's form, eth0.100 as eth0/100), <n> for a decimal number, <*>
	// for anything the kind's own form allows (Change.Validate), and
	// {a|b} for one of the alternatives.
	Target string
	// Old and New are the values it may find and set.
	Old, New ValueShape
}

// ValueShape is the set of values one side of a change may hold.
type ValueShape struct {
	// Name says what the values are, for messages.
	Name  string
	match func(string) bool
}

// Match reports whether v is one of the shape's values.
func (v ValueShape) Match(s string) bool { return v.match != nil && v.match(s) }

// Values is a shape of exactly the values given.
func Values(vs ...string) ValueShape {
	return ValueShape{Name: strings.Join(vs, " or "), match: func(s string) bool { return slices.Contains(vs, s) }}
}

var (
	decimalValue  = regexp.MustCompile(`^[0-9]{1,19}$`)
	decimalsValue = regexp.MustCompile(`^[0-9]{1,19} [0-9]{1,19} [0-9]{1,19}$`)
	cpuValue      = regexp.MustCompile(`^[0-9]{1,5}$`)
)

// Value shapes of the changes rules make.
var (
	// KindForm is any value of the change kind's own form (Validate).
	KindForm = ValueShape{Name: "a value of its kind", match: func(string) bool { return true }}
	// Decimal is a non-negative decimal number (a count, a size).
	Decimal = ValueShape{Name: "a decimal number", match: decimalValue.MatchString}
	// ThreeDecimals is three of them, as udp_mem holds.
	ThreeDecimals = ValueShape{Name: "three decimal numbers", match: decimalsValue.MatchString}
	// CPUMask is a hex cpumask ("f", "00,00000004").
	CPUMask = ValueShape{Name: "a hex cpumask", match: cpumaskValue.MatchString}
	// OneCPU is a CPU list of one CPU ("3").
	OneCPU = ValueShape{Name: "one CPU", match: cpuValue.MatchString}
)

// Target is what c acts on, as a ChangeShape's Target matches it: the
// sysctl key; the sysfs or irqbalance configuration path; "IFACE FEATURE"
// for an offload; "IFACE PARAM ..." for ring, coalesce and channel
// parameters (the names New sets, in order); the interface of an RSS
// table; "FAMILY TABLE" for tables; the module; the thread id; "" for
// audit.
func (c Change) Target() string {
	switch c.Kind {
	case ChangeSysctl:
		return c.Key
	case ChangeSysfs, ChangeIrqbalanceBan:
		return c.Path
	case ChangeEthtoolFeature:
		return c.Iface + " " + c.Feature
	case ChangeEthtoolRing, ChangeEthtoolCoalesce, ChangeEthtoolChannels:
		words := []string{c.Iface}
		if p, err := ParseParams(c.New, ParamNames(c.Kind)); err == nil {
			for _, name := range ParamNames(c.Kind) {
				if _, ok := p[name]; ok {
					words = append(words, name)
				}
			}
		}
		return strings.Join(words, " ")
	case ChangeEthtoolRSS:
		return c.Iface
	case ChangeNftTable, ChangeIptablesTable:
		return c.Family + " " + c.Table
	case ChangeModule:
		return c.Module
	case ChangeThreadAffinity:
		return strconv.Itoa(c.TID)
	case ChangeNAPI:
		return c.Iface + " " + strconv.FormatUint(uint64(c.NAPIID), 10)
	}
	return ""
}

// pattern compiles the shape's Target for the run's interface iface.
func (s ChangeShape) pattern(iface string) (*regexp.Regexp, error) {
	if s.Kind == ChangeSysctl {
		iface = SysctlKey(iface)
	}
	var b strings.Builder
	b.WriteString("^")
	rest := s.Target
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "<iface>"):
			if iface == "" {
				return nil, fmt.Errorf("the run names no interface")
			}
			b.WriteString(regexp.QuoteMeta(iface))
			rest = rest[len("<iface>"):]
		case strings.HasPrefix(rest, "<n>"):
			b.WriteString("[0-9]{1,10}")
			rest = rest[len("<n>"):]
		case strings.HasPrefix(rest, "<*>"):
			b.WriteString("(?s:.*)")
			rest = rest[len("<*>"):]
		case rest[0] == '{':
			b.WriteString("(?:")
			rest = rest[1:]
		case rest[0] == '|':
			b.WriteString("|")
			rest = rest[1:]
		case rest[0] == '}':
			b.WriteString(")")
			rest = rest[1:]
		default:
			n := strings.IndexAny(rest[1:], "<{|}") + 1
			if n == 0 {
				n = len(rest)
			}
			b.WriteString(regexp.QuoteMeta(rest[:n]))
			rest = rest[n:]
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// Matches reports whether c has this shape, made on the run's interface.
func (s ChangeShape) Matches(c Change, iface string) bool {
	if c.Kind != s.Kind || !s.Old.Match(c.Old) || !s.New.Match(c.New) {
		return false
	}
	re, err := s.pattern(iface)
	return err == nil && re.MatchString(c.Target())
}

func (s ChangeShape) String() string {
	target := s.Target
	if target == "" {
		target = "(no target)"
	}
	return fmt.Sprintf("%s %s from %s to %s", s.Kind, target, s.Old.Name, s.New.Name)
}

// Allowed checks that c has one of shapes and is made on the run's
// interface iface; the error names what the shapes allow.
func Allowed(shapes []ChangeShape, c Change, iface string) error {
	for _, s := range shapes {
		if s.Matches(c, iface) {
			return nil
		}
	}
	if len(shapes) == 0 {
		return fmt.Errorf("%w: its rule makes no changes", ErrInvalidChange)
	}
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = s.String()
	}
	return fmt.Errorf("%w: %s %q from %q to %q is not a change its rule makes (it makes: %s)",
		ErrInvalidChange, c.Kind, c.Target(), c.Old, c.New, strings.Join(names, "; "))
}

// alternatives is {a|b|...} of words, for a Target.
func alternatives(words []string) string { return "{" + strings.Join(words, "|") + "}" }
