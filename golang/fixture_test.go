package golang

import (
	"context"
	"testing"

	"github.com/perfscope/perfscope/lab/goapp"
)

// toolchains are the Go releases the fixture tests build with: Debian's
// 1.19, each release since through the module proxy, and the current one.
func toolchains(t *testing.T) []goapp.Toolchain {
	t.Helper()
	var out []goapp.Toolchain
	deb, ok := goapp.Debian()
	if !ok {
		t.Fatalf("Debian's Go 1.19 is not at %s: run scripts/deps.sh test", goapp.DebianGo)
	}
	out = append(out, deb)
	for _, r := range goapp.ProxyReleases {
		tc, err := goapp.Proxy(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tc)
	}
	cur, err := goapp.Current()
	if err != nil {
		t.Fatal(err)
	}
	return append(out, cur)
}

func buildFixture(t *testing.T, tc goapp.Toolchain, v goapp.Variant) string {
	t.Helper()
	dir, err := goapp.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	path, err := goapp.Build(context.Background(), tc, v, dir)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// fixtureVariants are the shapes built with tc: with every release the
// unstripped binary (whose symbol table checks what is read without it),
// the stripped one, and the hardest, a stripped cgo PIE; with the oldest
// and the current release also the PIE and cgo shapes on their own.
func fixtureVariants(tc goapp.Toolchain) []goapp.Variant {
	vs := []goapp.Variant{{}, {Stripped: true}, {Cgo: true, PIE: true, Stripped: true}}
	if deb, _ := goapp.Debian(); tc.Version == deb.Version || tc.Env[0] == "GOTOOLCHAIN=local" {
		vs = append(vs, goapp.Variant{PIE: true}, goapp.Variant{Cgo: true})
	}
	return vs
}
