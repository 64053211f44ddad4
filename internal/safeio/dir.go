package safeio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Dir is a directory held open, so that files are created relative to the
// directory checked, not to a path someone could swap afterwards. Every
// file is created with O_EXCL|O_NOFOLLOW: never an existing file, never
// through a link.
type Dir struct {
	fd   int
	path string
}

// OpenPrivateDir opens dir (creating it and its parents, mode 0755, if
// missing) and checks that the effective user owns it and that neither
// group nor others can write to it: in a directory others can write, they
// can plant a symlink under the name perfscope is about to write, and root
// would follow it. For output directories (flame graphs).
func OpenPrivateDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d, st, err := openDir(dir, 0)
	if err != nil {
		return nil, err
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		d.Close()
		return nil, fmt.Errorf("%s is owned by uid %d, not by uid %d who runs perfscope: %w", dir, st.Uid, euid, ErrUnsafeDir)
	}
	if st.Mode&0o022 != 0 {
		d.Close()
		return nil, fmt.Errorf("%s is writable by its group or by others (mode %04o): %w", dir, st.Mode&0o7777, ErrUnsafeDir)
	}
	return d, nil
}

// OpenTrustedDir opens an existing dir that is not a symbolic link, is
// owned by this user or root, and is writable by group or others only
// with the sticky bit (as /tmp is), so that nobody else can replace or
// remove a file perfscope creates in it. For files with a name of their
// own that must outlive the run (the revert file).
func OpenTrustedDir(dir string) (*Dir, error) {
	var lst unix.Stat_t
	if err := unix.Lstat(dir, &lst); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if lst.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil, fmt.Errorf("%s is a symbolic link: %w", dir, ErrUntrusted)
	}
	d, st, err := openDir(dir, unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	if err := Trusted(dir, st); err != nil {
		d.Close()
		return nil, err
	}
	if st.Dev != lst.Dev || st.Ino != lst.Ino {
		d.Close()
		return nil, fmt.Errorf("%s changed while it was opened: %w", dir, ErrUntrusted)
	}
	return d, nil
}

// OpenDir opens dir with no check of who may write it: a system directory
// whose files perfscope replaces (/etc/default), where the kernel's
// permissions already say who can.
func OpenDir(dir string) (*Dir, error) {
	d, _, err := openDir(dir, 0)
	return d, err
}

func openDir(dir string, flags int) (*Dir, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, st, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	return &Dir{fd: fd, path: dir}, st, nil
}

// Trusted checks a file's or directory's owner and mode: owned by this
// user or root; a directory writable by others only when sticky; a file
// writable by nobody else.
func Trusted(name string, st unix.Stat_t) error {
	if euid := uint32(os.Geteuid()); st.Uid != euid && st.Uid != 0 {
		return fmt.Errorf("%s is owned by uid %d, not by uid %d or root: %w", name, st.Uid, euid, ErrUntrusted)
	}
	writable := st.Mode&0o022 != 0
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case isDir && writable && st.Mode&unix.S_ISVTX == 0:
		return fmt.Errorf("%s is writable by group or others without the sticky bit: %w", name, ErrUntrusted)
	case !isDir && writable:
		return fmt.Errorf("%s is writable by group or others: %w", name, ErrUntrusted)
	}
	return nil
}

// Close releases the directory.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Path is the directory's path as given.
func (d *Dir) Path() string { return d.path }

// Sync flushes the directory's entries (a file created or renamed in it)
// to disk.
func (d *Dir) Sync() error { return unix.Fsync(d.fd) }

// Durable asks CreateFile and ReplaceFile to sync the file and the
// directory before returning, so a crash right after leaves the file.
type Durable bool

// CreateFile creates name, which must not exist, with mode perm (not
// narrowed by the umask), and fills it with fill; on any error the file
// is removed again.
func (d *Dir) CreateFile(name string, perm os.FileMode, durable Durable, fill func(*os.File) error) error {
	if err := d.create(name, perm, durable, fill); err != nil {
		return err
	}
	if durable {
		return d.Sync()
	}
	return nil
}

// ReplaceFile writes name whole or not at all: a new file beside it
// (CreateFile's guarantees) renamed over name once filled. A rename
// replaces a symlink at name rather than following it.
func (d *Dir) ReplaceFile(name string, perm os.FileMode, durable Durable, fill func(*os.File) error) error {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := "." + name + "." + hex.EncodeToString(rnd[:])
	if err := d.create(tmp, perm, durable, fill); err != nil {
		return err
	}
	if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
		unix.Unlinkat(d.fd, tmp, 0)
		return &os.LinkError{Op: "rename", Old: d.path + "/" + tmp, New: d.path + "/" + name, Err: err}
	}
	if durable {
		return d.Sync()
	}
	return nil
}

// WriteFile replaces name with what write produces (ReplaceFile), unless
// ctx ends first.
func (d *Dir) WriteFile(ctx context.Context, name string, perm os.FileMode, write func(io.Writer) error) error {
	return d.ReplaceFile(name, perm, false, func(f *os.File) error {
		if err := write(f); err != nil {
			return err
		}
		return ctx.Err()
	})
}

func (d *Dir) create(name string, perm os.FileMode, durable Durable, fill func(*os.File) error) error {
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return &os.PathError{Op: "create", Path: d.path + "/" + name, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path+"/"+name)
	werr := fill(f)
	if werr == nil {
		// The umask narrowed the creation mode; name the mode we mean
		// (after fill, which may have changed the owner).
		werr = f.Chmod(perm.Perm())
	}
	if werr == nil && durable {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		unix.Unlinkat(d.fd, name, 0)
	}
	return werr
}

// OpenTrustedFile opens name in the directory for reading: not through a
// link (ELOOP says "symbolic link"), a regular file, and Trusted. Opening
// does not block on a FIFO planted under the name.
func (d *Dir) OpenTrustedFile(name string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, st, errors.New("it is a symbolic link")
		}
		return nil, st, err
	}
	f := os.NewFile(uintptr(fd), d.path+"/"+name)
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, st, errors.New("not a regular file")
	}
	if err := Trusted(d.path+"/"+name, st); err != nil {
		f.Close()
		return nil, st, err
	}
	return f, st, nil
}
