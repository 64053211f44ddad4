package netconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// ModuleState says whether a netfilter piece is in the kernel.
type ModuleState string

const (
	ModuleLoaded  ModuleState = "loaded"  // listed in /proc/modules
	ModuleBuiltin ModuleState = "builtin" // in the kernel image: cannot be unloaded
	ModuleAbsent  ModuleState = "absent"
)

// netfilterModules are the modules whose hooks cost CPU per packet even
// with empty tables (Makita (LinuxCon Japan 2016): "unload iptables").
var netfilterModules = []string{"ip_tables", "iptable_filter", "iptable_raw", "iptable_mangle", "iptable_nat",
	"ip6_tables", "ip6table_filter", "ip6table_raw", "ip6table_mangle", "ip6table_nat", "nf_tables", "nf_conntrack"}

// Netfilter is the packet filter state.
type Netfilter struct {
	// IPTables are the tables in /proc/net/ip_tables_names ("filter"); nil
	// when the file is absent (ip_tables not in the kernel).
	IPTables  []string `json:"iptables_tables"`
	IP6Tables []string `json:"ip6tables_tables"`
	// ModulesListed is false when /proc/modules is absent (a kernel without
	// loadable modules: everything present is built in).
	ModulesListed bool                   `json:"modules_listed"`
	Modules       map[string]ModuleState `json:"modules"`
	// RuleCounts maps "ipv4/filter" (legacy x_tables), "ipv6/raw",
	// "nft/inet/filter" to rule counts; nil when nothing could be read. A
	// table that could not be read is absent, never 0, and the reason is in
	// NetConfig.Unavailable["netfilter_rules"].
	RuleCounts map[string]int `json:"rule_counts"`
	// RuleSource names the tools the counts came from.
	RuleSource string `json:"rule_source,omitempty"`
}

// Loaded reports whether any netfilter hook module is present.
func (n Netfilter) Loaded() bool {
	for _, s := range n.Modules {
		if s != ModuleAbsent {
			return true
		}
	}
	return n.IPTables != nil || n.IP6Tables != nil
}

// TotalRules is the sum of RuleCounts; ok is false when unknown.
func (n Netfilter) TotalRules() (total int, ok bool) {
	if n.RuleCounts == nil {
		return 0, false
	}
	for _, v := range n.RuleCounts {
		total += v
	}
	return total, true
}

// RuleCounter counts netfilter rules.
type RuleCounter interface {
	CountRules() (counts map[string]int, source string, err error)
}

func (s Sources) netfilter(c *NetConfig) Netfilter {
	var n Netfilter
	n.IPTables = s.tableNames("/proc/net/ip_tables_names")
	n.IP6Tables = s.tableNames("/proc/net/ip6_tables_names")
	n.Modules = map[string]ModuleState{}
	loaded, err := s.FS.Modules()
	n.ModulesListed = err == nil
	if err != nil && !errors.Is(err, procfs.ErrNoModules) {
		c.Unavailable["netfilter_modules"] = err.Error()
	}
	for _, m := range netfilterModules {
		_, isLoaded := loaded[m]
		switch {
		case isLoaded:
			n.Modules[m] = ModuleLoaded
		case s.exists("/sys/module/"+m) || s.impliedByProc(m, n):
			// Built-in modules appear in /sys/module only when they have
			// parameters; the /proc/net table lists prove the rest.
			n.Modules[m] = ModuleBuiltin
		default:
			n.Modules[m] = ModuleAbsent
		}
	}
	if s.Rules == nil {
		c.Unavailable["netfilter_rules"] = "rule counting not requested"
		return n
	}
	counts, source, err := s.Rules.CountRules()
	if err != nil {
		// Partial counts stay: the rules read only what is listed.
		c.Unavailable["netfilter_rules"] = err.Error()
	}
	n.RuleCounts, n.RuleSource = counts, source
	return n
}

func (s Sources) exists(p string) bool {
	_, err := os.Stat(s.FS.Path(p))
	return err == nil
}

func (s Sources) impliedByProc(module string, n Netfilter) bool {
	switch module {
	case "ip_tables":
		return n.IPTables != nil
	case "iptable_filter", "iptable_raw", "iptable_mangle", "iptable_nat":
		return slices.Contains(n.IPTables, strings.TrimPrefix(module, "iptable_"))
	case "ip6_tables":
		return n.IP6Tables != nil
	case "ip6table_filter", "ip6table_raw", "ip6table_mangle", "ip6table_nat":
		return slices.Contains(n.IP6Tables, strings.TrimPrefix(module, "ip6table_"))
	case "nf_conntrack":
		return s.exists("/proc/sys/net/netfilter/nf_conntrack_max")
	}
	return false
}

func (s Sources) tableNames(p string) []string {
	text, err := s.FS.ReadString(p)
	if err != nil {
		return nil
	}
	names := strings.Fields(text)
	if names == nil {
		names = []string{}
	}
	sort := slices.Clone(names)
	slices.Sort(sort)
	return sort
}

// ExecRuleCounter runs iptables-save, ip6tables-save and `nft -j list
// ruleset` when they are installed. Each is bounded by Timeout (2 s by
// default) so a wedged tool cannot stall a run.
type ExecRuleCounter struct{ Timeout time.Duration }

// CountRules implements RuleCounter.
func (e ExecRuleCounter) CountRules() (map[string]int, string, error) {
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	counts := map[string]int{}
	var sources []string
	var errs []error
	for _, tool := range []struct{ bin, family string }{{"iptables-save", "ipv4"}, {"ip6tables-save", "ipv6"}} {
		out, err := run(timeout, tool.bin)
		if errors.Is(err, exec.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for table, n := range CountIptablesSave(out) {
			counts[tool.family+"/"+table] = n
		}
		sources = append(sources, tool.bin)
	}
	if out, err := run(timeout, "nft", "-j", "list", "ruleset"); err == nil {
		nft, perr := CountNftJSON(out)
		if perr != nil {
			errs = append(errs, perr)
		}
		for table, n := range nft {
			counts["nft/"+table] = n
		}
		sources = append(sources, "nft")
	} else if !errors.Is(err, exec.ErrNotFound) {
		errs = append(errs, err)
	}
	if len(sources) == 0 {
		return nil, "", errors.Join(append(errs, errors.New("unknown: neither iptables-save nor nft is installed"))...)
	}
	return counts, strings.Join(sources, ","), errors.Join(errs...)
}

func run(timeout time.Duration, name string, args ...string) (string, error) {
	if _, err := exec.LookPath(name); err != nil {
		return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return string(out), nil
}

// CountIptablesSave counts "-A" rules per "*table" of iptables-save output.
// Tables with no rule are listed with 0: an empty filter table still hooks
// every packet.
func CountIptablesSave(out string) map[string]int {
	counts := map[string]int{}
	table := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = strings.TrimPrefix(line, "*")
			counts[table] += 0
		case strings.HasPrefix(line, "-A ") && table != "":
			counts[table]++
		}
	}
	return counts
}

// CountNftJSON counts rules per "family/table" of `nft -j list ruleset`.
func CountNftJSON(out string) (map[string]int, error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("nft -j: %w", err)
	}
	counts := map[string]int{}
	for _, obj := range doc.Nftables {
		var ref struct {
			Family string `json:"family"`
			Table  string `json:"table"`
			Name   string `json:"name"`
		}
		if raw, ok := obj["table"]; ok {
			if json.Unmarshal(raw, &ref) == nil {
				counts[ref.Family+"/"+ref.Name] += 0
			}
		}
		if raw, ok := obj["rule"]; ok {
			if json.Unmarshal(raw, &ref) == nil {
				counts[ref.Family+"/"+ref.Table]++
			}
		}
	}
	return counts, nil
}
