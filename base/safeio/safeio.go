// Package safeio is how perfscope, which runs as root, reads and writes
// files at paths other users may control: every path it writes is
// resolved one component at a time through directories and links only
// root or you control (resolve.go); an output path that is a device or a
// trusted symlink is written through, never replaced; files go into a
// directory only when nobody else can write there, through the descriptor
// that was checked, and are created without following a planted symlink;
// an input that is a FIFO without a writer does not make the command deaf
// to Ctrl-C; and every input has a size cap that fails loudly instead of
// exhausting memory or silently truncating.
package safeio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var (
	// ErrTooLarge is returned when an input exceeds its size cap.
	ErrTooLarge = errors.New("input too large")
	// ErrUnsafeDir is returned for an output directory that another user
	// could plant files in.
	ErrUnsafeDir = errors.New("directory is not private to this user")
	// ErrUntrusted is returned for a path outside the rules of resolve.go
	// (a directory or link of another user's on the way, a directory
	// others can write without the sticky bit) or a file others could
	// replace.
	ErrUntrusted = errors.New("another user could redirect or replace what perfscope writes there")
	// ErrNotWritable is returned for an output directory in which no file
	// can be created (a read-only file system, /proc/self).
	ErrNotWritable = errors.New("no file can be created there")
	// ErrNotFile is returned for an input that is a directory (or a socket).
	ErrNotFile = errors.New("not a file")
)

// PathFault reports whether err is about the path the caller was given
// rather than about the work: missing, unreadable, a directory, too
// large, below a file, or refused by the rules of this package (Refused).
// A command tells its user to correct the path.
func PathFault(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, ErrNotFile) || errors.Is(err, ErrTooLarge) || errors.Is(err, syscall.EISDIR) ||
		errors.Is(err, syscall.ENOTDIR) || Refused(err)
}

// Refused reports whether err is a refusal of a path by the rules of
// resolve.go or of OpenPrivateDir: the user's input, not a failed run.
func Refused(err error) bool {
	return errors.Is(err, ErrUntrusted) || errors.Is(err, ErrUnsafeDir) || errors.Is(err, ErrNotWritable)
}

// WaitingOpen is called once when opening an input or output blocks (a
// FIFO waiting for its other end), so the user learns why nothing happens.
type WaitingOpen func(path string)

// openCtx opens path (named so for messages) with open, giving up when
// ctx ends. Opening a FIFO blocks in the kernel until the other end opens
// it, where a signal-driven cancellation cannot reach it; so non-regular
// files are opened on their own goroutine, and one still blocked when ctx
// ends is abandoned (its descriptor, should the open ever complete, is
// closed).
func openCtx(ctx context.Context, path string, open func() (*os.File, error), blocking bool, waiting WaitingOpen) (*os.File, error) {
	if !blocking {
		return open()
	}
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	var mu sync.Mutex
	abandoned := false
	go func() {
		f, err := open()
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if f != nil {
				f.Close()
			}
			return
		}
		ch <- result{f, err}
	}()
	timer := time.NewTimer(200 * time.Millisecond)
	defer timer.Stop()
	for {
		select {
		case r := <-ch:
			return r.f, r.err
		case <-timer.C:
			if waiting != nil {
				waiting(path)
			}
		case <-ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			select {
			case r := <-ch:
				if r.f != nil {
					r.f.Close()
				}
			default:
				abandoned = true
			}
			return nil, ctx.Err()
		}
	}
}

// Input is an opened input that stops reading when its context ends.
type Input struct {
	f    *os.File
	ctx  context.Context
	stop func() bool
}

// OpenInput opens path for reading. A directory or socket is ErrNotFile; a
// FIFO or character device is opened without blocking cancellation, and
// its reads end with ctx's error when ctx ends (FIFO reads go through Go's
// poller, so closing the file wakes a read that waits for data).
func OpenInput(ctx context.Context, path string, waiting WaitingOpen) (*Input, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	mode := st.Mode()
	switch {
	case mode.IsDir():
		return nil, fmt.Errorf("%s is a directory: %w", path, ErrNotFile)
	case mode&fs.ModeSocket != 0:
		return nil, fmt.Errorf("%s is a socket: %w", path, ErrNotFile)
	}
	f, err := openCtx(ctx, path, func() (*os.File, error) { return os.Open(path) }, !mode.IsRegular(), waiting)
	if err != nil {
		return nil, err
	}
	in := &Input{f: f, ctx: ctx}
	in.stop = context.AfterFunc(ctx, func() { f.Close() })
	return in, nil
}

// Read reads from the file, returning ctx's error once ctx has ended.
func (in *Input) Read(b []byte) (int, error) {
	if err := in.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := in.f.Read(b)
	if err != nil && in.ctx.Err() != nil {
		return n, in.ctx.Err()
	}
	return n, err
}

// Close closes the file.
func (in *Input) Close() error {
	if in.stop() {
		return in.f.Close()
	}
	return nil
}

// Name is the path the input was opened from.
func (in *Input) Name() string { return in.f.Name() }

// LimitReader returns r limited to max bytes; reading past the cap fails
// with an error wrapping ErrTooLarge (naming what was read), never a short
// read that looks like the end of the input.
func LimitReader(r io.Reader, max int64, what string) io.Reader {
	return &limitedReader{r: r, left: max, max: max, what: what}
}

type limitedReader struct {
	r         io.Reader
	left, max int64
	what      string
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.left <= 0 {
		// One more byte tells a file of exactly max bytes from a longer one.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%s is larger than %s: %w", l.what, FormatSize(l.max), ErrTooLarge)
		}
		return 0, err
	}
	if int64(len(b)) > l.left {
		b = b[:l.left]
	}
	n, err := l.r.Read(b)
	l.left -= int64(n)
	return n, err
}

// ReadFile reads a whole file of at most max bytes, opened as OpenInput
// opens it (FIFO-safe, cancellable).
func ReadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	in, err := OpenInput(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return io.ReadAll(LimitReader(in, max, path))
}

// FormatSize prints a byte count in binary units.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// WriteOutput writes to path what write produces. path is resolved by the
// rules of resolve.go, and its directory must exist. A missing path or a
// regular file is written under a temporary name in the directory held
// open and renamed into place, so an interrupted or failed run never
// leaves a truncated file. A symbolic link owned by root or you is
// followed and never replaced: its target is resolved by the same rules,
// and a link in /proc (/proc/self/fd/1, the target of /dev/stdout) is
// opened as the kernel resolves it, to the file it stands for. A device
// (/dev/null) or FIFO is opened and written through, exactly as a shell
// redirection would, and never replaced: renaming over it would replace
// the device node itself.
func WriteOutput(ctx context.Context, path string, waiting WaitingOpen, write func(io.Writer) error) error {
	t, err := resolveOutput(path)
	if err != nil {
		return err
	}
	defer unix.Close(t.dir.fd)
	d := &Dir{fd: t.dir.fd, path: t.dir.path}
	switch {
	case !t.exists:
		return naming(path, d.WriteFile(ctx, t.name, 0o644, write))
	case t.st.Mode&unix.S_IFMT == unix.S_IFREG:
		return naming(path, d.WriteFile(ctx, t.name, os.FileMode(t.st.Mode&0o777), write))
	case t.procLink:
		// /proc/PID/fd/N names an open file, not a path: the kernel
		// opens that very file.
		return writeThrough(ctx, path, waiting, write, func() (int, error) {
			return unix.Openat(t.dir.fd, t.name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		}, nil)
	}
	// A device, FIFO or socket: opened where it was found (the directory
	// held), and only if it is still the file that was checked.
	return writeThrough(ctx, path, waiting, write, func() (int, error) {
		return unix.Openat(t.dir.fd, t.name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}, &t.st)
}

// CheckOutput resolves path as WriteOutput will, without writing: a run
// checks its output before it measures rather than fail after.
func CheckOutput(path string) error {
	t, err := resolveOutput(path)
	if err == nil {
		unix.Close(t.dir.fd)
	}
	return err
}

// outputTarget is what WriteOutput writes: name in the directory held,
// with what is there now.
type outputTarget struct {
	dir    heldDir
	name   string
	exists bool
	st     unix.Stat_t
	// procLink: a link in /proc (/proc/self/fd/1), which names an open
	// file rather than a path.
	procLink bool
}

// resolveOutput resolves path by the rules of resolve.go, following a
// trusted link at its end to its target, to a name in a directory held.
func resolveOutput(path string) (outputTarget, error) {
	cur, err := absolute(path)
	if err != nil {
		return outputTarget{}, err
	}
	r := newResolver(false)
	for {
		dir, name := splitLast(cur)
		if name == "" || name == "." || name == ".." {
			return outputTarget{}, &os.PathError{Op: "write", Path: path, Err: syscall.EISDIR}
		}
		h, err := r.dir(dir)
		if err != nil {
			return outputTarget{}, naming(path, err)
		}
		t := outputTarget{dir: h, name: name}
		fd, st, err := stepStat(h.fd, name)
		if errors.Is(err, unix.ENOENT) {
			return t, nil
		}
		if err != nil {
			unix.Close(h.fd)
			return outputTarget{}, &os.PathError{Op: "open", Path: path, Err: err}
		}
		t.exists, t.st = true, st
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			unix.Close(fd)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				unix.Close(h.fd)
				return outputTarget{}, &os.PathError{Op: "write", Path: path, Err: syscall.EISDIR}
			}
			return t, nil
		}
		where := filepath.Join(h.path, name)
		var fs unix.Statfs_t
		if unix.Fstatfs(h.fd, &fs) == nil && fs.Type == unix.PROC_SUPER_MAGIC {
			unix.Close(fd)
			// The directory, checked like any other, belongs to this
			// process (or another of root's or yours).
			if !r.owners.Trust(st.Uid) {
				unix.Close(h.fd)
				return outputTarget{}, fmt.Errorf("%s is a symbolic link owned by %s, not by root or you: %w", where, describeUID(st.Uid), ErrUntrusted)
			}
			t.procLink = true
			return t, nil
		}
		target, err := r.follow(fd, where, &st)
		unix.Close(fd)
		unix.Close(h.fd)
		if err != nil {
			return outputTarget{}, err
		}
		if !strings.HasPrefix(target, "/") {
			target = h.path + "/" + target
		}
		cur = target
	}
}

// splitLast splits a path before its last name, without cleaning it: a
// ".." in a link's target is resolved by the walk, not by the text.
func splitLast(p string) (dir, name string) {
	p = strings.TrimRight(p, "/")
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ".", p
	}
	return p[:i+1], p[i+1:]
}

// naming makes an error about a component of path name path too, and one
// about the temporary file beside it name path instead.
func naming(path string, err error) error {
	var pe *os.PathError
	switch {
	case !errors.As(err, &pe) || pe.Path == path:
		return err
	case pe.Op == "create":
		return &os.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	return &os.PathError{Op: pe.Op, Path: path, Err: fmt.Errorf("%s: %w", pe.Path, pe.Err)}
}

// writeThrough opens a file that is not replaced (open, on its own
// goroutine: a FIFO blocks until a reader comes) and writes to it. same,
// when set, is what the file must still be once opened.
func writeThrough(ctx context.Context, path string, waiting WaitingOpen, write func(io.Writer) error, open func() (int, error), same *unix.Stat_t) error {
	f, err := openCtx(ctx, path, func() (*os.File, error) {
		fd, err := open()
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		var st unix.Stat_t
		if same != nil && (unix.Fstat(fd, &st) != nil || st.Dev != same.Dev || st.Ino != same.Ino) {
			unix.Close(fd)
			return nil, fmt.Errorf("%s changed while it was opened: %w", path, ErrUntrusted)
		}
		// Non-blocking, so that Go's poller carries the writes and closing
		// the file (ctx ending) wakes one a stalled reader blocks.
		unix.SetNonblock(fd, true)
		return os.NewFile(uintptr(fd), path), nil
	}, true, waiting)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	werr := write(f)
	if stop() {
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
	}
	if werr == nil {
		werr = ctx.Err()
	}
	return werr
}
