package sockets

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNetNS(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "proc", "self", "ns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("net:[4026531833]", filepath.Join(dir, "net")); err != nil {
		t.Fatal(err)
	}
	n, err := NewFS(root).NetNS("self")
	if err != nil || n != 4026531833 {
		t.Errorf("NetNS = %d, %v; want 4026531833", n, err)
	}
	if _, err := NewFS(root).NetNS("1"); err == nil {
		t.Error("missing link: no error")
	}
	for _, bad := range []string{"mnt:[4026531833]", "net:[x]", "net:[4026531833", "net:[99999999999]"} {
		if _, err := parseNetNSLink(bad); err == nil {
			t.Errorf("parseNetNSLink(%q): no error", bad)
		}
	}
}
