package safeio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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

// OpenPrivateDir opens dir for output files (flame graphs, a recipe's
// outputs), creating it and its missing parents (mode 0755) on the way,
// by the rules of resolve.go; dir itself must be owned by a trusted user
// and writable by neither group nor others (not even sticky: /tmp is
// refused). Files are then created only through the descriptor it
// returns, so a directory renamed and replaced after this check redirects
// nothing. A directory in which files cannot be created at all (a
// read-only file system, /proc/self) is refused here, before any
// measurement, rather than when the results are written.
func OpenPrivateDir(dir string) (*Dir, error) {
	d, st, err := openResolved(dir, true)
	if err != nil {
		return nil, err
	}
	owners := CurrentOwners()
	if !owners.Trust(st.Uid) {
		d.Close()
		return nil, fmt.Errorf("%s is owned by %s, not by root or you: %w", dir, describeUID(st.Uid), ErrUnsafeDir)
	}
	if st.Mode&0o022 != 0 {
		d.Close()
		return nil, fmt.Errorf("%s is writable by its group or by others (mode %04o): %w", dir, st.Mode&0o7777, ErrUnsafeDir)
	}
	if err := d.probeCreate(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// OpenTrustedDir opens an existing dir by the rules of resolve.go: dir,
// like every directory above it, is owned by a trusted user and writable
// by group or others only with the sticky bit (as /tmp is), so that
// nobody else can replace or remove a file perfscope creates in it. For
// files with a name of their own that must outlive the run (the revert
// file).
func OpenTrustedDir(dir string) (*Dir, error) {
	d, _, err := openResolved(dir, false)
	return d, err
}

// OpenDir opens an existing system directory whose files perfscope
// replaces (/etc/default), by the same rules as OpenTrustedDir.
func OpenDir(dir string) (*Dir, error) { return OpenTrustedDir(dir) }

// MkdirTemp creates a new directory, mode 0700, named prefix and a random
// suffix, in the system's temporary directory (os.TempDir, resolved as
// OpenTrustedDir resolves it: $TMPDIR may point anywhere), and returns
// its path with links resolved. In a directory only trusted users can
// write, or a sticky one, nobody else can move or replace it, so it may
// be used by path (a lab's reports, its JVM's classes).
func MkdirTemp(prefix string) (string, error) {
	h, err := newResolver(false).dir(os.TempDir())
	if err != nil {
		return "", fmt.Errorf("temporary directory: %w", err)
	}
	defer unix.Close(h.fd)
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	name := prefix + hex.EncodeToString(rnd[:])
	if err := unix.Mkdirat(h.fd, name, 0o700); err != nil {
		return "", &os.PathError{Op: "mkdir", Path: filepath.Join(h.path, name), Err: err}
	}
	return filepath.Join(h.path, name), nil
}

// openResolved resolves dir (resolve.go) and opens it for reading, which
// fsync needs, from the descriptor the walk ended with.
func openResolved(dir string, create bool) (*Dir, unix.Stat_t, error) {
	var st unix.Stat_t
	h, err := newResolver(create).dir(dir)
	if err != nil {
		return nil, st, err
	}
	defer unix.Close(h.fd)
	fd, err := unix.Openat(h.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	return &Dir{fd: fd, path: dir}, st, nil
}

// probeCreate creates and removes a file, so that a directory nothing can
// be created in is found before a run rather than after it.
func (d *Dir) probeCreate() error {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	name := ".perfscope-probe-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &notWritableError{dir: d.path, err: err}
	}
	unix.Close(fd)
	unix.Unlinkat(d.fd, name, 0)
	return nil
}

// notWritableError is ErrNotWritable for one directory.
type notWritableError struct {
	dir string
	err error
}

func (e *notWritableError) Error() string {
	return fmt.Sprintf("no file can be created in %s (%v)", e.dir, e.err)
}

func (e *notWritableError) Is(target error) bool { return target == ErrNotWritable }
func (e *notWritableError) Unwrap() error        { return e.err }

// Trusted checks a file's or directory's owner and mode: owned by a
// trusted user (Owners); a directory writable by others only when sticky;
// a file writable by nobody else.
func Trusted(name string, st unix.Stat_t) error {
	owners := CurrentOwners()
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return owners.checkTraversed(name, &st)
	}
	if !owners.Trust(st.Uid) {
		return fmt.Errorf("%s is owned by %s, not by root or you: %w", name, describeUID(st.Uid), ErrUntrusted)
	}
	if st.Mode&0o022 != 0 {
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
