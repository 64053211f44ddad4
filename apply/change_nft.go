package apply

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"

	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/diagnose"
)

// nftables tables: read over netlink attribute by attribute (so that
// anything the restore could not recreate — a comment, a device binding,
// a dormant flag — is seen and refused before the delete), deleted and
// recreated with google/nftables in one transaction each. The description
// saved at --apply lives in the revert file: there is no second file to
// protect.

// NftTable is the saved description of a table, as collectors/netconfig
// reads it (the same reader the run counted the rules with); NftChain one
// of its chains.
type (
	NftTable = netconfig.NftTable
	NftChain = netconfig.NftChain
)

// nftHooks names hook numbers per family, for the shell rendition.
func nftHookName(family string, hook uint32) string {
	names := []string{"prerouting", "input", "forward", "output", "postrouting", "ingress"}
	switch family {
	case "arp":
		names = []string{"input", "output", "forward"}
	case "netdev":
		names = []string{"ingress", "egress"}
	}
	if int(hook) < len(names) {
		return names[hook]
	}
	return fmt.Sprint(hook)
}

// validateSavedNft checks a saved description as the revert-file reader
// must: a table perfscope can recreate, tables and chains only.
func validateSavedNft(t NftTable, family, name string) error {
	if t.Family != family || t.Name != name {
		return fmt.Errorf("saved nft table %s %q does not match the change's %s %q", t.Family, t.Name, family, name)
	}
	if t.Flags != 0 || t.Rules != 0 || t.Sets != 0 || t.Objects != 0 || t.Flowtables != 0 || len(t.Unsupported) != 0 {
		return errors.New("saved nft table holds more than tables and chains")
	}
	if len(t.Chains) > 1024 {
		return fmt.Errorf("saved nft table has %d chains", len(t.Chains))
	}
	seen := map[string]bool{}
	for _, c := range t.Chains {
		if c.Name == "" || len(c.Name) > 255 || strings.ContainsRune(c.Name, 0) || seen[c.Name] {
			return fmt.Errorf("saved nft chain name %q", c.Name)
		}
		seen[c.Name] = true
		base := c.Hook != nil || c.Priority != nil || c.Type != "" || c.Policy != ""
		if !base {
			continue
		}
		if c.Hook == nil || c.Priority == nil || *c.Hook > 7 || !slices.Contains([]string{"filter", "nat", "route"}, c.Type) || c.Policy != "accept" {
			return fmt.Errorf("saved nft base chain %q: hook, priority, type filter/nat/route and policy accept are required", c.Name)
		}
	}
	return nil
}

type nftHandler struct{}

func (nftHandler) read(s *System, c diagnose.Change) (state, error) {
	nft, err := need(s.Nft, "nftables")
	if err != nil {
		return state{}, err
	}
	t, err := nft.Table(c.Family, c.Table)
	if err != nil {
		return state{}, fmt.Errorf("read nft table %s %q: %w", c.Family, c.Table, err)
	}
	if t == nil {
		return state{value: diagnose.ValueAbsent}, nil
	}
	return state{value: diagnose.ValuePresent, saved: &Saved{Nft: t}}, nil
}

// guard: only a table that holds nothing but chains without rules, all
// accepting by policy, is deleted — anything else would change filtering
// or lose what the restore cannot recreate.
func (nftHandler) guard(s *System, c diagnose.Change, st state) error {
	t := st.saved.Nft
	what := fmt.Sprintf("nft table %s %q", c.Family, c.Table)
	switch {
	case t.Rules > 0:
		return fmt.Errorf("%s now holds %d rules: it is in use", what, t.Rules)
	case t.Sets+t.Objects+t.Flowtables > 0:
		return fmt.Errorf("%s holds %d sets, %d stateful objects and %d flowtables, which perfscope does not restore: delete it by hand if you mean to", what, t.Sets, t.Objects, t.Flowtables)
	case t.Flags != 0:
		return fmt.Errorf("%s has flags %#x (dormant or owned by a process), which perfscope does not restore", what, t.Flags)
	case len(t.Unsupported) > 0:
		return fmt.Errorf("%s has %s, which perfscope does not restore", what, strings.Join(t.Unsupported, ", "))
	case c.Family == "netdev":
		return fmt.Errorf("%s is bound to devices, which perfscope does not restore", what)
	}
	for _, ch := range t.Chains {
		if ch.Policy != "" && ch.Policy != "accept" {
			return fmt.Errorf("%s is not unused: chain %q drops by policy", what, ch.Name)
		}
	}
	return validateSavedNft(*t, c.Family, c.Table)
}

func (nftHandler) write(s *System, c diagnose.Change, value string, saved *Saved) error {
	if value == diagnose.ValueAbsent {
		return s.Nft.Delete(c.Family, c.Table)
	}
	if saved == nil || saved.Nft == nil {
		return errors.New("no saved description of the table to recreate")
	}
	return s.Nft.Create(*saved.Nft)
}

func (nftHandler) same(_ diagnose.Change, value string, saved *Saved, st state) bool {
	if value != st.value {
		return false
	}
	if value == diagnose.ValuePresent && saved != nil && saved.Nft != nil {
		return st.saved != nil && st.saved.Nft != nil && saved.Nft.Equal(*st.saved.Nft)
	}
	return true
}

// NftRestoreCommand renders recreating a saved table with nft: its own
// syntax when every name is a plain identifier, JSON input otherwise.
func NftRestoreCommand(t NftTable) string {
	plain := diagnose.NftIdentifier(t.Name)
	for _, c := range t.Chains {
		plain = plain && diagnose.NftIdentifier(c.Name)
	}
	if plain {
		cmds := []string{fmt.Sprintf("add table %s %s", t.Family, t.Name)}
		for _, c := range t.SortedChains() {
			if c.Hook == nil {
				cmds = append(cmds, fmt.Sprintf("add chain %s %s %s", t.Family, t.Name, c.Name))
				continue
			}
			cmds = append(cmds, fmt.Sprintf("add chain %s %s %s { type %s hook %s priority %d; policy %s; }",
				t.Family, t.Name, c.Name, c.Type, nftHookName(t.Family, *c.Hook), *c.Priority, c.Policy))
		}
		return "nft " + quoteWord(strings.Join(cmds, "; "))
	}
	var objs []string
	table, ok := diagnose.NftJSON(`{"add":{"table":{"family":%s,"name":%s}}}`, t.Family, t.Name)
	if !ok {
		return fmt.Sprintf("# nft table %s has a name no nft command can spell (not UTF-8); perfscope udp --revert recreates it through netlink", quoteWord(t.Name))
	}
	objs = append(objs, table)
	for _, c := range t.SortedChains() {
		var o string
		if c.Hook == nil {
			o, ok = diagnose.NftJSON(`{"add":{"chain":{"family":%s,"table":%s,"name":%s}}}`, t.Family, t.Name, c.Name)
		} else {
			o, ok = diagnose.NftJSON(fmt.Sprintf(`{"add":{"chain":{"family":%%s,"table":%%s,"name":%%s,"type":%%s,"hook":%%s,"prio":%d,"policy":%%s}}}`, *c.Priority),
				t.Family, t.Name, c.Name, c.Type, nftHookName(t.Family, *c.Hook), c.Policy)
		}
		if !ok {
			return fmt.Sprintf("# nft chain of table %s has a name no nft command can spell (not UTF-8); perfscope udp --revert recreates it through netlink", quoteWord(t.Name))
		}
		objs = append(objs, o)
	}
	return diagnose.NftJSONCommand(`{"nftables":[` + strings.Join(objs, ",") + `]}`)
}

// --- netlink --------------------------------------------------------------------

// netlinkNftables reads tables with collectors/netconfig's reader and
// deletes and recreates them with google/nftables.
type netlinkNftables struct{}

func (netlinkNftables) Table(family, name string) (*NftTable, error) {
	return netconfig.ReadNftTable(family, name)
}

func nftFamily(family string) nftables.TableFamily {
	n, _ := netconfig.NftFamilyNumber(family)
	return nftables.TableFamily(n)
}

func (netlinkNftables) Delete(family, name string) error {
	conn, err := nftables.New()
	if err != nil {
		return err
	}
	conn.DelTable(&nftables.Table{Name: name, Family: nftFamily(family)})
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("delete nft table %s %q: %w", family, name, err)
	}
	return nil
}

// Create recreates the table and its chains in one transaction: either
// all of it exists afterwards or nothing does. CreateTable fails on an
// existing table instead of merging into it.
func (netlinkNftables) Create(t NftTable) error {
	conn, err := nftables.New()
	if err != nil {
		return err
	}
	table := conn.CreateTable(&nftables.Table{Name: t.Name, Family: nftFamily(t.Family)})
	for _, c := range t.SortedChains() {
		ch := &nftables.Chain{Name: c.Name, Table: table}
		if c.Hook != nil && c.Priority != nil {
			hook, prio := nftables.ChainHook(*c.Hook), nftables.ChainPriority(*c.Priority)
			policy := nftables.ChainPolicyAccept
			ch.Hooknum, ch.Priority, ch.Type, ch.Policy = &hook, &prio, nftables.ChainType(c.Type), &policy
		}
		conn.AddChain(ch)
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("recreate nft table %s %q: %w", t.Family, t.Name, err)
	}
	return nil
}
