package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteFile writes a fixture file, its directories first.
func WriteFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// KallsymsRoot is a root whose /proc/kallsyms names the given functions,
// at 0xffffffff81000000 and every 0x1000 after.
func KallsymsRoot(t *testing.T, functions ...string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for i, f := range functions {
		fmt.Fprintf(&b, "%x T %s\n", 0xffffffff81000000+uint64(i)*0x1000, f)
	}
	WriteFile(t, filepath.Join(dir, "proc", "kallsyms"), b.String())
	return dir
}
