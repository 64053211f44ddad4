package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WithoutHostTracefs copies a recorded container's /proc and /sys fixture
// (privilege/testdata/observe) as it reads on a host that has not
// mounted tracefs: the run line's -v binds the host's empty sysfs
// directory, which mountinfo shows as sysfs (the line a read-only bind of
// /sys/kernel/tracing shows on this project's machines), and there is no
// events directory. Returns the copy's root.
func WithoutHostTracefs(t testing.TB, fixture string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	mi := filepath.Join(dir, "proc", "self", "mountinfo")
	b, err := os.ReadFile(mi)
	if err != nil {
		t.Fatal(err)
	}
	const tracefs = "91 79 0:13 / /sys/kernel/tracing ro,relatime - tracefs nodev rw"
	if !strings.Contains(string(b), tracefs) {
		t.Fatalf("%s: no tracefs line %q in mountinfo", fixture, tracefs)
	}
	b = []byte(strings.Replace(string(b), tracefs, "91 79 0:22 /kernel/tracing /sys/kernel/tracing ro,relatime - sysfs sysfs rw", 1))
	if err := os.WriteFile(mi, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "sys", "kernel", "tracing", "events")); err != nil {
		t.Fatal(err)
	}
	return dir
}
