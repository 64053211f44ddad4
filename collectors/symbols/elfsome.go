package symbols

import (
	"debug/elf"
	"fmt"
	"io"
	"slices"
	"sort"
)

// A Binary read for a few addresses only (ReadBinarySome) holds their
// answers instead of the function table: a profile names a few hundred
// addresses of a binary with tens of thousands of functions, and a short
// run would otherwise spend more on building and sorting that table than
// on everything else it does with the binary.

// someName is one address's answer.
type someName struct {
	name string
	ok   bool
}

// knows reports whether b can answer for the symbol address addr: always
// for a whole table, only for the addresses it was read for otherwise.
func (b *Binary) knows(addr uint64) bool {
	if b.some == nil {
		return true
	}
	_, ok := b.some[addr]
	return ok
}

// ReadBinarySome names only what the file offsets offsets lie in, in one
// pass over the ELF file's symbol tables: each symbol read is matched
// against the sorted addresses, only the names that win are read from the
// string tables, and no table of every function is built or sorted. The
// Binary answers Resolve(FileOffsetToAddr(off)) for exactly those offsets,
// with what ReadBinary's whole table would.
func ReadBinarySome(r io.ReaderAt, offsets []uint64) (*Binary, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := &Binary{loads: execLoads(f), some: map[uint64]someName{}}
	addrs := make([]uint64, len(offsets))
	for i, off := range offsets {
		addrs[i] = b.FileOffsetToAddr(off)
	}
	if err := b.resolveSome(f, addrs); err != nil {
		return nil, err
	}
	return b, nil
}

// execLoads are f's executable PT_LOAD segments.
func execLoads(f *elf.File) []elf.ProgHeader {
	var out []elf.ProgHeader
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			out = append(out, p.ProgHeader)
		}
	}
	return out
}

// resolveSome adds addrs' answers to b.some.
func (b *Binary) resolveSome(f *elf.File, addrs []uint64) error {
	want := slices.Clone(addrs)
	slices.Sort(want)
	want = slices.Compact(want)
	// cand[j] is the highest symbol at or below want[j] and above
	// want[j-1]: the one symbol of that gap that can be nearest to
	// want[j]. Among symbols at one address the first read wins, as in
	// ReadBinary (.symtab before .dynsym).
	type candidate struct {
		addr, size uint64
		table      int
		nameIdx    uint32
		set        bool
	}
	cand := make([]candidate, len(want))
	var tables []*stringReader
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		table := -1
		err := eachFunctionEntry(f, typ, func(s *stringReader) { table = len(tables); tables = append(tables, s) },
			func(value, size uint64, section elf.SectionIndex, nameIdx uint32) error {
				j := sort.Search(len(want), func(j int) bool { return want[j] >= value })
				if j == len(want) {
					return nil
				}
				if c := &cand[j]; !c.set || value > c.addr {
					*c = candidate{addr: value, size: functionSize(f, value, size, section), table: table, nameIdx: nameIdx, set: true}
				}
				return nil
			})
		if err != nil {
			return fmt.Errorf("read ELF symbols: %w", err)
		}
	}
	names := map[[2]uint64]string{}
	var best candidate
	for j, a := range want {
		if c := cand[j]; c.set {
			best = c // above every earlier gap's symbols
		}
		if !best.set || best.size != 0 && a >= best.addr+best.size {
			b.some[a] = someName{}
			continue
		}
		key := [2]uint64{uint64(best.table), uint64(best.nameIdx)}
		name, ok := names[key]
		if !ok {
			raw, err := tables[best.table].at(int64(best.nameIdx))
			if err != nil {
				return fmt.Errorf("read ELF symbols: %w", err)
			}
			name = demangleName(string(raw))
			names[key] = name
		}
		b.some[a] = someName{name: name, ok: true}
	}
	return nil
}

// functionSize bounds a function symbol without a size (hand-written
// assembly often has none) by the section it lies in, so that e.g. a PLT
// stub is not named after _init, the last sized-0 symbol before .plt.
func functionSize(f *elf.File, value, size uint64, section elf.SectionIndex) uint64 {
	if size == 0 && int(section) < len(f.Sections) {
		sec := f.Sections[section]
		if value >= sec.Addr && value < sec.Addr+sec.Size {
			size = sec.Addr + sec.Size - value
		}
	}
	return size
}
