package attach

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/internal/testutil"
)

// The JVM's user owns the directories the trigger goes into and can plant
// a link under its name: root used to open it (creating the target) and
// chown it to them — /etc/shadow included. The trigger is now created as
// the JVM's user and never through a link, so the root file the link
// points to keeps its owner and contents.
func TestTriggerNeverFollowsTheJVMUsersLink(t *testing.T) {
	h := testutil.NewNeighbourhood(t)
	victim := filepath.Join(h.Target, "victim")
	if err := os.WriteFile(victim, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A process of the neighbour's, working in the neighbour's directory:
	// the JVM as far as the trigger is concerned.
	jvm := h.Command(`cd "$1" && exec sleep 60`, h.Home)
	if err := jvm.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { jvm.Process.Kill(); jvm.Wait() }()
	pid := jvm.Process.Pid
	name := fmt.Sprintf(".attach_pid%d", pid)
	h.Run(t, `ln -s "$2" "$1/$3"`, h.Home, victim, name)
	// The JVM's /tmp (the fallback) is this host's: remove what lands there.
	defer os.Remove(filepath.Join(os.TempDir(), name))

	tg := &Target{Process: hsperf.Process{PID: pid, NSPID: pid, UID: int(h.UID), GID: int(h.GID)}, fs: hsperf.FS{Root: "/"},
		uid: int(h.UID), gid: int(h.GID)}
	path, err := tg.createTrigger()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(victim)
	if b, _ := os.ReadFile(victim); err != nil || string(b) != "root's" || testutil.OwnerOf(st) != 0 {
		t.Errorf("the linked root file was touched: %q, owner %d, %v", b, testutil.OwnerOf(st), err)
	}
	if fi, err := os.Lstat(filepath.Join(h.Home, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link: %v %v", fi, err)
	}
	// The trigger went to the fallback, as the JVM's user.
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() || testutil.OwnerOf(fi) != h.UID {
		t.Errorf("trigger %s: %v %v", path, fi, err)
	}
	tg.removeTrigger(path)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("trigger left: %v", err)
	}
}
