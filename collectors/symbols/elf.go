package symbols

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// Binary is the function symbols of one ELF file (executable or shared
// object) and the layout needed to turn a file offset into a symbol address.
type Binary struct {
	syms []elfSymbol
	// loads are the executable PT_LOAD segments.
	loads []elf.ProgHeader
}

type elfSymbol struct {
	addr, size uint64
	name       string
}

// Len is the number of function symbols.
func (b *Binary) Len() int { return len(b.syms) }

// ReadBinary reads the function symbols of an ELF file from .symtab and
// .dynsym. A stripped binary keeps only .dynsym (its exported functions);
// one with neither yields an empty table, not an error, so its frames show
// as "[unknown] (module)".
func ReadBinary(r io.ReaderAt) (*Binary, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := &Binary{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			b.loads = append(b.loads, p.ProgHeader)
		}
	}
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, err := read()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, fmt.Errorf("read ELF symbols: %w", err)
		}
		for _, s := range syms {
			typ := elf.ST_TYPE(s.Info)
			if (typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC) || s.Value == 0 || s.Section == elf.SHN_UNDEF {
				continue
			}
			size := s.Size
			if size == 0 && int(s.Section) < len(f.Sections) {
				// Hand-written assembly often has no size: bound it by
				// its section, so that e.g. a PLT stub is not named after
				// _init, the last sized-0 symbol before .plt.
				sec := f.Sections[s.Section]
				if s.Value >= sec.Addr && s.Value < sec.Addr+sec.Size {
					size = sec.Addr + sec.Size - s.Value
				}
			}
			b.syms = append(b.syms, elfSymbol{addr: s.Value, size: size, name: s.Name})
		}
	}
	// .symtab came first, so a stable sort keeps its (usually local, more
	// specific) name ahead of .dynsym's alias at the same address.
	sort.SliceStable(b.syms, func(i, j int) bool { return b.syms[i].addr < b.syms[j].addr })
	out := b.syms[:0]
	for _, s := range b.syms {
		if len(out) > 0 && out[len(out)-1].addr == s.addr {
			continue
		}
		out = append(out, s)
	}
	b.syms = out
	return b, nil
}

// FileOffsetToAddr converts an offset in the file to the virtual address
// symbols use, through the executable segment that maps it. This is what
// makes PIE executables and shared objects resolve wherever they were
// loaded: symbol address = offset − segment offset + segment vaddr.
func (b *Binary) FileOffsetToAddr(off uint64) uint64 {
	for _, p := range b.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr
		}
	}
	return off
}

// Resolve names the function containing the symbol address addr.
func (b *Binary) Resolve(addr uint64) (string, bool) {
	i := sort.Search(len(b.syms), func(i int) bool { return b.syms[i].addr > addr }) - 1
	if i < 0 {
		return "", false
	}
	s := b.syms[i]
	// A symbol whose size is still 0 (no section to bound it) is trusted as
	// the nearest, as perf does.
	if s.size != 0 && addr >= s.addr+s.size {
		return "", false
	}
	return demangleName(s.name), true
}

// demangleName turns C++ and Rust symbols into source names; Go and C names
// pass through unchanged.
func demangleName(name string) string {
	if !strings.HasPrefix(name, "_Z") && !strings.HasPrefix(name, "_R") {
		return name
	}
	return demangle.Filter(name, demangle.NoClones)
}
