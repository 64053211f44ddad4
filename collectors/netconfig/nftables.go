package netconfig

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
)

// nftables, read over netlink in the calling thread's network namespace:
// the tables with google/nftables, each table attribute by attribute
// (ReadNftTable), so that the rule counts the diagnosis uses and the
// description --apply saves before deleting a table come from one reader.

// nftFamilyNumbers are the nftables families by their names in nft(8).
var nftFamilyNumbers = map[string]byte{"ip": unix.NFPROTO_IPV4, "ip6": unix.NFPROTO_IPV6, "inet": unix.NFPROTO_INET,
	"arp": unix.NFPROTO_ARP, "bridge": unix.NFPROTO_BRIDGE, "netdev": unix.NFPROTO_NETDEV}

// NftFamilyNumber is the NFPROTO_ number of a family name ("inet").
func NftFamilyNumber(family string) (byte, bool) {
	n, ok := nftFamilyNumbers[family]
	return n, ok
}

func nftFamilyName(f nftables.TableFamily) string {
	for name, n := range nftFamilyNumbers {
		if nftables.TableFamily(n) == f {
			return name
		}
	}
	return fmt.Sprintf("family%d", f)
}

// NftTable describes one table: its flags, its chains, how many rules,
// sets, stateful objects and flowtables it holds, and what else it carries
// (Unsupported: a comment, an owning process, a device binding...). It is
// also the form in which --apply saves a table in the revert file.
type NftTable struct {
	Family      string     `json:"family"`
	Name        string     `json:"name"`
	Flags       uint32     `json:"flags"`
	Chains      []NftChain `json:"chains"`
	Rules       int        `json:"rules"`
	Sets        int        `json:"sets"`
	Objects     int        `json:"objects"`
	Flowtables  int        `json:"flowtables"`
	Unsupported []string   `json:"unsupported,omitempty"`
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
	a, b := t.SortedChains(), o.SortedChains()
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

// SortedChains are the chains by name.
func (t NftTable) SortedChains() []NftChain {
	c := slices.Clone(t.Chains)
	sort.Slice(c, func(i, j int) bool { return c[i].Name < c[j].Name })
	return c
}

// NftRules counts rules per "family/table" of the caller's network
// namespace (what `nft list ruleset` shows). Tables without a rule are
// listed with 0: their base chains still hook packets. iptables-nft's
// tables are nft tables and are counted here. A table that could not be
// read is left out (unknown, not zero) and named in the error.
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
	var errs []error
	for _, t := range tables {
		key := nftFamilyName(t.Family) + "/" + t.Name
		d, err := ReadNftTable(nftFamilyName(t.Family), t.Name)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("nftables: table %s: %w", key, err))
		case d != nil: // nil: deleted since the listing
			counts[key] = d.Rules
		}
	}
	return counts, errors.Join(errs...)
}

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
	nftTableAttr      = 1 // NFTA_{RULE,SET,OBJ,FLOWTABLE,CHAIN}_TABLE
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

func nlString(s string) []byte { return append([]byte(s), 0) }

// ReadNftTable describes one table, nil when it does not exist. Read
// attribute by attribute, so that whatever a description cannot hold is
// named in Unsupported rather than lost.
func ReadNftTable(family, name string) (*NftTable, error) {
	fam, ok := nftFamilyNumbers[family]
	if !ok {
		return nil, fmt.Errorf("unknown nft family %q", family)
	}
	msgs, err := nftRequest(unix.NFT_MSG_GETTABLE, fam, false, netlink.Attribute{Type: nftaTableName, Data: nlString(name)})
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
	msgs, err := nftRequest(msgType, fam, true, netlink.Attribute{Type: nftTableAttr, Data: nlString(table)})
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
	msgs, err := nftRequest(unix.NFT_MSG_GETCHAIN, fam, true, netlink.Attribute{Type: nftTableAttr, Data: nlString(table)})
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
