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

	mu sync.Mutex
	// openNamer, when set, opens a namer of kernel addresses (the
	// kernel's own lookup); named caches its answers, namerErr is why it
	// stopped being asked.
	openNamer  func() (KernelNamer, error)
	named      map[uint64]KernelName
	namerErr   error
	kernelDone bool
	kernel     *KernelSymbols
	kernelErr  error
	binaries   map[binaryKey]*Binary // nil value: unreadable, do not retry
	procs      map[int]*process
}

// KernelNamer names kernel addresses without /proc/kallsyms: perfscope's
// BPF namer (probes/ksym) asks the kernel's own symbol lookup for just
// the addresses a run sampled. out[i] names addrs[i]. It holds kernel
// objects until closed.
type KernelNamer interface {
	NameKernel(addrs []uint64) ([]KernelName, error)
	Close() error
}

// KernelName is what a kernel address resolved to: its function and module
// ("" for the kernel image); OK is false when no symbol covers it.
type KernelName struct {
	Name, Module string
	OK           bool
}

// maxNamed bounds the cache of named kernel addresses: a continuous
// profile samples new addresses for as long as it runs; past the bound the
// cache starts again (Prune).
const maxNamed = 1 << 16

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

// UseKernelNamer makes s name kernel addresses with namers that open
// opens, and read /proc/kallsyms only if that fails. Each call that meets
// addresses not named before opens one, names them all and closes it
// again (a millisecond), so nothing stays loaded between calls: callers
// name a whole profile's or lock section's addresses in one KernelNames
// call before naming stack by stack from the cache. Call it before the
// first kernel address is named.
func (s *Symbolizer) UseKernelNamer(open func() (KernelNamer, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.openNamer = open
	s.named = map[uint64]KernelName{}
}

// KernelNames names kernel addresses: with the kernel namer when there is
// one and it works, else from /proc/kallsyms (read and indexed once, on
// the first call that needs it). out[i] names addrs[i].
func (s *Symbolizer) KernelNames(addrs []uint64) []KernelName {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kernelNames(addrs)
}

func (s *Symbolizer) kernelNames(addrs []uint64) []KernelName {
	out := make([]KernelName, len(addrs))
	if s.openNamer != nil && s.namerErr == nil {
		var missing []uint64
		seen := map[uint64]bool{}
		for _, a := range addrs {
			if _, ok := s.named[a]; !ok && !seen[a] {
				seen[a] = true
				missing = append(missing, a)
			}
		}
		if len(missing) > 0 {
			names, err := s.nameKernel(missing)
			if err != nil {
				s.namerErr = err // from now on, kallsyms
			} else {
				for i, a := range missing {
					s.named[a] = names[i]
				}
			}
		}
		if s.namerErr == nil {
			for i, a := range addrs {
				out[i] = s.named[a]
			}
			return out
		}
	}
	k, _ := s.kernelSymbols()
	for i, a := range addrs {
		name, module, ok := k.Resolve(a)
		out[i] = KernelName{Name: name, Module: module, OK: ok}
	}
	return out
}

// nameKernel opens a namer, names addrs and closes it.
func (s *Symbolizer) nameKernel(addrs []uint64) ([]KernelName, error) {
	n, err := s.openNamer()
	if err != nil {
		return nil, err
	}
	names, err := n.NameKernel(addrs)
	if cerr := n.Close(); err == nil {
		err = cerr
	}
	if err == nil && len(names) != len(addrs) {
		err = fmt.Errorf("named %d of %d addresses", len(names), len(addrs))
	}
	return names, err
}

// KernelTable names addrs in one batch and returns the answers keyed by
// address, for callers that resolve one address at a time afterwards
// (lock stacks).
func (s *Symbolizer) KernelTable(addrs []uint64) KernelTable {
	names := s.KernelNames(addrs)
	t := make(KernelTable, len(addrs))
	for i, a := range addrs {
		t[a] = names[i]
	}
	return t
}

// KernelTable is kernel addresses named in advance.
type KernelTable map[uint64]KernelName

// Resolve names addr if it was in the batch.
func (t KernelTable) Resolve(addr uint64) (name, module string, ok bool) {
	n := t[addr]
	return n.Name, n.Module, n.OK
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
		return nil // the namer named every kernel frame, or none was asked for
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
	out := make([]string, len(addrs))
	for i, n := range s.kernelNames(addrs) {
		name := n.Name
		if !n.OK {
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
		b := s.binary(pid, m)
		if b != nil {
			sym := b.FileOffsetToAddr(addr - m.Start + m.Offset)
			if !b.knows(sym) {
				// Read for other addresses (PrepareUser): the whole
				// table now.
				b = s.readBinary(pid, m, nil)
				s.binaries[binaryKey{m.Dev, m.Inode}] = b
			}
			if b != nil {
				if name, ok := b.Resolve(sym); ok {
					return name
				}
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
	if len(s.named) > maxNamed {
		s.named = map[uint64]KernelName{}
	}
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
	b := s.readBinary(pid, m, nil)
	s.binaries[key] = b
	return b
}

// PrepareUser names the user addresses of a whole profile, by process,
// before its stacks are named one by one (User): each binary they lie in
// that is not cached yet is read for just its sampled addresses
// (ReadBinarySome) — one pass over its symbol tables, no table of every
// function built or sorted. A binary met again for addresses it was not
// read for (the next window of a continuous profile) is then read whole
// and cached, as User does without PrepareUser.
func (s *Symbolizer) PrepareUser(byPID map[int][]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type binaryAddrs struct {
		pid   int
		m     Mapping
		files []uint64 // file offsets
	}
	var order []binaryKey
	wanted := map[binaryKey]*binaryAddrs{}
	for pid, addrs := range byPID {
		p := s.process(pid)
		for _, a := range addrs {
			m, ok := findMapping(p.maps, a)
			if !ok || !m.FileBacked() {
				continue
			}
			key := binaryKey{m.Dev, m.Inode}
			if b, ok := s.binaries[key]; ok && (b == nil || b.some == nil) {
				continue // unreadable, or read whole
			}
			w := wanted[key]
			if w == nil {
				w = &binaryAddrs{pid: pid, m: m}
				wanted[key] = w
				order = append(order, key)
			}
			w.files = append(w.files, a-m.Start+m.Offset)
		}
	}
	for _, key := range order {
		w := wanted[key]
		if b := s.binaries[key]; b != nil {
			for _, off := range w.files {
				if !b.knows(b.FileOffsetToAddr(off)) {
					s.binaries[key] = s.readBinary(w.pid, w.m, nil)
					break
				}
			}
			continue
		}
		s.binaries[key] = s.readBinary(w.pid, w.m, w.files)
	}
}

// readBinary reads m's symbols through the process's root, or another path
// to the same file: the whole table, or with offsets only what those file
// offsets resolve to. Nil when no path reaches the file the process mapped.
func (s *Symbolizer) readBinary(pid int, m Mapping, offsets []uint64) *Binary {
	candidates := []string{
		s.fs.path(fmt.Sprintf("/proc/%d/root%s", pid, m.Path)),
		s.fs.path(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End)),
		// Once a short-lived process has exited, its /proc entries are
		// gone; the same file is often still there on the host. The inode
		// check below keeps a container's or a replaced file out.
		s.fs.path(m.Path),
	}
	for _, path := range candidates {
		if b := readBinaryFile(path, m.Inode, offsets); b != nil {
			return b
		}
	}
	return nil
}

// readBinaryFile reads path's symbols if it is the file with the given
// inode (the one the process mapped), else returns nil: the whole table,
// or with offsets only what those file offsets resolve to.
func readBinaryFile(path string, inode uint64, offsets []uint64) *Binary {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Ino != inode {
		return nil
	}
	if offsets == nil {
		b, err := ReadBinary(f)
		if err != nil {
			return nil
		}
		return b
	}
	b, err := ReadBinarySome(f, offsets)
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
