package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/perfscope/perfscope/base/shellquote"
)

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
	case ChangeNAPI:
		return c.napiCommand(value)
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
