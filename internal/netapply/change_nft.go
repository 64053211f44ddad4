package netapply

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/diagnose"
)

// nftables tables: read over netlink attribute by attribute (so that
// anything the restore could not recreate — a comment, a device binding,
// a dormant flag — is seen and refused before the delete), deleted and
// recreated with google/nftables in one transaction each. The description
// saved at --apply lives in the revert file: there is no second file to
// protect.

// NftTable is the saved description of a table without rules.
type NftTable struct {
	Family string     `json:"family"`
	Name   string     `json:"name"`
	Flags  uint32     `json:"flags"`
	Chains []NftChain `json:"chains"`
	// What a deleted table must not hold (perfscope recreates tables and
	// chains only); counted when it is read.
	Rules      int `json:"rules"`
	Sets       int `json:"sets"`
	Objects    int `json:"objects"`
	Flowtables int `json:"flowtables"`
	// Unsupported names attributes the restore cannot recreate.
	Unsupported []string `json:"unsupported,omitempty"`
}

// NftChain is one chain: a base chain has a type, hook, priority and
// policy; a regular chain only a name.
type NftChain struct {
	Name     string  `json:"name"`
	Type     string  `json:"type,omitempty"`
	Hook     *uint32 `json:"hook,omitempty"`
	Priority *int32  `json:"priority,omitempty"`
	Policy   string  `json:"policy,omitempty"`
}

// Equal compares two descriptions, chains in any order.
func (t NftTable) Equal(o NftTable) bool {
	if t.Family != o.Family || t.Name != o.Name || t.Flags != o.Flags || t.Rules != o.Rules || t.Sets != o.Sets ||
		t.Objects != o.Objects || t.Flowtables != o.Flowtables || !slices.Equal(t.Unsupported, o.Unsupported) || len(t.Chains) != len(o.Chains) {
		return false
	}
	a, b := t.sortedChains(), o.sortedChains()
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Type != y.Type || x.Policy != y.Policy || !ptrEqual(x.Hook, y.Hook) || !ptrEqual(x.Priority, y.Priority) {
			return false
		}
	}
	return true
}

func ptrEqual[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func (t NftTable) sortedChains() []NftChain {
	c := slices.Clone(t.Chains)
	sort.Slice(c, func(i, j int) bool { return c[i].Name < c[j].Name })
	return c
}

var nftFamilyNumbers = map[string]byte{"ip": unix.NFPROTO_IPV4, "ip6": unix.NFPROTO_IPV6, "inet": unix.NFPROTO_INET,
	"arp": unix.NFPROTO_ARP, "bridge": unix.NFPROTO_BRIDGE, "netdev": unix.NFPROTO_NETDEV}

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

// Validate checks a saved description as the revert-file reader must.
func (t NftTable) Validate(family, name string) error {
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
	return t.Validate(c.Family, c.Table)
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
		for _, c := range t.sortedChains() {
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
	for _, c := range t.sortedChains() {
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

type netlinkNftables struct{}

// nftables attribute numbers (linux/netfilter/nf_tables.h).
const (
	nftaTableName     = 1
	nftaTableFlags    = 2
	nftaTableUserdata = 6
	nftaTableOwner    = 7
	nftaChainName     = 3
	nftaChainHook     = 4
	nftaChainPolicy   = 5
	nftaChainType     = 7
	nftaChainFlags    = 10
	nftaChainUserdata = 12
	nftaHookNum       = 1
	nftaHookPriority  = 2
	nftaHookDev       = 3
	nftaHookDevs      = 4
	nftChainBase      = 1
	nftTableAttr      = 1 // NFTA_{RULE,SET,OBJ,FLOWTABLE}_TABLE
)

func nftRequest(msgType uint16, family byte, dump bool, attrs ...netlink.Attribute) ([]netlink.Message, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", err)
	}
	defer conn.Close()
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return nil, err
	}
	flags := netlink.Request | netlink.Acknowledge
	if dump {
		flags = netlink.Request | netlink.Dump
	}
	// struct nfgenmsg: family, version, resource id.
	return conn.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | int(msgType)), Flags: flags},
		Data:   append([]byte{family, unix.NFNETLINK_V0, 0, 0}, data...),
	})
}

func cString(s string) []byte { return append([]byte(s), 0) }

func (netlinkNftables) Table(family, name string) (*NftTable, error) {
	fam, ok := nftFamilyNumbers[family]
	if !ok {
		return nil, fmt.Errorf("unknown nft family %q", family)
	}
	msgs, err := nftRequest(unix.NFT_MSG_GETTABLE, fam, false, netlink.Attribute{Type: nftaTableName, Data: cString(name)})
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t := &NftTable{Family: family, Name: name, Chains: []NftChain{}}
	found := false
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return nil, err
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			switch ad.Type() {
			case nftaTableName:
				found = ad.String() == name
			case nftaTableFlags:
				t.Flags = ad.Uint32()
			case nftaTableUserdata:
				t.Unsupported = append(t.Unsupported, "a table comment")
			case nftaTableOwner:
				t.Unsupported = append(t.Unsupported, "an owning process")
			}
		}
		if err := ad.Err(); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, nil
	}
	if t.Chains, err = nftChains(fam, name, &t.Unsupported); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		msg uint16
		n   *int
	}{{unix.NFT_MSG_GETRULE, &t.Rules}, {unix.NFT_MSG_GETSET, &t.Sets}, {unix.NFT_MSG_GETOBJ, &t.Objects}, {unix.NFT_MSG_GETFLOWTABLE, &t.Flowtables}} {
		if *c.n, err = nftCount(c.msg, fam, name); err != nil {
			return nil, err
		}
	}
	slices.Sort(t.Unsupported)
	t.Unsupported = slices.Compact(t.Unsupported)
	return t, nil
}

// tableOf reads the table attribute (number 1 in rule, set, object,
// flowtable and chain messages) of a dumped message.
func tableOf(m netlink.Message) string {
	if len(m.Data) < 4 {
		return ""
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return ""
	}
	for ad.Next() {
		if ad.Type() == nftTableAttr {
			return ad.String()
		}
	}
	return ""
}

// nftCount counts a table's rules, sets, objects or flowtables. The
// kernel filters the dump by table; the messages are checked again.
func nftCount(msgType uint16, fam byte, table string) (int, error) {
	msgs, err := nftRequest(msgType, fam, true, netlink.Attribute{Type: nftTableAttr, Data: cString(table)})
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("count (message %d): %w", msgType, err)
	}
	n := 0
	for _, m := range msgs {
		if tableOf(m) == table {
			n++
		}
	}
	return n, nil
}

func nftChains(fam byte, table string, unsupported *[]string) ([]NftChain, error) {
	msgs, err := nftRequest(unix.NFT_MSG_GETCHAIN, fam, true, netlink.Attribute{Type: nftTableAttr, Data: cString(table)})
	if errors.Is(err, unix.ENOENT) {
		return []NftChain{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list chains: %w", err)
	}
	chains := []NftChain{}
	for _, m := range msgs {
		if tableOf(m) != table {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return nil, err
		}
		ad.ByteOrder = binary.BigEndian
		var c NftChain
		for ad.Next() {
			switch ad.Type() {
			case nftaChainName:
				c.Name = ad.String()
			case nftaChainType:
				c.Type = ad.String()
			case nftaChainPolicy:
				c.Policy = map[uint32]string{0: "drop", 1: "accept"}[ad.Uint32()]
				if c.Policy == "" {
					c.Policy = "unknown"
				}
			case nftaChainFlags:
				if ad.Uint32()&^nftChainBase != 0 {
					*unsupported = append(*unsupported, "chain flags (offload or binding)")
				}
			case nftaChainUserdata:
				*unsupported = append(*unsupported, "a chain comment")
			case nftaChainHook:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					nad.ByteOrder = binary.BigEndian
					for nad.Next() {
						switch nad.Type() {
						case nftaHookNum:
							h := nad.Uint32()
							c.Hook = &h
						case nftaHookPriority:
							p := int32(nad.Uint32())
							c.Priority = &p
						case nftaHookDev, nftaHookDevs:
							*unsupported = append(*unsupported, "a device binding")
						}
					}
					return nil
				})
			}
		}
		if err := ad.Err(); err != nil {
			return nil, err
		}
		chains = append(chains, c)
	}
	return chains, nil
}

func (netlinkNftables) Delete(family, name string) error {
	conn, err := nftables.New()
	if err != nil {
		return err
	}
	conn.DelTable(&nftables.Table{Name: name, Family: nftables.TableFamily(nftFamilyNumbers[family])})
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
	table := conn.CreateTable(&nftables.Table{Name: t.Name, Family: nftables.TableFamily(nftFamilyNumbers[t.Family])})
	for _, c := range t.sortedChains() {
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
