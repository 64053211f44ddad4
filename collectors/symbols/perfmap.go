package symbols

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// PerfMap is a JIT's /tmp/perf-<pid>.map: "START SIZE name" lines in hex,
// written by JVMs (jcmd Compiler.perfmap, -XX:+DumpPerfMapAtExit,
// perf-map-agent), Node (--perf-basic-prof) and others.
type PerfMap struct {
	entries []perfMapEntry
}

type perfMapEntry struct {
	start, end uint64
	name       string
}

// Len is the number of entries.
func (m *PerfMap) Len() int {
	if m == nil {
		return 0
	}
	return len(m.entries)
}

// Resolve names the JIT-compiled code containing addr.
func (m *PerfMap) Resolve(addr uint64) (string, bool) {
	if m == nil {
		return "", false
	}
	i := sort.Search(len(m.entries), func(i int) bool { return m.entries[i].start > addr }) - 1
	if i < 0 || addr >= m.entries[i].end {
		return "", false
	}
	return m.entries[i].name, true
}

// parsePerfMap reads a perf map. Code can be freed and its address reused,
// so the same start may appear twice: the later line is the newer code and
// wins.
func parsePerfMap(r io.Reader) (*PerfMap, error) {
	var entries []perfMapEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		start, rest, ok1 := strings.Cut(text, " ")
		size, name, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("perf map line %d: want \"START SIZE name\", got %q", line, text)
		}
		s, err := strconv.ParseUint(strings.TrimPrefix(start, "0x"), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("perf map line %d: start %q: %w", line, start, err)
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(size, "0x"), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("perf map line %d: size %q: %w", line, size, err)
		}
		entries = append(entries, perfMapEntry{start: s, end: s + n, name: strings.TrimSpace(name)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read perf map: %w", err)
	}
	// Stable sort keeps file order among equal starts; then keep the last.
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].start < entries[j].start })
	out := entries[:0]
	for _, e := range entries {
		if len(out) > 0 && out[len(out)-1].start == e.start {
			out[len(out)-1] = e
			continue
		}
		out = append(out, e)
	}
	return &PerfMap{entries: out}, nil
}
