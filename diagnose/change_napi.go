package diagnose

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/base/shellquote"
)

// ChangeNAPI sets one NAPI instance's settings through the netdev netlink
// family's napi-set (Linux 6.13+; threaded 6.17): Iface and
// Queue name the device and RX queue the instance served when the run read
// it, NAPIID the instance. A NAPI id changes when its device is
// reconfigured, so the executor checks the id still belongs to Iface (and
// serves Queue) before writing.
const ChangeNAPI ChangeKind = "napi"

// NAPIParams are the settings a napi change may name, as the netdev
// family spells its attributes; their values are "name=value" words like
// the ethtool parameter kinds', 64-bit.
var NAPIParams = []string{"defer-hard-irqs", "gro-flush-timeout", "irq-suspend-timeout", "threaded"}

// NAPIThreadedNames are the values of the threaded setting, by number
// (the netdev family's napi-threaded enum).
var NAPIThreadedNames = []string{"disabled", "enabled", "busy-poll"}

// napiParamMax is each setting's largest value the kernel accepts
// (Documentation/netlink/specs/netdev.yaml: defer-hard-irqs is checked
// against S32_MAX, the timeouts are any unsigned 64-bit value, threaded
// one of NAPIThreadedNames).
var napiParamMax = map[string]uint64{
	"defer-hard-irqs":     math.MaxInt32,
	"gro-flush-timeout":   math.MaxUint64,
	"irq-suspend-timeout": math.MaxUint64,
	"threaded":            uint64(len(NAPIThreadedNames) - 1),
}

// NAPISettingsChange sets NAPI instance id of iface (serving RX queue
// queue, or nil when the run did not learn which) from old to new.
func NAPISettingsChange(iface string, queue *int, id uint32, old, new map[string]uint64) Change {
	var q *int
	if queue != nil {
		v := *queue
		q = &v
	}
	return Change{Kind: ChangeNAPI, Iface: iface, NAPIID: id, Queue: q, Old: FormatNAPIParams(old), New: FormatNAPIParams(new)}
}

// FormatNAPIParams prints NAPI settings as "name=value" words in
// NAPIParams' order.
func FormatNAPIParams(p map[string]uint64) string {
	var words []string
	for _, name := range NAPIParams {
		if v, ok := p[name]; ok {
			words = append(words, name+"="+strconv.FormatUint(v, 10))
		}
	}
	return strings.Join(words, " ")
}

// ParseNAPIParams reads FormatNAPIParams' text: known names, each once,
// each value within the kernel's range.
func ParseNAPIParams(text string) (map[string]uint64, error) {
	return parseNamedValues(text, NAPIParams, "setting", func(name string) uint64 { return napiParamMax[name] })
}

// validateNAPI checks a napi change: a valid interface, a NAPI id (the
// kernel numbers them from NR_CPUS+1, which depends on its build), a
// queue number if any, and the same settings named old and new.
func (c Change) validateNAPI() error {
	if err := ValidIfaceName(c.Iface); err != nil {
		return err
	}
	if c.NAPIID == 0 {
		return c.invalid("no napi_id")
	}
	if c.Queue != nil && (*c.Queue < 0 || *c.Queue >= 1<<16) {
		return c.invalid("queue %d out of range", *c.Queue)
	}
	old, err := ParseNAPIParams(c.Old)
	if err != nil {
		return c.invalid("old value: %v", err)
	}
	new, err := ParseNAPIParams(c.New)
	if err != nil {
		return c.invalid("new value: %v", err)
	}
	if !sameNames(old, new) {
		return c.invalid("old and new values must name the same settings")
	}
	return nil
}

// napiCommand is the ynl command (the kernel's tools/net/ynl) that sets
// the instance's settings to value.
func (c Change) napiCommand(value string) string {
	p, err := ParseNAPIParams(value)
	if err != nil {
		return "# " + shellquote.Quote(value) + ": " + err.Error()
	}
	words := []string{fmt.Sprintf(`"id": %d`, c.NAPIID)}
	for _, name := range NAPIParams {
		v, ok := p[name]
		switch {
		case !ok:
		case name == "threaded":
			words = append(words, fmt.Sprintf(`%q: %q`, name, NAPIThreadedNames[v]))
		default:
			words = append(words, fmt.Sprintf(`%q: %d`, name, v))
		}
	}
	cmd := shellquote.Join("ynl", "--family", "netdev", "--do", "napi-set", "--json", "{"+strings.Join(words, ", ")+"}")
	where := "NAPI instance of " + shellquote.Quote(c.Iface)
	if c.Queue != nil {
		where += fmt.Sprintf(" rx-%d", *c.Queue)
	}
	return cmd + "   # " + where
}
