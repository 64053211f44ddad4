package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildC compiles a C program from source with gcc into a temporary
// directory and returns the executable's path. Symbolization and profiling
// tests use it to get a binary whose function names they know. Extra gcc
// flags (e.g. "-static", "-no-pie") follow the defaults: -O1 with frame
// pointers, so user stacks unwind as in a production build that keeps them.
func BuildC(t testing.TB, source string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("gcc is needed to build the test program: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(source), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	args := append([]string{"-O1", "-g", "-fno-omit-frame-pointer", "-o", bin, src}, flags...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
	return bin
}
