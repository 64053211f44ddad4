package procfs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRunning(t *testing.T) {
	root := t.TempDir()
	for pid, comm := range map[string]string{"1": "systemd", "20": "auditd", "300": "irqbalance", "301": "irqbalance", "4": "bash"} {
		dir := filepath.Join(root, "proc", pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "proc", "sys"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := FS{Root: root}.Running("irqbalance", "auditd", "sshd")
	if err != nil {
		t.Fatal(err)
	}
	// Directory order is by name: "300" before "301".
	if want := map[string]int{"irqbalance": 300, "auditd": 20}; !reflect.DeepEqual(got, want) {
		t.Errorf("Running = %v, want %v", got, want)
	}
	if _, err := (FS{Root: filepath.Join(root, "none")}).Running("auditd"); err == nil {
		t.Error("Running without /proc: no error")
	}
}
