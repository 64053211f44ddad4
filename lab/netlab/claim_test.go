package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

// Only what a dead process claimed is removed: a live owner's namespaces
// and an unclaimed namespace (another lab's, another tool's) stay.
func TestRemoveStaleRemovesOnlyDeadOwnersNamespaces(t *testing.T) {
	testutil.RequireRoot(t)
	ClaimDir = t.TempDir()
	defer func() { ClaimDir = "/run/perfscope" }()
	var b [3]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	dead, live, unclaimed := Prefix+"t-dead-"+id, Prefix+"t-live-"+id, Prefix+"t-free-"+id
	for _, ns := range []string{dead, live, unclaimed} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", ns, err, out)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	deadDir := filepath.Join(t.TempDir(), "perfscope-lab-udp-dead")
	os.Mkdir(deadDir, 0o755)

	// A claim whose owner exited: a real pid that is gone, with a start
	// time no process has, so pid reuse cannot make it look alive.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ClaimDir, "lab-dead"), []byte(fmt.Sprintf("owner %d 1\nnetns %s\ndir %s\n", cmd.Process.Pid, dead, deadDir)), 0o600)
	c, err := NewClaim([]string{live}, nil) // this process: alive
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()

	removed, err := RemoveStale()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || !slices.Equal(removed[0].Namespaces, []string{dead}) || !slices.Equal(removed[0].Dirs, []string{deadDir}) {
		t.Fatalf("removed %+v, want only %s and %s", removed, dead, deadDir)
	}
	ns, _ := Namespaces()
	if slices.Contains(ns, dead) || !slices.Contains(ns, live) || !slices.Contains(ns, unclaimed) {
		t.Errorf("namespaces after: %v; want %s gone, %s and %s kept", ns, dead, live, unclaimed)
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Errorf("dead lab's directory kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ClaimDir, "lab-dead")); !os.IsNotExist(err) {
		t.Error("stale claim kept")
	}
}
