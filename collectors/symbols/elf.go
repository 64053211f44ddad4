package symbols

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// Binary is the function symbols of one ELF file (executable or shared
// object) and the layout needed to turn a file offset into a symbol address.
//
// A run keeps every binary it sampled until it names the stacks, so the
// table is compact: function names back to back in one string, 24 bytes a
// symbol. And the symbol tables are streamed, never decoded whole:
// debug/elf's Symbols() reads the whole table and string table and builds
// every symbol (data, locals, file names) with its own string, which made
// naming a 120 s profile on a busy host allocate ~145 MB in its last
// second and pushed the heap far past its soft limit.
type Binary struct {
	syms  []elfSymbol
	names string
	// loads are the executable PT_LOAD segments.
	loads []elf.ProgHeader
	// some, when not nil, holds the answers for the only addresses the
	// Binary was read for (ReadBinarySome); syms is then empty.
	some map[uint64]someName
}

type elfSymbol struct {
	addr, size       uint64
	nameOff, nameLen uint32
}

// Len is the number of function symbols.
func (b *Binary) Len() int { return len(b.syms) }

func (b *Binary) name(s elfSymbol) string { return b.names[s.nameOff : s.nameOff+s.nameLen] }

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
	b := &Binary{loads: execLoads(f)}
	// Sized once from the section headers (every symbol, every name:
	// upper bounds) instead of grown by append, which for a large table
	// allocates several times its final size; the table kept is a copy of
	// exactly the functions.
	var nsyms, nnames uint64
	for _, sec := range f.Sections {
		if (sec.Type == elf.SHT_SYMTAB || sec.Type == elf.SHT_DYNSYM) && sec.Entsize > 0 {
			nsyms += sec.Size / sec.Entsize
			if int(sec.Link) < len(f.Sections) {
				nnames += f.Sections[sec.Link].Size
			}
		}
	}
	const maxPresize = 64 << 20 // a corrupt header must not allocate gigabytes
	b.syms = make([]elfSymbol, 0, min(nsyms, maxPresize/24))
	names := make([]byte, 0, min(nnames, maxPresize))
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		err := eachFunction(f, typ, func(value, size uint64, section elf.SectionIndex, name []byte) error {
			size = functionSize(f, value, size, section)
			if len(names)+len(name) > math.MaxUint32 {
				return errors.New("function names past 4 GiB")
			}
			b.syms = append(b.syms, elfSymbol{addr: value, size: size, nameOff: uint32(len(names)), nameLen: uint32(len(name))})
			names = append(names, name...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read ELF symbols: %w", err)
		}
	}
	b.names = string(names)
	// .symtab came first, so ordering by name offset (the order read) at
	// one address keeps its (usually local, more specific) name ahead of
	// .dynsym's alias, as a stable sort would; pdqsort on a 16-byte key
	// is several times faster than sort.SliceStable's reflection swaps
	// (the largest cost of naming a profile's stacks), and a table the
	// linker wrote in address order is not sorted at all.
	byAddr := func(x, y elfSymbol) int {
		if c := cmp.Compare(x.addr, y.addr); c != 0 {
			return c
		}
		if c := cmp.Compare(x.nameOff, y.nameOff); c != 0 {
			return c
		}
		return cmp.Compare(x.nameLen, y.nameLen) // an empty name read just before
	}
	if !slices.IsSortedFunc(b.syms, byAddr) {
		slices.SortFunc(b.syms, byAddr)
	}
	out := b.syms[:0]
	for _, s := range b.syms {
		if len(out) > 0 && out[len(out)-1].addr == s.addr {
			continue
		}
		out = append(out, s)
	}
	b.syms = slices.Clone(out)
	return b, nil
}

// eachFunction streams the defined function symbols (STT_FUNC,
// STT_GNU_IFUNC, non-zero value) of f's section of type typ (SHT_SYMTAB or
// SHT_DYNSYM) to fn; name is valid during the call only. Only their names
// are read from the string table, through a small window. A file without
// such a section has no symbols, which is not an error.
func eachFunction(f *elf.File, typ elf.SectionType, fn func(value, size uint64, section elf.SectionIndex, name []byte) error) error {
	var strs *stringReader
	return eachFunctionEntry(f, typ, func(tab *stringReader) { strs = tab }, func(value, size uint64, section elf.SectionIndex, nameIdx uint32) error {
		name, err := strs.at(int64(nameIdx))
		if err != nil {
			return err
		}
		return fn(value, size, section, name)
	})
}

// eachFunctionEntry is eachFunction without the names: fn gets the offset
// of each name in the section's string table, which table gets first (nil
// for a file without the section).
func eachFunctionEntry(f *elf.File, typ elf.SectionType, table func(*stringReader), fn func(value, size uint64, section elf.SectionIndex, nameIdx uint32) error) error {
	var sym *elf.Section
	for _, s := range f.Sections {
		if s.Type == typ {
			sym = s
			break
		}
	}
	if sym == nil {
		return nil
	}
	if int(sym.Link) <= 0 || int(sym.Link) >= len(f.Sections) {
		return fmt.Errorf("section %s: string table index %d out of range", sym.Name, sym.Link)
	}
	strs, err := newStringReader(f.Sections[sym.Link])
	if err != nil {
		return err
	}
	strs.name = f.Sections[sym.Link].Name
	table(strs)
	entry := elf.Sym64Size
	if f.Class == elf.ELFCLASS32 {
		entry = elf.Sym32Size
	}
	br := bufio.NewReaderSize(sym.Open(), 16<<10)
	buf := make([]byte, entry)
	bo := f.ByteOrder
	for i := 0; ; i++ {
		if _, err := io.ReadFull(br, buf); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil // a partial last entry is ignored, as debug/elf does
		} else if err != nil {
			return fmt.Errorf("section %s: %w", sym.Name, err)
		}
		if i == 0 {
			continue // the null symbol
		}
		var nameIdx uint32
		var value, size uint64
		var info byte
		var shndx uint16
		if f.Class == elf.ELFCLASS32 {
			nameIdx, value, size = bo.Uint32(buf[0:4]), uint64(bo.Uint32(buf[4:8])), uint64(bo.Uint32(buf[8:12]))
			info, shndx = buf[12], bo.Uint16(buf[14:16])
		} else {
			nameIdx, info, shndx = bo.Uint32(buf[0:4]), buf[4], bo.Uint16(buf[6:8])
			value, size = bo.Uint64(buf[8:16]), bo.Uint64(buf[16:24])
		}
		t := elf.ST_TYPE(info)
		if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC) || value == 0 || elf.SectionIndex(shndx) == elf.SHN_UNDEF {
			continue
		}
		if err := fn(value, size, elf.SectionIndex(shndx), nameIdx); err != nil {
			return err
		}
	}
}

// stringReader reads NUL-terminated names from a string table through a
// window of 8 KiB or more: symbol tables list names mostly in string table order,
// so a window serves most of them without reading the whole table (tens
// of megabytes in large binaries).
type stringReader struct {
	name   string // the section's, for errors
	r      io.ReaderAt
	size   int64
	window []byte
	start  int64 // offset of window[0]
}

// maxSymbolName bounds one name (C++ and Rust names run to a few KiB).
const maxSymbolName = 1 << 20

func newStringReader(s *elf.Section) (*stringReader, error) {
	if s.Flags&elf.SHF_COMPRESSED != 0 {
		// Rare for string tables; Open decompresses, so read it whole.
		b, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", s.Name, err)
		}
		return &stringReader{r: bytes.NewReader(b), size: int64(len(b))}, nil
	}
	return &stringReader{r: s, size: int64(s.Size)}, nil
}

// at returns the name at off, "" past the table's end (as debug/elf).
func (s *stringReader) at(off int64) ([]byte, error) {
	if off < 0 || off >= s.size {
		return nil, nil
	}
	for want := 8 << 10; ; want *= 2 {
		if off >= s.start && off < s.start+int64(len(s.window)) {
			rest := s.window[off-s.start:]
			if i := bytes.IndexByte(rest, 0); i >= 0 {
				return rest[:i], nil
			}
			if s.start+int64(len(s.window)) >= s.size {
				return rest, nil // unterminated at the table's end
			}
		}
		if want > maxSymbolName {
			return nil, fmt.Errorf("section %s: a symbol name at offset %d is longer than %d bytes", s.name, off, maxSymbolName)
		}
		n := min(int64(want), s.size-off)
		if int64(cap(s.window)) < n {
			s.window = make([]byte, n)
		}
		s.window = s.window[:n]
		if _, err := s.r.ReadAt(s.window, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("section %s: %w", s.name, err)
		}
		s.start = off
	}
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
	if b.some != nil {
		n := b.some[addr]
		return n.name, n.ok
	}
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
	return demangleName(b.name(s)), true
}

// demangleName turns C++ and Rust symbols into source names; Go and C names
// pass through unchanged.
func demangleName(name string) string {
	if !strings.HasPrefix(name, "_Z") && !strings.HasPrefix(name, "_R") {
		return name
	}
	return demangle.Filter(name, demangle.NoClones)
}
