package offcpu

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/ksym"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// ErrNoProcess means the process to watch does not exist.
var ErrNoProcess = errors.New("no such process")

// Probe is what Measure reads: a probes/offcpu.Probe, or a recording in
// tests.
type Probe interface {
	Snapshot() (probe.Snapshot, error)
	Method() probes.AttachMethod
	SelfCosts() (probes.SelfCosts, error)
	Close() error
}

// Options configure a run.
type Options struct {
	// PID is the process to watch; 0 watches every process (-a).
	PID int
	// Duration is the window; Measure ends it early when ctx is done or
	// the watched process exits, and says so in the evidence's warnings.
	Duration time.Duration
	// Probe configures the probe (its PID is set from PID).
	Probe probe.Options
	// Top bounds the waits listed (0: DefaultTop).
	Top int
	// Proc and Symbols read below their roots ("/" when zero).
	Proc    procfs.FS
	Symbols symbols.FS
	// Open opens the probe (nil: probes/offcpu.Open).
	Open func(probe.Options) (Probe, error)
	// KernelNamer opens the kernel's own symbol lookup to name kernel
	// frames (nil: probes/ksym's in a live run, whose Open is nil, and
	// /proc/kallsyms below Symbols otherwise or when it fails).
	KernelNamer func() (symbols.KernelNamer, error)
	// Started, when set, is called once the probe watches (progress,
	// tests that start their workload then).
	Started func()
}

// StacksName is the evidence's name of a stack selection.
func StacksName(s probe.Stacks) string {
	switch s {
	case probe.KernelOnly:
		return "kernel"
	case probe.UserOnly:
		return "user"
	}
	return "kernel+user"
}

// Measure watches a process (or every process) for the window and
// returns what its threads did off CPU. It always closes the probe
// before it returns. Errors: ErrNoProcess for a pid that is not there,
// the probe's (probes.ErrPermission, probes.ErrNotSupported) when it
// cannot attach, and bad options.
func Measure(ctx context.Context, o Options) (*evidence.OffCPU, error) {
	if o.Duration <= 0 {
		return nil, fmt.Errorf("offcpu: duration %v must be positive", o.Duration)
	}
	s, err := Open(o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.Begin()
	if o.Started != nil {
		o.Started()
	}
	why := waitWindow(ctx, s.o)
	return s.End(why)
}

// Session is one off-CPU window split at its readings, so that a recipe's
// part (measure.OffCPU) runs the same code as Measure inside a window it
// does not own: Open attaches the probe, Begin takes the first reading,
// End the last and builds the evidence.
type Session struct {
	o         Options
	in        Input
	sym       *symbols.Symbolizer
	p         Probe
	statStart procfs.Stat
	statErr   error
	closed    bool
}

// Open checks the options, names the process and attaches the probe.
// Errors: as Measure's.
func Open(o Options) (*Session, error) {
	if o.PID < 0 {
		return nil, fmt.Errorf("offcpu: pid %d must be positive", o.PID)
	}
	if o.Proc.Root == "" {
		o.Proc = procfs.Default
	}
	if o.Symbols.Root == "" {
		o.Symbols = symbols.Default
	}
	open := o.Open
	if open == nil {
		open = func(po probe.Options) (Probe, error) { return probe.Open(po) }
	}
	in := Input{PID: o.PID, Top: o.Top, Stacks: StacksName(o.Probe.Stacks), Comms: map[int]string{}}
	if o.PID != 0 {
		comm, err := o.Proc.ReadString(fmt.Sprintf("/proc/%d/comm", o.PID))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("pid %d: %w", o.PID, ErrNoProcess)
		}
		if err != nil {
			return nil, fmt.Errorf("read the name of pid %d: %w", o.PID, err)
		}
		in.Comm = comm
		in.Comms[o.PID] = comm
	}
	sym := symbols.New(o.Symbols)
	if o.PID != 0 {
		sym.Prefetch(o.PID)
	}
	namer := o.KernelNamer
	if namer == nil && o.Open == nil {
		namer = func() (symbols.KernelNamer, error) { return ksym.Open() }
	}
	if namer != nil {
		// Only the addresses the run saw are named, in one batch at the
		// end (nameAll): no /proc/kallsyms read unless the namer fails.
		sym.UseKernelNamer(namer)
	} else if _, err := sym.KernelSymbols(); err != nil {
		// Read before the probe loads: what names the stacks is the
		// kernel's text, not the probe's programs.
		in.Warnings = append(in.Warnings, "kernel frames are not named: "+err.Error())
	}

	po := o.Probe
	po.PID = o.PID
	p, err := open(po)
	if err != nil {
		return nil, err
	}
	in.AttachMethod = string(p.Method())
	return &Session{o: o, in: in, sym: sym, p: p}, nil
}

// Probe is the session's probe (a recipe's session governs and closes it
// too: Close is safe twice).
func (s *Session) Probe() Probe { return s.p }

// Begin takes the window's first reading of /proc: CPU time and the
// process's threads.
func (s *Session) Begin() {
	s.statStart, s.statErr = s.o.Proc.Stat()
	if s.o.PID != 0 {
		if tasks, err := s.o.Proc.Tasks(s.o.PID); err == nil {
			s.in.TasksStart = map[int][]procfs.Task{s.o.PID: tasks}
		}
	}
}

// End reads the probe and /proc once more (Read), then closes the probe,
// names the stacks and builds the evidence (Finish). why, when not
// empty, says why the window ended early ("interrupted", "pid N
// exited").
func (s *Session) End(why string) (*evidence.OffCPU, error) {
	if err := s.Read(); err != nil {
		return nil, err
	}
	return s.Finish(why), nil
}

// Read takes the window's last reading: the probe's maps, /proc's CPU
// time, threads and names, and the programs' own counts. The probe stays
// attached until Finish (or Close).
func (s *Session) Read() error {
	o := s.o
	in := &s.in
	snap, err := s.p.Snapshot()
	if err != nil {
		return fmt.Errorf("read the offcpu probe: %w", err)
	}
	in.Snapshot = snap
	in.Duration = max(0, snap.Mono-snap.WindowStart)
	if statEnd, err := o.Proc.Stat(); err == nil && s.statErr == nil {
		in.Busy, in.CPUs = busy(statEnd.Sub(s.statStart))
	}
	if in.CPUs == 0 {
		in.CPUs = len(snap.RunqCPU)
	}
	if o.PID != 0 {
		if tasks, err := o.Proc.Tasks(o.PID); err == nil {
			in.TasksEnd = map[int][]procfs.Task{o.PID: tasks}
		}
	}
	pids := map[int]bool{}
	for _, th := range snap.Threads {
		if o.PID == 0 || th.PID == o.PID {
			pids[th.PID] = true
		}
	}
	for pid := range pids {
		if _, ok := in.Comms[pid]; !ok {
			if c, err := o.Proc.ReadString("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil {
				in.Comms[pid] = c
			}
		}
	}
	if costs, err := s.p.SelfCosts(); err == nil {
		in.Programs = programCosts(costs)
	}
	return nil
}

// SetWindow replaces the window's length Read took from the probe (its
// current epoch's): under an overhead budget the probe is attached in
// sampling windows, each a new epoch, and the time the threads were
// watched is the windows' sum, which only the governor knows.
func (s *Session) SetWindow(d time.Duration) { s.in.Duration = d }

// Finish closes the probe (naming stacks is not done with it attached),
// names the stacks Read found and builds the evidence.
func (s *Session) Finish(why string) *evidence.OffCPU {
	in := s.in
	if err := s.Close(); err != nil {
		in.Warnings = append(in.Warnings, "closing the probe: "+err.Error())
	}
	nameAll(s.sym, in.Snapshot)
	in.Symbols = s.sym
	ev := Build(in)
	if why != "" {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("%s after %v of the %v asked for", why, time.Duration(ev.DurationNs).Round(time.Millisecond), s.o.Duration))
	}
	ev.Warnings = append(ev.Warnings, s.sym.Warnings()...)
	return &ev
}

// Close detaches the probe; a second call does nothing.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.p.Close()
}

// Ended says why a window watching o's process should end early ("" while
// it should not): the process exited.
func Ended(o Options) string {
	if o.Proc.Root == "" {
		o.Proc = procfs.Default
	}
	if o.PID != 0 {
		// A zombie has exited: its parent has not reaped it yet.
		if st, err := o.Proc.ProcessState(o.PID); errors.Is(err, fs.ErrNotExist) || err == nil && (st == 'Z' || st == 'X') {
			return fmt.Sprintf("pid %d exited", o.PID)
		}
	}
	return ""
}

// nameAll names every address of the snapshot's stacks in one batch per
// kind, as profile does: the kernel's in one call to the namer, each
// binary read once for just the addresses in it. Build then names stack
// by stack from the cache.
func nameAll(sym *symbols.Symbolizer, s probe.Snapshot) {
	var kernel []uint64
	user := map[int][]uint64{}
	seen := map[uint64]bool{}
	addKernel := func(stack []uint64) {
		for _, a := range symbols.CallSites(stack) {
			if !seen[a] {
				seen[a] = true
				kernel = append(kernel, a)
			}
		}
	}
	for _, w := range s.Waits {
		addKernel(w.KernelStack)
		user[w.PID] = append(user[w.PID], symbols.CallSites(w.UserStack)...)
		if w.Waker != nil {
			addKernel(w.Waker.KernelStack)
			user[w.Waker.PID] = append(user[w.Waker.PID], symbols.CallSites(w.Waker.UserStack)...)
		}
	}
	delete(user, 0)
	if len(kernel) > 0 {
		sym.KernelNames(kernel)
	}
	sym.PrepareUser(user)
}

// waitWindow waits for the duration; it returns early, saying why, when
// ctx is done or the watched process exits.
func waitWindow(ctx context.Context, o Options) string {
	end := time.NewTimer(o.Duration)
	defer end.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "interrupted"
		case <-end.C:
			return ""
		case <-tick.C:
			if why := Ended(o); why != "" {
				return why
			}
		}
	}
}

// busy is each CPU's share of the window spent neither idle nor waiting
// for I/O, and the number of CPUs.
func busy(d procfs.Stat) ([]evidence.CPUBusy, int) {
	var out []evidence.CPUBusy
	for _, c := range d.PerCPU {
		total := c.Total()
		if total <= 0 {
			continue
		}
		out = append(out, evidence.CPUBusy{CPU: c.CPU, BusyShare: float64(total-c.Idle-c.IOWait) / float64(total)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU < out[j].CPU })
	return out, len(out)
}

// programCosts are the probe's programs' own counts, per tracepoint, with
// the mean time of the runs they timed.
func programCosts(c probes.SelfCosts) []evidence.ProgramCost {
	var out []evidence.ProgramCost
	for hook, perCPU := range c {
		t := probes.Total(perCPU)
		pc := evidence.NewProgramCost(hook, t.Runs, t.PerRun()*time.Duration(t.Runs))
		pc.PerRunFrom = "self-timed"
		out = append(out, pc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Program < out[j].Program })
	return out
}
