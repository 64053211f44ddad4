// Package symbols names the instruction addresses of sampled stacks: kernel
// addresses from /proc/kallsyms, native user addresses from the ELF symbol
// tables of the files each process maps, and JIT-compiled code from the
// process's /tmp/perf-<pid>.map. Files are read through /proc/PID/root so
// that processes in containers resolve against their own binaries.
//
// Frame names follow FlameGraph's conventions: kernel frames end in "_[k]",
// JIT frames in "_[j]", and an address nothing names is "[unknown]" followed
// by the module it lies in, e.g. "[unknown] (libfoo.so)".
package symbols

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// FS reads files below Root: "/" on a live system, a fixture directory in
// tests.
type FS struct {
	Root string
}

// Default reads the live system.
var Default = FS{Root: "/"}

func (f FS) path(p string) string { return filepath.Join(f.Root, p) }

// CallSites turns a leaf-first stack of return addresses, as the kernel's
// stack walkers record them, into addresses inside the calls: a return
// address is the instruction after a call, which belongs to the next
// function when the call is a function's last instruction (calls to
// noreturn functions). The leaf is the interrupted (or switched-out)
// instruction itself and stays as it is.
func CallSites(stack []uint64) []uint64 {
	out := make([]uint64, len(stack))
	for i, a := range stack {
		if i > 0 && a > 0 {
			a--
		}
		out[i] = a
	}
	return out
}

// Frame name suffixes and placeholders.
const (
	KernelSuffix = "_[k]"
	JITSuffix    = "_[j]"
	Unknown      = "[unknown]"
)

// Symbolizer names addresses, caching what it read: kallsyms once, each
// binary's symbols once per (device, inode), each process's mappings and
// perf map once until Forget or Prune. It is safe for concurrent use.
//
// A profiler that runs for weeks (perfscope serve) sees every process the
// node ever runs: it calls Prune between windows, which drops the processes
// that have exited and the binaries no remaining process maps, so the cache
// follows what runs now. The cache also never holds more than
// MaxProcesses processes.
type Symbolizer struct {
	fs FS

	mu         sync.Mutex
	kernelDone bool
	kernel     *KernelSymbols
	kernelErr  error
	binaries   map[binaryKey]*Binary // nil value: unreadable, do not retry
	procs      map[int]*process
}

type binaryKey struct {
	dev   string
	inode uint64
}

// MaxProcesses bounds the processes a Symbolizer caches at once. At the
// bound, caching another first drops those that have exited, then, if all
// are alive, one of them (its mappings are read again when next needed).
const MaxProcesses = 16384

// process is what one pid needs for symbolization.
type process struct {
	// start is the process's start time in clock ticks since boot when
	// its mappings were read (0: unknown): with the pid, it tells the
	// process from a later one given the same pid.
	start   uint64
	maps    []Mapping
	mapsErr error
	perfMap *PerfMap // nil when the process has none
}

// New returns a symbolizer reading below fs.
func New(fs FS) *Symbolizer {
	return &Symbolizer{fs: fs, binaries: map[binaryKey]*Binary{}, procs: map[int]*process{}}
}

// KernelSymbols loads /proc/kallsyms once.
func (s *Symbolizer) KernelSymbols() (*KernelSymbols, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kernelSymbols()
}

func (s *Symbolizer) kernelSymbols() (*KernelSymbols, error) {
	if !s.kernelDone {
		s.kernelDone = true
		f, err := os.Open(s.fs.path("/proc/kallsyms"))
		if err != nil {
			s.kernelErr = fmt.Errorf("open kallsyms: %w", err)
		} else {
			s.kernel, s.kernelErr = parseKallsyms(f)
			f.Close()
		}
	}
	return s.kernel, s.kernelErr
}

// Warnings say why some frames could not be named, in one sentence each, for
// the report. They are empty when nothing stands in the way.
func (s *Symbolizer) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if !s.kernelDone {
		return nil
	}
	switch {
	case s.kernelErr != nil:
		out = append(out, fmt.Sprintf("kernel frames are unnamed: %v", s.kernelErr))
	case s.kernel.Restricted:
		out = append(out, "kernel frames are unnamed because /proc/kallsyms shows zero addresses to this user (run as root, or lower kernel.kptr_restrict)")
	}
	return out
}

// Kernel names kernel addresses; out[i] names addrs[i].
func (s *Symbolizer) Kernel(addrs []uint64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, _ := s.kernelSymbols()
	out := make([]string, len(addrs))
	for i, a := range addrs {
		name, _, ok := k.Resolve(a)
		if !ok {
			name = Unknown
		}
		out[i] = name + KernelSuffix
	}
	return out
}

// User names addresses in process pid's address space; out[i] names
// addrs[i]. The process must still be alive the first time it is asked
// about (its mappings are read then); later calls use the cache.
func (s *Symbolizer) User(pid int, addrs []uint64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.process(pid)
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = s.userFrame(pid, p, a)
	}
	return out
}

func (s *Symbolizer) userFrame(pid int, p *process, addr uint64) string {
	m, ok := findMapping(p.maps, addr)
	if ok && m.FileBacked() {
		if b := s.binary(pid, m); b != nil {
			off := addr - m.Start + m.Offset
			if name, ok := b.Resolve(b.FileOffsetToAddr(off)); ok {
				return name
			}
		}
		return Unknown + " (" + m.Module() + ")"
	}
	// JIT code lives in anonymous executable memory (or, when the maps
	// could not be read, anywhere): that is what perf maps describe.
	if name, ok := p.perfMap.Resolve(addr); ok {
		return name + JITSuffix
	}
	if ok {
		return Unknown + " (" + m.Module() + ")"
	}
	return Unknown
}

// process reads pid's mappings and perf map on first use.
func (s *Symbolizer) process(pid int) *process {
	if p, ok := s.procs[pid]; ok {
		return p
	}
	if len(s.procs) >= MaxProcesses {
		s.prune()
		for other := range s.procs {
			if len(s.procs) < MaxProcesses {
				break
			}
			delete(s.procs, other)
		}
	}
	p := &process{}
	s.procs[pid] = p
	p.start, _ = s.proc().ProcessStartTicks(pid)
	dir := s.fs.path("/proc/" + strconv.Itoa(pid))
	if f, err := os.Open(dir + "/maps"); err != nil {
		p.mapsErr = err
	} else {
		p.maps, p.mapsErr = parseMaps(f)
		f.Close()
	}
	p.perfMap, _ = s.readPerfMap(pid)
	return p
}

func (s *Symbolizer) proc() procfs.FS { return procfs.FS{Root: s.fs.Root} }

// Prune drops the cached processes that have exited since their mappings
// were read (or whose pid now names another process), then the binaries
// no remaining process maps, and returns how many processes it dropped.
// Call it once the frames of the exited processes have been named: a
// continuous profiler does between windows.
func (s *Symbolizer) Prune() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prune()
}

func (s *Symbolizer) prune() int {
	dropped := 0
	for pid, p := range s.procs {
		start, err := s.proc().ProcessStartTicks(pid)
		if err != nil || (p.start != 0 && start != p.start) {
			delete(s.procs, pid)
			dropped++
		}
	}
	mapped := map[binaryKey]bool{}
	for _, p := range s.procs {
		for _, m := range p.maps {
			mapped[binaryKey{m.Dev, m.Inode}] = true
		}
	}
	for key := range s.binaries {
		if !mapped[key] {
			delete(s.binaries, key)
		}
	}
	return dropped
}

// Cached is what the cache holds: the processes (pids) and the number of
// binaries.
func (s *Symbolizer) Cached() (pids []int, binaries int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range s.procs {
		pids = append(pids, pid)
	}
	return pids, len(s.binaries)
}

// PerfMapPath is where process pid's JIT writes its perf map, as seen from
// this (host) mount namespace: the file is named after the pid inside the
// process's own pid namespace and lives in its own /tmp.
func (s *Symbolizer) PerfMapPath(pid int) string {
	nspid := pid
	// The last NStgid is the innermost namespace's pid; kernels before 4.1
	// lack the line, and then the host pid is the only pid.
	if st, err := s.proc().Status(pid); err == nil && len(st.NStgid) > 0 {
		nspid = st.NStgid[len(st.NStgid)-1]
	}
	return s.fs.path(fmt.Sprintf("/proc/%d/root/tmp/perf-%d.map", pid, nspid))
}

// readPerfMap returns nil, nil when the process has no perf map.
func (s *Symbolizer) readPerfMap(pid int) (*PerfMap, error) {
	f, err := os.Open(s.PerfMapPath(pid))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parsePerfMap(f)
}

// binary returns m's symbols, reading the file through the process's root
// on first use. Deleted files (upgraded packages, replaced binaries) are
// still reachable through /proc/PID/map_files while they are mapped.
func (s *Symbolizer) binary(pid int, m Mapping) *Binary {
	key := binaryKey{m.Dev, m.Inode}
	if b, ok := s.binaries[key]; ok {
		return b
	}
	candidates := []string{
		s.fs.path(fmt.Sprintf("/proc/%d/root%s", pid, m.Path)),
		s.fs.path(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End)),
		// Once a short-lived process has exited, its /proc entries are
		// gone; the same file is often still there on the host. The inode
		// check below keeps a container's or a replaced file out.
		s.fs.path(m.Path),
	}
	var b *Binary
	for _, path := range candidates {
		if b = readBinaryFile(path, m.Inode); b != nil {
			break
		}
	}
	s.binaries[key] = b
	return b
}

// readBinaryFile reads path's symbols if it is the file with the given
// inode (the one the process mapped), else returns nil.
func readBinaryFile(path string, inode uint64) *Binary {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Ino != inode {
		return nil
	}
	b, err := ReadBinary(f)
	if err != nil {
		return nil
	}
	return b
}

// Prefetch reads pid's mappings and perf map now, while it runs, so that
// its frames still resolve if it exits before the stacks are named.
// Profilers call it for every pid they see while sampling.
func (s *Symbolizer) Prefetch(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.process(pid)
}

// Forget drops pid's cached mappings and perf map (binaries stay cached):
// call it when the pid may have exited and been reused, or to pick up a
// perf map written since.
func (s *Symbolizer) Forget(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.procs, pid)
}
