package asprof

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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

// outputFile is the profile's file in the session directory.
func (o Options) outputFile() string {
	if o.jfrOutput() {
		return jfrFile
	}
	return collapsedFile
}

// ErrAlreadyRunning: async-profiler is already profiling in the JVM for
// someone perfscope cannot judge (*AlreadyRunningError says who).
var ErrAlreadyRunning = errors.New("async-profiler is already profiling this JVM")

// Session is async-profiler running inside one JVM.
type Session struct {
	target *attach.Target
	// jvm is the JVM as it was when the session started.
	jvm jvmID
	// lib is the library's path as the JVM sees it.
	lib string
	// tmp holds the JVM's /tmp open, and dir is reached through it: when
	// the JVM dies mid-run its /proc/PID/root disappears, and only this
	// descriptor still reaches the files perfscope must remove. -1 once
	// closed.
	tmp int
	dir *sessionDir
	// stopped: no stop command is to be sent any more.
	stopped bool
	opts    Options
	// since is when the measured window began (SetWindowStart).
	since time.Time
	notes []string
}

// SetWindowStart marks when the measured window begins: allocation
// samples taken before it are dropped from the profile.
func (s *Session) SetWindowStart(t time.Time) { s.since = t }

// Notes are what the session found on the way in and the report should
// say: a session of a perfscope that was killed, taken over; files of
// exited JVMs removed; a dead perfscope's profiler still running in
// another JVM.
func (s *Session) Notes() []string { return s.notes }

// Start makes a private session directory in the JVM's /tmp, takes over
// what a perfscope that is gone left in this JVM, copies the library there
// (unless the JVM already has async-profiler loaded), loads it and starts
// profiling. On an error nothing is left running or on disk — unless the
// JVM stopped answering after the start command went out: then the
// directory and its owner file stay for the next run to take over. A
// session of a perfscope that still runs is a *BusyError, left alone.
func Start(ctx context.Context, t *attach.Target, hostLib string, opts Options) (_ *Session, err error) {
	lib, err := os.ReadFile(hostLib)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	me, err := currentSelf()
	if err != nil {
		return nil, err
	}
	jvm, err := targetID(t)
	if err != nil {
		return nil, err
	}
	s := &Session{target: t, jvm: jvm, opts: opts, tmp: -1}
	s.tmp, err = openTmp(t.HostPath("/tmp"))
	if err != nil {
		return nil, fmt.Errorf("open the JVM's /tmp: %w", err)
	}
	s.notes = sweepOwnTmp(ctx, s.tmp, me)
	if err := s.setUp(ctx, me, jvm, lib); err != nil {
		s.cleanup()
		return nil, err
	}
	outTarget := s.dir.jvmPath(opts.outputFile())
	msg, err := t.Load(ctx, s.lib, s.withLog(opts.startArgs(outTarget)))
	var le *attach.LoadError
	switch {
	case err == nil:
		return s, nil
	case errors.As(err, &le) && le.ReturnCode == 200 && strings.Contains(s.log(), "already"):
		s.cleanup()
		return nil, &AlreadyRunningError{PID: t.Process.PID, Lib: s.reusedLib()}
	case errors.As(err, &le):
		// The JVM answered that the profiler did not start.
		err = fmt.Errorf("start async-profiler: %w%s", err, s.logSuffix(msg))
		s.cleanup()
		return nil, err
	}
	// No answer (Ctrl-C, a timeout): the profiler may have started.
	s.Close()
	return nil, fmt.Errorf("start async-profiler: %w", err)
}

// setUp creates the session directory and takes over the JVM's sessions
// of perfscope runs that are gone, under the /tmp's lock, so that two
// runs never profile one JVM at once.
func (s *Session) setUp(ctx context.Context, me self, jvm jvmID, lib []byte) error {
	unlock, err := lockTmp(ctx, s.tmp, fmt.Sprintf("pid %d's /tmp", s.target.Process.PID))
	if err != nil {
		return err
	}
	defer unlock()
	// A JVM that has async-profiler mapped (an earlier session's, or
	// asprof's) gets the same library again, never a second one.
	reuse := reusableLibrary(mappedLibraries(s.target))
	m := newMarker(me, jvm, s.target.Process.UID)
	m.Lib = reuse
	d, err := createSessionDir(s.tmp, me, m, reuse == "", s.target.Process.UID, s.target.Process.GID, s.opts.outputFile())
	if err != nil {
		return fmt.Errorf("prepare async-profiler in the JVM's /tmp: %w", err)
	}
	s.dir = d
	s.lib = reuse
	if reuse == "" {
		if err := d.writeFile(libraryName, lib, true); err != nil {
			return fmt.Errorf("copy async-profiler into the JVM's /tmp: %w", err)
		}
		s.lib = d.jvmPath(libraryName)
	}
	if err := d.handOver(); err != nil {
		return err
	}
	r, err := reclaim(ctx, s.tmp, me, s.target, d, s.target.Procs())
	for _, o := range r.takenOver {
		s.notes = append(s.notes, o.String())
	}
	s.notes = append(s.notes, r.notes...)
	return err
}

// reusedLib is the library the session loaded when it was not its own
// copy ("" otherwise).
func (s *Session) reusedLib() string {
	if s.dir != nil && s.lib == s.dir.jvmPath(libraryName) {
		return ""
	}
	return s.lib
}

func (s *Session) withLog(args string) string {
	s.dir.truncate(logFile)
	return args + ",log=" + s.dir.jvmPath(logFile)
}

func (s *Session) log() string {
	b, _ := s.dir.readFile(logFile, 1<<20)
	return strings.TrimSpace(string(b))
}

func (s *Session) logSuffix(reply string) string { return logSuffixOf(reply, s.log()) }

// Stop stops profiling and returns the collapsed stacks, weighted by
// bytes (alloc), nanoseconds (cpu, wall, lock). It always stops and cleans
// up, even when ctx is already cancelled (Ctrl-C): the profiler must not
// keep running in the JVM after perfscope exits. When the JVM cannot be
// told to stop, the session's directory and owner file stay, so that the
// next run on it (or --stop) stops the profiler once this one is gone.
func (s *Session) Stop(ctx context.Context) (*Profile, error) {
	if s.stopped {
		return nil, errors.New("async-profiler session already stopped")
	}
	s.stopped = true
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	msg, err := s.target.Load(stopCtx, s.lib, s.withLog(s.opts.stopArgs(s.dir.jvmPath(s.opts.outputFile()))))
	if err != nil {
		err = fmt.Errorf("stop async-profiler: %w%s", err, s.logSuffix(msg))
		if s.keepIfRunning() {
			err = fmt.Errorf("%w; it may still run in pid %d: the next `perfscope jvm` on it, or `perfscope jvm --stop %d`, stops it once this run has ended", err, s.target.Process.PID, s.target.Process.PID)
		}
		return nil, err
	}
	defer s.cleanup()
	if s.opts.jfrOutput() {
		b, err := s.dir.readFile(jfrFile, 0)
		if err != nil {
			return nil, fmt.Errorf("read async-profiler output: %w", err)
		}
		p, err := ParseAllocJFR(b, AllocParse{Interval: s.opts.interval(), Threads: s.opts.Threads, Since: s.since})
		if err != nil {
			return nil, fmt.Errorf("read async-profiler's recording: %w", err)
		}
		return p, nil
	}
	b, err := s.dir.readFile(collapsedFile, 0)
	if err != nil {
		return nil, fmt.Errorf("read async-profiler output: %w", err)
	}
	p, err := ParseCollapsed(bytes.NewReader(b))
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
		_, err := s.target.Load(ctx, s.lib, s.withLog("stop"))
		cancel()
		var le *attach.LoadError
		if err != nil && !errors.As(err, &le) {
			// The JVM did not answer (a LoadError is an answer: "not
			// active"): the profiler may still run.
			s.keepIfRunning()
		}
	}
	s.cleanup()
}

// keepIfRunning leaves the session's directory (owner file, library, log
// and profile) in place when the JVM still runs, and says so: the profiler
// it could not stop may still be running, and a later run takes it over by
// the owner file once this process is gone. A JVM that exited took its
// profiler with it.
func (s *Session) keepIfRunning() bool {
	if s.dir == nil {
		return false
	}
	if s.target.Procs().ProcessRuns(s.jvm.PID, s.jvm.Start) {
		s.dir.close()
		s.dir = nil
		return true
	}
	return false
}

func (s *Session) cleanup() {
	if s.dir != nil {
		s.dir.remove()
		s.dir.close()
		s.dir = nil
	}
	if s.tmp >= 0 {
		unix.Close(s.tmp)
		s.tmp = -1
	}
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
	// the window began, and are not counted.
	BeforeWindow int64
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
