package goapp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/deps.sh fetches every toolchain the tests build with.
func TestDepsFetchesEveryRelease(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ProxyReleases {
		if !strings.Contains(string(b), r) {
			t.Errorf("scripts/deps.sh does not fetch %s", r)
		}
	}
}

func TestVariantNames(t *testing.T) {
	if s := (Variant{Stripped: true, PIE: true, Cgo: true}).String(); s != "stripped-pie-cgo" {
		t.Errorf("%q", s)
	}
	if s := (Variant{}).String(); s != "plain" {
		t.Errorf("%q", s)
	}
}
