package gclog

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotFound is returned when a named log does not exist.
var ErrNotFound = errors.New("GC log not found")

// ErrNotRegular is returned for a named log that is not a regular file (a
// FIFO, a device, a socket): reading one can block forever or never end.
var ErrNotRegular = errors.New("not a regular file")

// ErrCorrupt is returned when a compressed log cannot be decompressed.
var ErrCorrupt = errors.New("corrupt compressed GC log")

// RotatedSet expands name to the files of its rotation set, oldest first.
//
// JDK 8 (-XX:+UseGCLogFileRotation) writes gc.log.0, gc.log.1, ... and
// marks the one in use gc.log.N.current; when it wraps around, numbers no
// longer say which is oldest. JDK 9+ writes gc.log and renames it to
// gc.log.0, gc.log.1, ... on rotation, also wrapping. So the order is by
// modification time (the file written last was closed last), with the
// current file (gc.log or *.current) always last. Files with equal times
// (copied, extracted from an archive) are ordered by the first stamp in
// each, then by number. Compressed members (gc.log.3.gz) belong to the
// set too.
//
// Only regular files owned by name's owner (or, when name does not exist,
// the directory's) are siblings: a symlink, FIFO or device named like a
// rotated log is not read.
//
// name may be the base ("gc.log") or any member. When name has no rotated
// siblings the set is just [name].
func RotatedSet(name string) ([]string, error) {
	base := rotationBase(name)
	dir := filepath.Dir(base)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, err
	}
	owner, ownerKnown := fileOwner(name)
	if !ownerKnown {
		owner, ownerKnown = fileOwner(dir)
	}
	type member struct {
		path    string
		num     int
		current bool
		mtime   int64
		first   float64
	}
	var ms []member
	prefix := filepath.Base(base)
	for _, e := range entries {
		n := e.Name()
		m := member{path: filepath.Join(dir, n), num: -1}
		switch {
		case n == prefix:
			m.current = true
		case strings.HasPrefix(n, prefix+"."):
			suffix := strings.TrimSuffix(n[len(prefix)+1:], ".gz")
			if s, ok := strings.CutSuffix(suffix, ".current"); ok {
				suffix, m.current = s, true
			}
			v, err := strconv.Atoi(suffix)
			if err != nil || v < 0 {
				continue
			}
			m.num = v
		default:
			continue
		}
		if m.path != filepath.Clean(name) {
			// A sibling nobody named: only a regular file of the same owner.
			if !e.Type().IsRegular() {
				continue
			}
			if o, ok := fileOwner(m.path); ownerKnown && (!ok || o != owner) {
				continue
			}
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		m.mtime = info.ModTime().UnixNano()
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		if _, err := os.Stat(name); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return []string{name}, nil
	}
	for i := range ms {
		ms[i].first = math.NaN()
	}
	for i := range ms {
		for j := i + 1; j < len(ms); j++ {
			if ms[i].mtime == ms[j].mtime {
				if math.IsNaN(ms[i].first) {
					ms[i].first = firstStamp(ms[i].path)
				}
				if math.IsNaN(ms[j].first) {
					ms[j].first = firstStamp(ms[j].path)
				}
			}
		}
	}
	sort.SliceStable(ms, func(a, b int) bool {
		x, y := ms[a], ms[b]
		if x.current != y.current {
			return !x.current
		}
		if x.mtime != y.mtime {
			return x.mtime < y.mtime
		}
		if !math.IsNaN(x.first) && !math.IsNaN(y.first) && x.first != y.first {
			return x.first < y.first
		}
		return x.num < y.num
	})
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.path
	}
	return out, nil
}

func fileOwner(path string) (uint32, bool) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// firstStamp is the first event's time in a log file: the date stamp's
// Unix time when the log has dates, else the uptime; NaN when there is
// none in its first 1000 lines.
func firstStamp(path string) float64 {
	r, err := Open(path)
	if err != nil {
		return math.NaN()
	}
	defer r.Close()
	stamp := math.NaN()
	p := &Parser{}
	p.OnTime = func(up float64, wall time.Time) {
		if math.IsNaN(stamp) {
			stamp = stampValue(up, wall)
		}
	}
	p.OnEvent = func(e *Event) {
		if math.IsNaN(stamp) {
			stamp = stampValue(e.Uptime, e.Wall)
		}
	}
	_ = p.Parse(&stopAfter{r: io.LimitReader(r, 4<<20), done: func() bool { return !math.IsNaN(stamp) }})
	return stamp
}

func stampValue(up float64, wall time.Time) float64 {
	if !wall.IsZero() {
		return float64(wall.UnixNano()) / 1e9
	}
	return up
}

// stopAfter ends a read once done says so.
type stopAfter struct {
	r    io.Reader
	done func() bool
}

func (s *stopAfter) Read(b []byte) (int, error) {
	if s.done() {
		return 0, io.EOF
	}
	return s.r.Read(b[:min(len(b), 16<<10)])
}

// rotationBase strips ".N", ".N.current" and ".gz" from a member's name.
func rotationBase(name string) string {
	b := strings.TrimSuffix(name, ".gz")
	b = strings.TrimSuffix(b, ".current")
	if k := strings.LastIndexByte(b, '.'); k > 0 {
		if _, err := strconv.Atoi(b[k+1:]); err == nil {
			return b[:k]
		}
	}
	return b
}

// Open opens a log file, transparently decompressing gzip (recognised by
// its magic bytes, not its name). The file must be a regular file: it is
// opened without blocking and checked before anything is read, so a FIFO
// with no writer or a device returns ErrNotRegular instead of hanging or
// reading forever.
func Open(name string) (io.ReadCloser, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		err = &fs.PathError{Op: "open", Path: name, Err: err}
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, fileKind(info.Mode()))
	}
	br := bufio.NewReaderSize(f, 64<<10)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
		}
		return &gzFile{zr, f}, nil
	}
	return &plainFile{br, f}, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "not a file"
}

type plainFile struct {
	io.Reader
	f *os.File
}

func (p *plainFile) Close() error { return p.f.Close() }

type gzFile struct {
	*gzip.Reader
	f *os.File
}

// Read reports a damaged stream as ErrCorrupt: bad input, not a failed run.
func (g *gzFile) Read(b []byte) (int, error) {
	n, err := g.Reader.Read(b)
	var ce flate.CorruptInputError
	if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ce) {
		err = fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return n, err
}

func (g *gzFile) Close() error {
	g.Reader.Close()
	return g.f.Close()
}

// ParseFiles parses files in order as one log into p (then flushes it).
// It stops with ctx's error when ctx is cancelled.
func ParseFiles(ctx context.Context, p *Parser, files []string) error {
	for _, name := range files {
		r, err := Open(name)
		if err != nil {
			return err
		}
		err = p.ParseNamed(name, ctxReader{ctx, r})
		r.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
	}
	p.Flush()
	return nil
}

// ctxReader makes a long parse interruptible between reads.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// AnalyzeFiles parses files in order as one log and summarises it,
// counting pauses longer than pauseGoal.
func AnalyzeFiles(ctx context.Context, files []string, pauseGoal time.Duration) (Summary, error) {
	p := &Parser{}
	a := NewAnalyzer(pauseGoal)
	a.Attach(p)
	if err := ParseFiles(ctx, p, files); err != nil {
		return Summary{}, err
	}
	s := a.Summary(p.Stats)
	s.Files = files
	return s, nil
}
