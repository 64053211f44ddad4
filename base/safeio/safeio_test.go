package safeio

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

// A device node at --out is written through, never replaced by a regular
// file (root replacing /dev/null with an SVG). The node is made in a temp
// directory: the real /dev is never touched.
func TestWriteOutputKeepsDeviceNode(t *testing.T) {
	testutil.RequireRoot(t)
	dev := filepath.Join(t.TempDir(), "null")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := WriteOutput(context.Background(), dev, nil, writeString("<svg/>")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(dev)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is now %v, want the character device it was", dev, st.Mode())
	}
}

// A symlink at --out (to /proc/self/fd/1, or to a file) is written
// through; the link itself stays.
func TestWriteOutputFollowsSymlinkWithoutReplacingIt(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("old contents that are longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteOutput(context.Background(), link, nil, writeString("new")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link replaced by %v", st.Mode())
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Fatalf("target = %q, want %q", b, "new")
	}
}

func TestWriteOutputReplacesRegularFileAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.svg")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	failing := func(w io.Writer) error { io.WriteString(w, "partial"); return errors.New("boom") }
	if err := WriteOutput(context.Background(), path, nil, failing); err == nil {
		t.Fatal("failed write reported success")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("failed write changed the file to %q", b)
	}
	if err := WriteOutput(context.Background(), path, nil, writeString("new")); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "new" || st.Mode().Perm() != 0o640 {
		t.Fatalf("file = %q mode %v, want new, 0640", b, st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if err := WriteOutput(context.Background(), dir, nil, writeString("x")); err == nil {
		t.Fatal("writing over a directory succeeded")
	}
	// A file in a missing directory is the user's input: the error names
	// the file asked for (not the temporary one) and is fs.ErrNotExist.
	missing := filepath.Join(dir, "no", "such", "out.svg")
	if err := WriteOutput(context.Background(), missing, nil, writeString("x")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing directory: %v, want ErrNotExist naming %s", err, missing)
	}
}

// A FIFO without a writer must not make the command deaf to cancellation.
func TestOpenInputFIFOWithoutWriterCancels(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	waited := false
	done := make(chan error, 1)
	go func() {
		_, err := OpenInput(ctx, fifo, func(string) { waited = true })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !waited {
			t.Fatalf("err = %v, waited = %v; want context.Canceled after a waiting notice", err, waited)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OpenInput on a FIFO without writer ignored cancellation")
	}
}

// A FIFO whose writer never writes: the read ends on cancellation.
func TestInputReadFIFOCancels(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // a writer that stays silent
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	in, err := OpenInput(ctx, fifo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	time.AfterFunc(200*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(in); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read from a silent FIFO ignored cancellation")
	}
}

func TestOpenInputRefusesDirectory(t *testing.T) {
	if _, err := OpenInput(context.Background(), t.TempDir(), nil); !errors.Is(err, ErrNotFile) {
		t.Fatalf("err = %v, want ErrNotFile", err)
	}
}

func TestLimitReaderFailsPastCap(t *testing.T) {
	b, err := io.ReadAll(LimitReader(strings.NewReader("12345"), 5, "x"))
	if err != nil || string(b) != "12345" {
		t.Fatalf("exactly at the cap: %q, %v", b, err)
	}
	if _, err := io.ReadAll(LimitReader(strings.NewReader("123456"), 5, "x")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("past the cap: %v, want ErrTooLarge", err)
	}
	if _, err := ReadFile(context.Background(), "/dev/zero", 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("/dev/zero: %v, want ErrTooLarge", err)
	}
}

func TestPrivateDirRefusesSharedDirectories(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777|os.ModeSticky) // like /tmp
	if _, err := OpenPrivateDir(open); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("world-writable directory: %v, want ErrUnsafeDir", err)
	}
	os.Chmod(open, 0o777)
	if _, err := OpenPrivateDir(open); !Refused(err) {
		t.Fatalf("world-writable directory without the sticky bit: %v, want a refusal", err)
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(dir, "other")
		os.Mkdir(other, 0o755)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenPrivateDir(other); !Refused(err) || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("directory of another user: %v, want a refusal", err)
		}
	}
	d, err := OpenPrivateDir(filepath.Join(dir, "new"))
	if err != nil {
		t.Fatalf("new private directory: %v", err)
	}
	d.Close()
}

// A symlink planted under the name about to be written is replaced, never
// followed: the file it points at keeps its contents.
func TestPrivateDirWriteDoesNotFollowPlantedSymlink(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	d, err := OpenPrivateDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.Symlink(secret, filepath.Join(out, "udp-all.folded")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile(context.Background(), "udp-all.folded", 0o644, writeString("a;b 1\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root only" {
		t.Fatalf("followed the planted symlink: secret = %q", b)
	}
	st, err := os.Lstat(filepath.Join(out, "udp-all.folded"))
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o644 {
		t.Fatalf("udp-all.folded: %v %v, want a regular 0644 file", st, err)
	}
}

// A trusted directory (the revert file's): /tmp-like sticky directories
// are trusted, group-writable ones without the sticky bit are not, and a
// link to a directory only when root or you own it (resolve.go);
// CreateFile never opens an existing name; the files read back must be
// regular, not links or FIFOs (which would block).
func TestTrustedDirCreateAndOpen(t *testing.T) {
	dir := t.TempDir()
	sticky := filepath.Join(dir, "sticky")
	os.Mkdir(sticky, 0o755)
	os.Chmod(sticky, os.ModeSticky|0o777)
	d, err := OpenTrustedDir(sticky)
	if err != nil {
		t.Fatalf("sticky world-writable directory: %v", err)
	}
	defer d.Close()
	fill := func(f *os.File) error { _, err := f.WriteString("x"); return err }
	if err := d.CreateFile("f", 0o600, true, fill); err != nil {
		t.Fatal(err)
	}
	if err := d.CreateFile("f", 0o600, false, fill); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second CreateFile of the same name: %v, want ErrExist", err)
	}
	if st, err := os.Stat(filepath.Join(sticky, "f")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("created file: %v %v, want mode 0600", st, err)
	}
	if f, _, err := d.OpenTrustedFile("f"); err != nil {
		t.Errorf("open the file just written: %v", err)
	} else {
		f.Close()
	}
	os.Symlink(filepath.Join(sticky, "f"), filepath.Join(sticky, "link"))
	if _, _, err := d.OpenTrustedFile("link"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("link: %v", err)
	}
	if err := unix.Mkfifo(filepath.Join(sticky, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.OpenTrustedFile("fifo"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("fifo: %v", err)
	}

	group := filepath.Join(dir, "group")
	os.Mkdir(group, 0o755)
	os.Chmod(group, 0o775)
	if _, err := OpenTrustedDir(group); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "without the sticky bit") {
		t.Errorf("group-writable directory: %v", err)
	}
	os.Symlink(sticky, filepath.Join(dir, "dirlink"))
	if d, err := OpenTrustedDir(filepath.Join(dir, "dirlink")); err != nil {
		t.Errorf("your link to a directory: %v", err)
	} else {
		d.Close()
	}
	if os.Geteuid() == 0 {
		os.Lchown(filepath.Join(dir, "dirlink"), 65534, 65534)
		if _, err := OpenTrustedDir(filepath.Join(dir, "dirlink")); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "symbolic link owned by uid 65534") {
			t.Errorf("another user's link to a directory: %v", err)
		}
	}
}

// A path the caller can correct is a PathFault; a failure of the work
// itself (a full disk, a cancelled read) is not.
func TestPathFault(t *testing.T) {
	dir := t.TempDir()
	_, missing := os.Open(filepath.Join(dir, "missing"))
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	_, belowFile := os.Open(filepath.Join(file, "x"))
	for _, c := range []struct {
		err   error
		fault bool
	}{
		{missing, true},
		{belowFile, true},
		{&fs.PathError{Op: "open", Path: dir, Err: unix.EISDIR}, true},
		{fs.ErrPermission, true},
		{ErrNotFile, true},
		{ErrTooLarge, true},
		{ErrUntrusted, true},
		{&fs.PathError{Op: "write", Path: file, Err: unix.ENOSPC}, false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := PathFault(c.err); got != c.fault {
			t.Errorf("PathFault(%v) = %v, want %v", c.err, got, c.fault)
		}
	}
}
