package safeio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Dir is an output directory that only the effective user can write to,
// held open so that files are created relative to the directory checked,
// not to a path someone could swap afterwards.
type Dir struct {
	fd   int
	path string
}

// OpenPrivateDir opens dir (creating it and its parents, mode 0755, if
// missing) and checks that the effective user owns it and that neither
// group nor others can write to it: in a directory others can write, they
// can plant a symlink under the name perfscope is about to write, and root
// would follow it.
func OpenPrivateDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is owned by uid %d, not by uid %d who runs perfscope: %w", dir, st.Uid, euid, ErrUnsafeDir)
	}
	if st.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is writable by its group or by others (mode %04o): %w", dir, st.Mode&0o7777, ErrUnsafeDir)
	}
	return &Dir{fd: fd, path: dir}, nil
}

// Close releases the directory.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Path is the directory's path as given.
func (d *Dir) Path() string { return d.path }

// WriteFile writes name inside the directory with what write produces: a
// new temporary file created with O_EXCL|O_NOFOLLOW (never an existing
// file, never through a link), renamed over name when complete. A rename
// replaces a symlink at name rather than following it.
func (d *Dir) WriteFile(ctx context.Context, name string, perm os.FileMode, write func(io.Writer) error) error {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := "." + name + "." + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return &os.PathError{Op: "create", Path: d.path + "/" + tmp, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path+"/"+tmp)
	werr := write(f)
	if werr == nil {
		werr = ctx.Err()
	}
	if werr == nil {
		// The umask narrowed the creation mode; name the mode we mean.
		werr = f.Chmod(perm.Perm())
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
			werr = &os.LinkError{Op: "rename", Old: tmp, New: name, Err: err}
		}
	}
	if werr != nil {
		unix.Unlinkat(d.fd, tmp, 0)
	}
	return werr
}
