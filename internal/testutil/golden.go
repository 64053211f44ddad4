package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the file testdata/golden/name, byte for byte:
// a renderer's text held this way cannot change unnoticed when its code
// moves. PERFSCOPE_UPDATE_GOLDEN=1 rewrites the file from got instead (an
// environment variable, not a flag: several packages' tests define their
// own -update).
func Golden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if os.Getenv("PERFSCOPE_UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (PERFSCOPE_UPDATE_GOLDEN=1 writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s changed:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
