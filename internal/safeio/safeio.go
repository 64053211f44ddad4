// Package safeio is how perfscope, which runs as root, reads and writes
// files at paths other users may control: an output path that is a device
// or a symlink is written through, never replaced; files go into a
// directory only when nobody else can write there, and are created without
// following a planted symlink; an input that is a FIFO without a writer
// does not make the command deaf to Ctrl-C; and every input has a size cap
// that fails loudly instead of exhausting memory or silently truncating.
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
	"sync"
	"syscall"
	"time"
)

var (
	// ErrTooLarge is returned when an input exceeds its size cap.
	ErrTooLarge = errors.New("input too large")
	// ErrUnsafeDir is returned for an output directory that another user
	// could plant files in.
	ErrUnsafeDir = errors.New("directory is not private to this user")
	// ErrUntrusted is returned for a directory or file outside
	// OpenTrustedDir's policy: another user could replace or remove it.
	ErrUntrusted = errors.New("another user could replace what perfscope writes there")
	// ErrNotFile is returned for an input that is a directory (or a socket).
	ErrNotFile = errors.New("not a file")
)

// WaitingOpen is called once when opening an input or output blocks (a
// FIFO waiting for its other end), so the user learns why nothing happens.
type WaitingOpen func(path string)

// openCtx opens path with flag, giving up when ctx ends. Opening a FIFO
// blocks in the kernel until the other end opens it, where a signal-driven
// cancellation cannot reach it; so non-regular files are opened on their
// own goroutine, and one still blocked when ctx ends is abandoned (its
// descriptor, should the open ever complete, is closed).
func openCtx(ctx context.Context, path string, flag int, perm fs.FileMode, blocking bool, waiting WaitingOpen) (*os.File, error) {
	if !blocking {
		return os.OpenFile(path, flag, perm)
	}
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	var mu sync.Mutex
	abandoned := false
	go func() {
		f, err := os.OpenFile(path, flag, perm)
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
	f, err := openCtx(ctx, path, os.O_RDONLY, 0, !mode.IsRegular(), waiting)
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

// WriteOutput writes to path what write produces. A missing path or a
// regular file is written under a temporary name in the same directory and
// renamed into place, so an interrupted or failed run never leaves a
// truncated file. Anything else — a device such as /dev/null, a FIFO, a
// symlink such as /proc/self/fd/1 — is opened and written through, exactly
// as a shell redirection would, and never replaced: renaming over it would
// replace the device node or the link itself.
func WriteOutput(ctx context.Context, path string, waiting WaitingOpen, write func(io.Writer) error) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return writeReplacing(ctx, path, 0o644, write)
	case err != nil:
		return err
	case st.Mode().IsRegular():
		return writeReplacing(ctx, path, st.Mode().Perm(), write)
	case st.IsDir():
		return &os.PathError{Op: "write", Path: path, Err: syscall.EISDIR}
	}
	target, err := os.Stat(path)
	blocking := err != nil || !target.Mode().IsRegular()
	f, err := openCtx(ctx, path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644, blocking, waiting)
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

// writeReplacing writes a temporary file next to path, then renames it
// over path.
func writeReplacing(ctx context.Context, path string, perm fs.FileMode, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		// Name the file asked for, not the temporary one beside it.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &os.PathError{Op: "create", Path: path, Err: err}
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	return nil
}
