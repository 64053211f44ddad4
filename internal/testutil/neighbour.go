package testutil

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Neighbour is another, unprivileged user on the machine (nobody), as
// whom root tests plant what a hostile local user could: the kernel
// records their files, links and directories as that user's.
type Neighbour struct {
	UID, GID uint32
	Name     string
}

// OtherUser is the neighbour; the test must run as root to act as them.
func OtherUser(t testing.TB) Neighbour {
	t.Helper()
	RequireRoot(t)
	n := Neighbour{UID: 65534, GID: 65534, Name: "nobody"}
	if u, err := user.Lookup("nobody"); err == nil {
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			n.UID, n.GID = uint32(uid), uint32(gid)
		}
	}
	return n
}

// Command is sh -c script (with args as $1...) run as the neighbour, with
// no supplementary groups.
func (n Neighbour) Command(script string, args ...string) *exec.Cmd {
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: n.UID, Gid: n.GID, Groups: []uint32{}}}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/"}
	cmd.Dir = "/"
	return cmd
}

// Run runs script as the neighbour and fails t if it fails.
func (n Neighbour) Run(t testing.TB, script string, args ...string) {
	t.Helper()
	if out, err := n.Command(script, args...).CombinedOutput(); err != nil {
		t.Fatalf("as %s: %s: %v: %s", n.Name, script, err, out)
	}
}

// SharedScratch is a new directory that every user may enter (root's,
// mode 0755: t.TempDir's are private), removed with all it holds when the
// test ends.
func SharedScratch(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "perfscope-scratch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Chown gives path (not a link's target) to the neighbour.
func (n Neighbour) Chown(t testing.TB, path string) {
	t.Helper()
	if err := os.Lchown(path, int(n.UID), int(n.GID)); err != nil {
		t.Fatal(err)
	}
}

// Neighbourhood is a scratch tree holding what a hostile local user
// meets and makes: the neighbour's own directory, root directories that
// stand for /etc/cron.d and /root (never the real ones), and directories
// others may write, with and without the sticky bit.
type Neighbourhood struct {
	Neighbour
	// Scratch is root's, 0755; the others are in it.
	Scratch string
	// Home is the neighbour's, 0755.
	Home string
	// Target is root's, 0755: it stands for /etc/cron.d.
	Target string
	// RootLike is root's, 0700: it stands for /root.
	RootLike string
	// Sticky is root's, 1777: it stands for /tmp.
	Sticky string
	// Open is root's, 0777 without the sticky bit.
	Open string
}

// NewNeighbourhood builds the tree (as root), removed when t ends.
func NewNeighbourhood(t testing.TB) Neighbourhood {
	t.Helper()
	n := OtherUser(t)
	s := SharedScratch(t)
	h := Neighbourhood{Neighbour: n, Scratch: s, Home: filepath.Join(s, "u"), Target: filepath.Join(s, "target"),
		RootLike: filepath.Join(s, "rootlike"), Sticky: filepath.Join(s, "sticky"), Open: filepath.Join(s, "open")}
	for dir, mode := range map[string]os.FileMode{h.Home: 0o755, h.Target: 0o755, h.RootLike: 0o700, h.Sticky: 0o777 | os.ModeSticky, h.Open: 0o777} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
	}
	n.Chown(t, h.Home)
	return h
}

// Untouched fails t when dir holds anything.
func Untouched(t testing.TB, dir string) {
	t.Helper()
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name()
		}
		t.Errorf("%s was written: %v %v", dir, names, err)
	}
}

// OwnerOf is the uid owning a file (its Stat_t's); an impossible uid
// when the platform has none.
func OwnerOf(fi os.FileInfo) uint32 {
	if fi == nil {
		return ^uint32(0)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}
