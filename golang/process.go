package golang

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoProcess: the pid names no running process.
var ErrNoProcess = errors.New("no such process")

// FS reads a process below Root ("/" by default): /proc/PID/exe, maps,
// environ and mem. Tests point it at fixtures.
type FS struct {
	Root string
}

func (fs FS) path(pid int, name string) string {
	root := fs.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "proc", strconv.Itoa(pid), name)
}

// Process is a running Go program: its binary, where the binary is
// mapped, and what its environment says about the GC.
type Process struct {
	PID int
	// Exe is the path the kernel resolves to the program's file, also
	// for a program in a container (/proc/PID/exe): uprobes attach there.
	Exe string
	// ExeName is the file's path as the program sees it (inside its
	// container).
	ExeName string
	Binary  *Binary
	// Bias is what the loader added to the binary's link-time addresses
	// (0 unless PIE).
	Bias uint64
	// Env holds the GC's variables from /proc/PID/environ: GOGC,
	// GOMEMLIMIT, GODEBUG, GOMAXPROCS (absent ones are not keys).
	Env map[string]string
	// EnvUnreadable says why the environment could not be read.
	EnvUnreadable string

	fs       FS
	exeMaps  []mapping
	maps     []mapping
	closeExe func() error
}

// OpenProcess reads pid's binary and mappings. Errors wrap ErrNoProcess,
// ErrNotGo or ErrUnsupportedGo. Close releases the binary.
func OpenProcess(fs FS, pid int) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	exe := fs.path(pid, "exe")
	if _, err := os.Stat(fs.path(pid, "stat")); err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	name, err := os.Readlink(exe)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("pid %d has no executable (a kernel thread, or it exited): %w", pid, ErrNotGo)
		}
		return nil, fmt.Errorf("pid %d: read its executable: %w", pid, err)
	}
	b, closeFn, err := OpenBinary(exe)
	if err != nil {
		return nil, fmt.Errorf("pid %d (%s): %w", pid, strings.TrimSuffix(name, " (deleted)"), err)
	}
	p := &Process{PID: pid, Exe: exe, ExeName: name, Binary: b, fs: fs, closeExe: closeFn}
	st, err := os.Stat(exe)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	f, err := os.Open(fs.path(pid, "maps"))
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	maps, err := parseMaps(f)
	f.Close()
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	ino := uint64(0)
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = s.Ino
	}
	p.maps = maps
	for _, m := range maps {
		if m.inode == ino && ino != 0 {
			p.exeMaps = append(p.exeMaps, m)
		}
	}
	if p.Bias, err = b.loadBias(p.exeMaps); err != nil {
		p.Close()
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	p.Env, err = readEnviron(fs.path(pid, "environ"))
	if err != nil {
		p.EnvUnreadable = err.Error()
	}
	return p, nil
}

// Close releases the binary.
func (p *Process) Close() error {
	if p == nil || p.closeExe == nil {
		return nil
	}
	err := p.closeExe()
	p.closeExe = nil
	return err
}

// Alive says whether the process still runs the same binary.
func (p *Process) Alive() bool {
	b, err := os.ReadFile(p.fs.path(p.PID, "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end, offset uint64
	perms              string
	inode              uint64
	path               string
}

func parseMaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			return nil, fmt.Errorf("maps line %d: %q", n, sc.Text())
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps line %d: address range %q", n, f[0])
		}
		var m mapping
		var err error
		if m.start, err = strconv.ParseUint(lo, 16, 64); err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		if m.end, err = strconv.ParseUint(hi, 16, 64); err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		if m.offset, err = strconv.ParseUint(f[2], 16, 64); err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		m.perms = f[1]
		if m.inode, err = strconv.ParseUint(f[4], 10, 64); err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		if len(f) > 5 {
			m.path = strings.Join(f[5:], " ")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// loadBias is the difference between where the binary's executable
// segment is mapped and its link-time address.
func (b *Binary) loadBias(maps []mapping) (uint64, error) {
	for _, m := range maps {
		if !strings.Contains(m.perms, "x") {
			continue
		}
		for _, p := range b.loads {
			if p.Flags&1 == 0 { // PF_X
				continue
			}
			// The mapping starts at a page-aligned file offset inside
			// the segment.
			if m.offset >= p.Off&^0xfff && m.offset < p.Off+p.Filesz {
				linked := p.Vaddr - p.Off + m.offset
				if !b.PIE && m.start != linked {
					return 0, fmt.Errorf("the executable is mapped at %#x, linked at %#x, and is not position independent", m.start, linked)
				}
				return m.start - linked, nil
			}
		}
	}
	return 0, errors.New("the executable's code is not mapped (the process is exiting?)")
}

// readEnviron keeps the variables that steer the Go runtime's GC.
func readEnviron(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseEnviron(b), nil
}

func parseEnviron(b []byte) map[string]string {
	env := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS":
			env[k] = v
		}
	}
	return env
}

// ReadUint64 reads a word of the running program at a link-time address.
func (p *Process) ReadUint64(addr uint64) (uint64, error) { return p.readWord(addr + p.Bias) }

// readWord reads a word at a run-time address (/proc/PID/mem: reading
// never stops or changes the program).
func (p *Process) readWord(addr uint64) (uint64, error) {
	f, err := os.Open(p.fs.path(p.PID, "mem"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf [8]byte
	if _, err := f.ReadAt(buf[:], int64(addr)); err != nil {
		return 0, fmt.Errorf("read pid %d's memory at %#x: %w", p.PID, addr, err)
	}
	return binary.LittleEndian.Uint64(buf[:]), nil
}

// Symbolize names a runtime address of the process: a frame of the
// binary, or the name of the mapping it falls in (a cgo library, the
// vdso) with ok false.
func (p *Process) Symbolize(pc uint64) (Frame, bool) {
	if pc >= p.Bias {
		if f, ok := p.Binary.Lookup(pc - p.Bias); ok {
			return f, true
		}
	}
	for _, m := range p.maps {
		if pc >= m.start && pc < m.end && m.path != "" {
			return Frame{Function: "[" + filepath.Base(m.path) + "]"}, false
		}
	}
	return Frame{Function: "[unknown]"}, false
}
