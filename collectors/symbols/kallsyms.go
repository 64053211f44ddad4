package symbols

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
)

// KernelSymbols is /proc/kallsyms' text symbols sorted by address.
//
// It is held for a whole run by every part that names kernel frames, so it
// is kept compact: names live in one string and each symbol is 16 bytes.
// The first version (a string per line and a 40-byte entry) held ~15 MB
// for 120,000 symbols and allocated 48 MB to parse them. A session reads it
// once for all its parts (lock sites and the profile share a Symbolizer),
// and only when the kernel's own lookup (Symbolizer.UseKernelNamer) cannot
// name its frames.
type KernelSymbols struct {
	syms    []kernelSymbol
	names   string   // every name, back to back
	modules []string // by index; 0 is the kernel image ("")
	// Restricted is true when every address reads as zero: the kernel hides
	// them from this reader (kernel.kptr_restrict, or not root), so kernel
	// frames cannot be named.
	Restricted bool
}

type kernelSymbol struct {
	addr    uint64
	nameOff uint32
	nameLen uint16
	module  uint16
}

// Len is the number of text symbols.
func (k *KernelSymbols) Len() int { return len(k.syms) }

// Resolve names the function containing addr: the text symbol with the
// highest address not above it. kallsyms has no sizes, so an address past
// the end of the last function of a region still resolves to that function;
// stacks only hold return addresses inside functions, so this does not
// mislead in practice.
func (k *KernelSymbols) Resolve(addr uint64) (name, module string, ok bool) {
	if k == nil || k.Restricted {
		return "", "", false
	}
	i := sort.Search(len(k.syms), func(i int) bool { return k.syms[i].addr > addr }) - 1
	if i < 0 {
		return "", "", false
	}
	s := k.syms[i]
	return k.names[s.nameOff : s.nameOff+uint32(s.nameLen)], k.modules[s.module], true
}

// parseKallsyms reads "ffffffff81000000 T _stext [module]" lines, keeping
// text symbols (t, T, w, W): data symbols never appear in stacks and would
// only shadow the function an address belongs to.
func parseKallsyms(r io.Reader) (*KernelSymbols, error) {
	k := &KernelSymbols{modules: []string{""}}
	moduleIDs := map[string]uint16{"": 0}
	// kallsyms has no size to read ahead of it; these fit the ~120,000-
	// 250,000 text symbols of common kernels without the several-fold
	// reallocation append makes of large slices.
	syms := make([]kernelSymbol, 0, 1<<18)
	var names strings.Builder
	names.Grow(4 << 20)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	nonZero := false
	line := 0
	var f [4][]byte
	for sc.Scan() {
		line++
		n := fields(sc.Bytes(), f[:])
		if n < 3 {
			continue
		}
		switch string(f[1]) {
		case "t", "T", "w", "W":
		default:
			continue
		}
		addr, ok := parseHex(f[0])
		if !ok {
			return nil, fmt.Errorf("kallsyms line %d: address %q: not a 64-bit hexadecimal number", line, f[0])
		}
		if addr != 0 {
			nonZero = true
		}
		if len(f[2]) > math.MaxUint16 || names.Len() > math.MaxUint32-len(f[2]) {
			return nil, fmt.Errorf("kallsyms line %d: symbol name of %d bytes", line, len(f[2]))
		}
		s := kernelSymbol{addr: addr, nameOff: uint32(names.Len()), nameLen: uint16(len(f[2]))}
		names.Write(f[2])
		if n > 3 {
			mod := bytes.Trim(f[3], "[]")
			id, ok := moduleIDs[string(mod)]
			if !ok {
				if len(k.modules) > math.MaxUint16 {
					return nil, fmt.Errorf("kallsyms line %d: more than %d modules", line, math.MaxUint16)
				}
				id = uint16(len(k.modules))
				k.modules = append(k.modules, string(mod))
				moduleIDs[string(mod)] = id
			}
			s.module = id
		}
		syms = append(syms, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	if len(syms) == 0 {
		return nil, fmt.Errorf("kallsyms lists no text symbols")
	}
	k.names = names.String()
	k.syms = byAddress(syms) // exactly its length: it is kept for the run
	k.Restricted = !nonZero
	return k, nil
}

// byAddress returns syms ordered by address, symbols at the same address
// in the order kallsyms listed them (Resolve names the first), in a new
// slice of exactly their number. The kernel lists vmlinux's symbols
// already sorted (scripts/kallsyms sorts them at build time) and only then
// those of modules, BPF programs and trampolines, each in its own order:
// the sorted run is kept as it is and only the rest (a few thousand
// symbols at most, none at all on a kernel without modules) is sorted and
// merged into it.
func byAddress(syms []kernelSymbol) []kernelSymbol {
	sorted := 1
	for sorted < len(syms) && syms[sorted-1].addr <= syms[sorted].addr {
		sorted++
	}
	out := make([]kernelSymbol, 0, len(syms))
	head, tail := syms[:sorted], syms[sorted:]
	if len(tail) == 0 {
		return append(out, head...)
	}
	// nameOff grows with the line: ordering by it keeps kallsyms' order
	// among symbols at one address, as a stable sort would.
	less := func(a, b kernelSymbol) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		return cmp.Compare(a.nameOff, b.nameOff)
	}
	slices.SortFunc(tail, less)
	for len(head) > 0 && len(tail) > 0 {
		if less(tail[0], head[0]) < 0 {
			out, tail = append(out, tail[0]), tail[1:]
		} else {
			out, head = append(out, head[0]), head[1:]
		}
	}
	out = append(out, head...)
	return append(out, tail...)
}

// parseHex parses a kallsyms address: 1 to 16 hexadecimal digits, without
// the allocation strconv.ParseUint(string(b)) makes for each of ~200,000 lines.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

// fields splits line at runs of spaces and tabs into out, as strings.Fields
// would but without allocating, and returns how many it found (at most
// len(out); the rest of the line is dropped).
func fields(line []byte, out [][]byte) int {
	n := 0
	for n < len(out) {
		i := 0
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		line = line[i:]
		if len(line) == 0 {
			break
		}
		j := 0
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		out[n], line = line[:j], line[j:]
		n++
	}
	return n
}
