package symbols

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Mapping is one executable region of a process's address space, from
// /proc/PID/maps.
type Mapping struct {
	Start, End uint64
	// Offset is the file offset mapped at Start.
	Offset uint64
	// Dev and Inode identify the file across mount namespaces; together
	// they key the per-binary symbol cache.
	Dev   string
	Inode uint64
	// Path as the process sees it (inside its mount namespace); "" for
	// anonymous memory, "[vdso]" and the like for special regions.
	Path    string
	Deleted bool
}

// Module is the short name frames carry: the file's base name, or the
// special region's name.
func (m Mapping) Module() string {
	switch {
	case m.Path == "":
		return "[anon]"
	case strings.HasPrefix(m.Path, "["):
		return m.Path
	}
	return filepath.Base(m.Path)
}

// FileBacked is true for mappings of a regular file whose symbols can be
// read.
func (m Mapping) FileBacked() bool {
	return m.Inode != 0 && strings.HasPrefix(m.Path, "/")
}

// parseMaps keeps the executable mappings of /proc/PID/maps, sorted by
// address: only they can appear in a stack.
func parseMaps(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		// addr perms offset dev inode [path]; path may contain spaces.
		f := strings.SplitN(sc.Text(), " ", 6)
		if len(f) < 5 {
			return nil, fmt.Errorf("maps line %d: too few fields: %q", line, sc.Text())
		}
		if len(f[1]) < 3 || f[1][2] != 'x' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps line %d: address range %q", line, f[0])
		}
		var m Mapping
		var err error
		if m.Start, err = strconv.ParseUint(lo, 16, 64); err != nil {
			return nil, fmt.Errorf("maps line %d: %w", line, err)
		}
		if m.End, err = strconv.ParseUint(hi, 16, 64); err != nil {
			return nil, fmt.Errorf("maps line %d: %w", line, err)
		}
		if m.Offset, err = strconv.ParseUint(f[2], 16, 64); err != nil {
			return nil, fmt.Errorf("maps line %d: offset: %w", line, err)
		}
		m.Dev = f[3]
		if m.Inode, err = strconv.ParseUint(f[4], 10, 64); err != nil {
			return nil, fmt.Errorf("maps line %d: inode: %w", line, err)
		}
		if len(f) == 6 {
			m.Path = strings.TrimLeft(f[5], " ")
			if p, ok := strings.CutSuffix(m.Path, " (deleted)"); ok {
				m.Path, m.Deleted = p, true
			}
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out, nil
}

// findMapping returns the mapping containing addr.
func findMapping(maps []Mapping, addr uint64) (Mapping, bool) {
	i := sort.Search(len(maps), func(i int) bool { return maps[i].Start > addr }) - 1
	if i < 0 || addr >= maps[i].End {
		return Mapping{}, false
	}
	return maps[i], true
}
