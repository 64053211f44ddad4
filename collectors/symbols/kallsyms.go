package symbols

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
)

// KernelSymbols is /proc/kallsyms' text symbols sorted by address.
//
// It is held for a whole run by every part that names kernel frames, so it
// is kept compact: names live in one string and each symbol is 16 bytes.
// The first version (a string per line and a 40-byte entry) held ~15 MB
// for 120,000 symbols and allocated 48 MB to parse them; a 120 s `perfscope
// udp` parses it twice (lock sites and the profile).
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
	k.syms = make([]kernelSymbol, 0, 1<<18)
	names := make([]byte, 0, 4<<20)
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
		addr, err := strconv.ParseUint(string(f[0]), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms line %d: address %q: %w", line, f[0], err)
		}
		if addr != 0 {
			nonZero = true
		}
		if len(f[2]) > math.MaxUint16 || len(names) > math.MaxUint32-len(f[2]) {
			return nil, fmt.Errorf("kallsyms line %d: symbol name of %d bytes", line, len(f[2]))
		}
		s := kernelSymbol{addr: addr, nameOff: uint32(len(names)), nameLen: uint16(len(f[2]))}
		names = append(names, f[2]...)
		if n > 3 {
			mod := string(bytes.Trim(f[3], "[]"))
			id, ok := moduleIDs[mod]
			if !ok {
				if len(k.modules) > math.MaxUint16 {
					return nil, fmt.Errorf("kallsyms line %d: more than %d modules", line, math.MaxUint16)
				}
				id = uint16(len(k.modules))
				k.modules = append(k.modules, mod)
				moduleIDs[mod] = id
			}
			s.module = id
		}
		k.syms = append(k.syms, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	if len(k.syms) == 0 {
		return nil, fmt.Errorf("kallsyms lists no text symbols")
	}
	k.names = string(names)
	k.syms = slices.Clone(k.syms) // exactly its length: it is kept for the run
	k.Restricted = !nonZero
	sort.SliceStable(k.syms, func(i, j int) bool { return k.syms[i].addr < k.syms[j].addr })
	return k, nil
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
