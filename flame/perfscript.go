package flame

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// RootFrames asks readers to put what a sample carries about where it ran
// below its stack, so that one graph splits by process, thread or CPU.
// Inputs that do not carry the information (folded stacks) ignore it.
type RootFrames struct {
	// Process adds "comm-pid" (FlameGraph's stackcollapse-perf --pid).
	Process bool
	// Thread adds "comm-pid/tid" (stackcollapse-perf --tid); it implies Process.
	Thread bool
	// CPU adds "[cpu N]".
	CPU bool
}

// sampleOrigin is what a sample says about where it ran; -1 when absent.
type sampleOrigin struct {
	comm          string
	pid, tid, cpu int64
}

// appendRoots appends the root frames o asks for, CPU outermost.
func (o RootFrames) appendRoots(frames []string, s sampleOrigin) []string {
	if o.CPU && s.cpu >= 0 {
		frames = append(frames, "[cpu "+strconv.FormatInt(s.cpu, 10)+"]")
	}
	switch {
	case o.Thread && s.pid >= 0 && s.tid >= 0:
		frames = append(frames, s.comm+"-"+strconv.FormatInt(s.pid, 10)+"/"+strconv.FormatInt(s.tid, 10))
	case (o.Process || o.Thread) && s.pid >= 0:
		frames = append(frames, s.comm+"-"+strconv.FormatInt(s.pid, 10))
	case (o.Process || o.Thread) && s.comm != "":
		frames = append(frames, s.comm)
	}
	return frames
}

// perfHeader matches a sample's first line in `perf script` output:
// "comm  pid/tid [cpu] time: [period] event:", where comm may contain
// spaces and pid/tid, cpu and time are each optional (perf script -F).
var perfHeader = regexp.MustCompile(`^\s*(.*?)\s+(\d+)(?:/(\d+))?\s+(?:\[(\d+)\]\s+)?(?:\d+\.\d+:)?`)

// perfJITMap matches the symbol file of a JIT that writes /tmp/perf-PID.map.
var perfJITMap = regexp.MustCompile(`/perf-\d+\.map$`)

// ReadPerfScript reads the output of `perf script` (samples with call
// chains, as recorded with `perf record -g`), one sample per stack, like
// FlameGraph's stackcollapse-perf: offsets are dropped, kernel frames get
// "_[k]", frames from a JIT's /tmp/perf-PID.map get "_[j]", and
// unresolved frames become "[module]" (or "[unknown]").
func ReadPerfScript(r io.Reader, roots RootFrames) (*Profile, error) {
	p := New(Samples)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), MaxLineBytes)
	var (
		leafFirst []string
		origin    sampleOrigin
		inSample  bool
		lineNo    int
		frames    []string
		samples   int
	)
	flush := func() {
		if !inSample {
			return
		}
		frames = roots.appendRoots(frames[:0], origin)
		for i := len(leafFirst) - 1; i >= 0; i-- {
			frames = append(frames, leafFirst[i])
		}
		if len(frames) == 0 {
			frames = append(frames, "[no stack]")
		}
		p.Add(frames, 1)
		samples++
		leafFirst = leafFirst[:0]
		inSample = false
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if line[0] == '#' && !inSample {
			continue // perf script -header comments
		}
		if !inSample {
			m := perfHeader.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("perf script line %d: not a sample header (want \"comm pid/tid [cpu] time: event:\")", lineNo)
			}
			origin = sampleOrigin{comm: strings.TrimSpace(m[1]), pid: atoiOr(m[2], -1), tid: atoiOr(m[3], -1), cpu: atoiOr(m[4], -1)}
			if m[3] == "" { // "comm tid" without -F pid: the number is the thread
				origin.tid = origin.pid
			}
			inSample = true
			continue
		}
		name, err := perfFrame(line)
		if err != nil {
			return nil, fmt.Errorf("perf script line %d: %w", lineNo, err)
		}
		if len(leafFirst) >= MaxDepth {
			return nil, fmt.Errorf("perf script line %d: %w", lineNo, ErrTooDeep)
		}
		leafFirst = append(leafFirst, name)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read perf script: %w", err)
	}
	flush()
	if samples == 0 {
		return nil, fmt.Errorf("perf script input has no samples")
	}
	return p, p.Err()
}

func atoiOr(s string, def int64) int64 {
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return def
	}
	return v
}

// perfFrame turns "\t ffffffff8102 do_syscall_64+0x5b ([kernel.kallsyms])"
// into a frame name.
func perfFrame(line string) (string, error) {
	line = strings.TrimSpace(line)
	addrEnd := strings.IndexAny(line, " \t")
	if addrEnd <= 0 {
		return "", fmt.Errorf("not a stack frame (want \"address symbol (module)\")")
	}
	addr, err := strconv.ParseUint(line[:addrEnd], 16, 64)
	if err != nil {
		return "", fmt.Errorf("not a stack frame: bad address %q", line[:addrEnd])
	}
	rest := strings.TrimSpace(line[addrEnd:])
	sym, module := rest, ""
	if strings.HasSuffix(rest, ")") {
		if i := strings.LastIndex(rest, " ("); i >= 0 {
			sym, module = strings.TrimSpace(rest[:i]), rest[i+2:len(rest)-1]
		} else if strings.HasPrefix(rest, "(") {
			sym, module = "", rest[1:len(rest)-1]
		}
	}
	if i := strings.LastIndex(sym, "+0x"); i > 0 {
		sym = sym[:i]
	}
	kernel := addr >= 0xffff800000000000 || module == "[kernel.kallsyms]" ||
		strings.HasPrefix(module, "[") && !strings.HasPrefix(module, "[unknown") && module != "[vdso]" && module != "[vsyscall]"
	if sym == "" || sym == "[unknown]" {
		switch {
		case module != "" && module != "[unknown]":
			sym = "[" + strings.Trim(baseName(module), "[]") + "]"
		default:
			sym = "[unknown]"
		}
		if kernel {
			sym += "_[k]"
		}
		return sym, nil
	}
	switch {
	case hasAnnotation(sym):
	case kernel:
		sym += "_[k]"
	case perfJITMap.MatchString(module):
		sym += "_[j]"
	}
	return sym, nil
}

// hasAnnotation reports a FlameGraph "_[x]" suffix.
func hasAnnotation(name string) bool {
	n := len(name)
	return n > 4 && name[n-4] == '_' && name[n-3] == '[' && name[n-1] == ']'
}

// looksLikePerfScript reports whether the start of an input is `perf
// script` output: a header line followed by an indented hex address.
func looksLikePerfScript(head []byte) bool {
	lines := bytes.Split(head, []byte("\n"))
	for i := 0; i+1 < len(lines); i++ {
		l := lines[i]
		if len(bytes.TrimSpace(l)) == 0 || l[0] == '#' {
			continue
		}
		next := lines[i+1]
		if len(next) == 0 || (next[0] != '\t' && next[0] != ' ') {
			return false
		}
		f := bytes.Fields(next)
		if len(f) == 0 {
			return false
		}
		_, err := strconv.ParseUint(string(f[0]), 16, 64)
		return err == nil && perfHeader.Match(l)
	}
	return false
}
