package symbols

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// KernelSymbols is /proc/kallsyms' text symbols sorted by address.
type KernelSymbols struct {
	syms []kernelSymbol
	// Restricted is true when every address reads as zero: the kernel hides
	// them from this reader (kernel.kptr_restrict, or not root), so kernel
	// frames cannot be named.
	Restricted bool
}

type kernelSymbol struct {
	addr   uint64
	name   string
	module string // "" for the kernel image
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
	return k.syms[i].name, k.syms[i].module, true
}

// parseKallsyms reads "ffffffff81000000 T _stext [module]" lines, keeping
// text symbols (t, T, w, W): data symbols never appear in stacks and would
// only shadow the function an address belongs to.
func parseKallsyms(r io.Reader) (*KernelSymbols, error) {
	k := &KernelSymbols{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	nonZero := false
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		switch f[1] {
		case "t", "T", "w", "W":
		default:
			continue
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms line %d: address %q: %w", line, f[0], err)
		}
		if addr != 0 {
			nonZero = true
		}
		s := kernelSymbol{addr: addr, name: f[2]}
		if len(f) > 3 {
			s.module = strings.Trim(f[3], "[]")
		}
		k.syms = append(k.syms, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	if len(k.syms) == 0 {
		return nil, fmt.Errorf("kallsyms lists no text symbols")
	}
	k.Restricted = !nonZero
	sort.SliceStable(k.syms, func(i, j int) bool { return k.syms[i].addr < k.syms[j].addr })
	return k, nil
}
