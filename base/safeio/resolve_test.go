package safeio

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

// bothWalks runs f with openat2 and with the openat(O_NOFOLLOW) walk of
// kernels before 5.6.
func bothWalks(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("openat", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		f(t)
	})
}

// The reported attack: /tmp/u/cron -> /etc/cron.d made a root run write
// into /etc/cron.d, and a link to /root made it create /root/sub2.
func TestPrivateDirRefusesNeighboursLinks(t *testing.T) {
	h := testutil.NewNeighbourhood(t)
	h.Run(t, `ln -s "$1" "$2/cron" && ln -s "$3" "$2/sub"`, h.Target, h.Home, h.RootLike)
	bothWalks(t, func(t *testing.T) {
		for _, dir := range []string{filepath.Join(h.Home, "cron"), filepath.Join(h.Home, "sub", "sub2"), filepath.Join(h.Home, "cron", "deeper")} {
			d, err := OpenPrivateDir(dir)
			if err == nil {
				d.Close()
				t.Fatalf("%s: opened", dir)
			}
			if !Refused(err) || !strings.Contains(err.Error(), h.Home+" is owned by uid "+strconv.Itoa(int(h.UID))) {
				t.Errorf("%s: %v; want a refusal naming %s's owner", dir, err, h.Home)
			}
		}
		testutil.Untouched(t, h.Target)
		testutil.Untouched(t, h.RootLike)
	})
}

// A link the neighbour owns is refused wherever it lies, even in a
// directory perfscope may write below (a sticky one, as /tmp), and
// whatever it points to.
func TestResolveRefusesLinkOfAnotherUser(t *testing.T) {
	h := testutil.NewNeighbourhood(t)
	h.Run(t, `ln -s "$1" "$2/out" && ln -s "$3/file" "$2/out.svg"`, h.RootLike, h.Sticky, h.Target)
	secret := filepath.Join(h.Target, "file")
	os.WriteFile(secret, []byte("root's"), 0o600)
	bothWalks(t, func(t *testing.T) {
		_, err := OpenPrivateDir(filepath.Join(h.Sticky, "out", "sub2"))
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "is a symbolic link owned by uid "+strconv.Itoa(int(h.UID))) {
			t.Errorf("directory through the link: %v", err)
		}
		testutil.Untouched(t, h.RootLike)
		err = WriteOutput(context.Background(), filepath.Join(h.Sticky, "out.svg"), nil, writeString("<svg/>"))
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "symbolic link owned by") {
			t.Errorf("--out at the link: %v", err)
		}
		if b, _ := os.ReadFile(secret); string(b) != "root's" {
			t.Errorf("written through the link: %q", b)
		}
		if _, err := OpenTrustedDir(filepath.Join(h.Sticky, "out")); !errors.Is(err, ErrUntrusted) {
			t.Errorf("revert directory through the link: %v", err)
		}
	})
}

// A directory others can write without the sticky bit is refused on the
// way, not only at the end: anyone could swap what lies below it.
func TestResolveRefusesOpenParent(t *testing.T) {
	h := testutil.NewNeighbourhood(t)
	bothWalks(t, func(t *testing.T) {
		_, err := OpenPrivateDir(filepath.Join(h.Open, "flames"))
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "writable by group or others without the sticky bit (mode 0777)") {
			t.Errorf("%v", err)
		}
		testutil.Untouched(t, h.Open)
		if err := WriteOutput(context.Background(), filepath.Join(h.Open, "out.svg"), nil, writeString("x")); !errors.Is(err, ErrUntrusted) {
			t.Errorf("--out: %v", err)
		}
		testutil.Untouched(t, h.Open)
		// Below a sticky directory of root's, as /tmp/flames: allowed.
		d, err := OpenPrivateDir(filepath.Join(h.Sticky, "flames"))
		if err != nil {
			t.Fatalf("below a sticky directory: %v", err)
		}
		d.Close()
		os.Remove(filepath.Join(h.Sticky, "flames"))
	})
}

// The neighbour's directory in the working directory's path is checked
// like any other: a relative path is resolved from "/".
func TestResolveChecksWorkingDirectory(t *testing.T) {
	h := testutil.NewNeighbourhood(t)
	t.Chdir(h.Home)
	_, err := OpenPrivateDir("flames")
	if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), h.Home+" is owned by") {
		t.Errorf("%v", err)
	}
	testutil.Untouched(t, h.Home)
}

// A directory swapped after it was checked redirects nothing: files are
// created through the descriptor held, never by path. Under sudo the
// invoking user (SUDO_UID) is trusted with their own directory; when
// they move it away and put a link to a root directory in its place, the
// files still land in the directory that was checked.
func TestSwapAfterCheckCannotRedirect(t *testing.T) {
	h := testutil.NewNeighbourhood(t)
	t.Setenv("SUDO_UID", strconv.Itoa(int(h.UID)))
	flames := filepath.Join(h.Home, "flames")
	d, err := OpenPrivateDir(flames)
	if err != nil {
		t.Fatalf("the invoking user's own directory: %v", err)
	}
	defer d.Close()
	h.Run(t, `mv "$1/flames" "$1/moved" && ln -s "$2" "$1/flames"`, h.Home, h.Target)
	if err := d.WriteFile(context.Background(), "udp-all.folded", 0o644, writeString("a;b 1\n")); err != nil {
		t.Fatal(err)
	}
	testutil.Untouched(t, h.Target)
	if b, err := os.ReadFile(filepath.Join(h.Home, "moved", "udp-all.folded")); err != nil || string(b) != "a;b 1\n" {
		t.Errorf("the checked directory lacks the file: %q %v", b, err)
	}
}

// Links of root's are followed, their targets by the same rules; /proc's
// links name open files and are written through (/dev/stdout).
func TestWriteOutputFollowsTrustedLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	os.Symlink("real", filepath.Join(dir, "rel"))
	os.Symlink(filepath.Join(dir, "rel", "out.svg"), filepath.Join(dir, "out.svg"))
	if err := WriteOutput(context.Background(), filepath.Join(dir, "out.svg"), nil, writeString("<svg/>")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(real, "out.svg")); string(b) != "<svg/>" {
		t.Errorf("target = %q", b)
	}
	if st, _ := os.Lstat(filepath.Join(dir, "out.svg")); st.Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced")
	}
	os.Symlink("loop", filepath.Join(dir, "loop"))
	if err := WriteOutput(context.Background(), filepath.Join(dir, "loop"), nil, writeString("x")); err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("a loop: %v", err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	path := "/proc/self/fd/" + strconv.Itoa(int(w.Fd()))
	if err := WriteOutput(context.Background(), path, nil, writeString("through the pipe")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if b, _ := io.ReadAll(r); string(b) != "through the pipe" {
		t.Errorf("pipe read %q", b)
	}
}

// A directory nothing can be created in is refused when opened, before a
// run spends its window: /proc/self.
func TestPrivateDirRefusesProc(t *testing.T) {
	_, err := OpenPrivateDir("/proc/self")
	if !errors.Is(err, ErrNotWritable) || !Refused(err) {
		t.Fatalf("%v, want ErrNotWritable", err)
	}
}
