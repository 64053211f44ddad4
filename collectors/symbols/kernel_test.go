package symbols

import (
	"debug/elf"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// stableByAddress is what parseKallsyms used to do: a stable sort of
// every symbol.
func stableByAddress(syms []kernelSymbol) []kernelSymbol {
	out := slices.Clone(syms)
	sort.SliceStable(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

// byAddress keeps the kernel's sorted run and merges the rest into it in
// exactly the order a stable sort of everything gives: aliases at one
// address stay in the order kallsyms listed them, a module symbol at a
// vmlinux symbol's address comes after it.
func TestByAddressEqualsAStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 1 + r.IntN(200)
		sorted := r.IntN(n + 1)
		syms := make([]kernelSymbol, n)
		addr := uint64(0xffffffff81000000)
		for i := range syms {
			if i < sorted {
				addr += uint64(r.IntN(3)) * 16 // repeats: aliases
			} else {
				addr = 0xffffffff81000000 + uint64(r.IntN(n))*16 // modules: anywhere, in any order
			}
			syms[i] = kernelSymbol{addr: addr, nameOff: uint32(i) * 8, nameLen: 8}
		}
		got, want := byAddress(slices.Clone(syms)), stableByAddress(syms)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d (%d symbols, first %d sorted): byAddress differs from a stable sort", round, n, sorted)
		}
		if cap(got) != len(got) {
			t.Fatalf("round %d: kept %d slots for %d symbols", round, cap(got), len(got))
		}
	}
}

// The running kernel's /proc/kallsyms, whose order nobody here chose,
// parses to what a stable sort of its text symbols gives.
func TestLiveKallsymsParsesAsAStableSort(t *testing.T) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Skipf("no /proc/kallsyms: %v", err)
	}
	defer f.Close()
	k, err := parseKallsyms(f)
	if err != nil {
		t.Fatal(err)
	}
	if k.Restricted {
		t.Skip("/proc/kallsyms shows this user zero addresses")
	}
	b, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		addr   uint64
		name   string
		module string
	}
	var lines []line
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !strings.Contains("tTwW", f[1]) {
			continue
		}
		var a uint64
		fmt.Sscanf(f[0], "%x", &a)
		mod := ""
		if len(f) > 3 {
			mod = strings.Trim(f[3], "[]")
		}
		lines = append(lines, line{a, f[2], mod})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].addr < lines[j].addr })
	// The file changes between two reads only where BPF programs and
	// modules come and go: compare the kernel image's symbols.
	var image []line
	for _, l := range lines {
		if l.module == "" {
			image = append(image, l)
		}
	}
	var parsed []line
	for _, s := range k.syms {
		if m := k.modules[s.module]; m == "" {
			parsed = append(parsed, line{s.addr, k.names[s.nameOff : s.nameOff+uint32(s.nameLen)], m})
		}
	}
	if len(image) < 1000 || !slices.Equal(parsed, image) {
		t.Fatalf("parsed %d kernel image symbols, a stable sort of the file gives %d, or they differ", len(parsed), len(image))
	}
}

// ReadBinary's table of real binaries nobody here built (the C library and
// bash, .dynsym only; the Go toolchain's go command, a .symtab of tens of
// thousands of functions) is what a stable sort of the symbols in
// the order read gives: .symtab's name kept over .dynsym's alias at one
// address.
func TestReadBinaryEqualsAStableSort(t *testing.T) {
	goCmd, _ := exec.LookPath("go") // the tests run under it
	for _, path := range []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/bin/bash", goCmd} {
		f, err := os.Open(path)
		if err != nil {
			t.Logf("%s: %v", path, err)
			continue
		}
		b, err := ReadBinary(f)
		if err != nil {
			f.Close()
			t.Fatal(err)
		}
		ef, err := elf.NewFile(f)
		if err != nil {
			t.Fatal(err)
		}
		type sym struct {
			addr uint64
			name string
		}
		var all []sym
		for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
			err := eachFunction(ef, typ, func(value, _ uint64, _ elf.SectionIndex, name []byte) error {
				all = append(all, sym{value, string(name)})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		sort.SliceStable(all, func(i, j int) bool { return all[i].addr < all[j].addr })
		var want []sym
		for _, s := range all {
			if len(want) == 0 || want[len(want)-1].addr != s.addr {
				want = append(want, s)
			}
		}
		var got []sym
		for _, s := range b.syms {
			got = append(got, sym{s.addr, b.name(s)})
		}
		if len(got) < 100 || !slices.Equal(got, want) {
			t.Errorf("%s: %d symbols, a stable sort gives %d, or they differ", path, len(got), len(want))
		}
	}
}

// Reading a binary for a few addresses answers what its whole table does,
// on real binaries nobody here built: random offsets in their code,
// symbols' first bytes, and offsets past the last function.
func TestReadBinarySomeEqualsTheWholeTable(t *testing.T) {
	goCmd, _ := exec.LookPath("go")
	r := rand.New(rand.NewPCG(3, 4))
	for _, path := range []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/bin/bash", goCmd} {
		f, err := os.Open(path)
		if err != nil {
			t.Logf("%s: %v", path, err)
			continue
		}
		whole, err := ReadBinary(f)
		if err != nil {
			t.Fatal(err)
		}
		var offsets []uint64
		for _, l := range whole.loads {
			for range 2000 {
				offsets = append(offsets, l.Off+uint64(r.Int64N(int64(l.Filesz)+64)))
			}
		}
		for i := 0; i < len(whole.syms); i += 97 {
			a := whole.syms[i].addr
			for _, l := range whole.loads {
				if a >= l.Vaddr && a < l.Vaddr+l.Filesz {
					offsets = append(offsets, a-l.Vaddr+l.Off)
				}
			}
		}
		some, err := ReadBinarySome(f, offsets)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		named, differ := 0, 0
		for _, off := range offsets {
			a := whole.FileOffsetToAddr(off)
			wn, wok := whole.Resolve(a)
			sn, sok := some.Resolve(a)
			if !some.knows(a) || wn != sn || wok != sok {
				if differ++; differ <= 5 {
					t.Errorf("%s offset %#x: whole table %q %v, read for some %q %v", path, off, wn, wok, sn, sok)
				}
			}
			if wok {
				named++
			}
		}
		if named < len(offsets)/4 || differ > 0 {
			t.Errorf("%s: %d of %d offsets named, %d differ", path, named, len(offsets), differ)
		}
		if len(some.syms) != 0 {
			t.Errorf("%s: read for some addresses, kept a table of %d functions", path, len(some.syms))
		}
	}
}
