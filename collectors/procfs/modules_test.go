package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModulesParse(t *testing.T) {
	in := `nf_tables 372736 0 - Live 0x0000000000000000
iptable_filter 12288 1 - Live 0x0000000000000000
ip_tables 36864 1 iptable_filter, Live 0x0000000000000000
`
	m, err := parseModules(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m["nf_tables"] != 0 || m["ip_tables"] != 1 {
		t.Fatalf("got %v", m)
	}
	if _, err := parseModules(strings.NewReader("nf_tables 372736 x - Live\n")); err == nil {
		t.Error("a use count that is not a number was accepted")
	}
	if _, err := parseModules(strings.NewReader("nf_tables\n")); err == nil {
		t.Error("a truncated line was accepted")
	}
}

func TestModulesWithoutLoadableModules(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	if _, err := (FS{Root: root}).Modules(); !errors.Is(err, ErrNoModules) {
		t.Fatalf("err = %v, want ErrNoModules", err)
	}
}
