package asprof

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/jvm/attach"
)

// Event is what async-profiler samples.
type Event string

const (
	Alloc Event = "alloc"
	CPU   Event = "cpu"
	Lock  Event = "lock"
	Wall  Event = "wall"
)

// ParseEvent accepts the events perfscope exposes.
func ParseEvent(s string) (Event, error) {
	switch e := Event(s); e {
	case Alloc, CPU, Lock, Wall:
		return e, nil
	}
	return "", fmt.Errorf("unknown profiling event %q (want alloc, cpu, lock or wall)", s)
}

// DefaultAllocInterval is perfscope jvm's allocation sampling interval, and
// async-profiler's own default. Each sample costs the allocating thread
// 15-30 µs (a JVMTI stack walk and a class name lookup), so the cost
// is proportional to bytes allocated per CPU-second: on the sample app,
// the worst case there is (51 KiB per request in 40 µs of CPU), the
// first default of 128 KiB added 13-18 % CPU per request and 512 KiB
// adds 6-7 %, while a service allocating 300 MB per CPU-second pays
// 1-2 % (BENCHMARKS.md, "jvm: overhead on the sample app"). The price is
// statistical: the totals are good to about 1/sqrt(allocated/interval),
// ±5 % from 200 MB allocated in the window; shorter or quieter windows
// want --alloc-interval 128k.
const DefaultAllocInterval = 512 << 10

// Options configure one profiling session.
type Options struct {
	Event Event
	// AllocInterval samples one allocation per this many bytes (alloc
	// only); 0 keeps async-profiler's default.
	AllocInterval int64
	// Interval is the cpu/wall sampling period; 0 keeps the default.
	Interval time.Duration
	// Threads profiles threads separately: every collapsed stack starts
	// with a frame naming its thread ("[http-nio-8080-exec-1 tid=4242]"),
	// which is how allocation is split between request threads and the
	// rest.
	Threads bool
}

// jfrOutput says whether the session records JFR instead of collapsed
// stacks: allocation samples carry the sampled object's size only there,
// and perfscope needs it to weigh them without bias (unbiasedWeight).
func (o Options) jfrOutput() bool { return o.Event == Alloc }

// startArgs starts profiling; file is the JFR recording's path in the
// JVM (alloc only).
func (o Options) startArgs(file string) string {
	args := []string{"start", "event=" + string(o.Event)}
	if o.Event == Alloc && o.AllocInterval > 0 {
		args = append(args, fmt.Sprintf("alloc=%d", o.AllocInterval))
	}
	if o.Interval > 0 && (o.Event == CPU || o.Event == Wall) {
		args = append(args, fmt.Sprintf("interval=%d", o.Interval.Nanoseconds()))
	}
	if o.jfrOutput() {
		// JFR events name their thread: `threads` is not needed.
		return strings.Join(append(args, "jfr", "file="+file), ",")
	}
	if o.Threads {
		args = append(args, "threads")
	}
	return strings.Join(append(args, "total"), ",")
}

func (o Options) stopArgs(file string) string {
	if o.jfrOutput() {
		return "stop,jfr,file=" + file
	}
	args := "stop,file=" + file + ",collapsed,total"
	if o.Threads {
		args += ",threads"
	}
	return args
}

// interval is the allocation sampling interval the session runs with.
func (o Options) interval() int64 {
	if o.AllocInterval > 0 {
		return o.AllocInterval
	}
	return DefaultProfilerAllocInterval
}

// outputExt is the profile file's extension.
func (o Options) outputExt() string {
	if o.jfrOutput() {
		return ".jfr"
	}
	return ".collapsed"
}

// ErrAlreadyRunning: async-profiler is already profiling in the JVM
// (another perfscope or asprof session).
var ErrAlreadyRunning = errors.New("async-profiler is already profiling this JVM (another perfscope or asprof session); stop it first with `asprof stop PID`")

// Session is async-profiler running inside one JVM.
type Session struct {
	target *attach.Target
	// lib is the library's path as the JVM sees it.
	lib string
	// hostDir/targetDir are perfscope's scratch directory in the JVM's
	// /tmp, seen from here and from the JVM.
	hostDir, targetDir string
	// tmpFd holds the JVM's /tmp open, and hostDir is reached through it
	// (/proc/self/fd/N/...): when the JVM dies mid-run its /proc/PID/root
	// disappears, and only this descriptor still reaches the files
	// perfscope must remove. -1 once closed.
	tmpFd   int
	ownsLib bool
	stopped bool
	opts    Options
	id      string
	// since and until are when the measured window began and ended
	// (SetWindowStart, SetWindowEnd).
	since, until time.Time
}

// SetWindowStart marks when the measured window begins: allocation
// samples taken before it are dropped from the profile.
func (s *Session) SetWindowStart(t time.Time) { s.since = t }

// SetWindowEnd marks when the measured window ended: samples taken after
// it, while the stop command reaches the JVM, are dropped.
func (s *Session) SetWindowEnd(t time.Time) { s.until = t }

// Start copies the library into the JVM's mount namespace (unless the JVM
// already has async-profiler loaded), loads it and starts profiling. On any
// error nothing is left running or on disk.
func Start(ctx context.Context, t *attach.Target, hostLib string, opts Options) (_ *Session, err error) {
	s := &Session{target: t, opts: opts, tmpFd: -1}
	var idb [6]byte
	rand.Read(idb[:])
	s.id = hex.EncodeToString(idb[:])
	if err := s.stage(hostLib); err != nil {
		s.cleanup()
		return nil, err
	}
	defer func() {
		if err != nil {
			s.cleanup()
		}
	}()
	jfrFile, _ := s.file(opts.outputExt())
	msg, err := t.Load(ctx, s.lib, s.withLog(opts.startArgs(jfrFile)))
	if err != nil {
		var le *attach.LoadError
		if errors.As(err, &le) && le.ReturnCode == 200 && strings.Contains(s.log(), "already") {
			return nil, ErrAlreadyRunning
		}
		return nil, fmt.Errorf("start async-profiler: %w%s", err, s.logSuffix(msg))
	}
	return s, nil
}

// stage makes the library loadable by the JVM: a JVM in a container cannot
// see the host's cache, and a JVM running as another user may not read
// root's home, so the library goes into a directory of the JVM's /tmp owned
// by its user. The directory is named after the library's digest: loading
// the same path again reuses the copy the JVM already has mapped instead of
// loading a second async-profiler.
func (s *Session) stage(hostLib string) error {
	if loaded := s.loadedLibrary(); loaded != "" {
		s.lib = loaded
	}
	b, err := os.ReadFile(hostLib)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	sum := sha256.Sum256(b)
	name := ".perfscope-asprof-" + hex.EncodeToString(sum[:6])
	s.targetDir = "/tmp/" + name
	fd, err := unix.Open(s.target.HostPath("/tmp"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the JVM's /tmp: %w", err)
	}
	s.tmpFd = fd
	s.hostDir = fmt.Sprintf("/proc/self/fd/%d/%s", fd, name)
	if err := os.Mkdir(s.hostDir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("prepare async-profiler in the JVM's /tmp: %w", err)
	}
	// The JVM writes its profile here as its own user.
	if os.Geteuid() == 0 {
		os.Chown(s.hostDir, s.target.Process.UID, s.target.Process.GID)
	}
	if s.lib != "" {
		return nil
	}
	hostCopy := filepath.Join(s.hostDir, libraryName)
	if _, err := os.Stat(hostCopy); err != nil {
		tmp := filepath.Join(s.hostDir, "."+s.id+".so")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return fmt.Errorf("copy async-profiler into the JVM's /tmp: %w", err)
		}
		if err := os.Rename(tmp, hostCopy); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	s.lib = filepath.Join(s.targetDir, libraryName)
	s.ownsLib = true
	return nil
}

// loadedLibrary is the path of an async-profiler the JVM already mapped
// (from an earlier asprof run), as the JVM sees it.
func (s *Session) loadedLibrary() string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", s.target.Process.PID))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 6 && strings.HasSuffix(fields[5], "/"+libraryName) {
			return fields[5]
		}
	}
	return ""
}

func (s *Session) file(ext string) (target, host string) {
	name := s.id + ext
	return s.targetDir + "/" + name, filepath.Join(s.hostDir, name)
}

func (s *Session) withLog(args string) string {
	logPath, _ := s.file(".log")
	return args + ",log=" + logPath
}

func (s *Session) log() string {
	_, host := s.file(".log")
	b, _ := os.ReadFile(host)
	return strings.TrimSpace(string(b))
}

func (s *Session) logSuffix(reply string) string {
	msg := strings.TrimSpace(reply + "\n" + s.log())
	if msg == "" {
		return ""
	}
	return " (async-profiler: " + strings.ReplaceAll(msg, "\n", "; ") + ")"
}

// Stop stops profiling and returns the collapsed stacks, weighted by
// bytes (alloc), nanoseconds (cpu, wall, lock). It always stops and cleans
// up, even when ctx is already cancelled (Ctrl-C): the profiler must not
// keep running in the JVM after perfscope exits.
func (s *Session) Stop(ctx context.Context) (*Profile, error) {
	if s.stopped {
		return nil, errors.New("async-profiler session already stopped")
	}
	s.stopped = true
	defer s.cleanup()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	targetOut, hostOut := s.file(s.opts.outputExt())
	msg, err := s.target.Load(stopCtx, s.lib, s.withLog(s.opts.stopArgs(targetOut)))
	if err != nil {
		return nil, fmt.Errorf("stop async-profiler: %w%s", err, s.logSuffix(msg))
	}
	if s.opts.jfrOutput() {
		b, err := os.ReadFile(hostOut)
		if err != nil {
			return nil, fmt.Errorf("read async-profiler output: %w", err)
		}
		p, err := ParseAllocJFR(b, AllocParse{Interval: s.opts.interval(), Threads: s.opts.Threads, Since: s.since, Until: s.until})
		if err != nil {
			return nil, fmt.Errorf("read async-profiler's recording: %w", err)
		}
		return p, nil
	}
	f, err := os.Open(hostOut)
	if err != nil {
		return nil, fmt.Errorf("read async-profiler output: %w", err)
	}
	defer f.Close()
	p, err := ParseCollapsed(f)
	if err != nil {
		return nil, fmt.Errorf("read async-profiler output: %w", err)
	}
	p.Event = s.opts.Event
	return p, nil
}

// Close stops the profiler if Stop was not called (an error path) and
// removes perfscope's files from the JVM's /tmp. Safe to call twice.
func (s *Session) Close() {
	if !s.stopped {
		s.stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		s.target.Load(ctx, s.lib, s.withLog("stop"))
		cancel()
	}
	s.cleanup()
}

func (s *Session) cleanup() {
	if s.tmpFd < 0 {
		return
	}
	defer func() {
		unix.Close(s.tmpFd)
		s.tmpFd = -1
	}()
	for _, ext := range []string{".collapsed", ".jfr", ".log"} {
		_, host := s.file(ext)
		os.Remove(host)
	}
	if s.ownsLib {
		// The JVM keeps its mapping of a deleted file; a later load by
		// the same path reuses it.
		os.Remove(filepath.Join(s.hostDir, libraryName))
	}
	os.Remove(s.hostDir) // only if empty: another session may be using it
}

// Profile is collapsed stacks with their weights.
type Profile struct {
	Event  Event
	Stacks []Stack
	Total  int64
	// The rest is known for allocation profiles read from JFR
	// (ParseAllocJFR).
	// Interval is the sampling interval in bytes.
	Interval int64
	// Samples is the number of allocation samples; Variance is the
	// estimated variance of Total (bytes²) from sampling.
	Samples  int64
	Variance float64
	// ReportedTotal is the total as async-profiler weighs samples
	// (max(size, interval)), before perfscope's unbiased weighting.
	ReportedTotal int64
	// Truncated samples have stacks deeper than async-profiler keeps
	// (their root frames, the thread's entry, are missing); NoStack
	// samples have no stack at all; OtherWeighting samples were not
	// JVMTI samples and keep async-profiler's weight.
	Truncated, NoStack, OtherWeighting int64
	// BeforeWindow samples were taken while the sampler settled, before
	// the window began, AfterWindow after it ended; neither is counted.
	BeforeWindow, AfterWindow int64
}

// Stack is one collapsed stack, root first.
type Stack struct {
	Frames []string
	Weight int64
	// Samples and Variance are set for JFR allocation profiles.
	Samples  int64
	Variance float64
}

// ParseCollapsed reads "frame;frame;frame weight" lines.
func ParseCollapsed(r io.Reader) (*Profile, error) {
	p := &Profile{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			return nil, fmt.Errorf("line %d: no weight: %q", n, truncate(line))
		}
		var w int64
		if _, err := fmt.Sscan(line[i+1:], &w); err != nil || w < 0 {
			return nil, fmt.Errorf("line %d: bad weight %q", n, line[i+1:])
		}
		p.Stacks = append(p.Stacks, Stack{Frames: strings.Split(line[:i], ";"), Weight: w})
		p.Total += w
	}
	return p, sc.Err()
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
