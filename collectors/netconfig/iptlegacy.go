package netconfig

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Legacy iptables tables (x_tables) are not nftables: `nft list ruleset`
// and iptables-nft do not see them, yet their hooks run for every packet.
// The kernel lists them in /proc/net/ip_tables_names and hands out their
// rules through getsockopt on a raw socket (IPT_SO_GET_INFO and
// IPT_SO_GET_ENTRIES, linux/netfilter_ipv4/ip_tables.h), the interface
// iptables-legacy-save itself uses; LegacyTableRules reads it without any
// tool.
//
// Only tables the kernel already lists may be asked for: a request for
// another table would make the kernel instantiate it in this namespace and
// register its hooks — the very cost being measured.

// getsockopt numbers: IPT_SO_GET_INFO = IPT_BASE_CTL (64), GET_ENTRIES 65;
// IPv6 uses the same numbers at level IPPROTO_IPV6.
const (
	iptSoGetInfo    = 64
	iptSoGetEntries = 65
	xtTableMaxName  = 32
	// struct ipt_getinfo: name[32], valid_hooks, hook_entry[5],
	// underflow[5], num_entries, size.
	getinfoSize = 84
	// struct ipt_get_entries: name[32], size, then the entry table aligned
	// for its u64 counters.
	getEntriesHeader = 40
	// Largest rule blob read (a host with 100k rules is ~20 MB).
	maxTableBytes = 256 << 20
)

// legacyFamily is where the entry layouts differ between IPv4 and IPv6:
// struct ipt_entry puts target_offset and next_offset after the 84-byte
// struct ipt_ip and nfcache; struct ip6t_entry after the 136-byte
// struct ip6t_ip6.
type legacyFamily struct {
	name         string // "ipv4", "ipv6"
	domain       int
	level        int
	targetOffset int // of the u16 target_offset in an entry
}

var (
	legacyIPv4 = legacyFamily{"ipv4", unix.AF_INET, unix.IPPROTO_IP, 88}
	legacyIPv6 = legacyFamily{"ipv6", unix.AF_INET6, unix.IPPROTO_IPV6, 140}
)

// LegacyTable is one x_tables table as the kernel holds it.
type LegacyTable struct {
	Name string
	// Rules counts user rules: not the built-in chains' policies, not the
	// head and RETURN tail of user-defined chains, not the table's end.
	Rules int
	// Chains are the user-defined chains.
	Chains []string
	// Policies are the built-in chains' policies ("INPUT": "ACCEPT";
	// "DROP", or "OTHER" for a target that is not a plain verdict).
	Policies map[string]string
}

// legacyHooks name the netfilter hooks (NF_INET_*), the built-in chains.
var legacyHooks = [5]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

func getsockopt(fd, level, opt int, buf []byte) error {
	n := uint32(len(buf))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	runtime.KeepAlive(buf)
	if errno != 0 {
		return errno
	}
	return nil
}

// ReadLegacyTable reads one legacy table of family "ipv4" or "ipv6" in the
// calling thread's network namespace. Ask only for a table the kernel
// lists (/proc/net/ip_tables_names), or whose module is loaded: asking for
// another makes the kernel create it.
func ReadLegacyTable(family, table string) (LegacyTable, error) {
	fam := legacyIPv4
	if family == "ipv6" {
		fam = legacyIPv6
	}
	return readLegacyTable(fam, table)
}

// readLegacyTable asks the kernel for one listed table.
func readLegacyTable(fam legacyFamily, table string) (LegacyTable, error) {
	t := LegacyTable{Name: table}
	if len(table) >= xtTableMaxName || table == "" {
		return t, fmt.Errorf("table name %q", table)
	}
	fd, err := unix.Socket(fam.domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return t, fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	info := make([]byte, getinfoSize)
	copy(info, table)
	if err := getsockopt(fd, fam.level, iptSoGetInfo, info); err != nil {
		return t, fmt.Errorf("%s table %s: IPT_SO_GET_INFO: %w", fam.name, table, err)
	}
	ne := binary.NativeEndian
	validHooks := ne.Uint32(info[32:])
	size := ne.Uint32(info[80:])
	if size > maxTableBytes {
		return t, fmt.Errorf("%s table %s: %d bytes of rules", fam.name, table, size)
	}
	// underflow[h]: the offset of built-in chain h's policy entry.
	policies := map[int]string{}
	for h := 0; h < 5; h++ {
		if validHooks&(1<<h) != 0 {
			policies[int(ne.Uint32(info[56+4*h:]))] = legacyHooks[h]
		}
	}
	buf := make([]byte, getEntriesHeader+int(size))
	copy(buf, table)
	ne.PutUint32(buf[32:], size)
	if err := getsockopt(fd, fam.level, iptSoGetEntries, buf); err != nil {
		return t, fmt.Errorf("%s table %s: IPT_SO_GET_ENTRIES: %w", fam.name, table, err)
	}
	t.Rules, t.Chains, t.Policies, err = parseLegacyEntries(fam, buf[getEntriesHeader:], policies)
	if err != nil {
		return t, fmt.Errorf("%s table %s: %w", fam.name, table, err)
	}
	return t, nil
}

// parseLegacyEntries walks a table's entry blob. Built-in chains come
// first, each ending in its policy entry (at an underflow offset, keys of
// policies); then each user chain: an ERROR entry naming it, its rules, and
// an unconditional RETURN; the table ends with an ERROR entry named
// "ERROR".
func parseLegacyEntries(fam legacyFamily, blob []byte, policies map[int]string) (rules int, chains []string, verdicts map[string]string, err error) {
	type entry struct {
		off    int
		target string
		errorn string
	}
	var entries []entry
	verdicts = map[string]string{}
	ne := binary.NativeEndian
	for off := 0; off < len(blob); {
		if off+fam.targetOffset+4 > len(blob) {
			return 0, nil, nil, fmt.Errorf("entry at %d runs past the table", off)
		}
		tOff := int(ne.Uint16(blob[off+fam.targetOffset:]))
		next := int(ne.Uint16(blob[off+fam.targetOffset+2:]))
		// struct xt_entry_target: u16 target_size, char name[29], u8
		// revision, then the target's data (ERROR: the chain name).
		if next <= 0 || tOff+32 > next || off+next > len(blob) {
			return 0, nil, nil, fmt.Errorf("entry at %d: target_offset %d, next_offset %d", off, tOff, next)
		}
		e := entry{off: off, target: cstring(blob[off+tOff+2 : off+tOff+31])}
		if e.target == "ERROR" {
			e.errorn = cstring(blob[off+tOff+32 : off+next])
		}
		if chain, ok := policies[off]; ok {
			// The standard target (name "") holds an int verdict:
			// -NF_ACCEPT-1 is ACCEPT, -NF_DROP-1 DROP.
			verdicts[chain] = "OTHER"
			if e.target == "" && tOff+36 <= next {
				switch int32(ne.Uint32(blob[off+tOff+32:])) {
				case -2:
					verdicts[chain] = "ACCEPT"
				case -1:
					verdicts[chain] = "DROP"
				}
			}
		}
		entries = append(entries, e)
		off += next
	}
	if len(verdicts) != len(policies) {
		return 0, nil, nil, fmt.Errorf("%d of %d built-in chains' policies found", len(verdicts), len(policies))
	}
	inUser := false
	for i, e := range entries {
		switch {
		case e.target == "ERROR" && e.errorn == "ERROR":
			inUser = false // end of table
		case e.target == "ERROR":
			inUser = true
			chains = append(chains, e.errorn)
		case policies[e.off] != "":
		case inUser && i+1 < len(entries) && entries[i+1].target == "ERROR":
			// the user chain's closing RETURN
		default:
			rules++
		}
	}
	return rules, chains, verdicts, nil
}

func cstring(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// LegacyRules counts the rules of every table in names (as listed by
// /proc/net/ip_tables_names or ip6_tables_names) for family "ipv4" or
// "ipv6", keyed "ipv4/filter".
func LegacyRules(family string, names []string) (map[string]int, error) {
	counts := map[string]int{}
	var errs []error
	for _, n := range names {
		t, err := ReadLegacyTable(family, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		counts[family+"/"+n] = t.Rules
	}
	return counts, errors.Join(errs...)
}
