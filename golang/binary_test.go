package golang

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Every supported release, in every shape: the build info, the function
// table (the runtime functions the probe attaches to and the pool's New
// call), and runtime.MemProfileRate's address — read from the code in a
// stripped binary and checked against the symbol table of the same build
// unstripped.
func TestBinariesOfEverySupportedRelease(t *testing.T) {
	for _, tc := range toolchains(t) {
		for _, v := range fixtureVariants(tc) {
			t.Run(tc.Version+"/"+v.String(), func(t *testing.T) {
				path := buildFixture(t, tc, v)
				b, closeFn, err := OpenBinary(path)
				if err != nil {
					t.Fatal(err)
				}
				defer closeFn()
				t.Logf("%s %v pie=%v dynamic=%v symbols=%v pclntab=%s funcs=%d", b.GoVersion, b.Version, b.PIE, b.Dynamic, b.Symbols, b.PclntabFrom, b.Functions())
				// An internally linked PIE needs the dynamic loader too.
				if b.PIE != v.PIE || b.Symbols == v.Stripped || b.Dynamic != (v.Cgo || v.PIE) || b.Cgo() != v.Cgo {
					t.Errorf("pie=%v symbols=%v dynamic=%v cgo=%v, want %v %v %v %v", b.PIE, b.Symbols, b.Dynamic, b.Cgo(), v.PIE, !v.Stripped, v.Cgo || v.PIE, v.Cgo)
				}
				if b.Module != "goapp" {
					t.Errorf("module %q", b.Module)
				}
				l, err := LayoutFor(b.Version, b.Arch)
				if err != nil {
					t.Fatal(err)
				}
				_ = l
				for _, name := range []string{"runtime.mProf_Malloc", "runtime.gcMarkTermination", "sync.(*Pool).Get", "sync.(*Pool).Put", "main.work"} {
					f, ok := b.Func(name)
					if !ok {
						t.Errorf("%s not found", name)
						continue
					}
					if fr, ok := b.Lookup(f.Entry); !ok || fr.Function != name {
						t.Errorf("Lookup(%s entry) = %+v", name, fr)
					}
					if _, err := b.FileOffset(f.Entry); err != nil {
						t.Error(err)
					}
					// The runtime's and the pool's functions check the
					// stack: the hook goes after the check.
					if body, err := b.BodyStart(f); err != nil || body == f.Entry || body > f.Entry+32 {
						t.Errorf("%s: body at %#x (entry %#x): %v", name, body, f.Entry, err)
					}
				}
				if _, err := b.PoolNewCall(); err != nil {
					t.Error(err)
				}
				addr, how, err := b.MemProfileRateAddr()
				if err != nil {
					t.Fatal(err)
				}
				if !v.Stripped {
					code, how2, err := b.memProfileRateFromCode()
					if err != nil || code != addr {
						t.Errorf("MemProfileRate: symbol %#x (%s), code %#x (%s, %v)", addr, how, code, how2, err)
					}
					return
				}
				// The same binary with its section headers removed (as
				// sstrip leaves it) is read from its segments alone.
				bare := withoutSectionHeaders(t, path)
				nb, closeBare, err := OpenBinary(bare)
				if v.PIE {
					if !errors.Is(err, ErrUnsupportedGo) {
						t.Errorf("a PIE without section headers: %v, want ErrUnsupportedGo", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("without section headers: %v", err)
				}
				defer closeBare()
				if nb.PclntabFrom != "segment scan" || nb.Functions() != b.Functions() {
					t.Errorf("without section headers: table from %s with %d functions, want a segment scan with %d", nb.PclntabFrom, nb.Functions(), b.Functions())
				}
				f1, _ := b.Func("runtime.mProf_Malloc")
				f2, _ := nb.Func("runtime.mProf_Malloc")
				if f1 != f2 {
					t.Errorf("mProf_Malloc %+v, without section headers %+v", f1, f2)
				}
				if a2, _, err := nb.MemProfileRateAddr(); err != nil || a2 != addr {
					t.Errorf("MemProfileRate without section headers %#x (%v), with %#x", a2, err, addr)
				}
			})
		}
	}
}

// withoutSectionHeaders copies an ELF file with e_shoff, e_shnum and
// e_shstrndx zeroed: the loader never reads section headers.
func withoutSectionHeaders(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(b[0x28:], 0) // e_shoff
	binary.LittleEndian.PutUint16(b[0x3c:], 0) // e_shnum
	binary.LittleEndian.PutUint16(b[0x3e:], 0) // e_shstrndx
	out := filepath.Join(t.TempDir(), "bare")
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}
