// Package golang reads a Go program as its users run it — an ELF binary,
// stripped or not, PIE or not, static or cgo, reached through
// /proc/PID/exe and /proc/PID/root so that a program in a container is read
// from its own file system — and measures what it allocates per request,
// its GC cycles and its sync.Pools with the goalloc probe (Measure).
//
// What a binary gives without symbols: the Go version and module from the
// build info (debug/buildinfo), every function's address from .gopclntab
// (which `-ldflags=-s -w` and strip(1) leave in place), and from those the
// runtime functions the probe attaches to. The register that carries
// runtime.mProf_Malloc's size changed in Go 1.23; versions whose layout
// perfscope has not checked are refused with ErrUnsupportedGo rather than
// read with a guess.
package golang

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// ErrNotGo: the file is not a Go program perfscope can read (no build
// info, or not ELF).
var ErrNotGo = errors.New("not a Go program")

// ErrUnsupportedGo: a Go program whose version, architecture or layout
// perfscope does not support (its function table cannot be read, or the
// runtime's argument layout for that version was never checked).
var ErrUnsupportedGo = errors.New("unsupported Go version or binary layout")

// Binary is one Go executable's build info and function table.
type Binary struct {
	// GoVersion is the toolchain that built it, as the build info says
	// ("go1.22.12"); Version its parsed release.
	GoVersion string
	Version   Version
	// Module is the main module's path and version ("(devel)" for a
	// local build); Path the main package.
	Module, ModuleVersion, Path string
	// Settings are the build settings (CGO_ENABLED, -buildmode, -pgo,
	// GOARCH, -ldflags, ...).
	Settings map[string]string
	Arch     string
	// PIE: position independent (ELF type ET_DYN); its addresses move by
	// the load bias, read from /proc/PID/maps.
	PIE bool
	// Dynamic: it has an ELF interpreter (cgo, or a PIE, which the
	// dynamic loader relocates); a static binary has none.
	Dynamic bool
	// Symbols: the ELF symbol table is present (not -s, not stripped).
	Symbols bool
	// PclntabFrom says where the function table was found: the section
	// name, or "segment scan" when section headers were removed.
	PclntabFrom string

	text     uint64
	table    *gosym.Table
	funcs    map[string]*gosym.Func
	loads    []elf.ProgHeader
	sections []*elf.Section
	data     map[string]elf.Symbol
	byAddr   []elf.Symbol
	r        io.ReaderAt
}

// OpenBinary reads the Go executable at path.
func OpenBinary(path string) (*Binary, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	b, err := ReadBinary(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, f.Close, nil
}

// ReadBinary reads a Go executable. The reader must stay open while the
// Binary is used (Code reads from it).
func ReadBinary(r io.ReaderAt) (*Binary, error) {
	ef, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("%w: not an ELF file (%v)", ErrNotGo, err)
	}
	info, err := buildinfo.Read(r)
	if err != nil {
		if _, _, perr := scanPclntab(ef); perr == nil && len(ef.Sections) == 0 {
			// debug/buildinfo looks in the first writable segment only
			// when there are no section headers; a PIE keeps the build
			// info in another.
			return nil, fmt.Errorf("%w: a Go program without section headers whose build info cannot be found: its Go version, and so the runtime's layout, is unknown", ErrUnsupportedGo)
		}
		return nil, fmt.Errorf("%w: no Go build info (%v)", ErrNotGo, err)
	}
	b := &Binary{
		GoVersion: info.GoVersion, Path: info.Path, Module: info.Main.Path, ModuleVersion: info.Main.Version,
		Settings: map[string]string{}, PIE: ef.Type == elf.ET_DYN, sections: ef.Sections, r: r,
	}
	for _, s := range info.Settings {
		b.Settings[s.Key] = s.Value
	}
	switch ef.Machine {
	case elf.EM_X86_64:
		b.Arch = "amd64"
	case elf.EM_AARCH64:
		b.Arch = "arm64"
	default:
		b.Arch = strings.ToLower(strings.TrimPrefix(ef.Machine.String(), "EM_"))
	}
	for _, p := range ef.Progs {
		switch p.Type {
		case elf.PT_LOAD:
			b.loads = append(b.loads, p.ProgHeader)
		case elf.PT_INTERP:
			b.Dynamic = true
		}
	}
	if b.Version, err = ParseVersion(info.GoVersion); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedGo, err)
	}
	if syms, err := ef.Symbols(); err == nil && len(syms) > 0 {
		b.Symbols = true
		b.data = map[string]elf.Symbol{}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
				b.data[s.Name] = s
			}
		}
	}
	if err := b.readPclntab(ef); err != nil {
		return nil, fmt.Errorf("%w: %s, %s: %v", ErrUnsupportedGo, b.GoVersion, b.Arch, err)
	}
	return b, nil
}

// The pclntab header of Go 1.18 and later: magic, two zero bytes, the
// instruction size quantum, the pointer size, then nfunc, nfiles and the
// address of runtime.text.
var pclntabMagics = [][]byte{
	{0xf0, 0xff, 0xff, 0xff}, // Go 1.18, 1.19
	{0xf1, 0xff, 0xff, 0xff}, // Go 1.20 and later
}

func (b *Binary) readPclntab(ef *elf.File) error {
	var data []byte
	var addr uint64
	for _, name := range []string{".gopclntab", ".data.rel.ro.gopclntab"} {
		if s := ef.Section(name); s != nil && s.Type != elf.SHT_NOBITS {
			d, err := s.Data()
			if err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			data, addr, b.PclntabFrom = d, s.Addr, name
			break
		}
	}
	if data == nil {
		d, a, err := scanPclntab(ef)
		if err != nil {
			return err
		}
		data, addr, b.PclntabFrom = d, a, "segment scan"
	}
	if len(data) < 32 || data[6] == 0 || data[7] != 8 {
		return errors.New("the function table's header is not a 64-bit Go 1.18+ pclntab")
	}
	known := false
	for _, m := range pclntabMagics {
		known = known || bytes.Equal(data[:4], m)
	}
	if !known {
		return fmt.Errorf("function table magic %#x is not one perfscope reads", data[:4])
	}
	text := binary.LittleEndian.Uint64(data[24:32])
	if text == 0 {
		// A PIE's pclntab holds runtime.text through a dynamic
		// relocation; the file has zero there.
		text = relocatedAt(ef, addr+24)
	}
	if text == 0 {
		if s, ok := b.data["runtime.text"]; ok {
			text = s.Value
		} else if s := ef.Section(".text"); s != nil {
			text = s.Addr
		}
	}
	var t *gosym.Table
	var err error
	if text != 0 {
		t, err = gosym.NewTable(nil, gosym.NewLineTable(data, text))
	} else {
		// No header value, symbol or section: try where the linker puts
		// text in an executable segment, and keep the start whose
		// runtime.main begins with Go's stack check.
		t, text, err = b.guessText(data)
	}
	if err != nil {
		return fmt.Errorf("parse the function table: %w", err)
	}
	b.text = text
	if len(t.Funcs) == 0 {
		return errors.New("the function table lists no function")
	}
	b.table = t
	b.funcs = make(map[string]*gosym.Func, len(t.Funcs))
	for i := range t.Funcs {
		f := &t.Funcs[i]
		if _, dup := b.funcs[f.Name]; !dup {
			b.funcs[f.Name] = f
		}
	}
	// A wrong text start shifts every function: runtime.text's own
	// entry is the start.
	if f, ok := b.funcs["runtime.text"]; ok && f.Entry != text {
		return fmt.Errorf("runtime.text at %#x, the table starts at %#x", f.Entry, text)
	}
	if _, ok := b.funcs["runtime.main"]; !ok {
		return errors.New("the function table has no runtime.main")
	}
	return nil
}

// scanPclntab finds the function table in the read-only segments of a
// binary without section headers, by its header.
func scanPclntab(ef *elf.File) ([]byte, uint64, error) {
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X != 0 {
			continue
		}
		seg, err := io.ReadAll(p.Open())
		if err != nil {
			continue
		}
		for _, m := range pclntabMagics {
			for off := 0; ; {
				i := bytes.Index(seg[off:], m)
				if i < 0 {
					break
				}
				at := off + i
				off = at + 4
				if at%8 != 0 || at+32 > len(seg) || seg[at+4] != 0 || seg[at+5] != 0 || seg[at+6] == 0 || seg[at+7] != 8 {
					continue
				}
				return seg[at:], p.Vaddr + uint64(at), nil
			}
		}
	}
	return nil, 0, errors.New("no .gopclntab section and no function table in the read-only segments")
}

// relocatedAt is the addend of the R_X86_64_RELATIVE relocation that
// fills the word at addr when a PIE is loaded (0: none).
func relocatedAt(ef *elf.File, addr uint64) uint64 {
	if ef.Machine != elf.EM_X86_64 {
		return 0
	}
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_RELA {
			continue
		}
		d, err := s.Data()
		if err != nil {
			continue
		}
		for i := 0; i+24 <= len(d); i += 24 {
			off := binary.LittleEndian.Uint64(d[i:])
			info := binary.LittleEndian.Uint64(d[i+8:])
			if off == addr && elf.R_X86_64(info&0xffffffff) == elf.R_X86_64_RELATIVE {
				return binary.LittleEndian.Uint64(d[i+16:])
			}
		}
	}
	return 0
}

// Function is one function of the table: its link-time entry address and
// end.
type Function struct {
	Name       string
	Entry, End uint64
}

// Func finds a function by its full name ("runtime.mProf_Malloc",
// "sync.(*Pool).Get").
func (b *Binary) Func(name string) (Function, bool) {
	f, ok := b.funcs[name]
	if !ok {
		return Function{}, false
	}
	return Function{Name: f.Name, Entry: f.Entry, End: f.End}, true
}

// Functions is the number of functions in the table.
func (b *Binary) Functions() int { return len(b.table.Funcs) }

// Frame is one symbolized address.
type Frame struct {
	Function string
	File     string
	Line     int
}

// Lookup symbolizes a link-time address. Inlined calls are not expanded:
// the frame names the function the code was inlined into, with the line
// of the inlined code.
func (b *Binary) Lookup(pc uint64) (Frame, bool) {
	file, line, fn := b.table.PCToLine(pc)
	if fn == nil {
		return Frame{}, false
	}
	return Frame{Function: fn.Name, File: file, Line: line}, true
}

// FileOffset converts a link-time address to the file offset a uprobe
// attaches at.
func (b *Binary) FileOffset(addr uint64) (uint64, error) {
	for _, p := range b.loads {
		if p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x is in no executable segment", addr)
}

// Code reads the bytes of fn from the file.
func (b *Binary) Code(fn Function) ([]byte, error) {
	off, err := b.FileOffset(fn.Entry)
	if err != nil {
		return nil, err
	}
	if fn.End <= fn.Entry || fn.End-fn.Entry > 1<<20 {
		return nil, fmt.Errorf("%s: implausible size %d", fn.Name, fn.End-fn.Entry)
	}
	code := make([]byte, fn.End-fn.Entry)
	if _, err := b.r.ReadAt(code, int64(off)); err != nil {
		return nil, fmt.Errorf("read %s: %w", fn.Name, err)
	}
	return code, nil
}

// DataSymbol is a data symbol's link-time address and size, from the
// ELF symbol table (absent in a stripped binary).
func (b *Binary) DataSymbol(name string) (addr, size uint64, ok bool) {
	s, ok := b.data[name]
	return s.Value, s.Size, ok
}

// DataSymbolAt names the data symbol covering a link-time address ("" when
// none or without symbols).
func (b *Binary) DataSymbolAt(addr uint64) string {
	if b.data == nil {
		return ""
	}
	if b.byAddr == nil {
		for _, s := range b.data {
			if s.Size > 0 {
				b.byAddr = append(b.byAddr, s)
			}
		}
		sort.Slice(b.byAddr, func(i, j int) bool { return b.byAddr[i].Value < b.byAddr[j].Value })
	}
	i := sort.Search(len(b.byAddr), func(i int) bool { return b.byAddr[i].Value > addr }) - 1
	if i < 0 || addr >= b.byAddr[i].Value+b.byAddr[i].Size {
		return ""
	}
	return b.byAddr[i].Name
}

// section is the section covering a link-time address (nil: none, or no
// section headers).
func (b *Binary) section(addr uint64) *elf.Section {
	for _, s := range b.sections {
		if s.Flags&elf.SHF_ALLOC != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
			return s
		}
	}
	return nil
}

// pointerFreeData says whether a link-time address lies in writable data,
// and in a section of pointer-free variables (.noptrdata, .noptrbss) when
// the section headers say.
func (b *Binary) pointerFreeData(addr uint64) bool {
	if s := b.section(addr); s != nil {
		return s.Name == ".noptrdata" || s.Name == ".noptrbss"
	}
	for _, p := range b.loads {
		if p.Flags&elf.PF_W != 0 && addr >= p.Vaddr && addr < p.Vaddr+p.Memsz {
			return true
		}
	}
	return false
}

// Cgo says whether the program was built with cgo (its build settings).
func (b *Binary) Cgo() bool { return b.Settings["CGO_ENABLED"] == "1" }

// guessText finds the text start of a binary whose pclntab header, symbol
// table and section headers do not give it: each executable segment's
// start and its next page boundaries are tried, and the right one puts
// runtime.main on an instruction that compares the stack pointer with
// the goroutine's stack guard (16(R14), the prologue of every Go function
// with a stack check).
func (b *Binary) guessText(data []byte) (*gosym.Table, uint64, error) {
	for _, p := range b.loads {
		if p.Flags&elf.PF_X == 0 {
			continue
		}
		for text := p.Vaddr; text < p.Vaddr+0x4000; text = (text + 0x1000) &^ 0xfff {
			t, err := gosym.NewTable(nil, gosym.NewLineTable(data, text))
			if err != nil {
				return nil, 0, err
			}
			fn := t.LookupFunc("runtime.main")
			if fn == nil {
				break
			}
			b.table = t
			if b.stackCheckAt(Function{Name: fn.Name, Entry: fn.Entry, End: fn.End}) {
				b.table = nil
				return t, text, nil
			}
			b.table = nil
		}
	}
	return nil, 0, errors.New("cannot find where the program's text starts")
}
