package golang

import (
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
				}
			})
		}
	}
}
