package gclog

import (
	"bufio"
	"bytes"
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

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/base/textenc"
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
// each, then by number. Compressed members (gc.log.3.gz, gc.log.3.zst) belong to the
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
			suffix := trimCompressed(n[len(prefix)+1:])
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

// trimCompressed strips the suffix logrotate gives a compressed member.
func trimCompressed(name string) string {
	if b, ok := strings.CutSuffix(name, ".gz"); ok {
		return b
	}
	return strings.TrimSuffix(name, ".zst")
}

// rotationBase strips ".N", ".N.current", ".gz" and ".zst" from a member's name.
func rotationBase(name string) string {
	b := trimCompressed(name)
	b = strings.TrimSuffix(b, ".current")
	if k := strings.LastIndexByte(b, '.'); k > 0 {
		if _, err := strconv.Atoi(b[k+1:]); err == nil {
			return b[:k]
		}
	}
	return b
}

// Input is an opened log file, read as UTF-8 text.
type Input struct {
	r io.Reader
	f *os.File
	// zr is the decompressor, closed with the file.
	zr io.Closer
	// Compression is "gzip", "zstd" or "" (none).
	Compression string
	// Encoding is the text's encoding when it was not plain UTF-8
	// (UTF-16LE from PowerShell's `>`, a UTF-8 byte-order mark).
	Encoding textenc.Encoding
}

func (in *Input) Read(b []byte) (int, error) { return in.r.Read(b) }

// Close closes the decompressor and the file.
func (in *Input) Close() error {
	if in.zr != nil {
		in.zr.Close()
	}
	return in.f.Close()
}

// MaxZstdWindow bounds the memory a zstd frame may ask for: the zstd
// tool's own default limit (--memory=128MB), which every file it wrote
// without --long=28 or more stays under.
const MaxZstdWindow = 128 << 20

// Open opens a log file, transparently decompressing gzip and zstd
// (recognised by their magic bytes, not the name) and decoding UTF-16 and
// UTF-32 (textenc.Decode) to UTF-8. The file must be a regular file: it is
// opened without blocking and checked before anything is read, so a FIFO
// with no writer or a device returns ErrNotRegular instead of hanging or
// reading forever. A damaged compressed stream reads as ErrCorrupt.
func Open(name string) (*Input, error) {
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
	in := &Input{f: f}
	file := &ioErrors{r: &sparseFile{f: f}}
	br := bufio.NewReaderSize(file, 64<<10)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
		}
		in.zr, in.Compression = zr, "gzip"
		br = bufio.NewReaderSize(&decompressed{zr, file, "gzip"}, 64<<10)
	case bytes.Equal(magic, zstdMagic):
		// One goroutine, no read-ahead: a log is read once, front to back.
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(MaxZstdWindow))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
		}
		in.zr, in.Compression = zstdCloser{zr}, "zstd"
		br = bufio.NewReaderSize(&decompressed{zr, file, "zstd"}, 64<<10)
	}
	in.r, in.Encoding = textenc.Decode(br)
	return in, nil
}

// sparseFile reads a file's holes as NUL bytes without reading them: a
// 3 GB hole (a crash's sparse tail, a truncate) costs a memory clear
// instead of seconds of the kernel zeroing page cache it then keeps. The
// holes come from lseek's SEEK_DATA and SEEK_HOLE; where a filesystem
// does not track them, the whole file is one data segment and is read.
type sparseFile struct {
	f   *os.File
	off int64
	// [off, end) is a hole when hole, else data; looked up again at end.
	end  int64
	hole bool
}

func (s *sparseFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if s.off >= s.end {
		s.segment()
	}
	n := int(min(int64(len(p)), s.end-s.off))
	if n == 0 {
		return 0, io.EOF
	}
	if s.hole {
		clear(p[:n])
		s.off += int64(n)
		return n, nil
	}
	n, err := s.f.ReadAt(p[:n], s.off)
	s.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// segment looks up the data or hole that starts at off.
func (s *sparseFile) segment() {
	fd := int(s.f.Fd())
	data, err := unix.Seek(fd, s.off, unix.SEEK_DATA)
	switch {
	case err == unix.ENXIO:
		// No data after off: a hole to the end of the file, or the end.
		s.hole, s.end = true, s.off
		if st, err := s.f.Stat(); err == nil {
			s.end = max(s.off, st.Size())
		}
	case err != nil:
		// No hole support: read to the end as data.
		s.hole, s.end = false, math.MaxInt64
	case data > s.off:
		s.hole, s.end = true, data
	default:
		s.hole = false
		if s.end, err = unix.Seek(fd, data, unix.SEEK_HOLE); err != nil {
			s.end = math.MaxInt64
		}
	}
}

// zstdMagic starts every zstd frame (RFC 8878).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

type zstdCloser struct{ d *zstd.Decoder }

func (z zstdCloser) Close() error { z.d.Close(); return nil }

// ioErrors remembers the file's own read error, so that a decompressor's
// failure can be told apart from the disk's.
type ioErrors struct {
	r   io.Reader
	err error
}

func (e *ioErrors) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// decompressed reports a damaged stream as ErrCorrupt: bad input, not a
// failed run. An error of the file underneath stays what it is.
type decompressed struct {
	r    io.Reader
	file *ioErrors
	kind string
}

func (d *decompressed) Read(b []byte) (int, error) {
	n, err := d.r.Read(b)
	if err == nil || err == io.EOF {
		return n, err
	}
	if d.file.err != nil {
		return n, d.file.err
	}
	if errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return n, fmt.Errorf("%w: its zstd window is larger than the %d MiB perfscope reads (compressed with --long?): decompress it with zstd -d --memory=2GB and name the result", ErrCorrupt, MaxZstdWindow>>20)
	}
	return n, fmt.Errorf("%w: %s: %v", ErrCorrupt, d.kind, err)
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

// ParseFiles parses files in order as one log into p (then flushes it).
// It stops with ctx's error when ctx is cancelled.
func ParseFiles(ctx context.Context, p *Parser, files []string) error {
	for _, name := range files {
		r, err := Open(name)
		if err != nil {
			return err
		}
		if r.Compression != "" || r.Encoding != textenc.Plain {
			p.Stats.Decoded = append(p.Stats.Decoded, Decoding{File: name, Compression: r.Compression, Encoding: string(r.Encoding)})
		}
		err = p.ParseNamed(name, safeio.ContextReader(ctx, r))
		r.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
	}
	p.Flush()
	return nil
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
