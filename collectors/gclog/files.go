package gclog

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrNotFound is returned when a named log does not exist.
var ErrNotFound = errors.New("GC log not found")

// RotatedSet expands name to the files of its rotation set, oldest first.
//
// JDK 8 (-XX:+UseGCLogFileRotation) writes gc.log.0, gc.log.1, ... and
// marks the one in use gc.log.N.current; when it wraps around, numbers no
// longer say which is oldest. JDK 9+ writes gc.log and renames it to
// gc.log.0, gc.log.1, ... on rotation, also wrapping. So the order is by
// modification time (the file written last was closed last), with the
// current file (gc.log or *.current) always last and the number breaking
// ties. Compressed members (gc.log.3.gz) belong to the set too.
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
	type member struct {
		path    string
		num     int
		current bool
		mtime   int64
	}
	var ms []member
	prefix := filepath.Base(base)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
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
	sort.SliceStable(ms, func(a, b int) bool {
		if ms[a].current != ms[b].current {
			return !ms[a].current
		}
		if ms[a].mtime != ms[b].mtime {
			return ms[a].mtime < ms[b].mtime
		}
		return ms[a].num < ms[b].num
	})
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.path
	}
	return out, nil
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
// its magic bytes, not its name).
func Open(name string) (io.ReadCloser, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return &gzFile{zr, f}, nil
	}
	return &plainFile{br, f}, nil
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
		err = p.Parse(ctxReader{ctx, r})
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
