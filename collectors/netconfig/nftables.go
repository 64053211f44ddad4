package netconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
)

var nftFamilies = map[nftables.TableFamily]string{
	nftables.TableFamilyINet: "inet", nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6",
	nftables.TableFamilyARP: "arp", nftables.TableFamilyNetdev: "netdev", nftables.TableFamilyBridge: "bridge",
}

// NftRules counts rules per "family/table" of the caller's network
// namespace through nftables netlink (what `nft list ruleset` reads), with
// google/nftables. Tables without a rule are listed with 0: their base
// chains still hook packets. iptables-nft's tables are nft tables and are
// counted here.
func NftRules() (map[string]int, error) {
	conn, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", err)
	}
	tables, err := conn.ListTables()
	if err != nil {
		return nil, fmt.Errorf("nftables: list tables: %w", err)
	}
	counts := map[string]int{}
	for _, t := range tables {
		counts[nftKey(t)] += 0
	}
	chains, err := conn.ListChains()
	if err != nil {
		return nil, fmt.Errorf("nftables: list chains: %w", err)
	}
	var errs []error
	for _, c := range chains {
		rules, err := conn.GetRules(c.Table, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("nftables: rules of %s %s: %w", nftKey(c.Table), c.Name, err))
			delete(counts, nftKey(c.Table)) // unknown, not zero
			continue
		}
		if _, ok := counts[nftKey(c.Table)]; ok {
			counts[nftKey(c.Table)] += len(rules)
		}
	}
	return counts, errors.Join(errs...)
}

func nftKey(t *nftables.Table) string {
	f, ok := nftFamilies[t.Family]
	if !ok {
		f = fmt.Sprintf("family%d", t.Family)
	}
	return f + "/" + t.Name
}

// NativeRuleCounter counts netfilter rules without any tool: nftables
// through netlink, legacy x_tables through their getsockopt interface for
// the tables FS lists. A part it cannot read is left out of the counts
// (never counted as 0) and named in the error.
type NativeRuleCounter struct{ Sources Sources }

// CountRules implements RuleCounter.
func (n NativeRuleCounter) CountRules() (map[string]int, string, error) {
	counts := map[string]int{}
	var sources []string
	var errs []error
	if nft, err := NftRules(); err != nil {
		errs = append(errs, err)
	} else {
		for k, v := range nft {
			counts["nft/"+k] = v
		}
		sources = append(sources, "nftables netlink")
	}
	for _, fam := range []struct{ family, file string }{{"ipv4", "ip_tables_names"}, {"ipv6", "ip6_tables_names"}} {
		// The calling thread's namespace: the sockets below are the
		// thread's, and /proc/net follows the process's main thread.
		names := n.Sources.tableNames("/proc/thread-self/net/" + fam.file)
		if names == nil {
			names = n.Sources.tableNames("/proc/net/" + fam.file)
		}
		if len(names) == 0 {
			continue
		}
		legacy, err := LegacyRules(fam.family, names)
		if err != nil {
			errs = append(errs, err)
		}
		for k, v := range legacy {
			counts[k] = v
		}
		if len(legacy) > 0 {
			sources = append(sources, fam.family+" x_tables getsockopt")
		}
	}
	if len(sources) == 0 {
		return nil, "", errors.Join(errs...)
	}
	return counts, strings.Join(sources, ", "), errors.Join(errs...)
}
