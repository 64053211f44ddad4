package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/report"
)

// Output formats of `perfscope profile` beyond text and json.
const (
	formatFolded     report.Format = "folded"
	formatSVG        report.Format = "svg"
	formatHTML       report.Format = "html"
	formatPprof      report.Format = "pprof"
	formatSpeedscope report.Format = "speedscope"
)

var profileFormats = []report.Format{report.Text, report.JSON, formatFolded, formatSVG, formatHTML, formatPprof, formatSpeedscope}

type profileOptions struct {
	PID         int
	All         bool
	Duration    time.Duration
	Frequency   int
	KernelOnly  bool
	UserOnly    bool
	PerProcess  bool
	PerThread   bool
	PerCPU      bool
	NoComm      bool
	IncludeIdle bool
	JITMap      bool
	Top         int
	StackMap    int
	Title       string
	Output      string
	OutFile     string

	format report.Format
	stacks cpuprofile.Stacks
	root   cpuprofile.RootFrame
	fs     procfs.FS
	sym    *symbols.Symbolizer
	// jvmFS finds HotSpot JVMs (hsperfdata) for --jit-map; jvm is the
	// --pid JVM that will be asked for its perf map when the window ends.
	jvmFS hsperf.FS
	jvm   *attach.Target
	// run is the profiling itself; tests replace it to check flag handling.
	run func(ctx context.Context, o *profileOptions, g *Globals) error
}

func newProfileCmd(g *Globals) *cobra.Command {
	return profileCmd(g, &profileOptions{fs: procfs.Default, sym: symbols.New(symbols.Default), jvmFS: hsperf.Default, run: runProfile})
}

// profileCmd binds flags to o; tests pass options with a fake run.
func profileCmd(g *Globals, o *profileOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Sample on-CPU stacks (kernel and user) and print top functions or a flame graph",
		Long: `profile samples what every CPU is running at --freq Hz with a software
cpu-clock perf event and a BPF program that counts kernel and user stacks in
the kernel. Frames are named from /proc/kallsyms, the ELF symbols of each
process's binaries (read through /proc/PID/root, so containers work) and JIT
perf maps (/tmp/perf-<pid>.map). The idle task is left out unless
--include-idle is given.

Text output lists the top functions by self and total samples; -o folded,
svg, html, pprof and speedscope write the profile for flame graph tools.

For JVMs, start the JVM with -XX:+PreserveFramePointer so stacks unwind
through Java frames, and use --jit-map to name compiled Java methods: a
HotSpot JVM (JDK 17+) is asked through the attach protocol to write its perf
map (Compiler.perfmap) when the window ends; other runtimes must have written
/tmp/perf-<pid>.map themselves.`,
		Example: `  perfscope profile --duration 10s
  perfscope profile --pid 1234 -o svg --out cpu.svg
  perfscope profile --all --kernel-only --per-cpu -o folded > kernel.folded
  perfscope profile --pid 1234 --jit-map -o html --out jvm.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.PID, "pid", "p", 0, "profile only this process")
	f.BoolVarP(&o.All, "all", "a", false, "profile every process (the default when --pid is not given)")
	f.DurationVarP(&o.Duration, "duration", "d", 10*time.Second, "how long to sample (Ctrl-C stops early and still reports)")
	f.IntVarP(&o.Frequency, "freq", "F", cpuprofile.DefaultFrequency, "samples per second per CPU")
	f.BoolVar(&o.KernelOnly, "kernel-only", false, "record kernel stacks only")
	f.BoolVar(&o.UserOnly, "user-only", false, "record user stacks only")
	f.BoolVar(&o.PerProcess, "per-process", false, `root each stack at "comm-pid"`)
	f.BoolVar(&o.PerThread, "per-thread", false, `root each stack at "comm-pid/tid"`)
	f.BoolVar(&o.PerCPU, "per-cpu", false, `root each stack at "cpu-N"`)
	f.BoolVar(&o.NoComm, "no-comm", false, "put no process name at the root of stacks")
	f.BoolVar(&o.IncludeIdle, "include-idle", false, "keep samples of idle CPUs (the swapper task)")
	f.BoolVar(&o.JITMap, "jit-map", false, "name JIT-compiled code from the process's perf map: a HotSpot JVM (JDK 17+) is asked to write it, other runtimes must have written /tmp/perf-<pid>.map (needs --pid)")
	f.IntVar(&o.Top, "top", 20, "functions listed in text output")
	f.IntVar(&o.StackMap, "stack-map-size", 16384, "stack map entries (~1 KiB each): raise it when many distinct stacks collide and samples are lost")
	f.StringVar(&o.Title, "title", "", "flame graph title (svg, html, speedscope)")
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text, json, folded, svg, html, pprof or speedscope")
	f.StringVar(&o.OutFile, "out", "", "write the output to this file instead of standard output")
	return cmd
}

func (o *profileOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat(o.Output, profileFormats...); err != nil {
		return asUsage(err)
	}
	if o.PID != 0 && o.All {
		return usageError("--pid and --all exclude each other: give one")
	}
	if o.Duration <= 0 {
		return usageError("--duration must be positive, got %v", o.Duration)
	}
	if o.StackMap < 1024 || o.StackMap > 1<<20 {
		return usageError("--stack-map-size must be between 1024 and 1048576, got %d", o.StackMap)
	}
	if o.Top <= 0 {
		return usageError("--top must be positive, got %d", o.Top)
	}
	if o.Frequency <= 0 {
		return usageError("--freq must be positive, got %d", o.Frequency)
	}
	if max, ok, _ := o.fs.SysctlInt("kernel.perf_event_max_sample_rate"); ok && int64(o.Frequency) > max {
		return usageError("--freq %d is above kernel.perf_event_max_sample_rate (%d): lower it", o.Frequency, max)
	}
	switch {
	case o.KernelOnly && o.UserOnly:
		return usageError("--kernel-only and --user-only exclude each other: give one")
	case o.KernelOnly:
		o.stacks = cpuprofile.KernelOnly
	case o.UserOnly:
		o.stacks = cpuprofile.UserOnly
	}
	o.root = cpuprofile.RootComm
	roots := 0
	for _, r := range []struct {
		set  bool
		root cpuprofile.RootFrame
	}{{o.PerProcess, cpuprofile.RootProcess}, {o.PerThread, cpuprofile.RootThread}, {o.PerCPU, cpuprofile.RootCPU}, {o.NoComm, cpuprofile.RootNone}} {
		if r.set {
			roots++
			o.root = r.root
		}
	}
	if roots > 1 {
		return usageError("--per-process, --per-thread, --per-cpu and --no-comm exclude each other: give one")
	}
	if o.PID < 0 {
		return usageError("--pid must be positive, got %d", o.PID)
	}
	if o.PID > 0 {
		if err := o.checkProcess(); err != nil {
			return err
		}
	}
	if o.JITMap {
		if o.PID == 0 {
			return usageError("--jit-map needs --pid: perf maps belong to one process")
		}
		return o.checkJITMap()
	}
	return nil
}

// checkJITMap decides where --jit-map's names come from, before anything
// is loaded: a HotSpot JVM that can be attached to writes its map when the
// window ends; any other process must already have one.
func (o *profileOptions) checkJITMap() error {
	path := o.sym.PerfMapPath(o.PID)
	_, statErr := os.Stat(path)
	hasMap := !errors.Is(statErr, fs.ErrNotExist)
	t, err := attach.Preflight(o.jvmFS, o.PID)
	switch {
	case err == nil:
		o.jvm = t
		return nil
	case hasMap:
		// Not a JVM (node --perf-basic-prof, a .NET runtime), or a JVM
		// perfscope must not signal: use the map as it is.
		return nil
	case errors.Is(err, attach.ErrNotJVM):
		return usageError("process %d has no JIT perf map (%s) and is not a HotSpot JVM perfscope could ask for one: start its runtime so that it writes /tmp/perf-<pid>.map (e.g. node --perf-basic-prof)", o.PID, path)
	}
	return unavailableError("process %d is a JVM perfscope cannot ask for its perf map (%v) and has none at %s: drop --jit-map, or restart it without -Xrs / -XX:+DisableAttachMechanism", o.PID, err, path)
}

// checkProcess turns a dead pid or a thread id into one clear sentence
// before anything is loaded.
func (o *profileOptions) checkProcess() error {
	st, err := o.fs.Status(o.PID)
	if errors.Is(err, fs.ErrNotExist) {
		return usageError("process %d is not running", o.PID)
	}
	if err != nil {
		return fmt.Errorf("read status of process %d: %w", o.PID, err)
	}
	// /proc/TID exists for threads too, but the probe filters on the
	// process (thread group) id.
	if len(st.NStgid) > 0 && st.NStgid[0] != o.PID {
		return usageError("%d is a thread of process %d: pass --pid %d", o.PID, st.NStgid[0], st.NStgid[0])
	}
	return nil
}

// profileData is the "data" section of `perfscope profile -o json`.
type profileData struct {
	// Target is "all" or "pid".
	Target      string `json:"target"`
	PID         int    `json:"pid,omitempty"`
	FrequencyHz int    `json:"frequency_hz"`
	CPUs        int    `json:"cpus"`
	// Stacks is "kernel+user", "kernel" or "user".
	Stacks string `json:"stacks"`
	// RootFrames is "comm", "none", "process", "thread" or "cpu".
	RootFrames string          `json:"root_frames"`
	DurationNs int64           `json:"duration_ns"`
	Samples    uint64          `json:"samples"`
	Lost       uint64          `json:"lost"`
	LostBy     cpuprofile.Lost `json:"lost_by_reason"`
	// TopFunctions is sorted by self samples.
	TopFunctions []functionSamples `json:"top_functions"`
	// Folded holds every distinct stack, root first, in FlameGraph's
	// folded form, sorted by count.
	Folded   []foldedStack `json:"folded"`
	Warnings []string      `json:"warnings,omitempty"`
}

type functionSamples struct {
	Function string `json:"function"`
	// Self counts samples where the function was running; Total those
	// where it was anywhere on the stack.
	Self       uint64  `json:"self"`
	Total      uint64  `json:"total"`
	SelfShare  float64 `json:"self_share"`
	TotalShare float64 `json:"total_share"`
}

type foldedStack struct {
	Stack string `json:"stack"`
	Count uint64 `json:"count"`
}

func stacksKindName(s cpuprofile.Stacks) string {
	return [...]string{"kernel+user", "kernel", "user"}[s]
}

func rootFrameName(r cpuprofile.RootFrame) string {
	return [...]string{"comm", "none", "process", "thread", "cpu"}[r]
}

func runProfile(ctx context.Context, o *profileOptions, g *Globals) error {
	p, err := cpuprofile.Open(cpuprofile.Options{PID: o.PID, Frequency: o.Frequency, Stacks: o.stacks, IncludeIdle: o.IncludeIdle, StackEntries: o.StackMap})
	if errors.Is(err, probes.ErrPermission) {
		return unavailableError("the kernel refused to load the sampling program: run perfscope profile as root, or with CAP_BPF and CAP_PERFMON")
	}
	if err != nil {
		return err
	}
	defer p.Close()
	stats, statsErr := probes.EnableStats()
	if statsErr == nil {
		defer stats.Close()
	}
	if err := p.Start(); err != nil {
		if errors.Is(err, probes.ErrPermission) {
			return unavailableError("the kernel refused a cpu-clock perf event: run perfscope profile as root, or with CAP_PERFMON (kernel.perf_event_paranoid is in the way)")
		}
		return err
	}
	started := time.Now()
	attached := started.Sub(g.Started)
	if f, ok := g.Err.(*os.File); ok && isTerminal(f) {
		fmt.Fprintf(g.Err, "sampling for %v at %d Hz on %d CPUs (Ctrl-C stops early)…\n", o.Duration, o.Frequency, p.CPUs())
	}
	sampleUntilDone(ctx, p, o.sym, o.Duration)
	if err := p.Stop(); err != nil {
		return fmt.Errorf("stop sampling: %w", err)
	}
	window := time.Since(started)
	prof, err := p.Snapshot()
	if err != nil {
		return err
	}
	jitWarning, removeJITMap := o.writeJITMap(ctx)
	defer removeJITMap()

	r := report.New("profile", Version(), started)
	r.Meta.DurationNs = int64(window)
	fp, data := o.summarize(prof)
	if jitWarning != "" {
		data.Warnings = append(data.Warnings, jitWarning)
	}
	data.CPUs, data.DurationNs = p.CPUs(), int64(window)
	if statsErr != nil {
		data.Warnings = append(data.Warnings, fmt.Sprintf("BPF run time not measured: %v", statsErr))
	}
	r.Data = data
	r.Overhead = profileOverhead(p, attached, window, prof.Lost.Total())
	return o.write(g, r, data, fp)
}

// writeJITMap asks the --pid JVM, through the attach protocol, to write
// its perf map (Compiler.perfmap, JDK 17+) now that sampling is over, so
// that code compiled during the window is named too, and makes the
// symbolizer read it afresh. A map perfscope caused to exist is removed by
// the returned func once the frames are named; one the user had is left
// (updated). A JVM that cannot write it costs the names, not the profile.
func (o *profileOptions) writeJITMap(ctx context.Context) (warning string, remove func()) {
	remove = func() {}
	if o.jvm == nil {
		return "", remove
	}
	path := o.sym.PerfMapPath(o.PID)
	_, statErr := os.Stat(path)
	existed := statErr == nil
	// Ctrl-C ended the window; the map is still wanted for the report.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := o.jvm.Jcmd(jctx, "Compiler.perfmap"); err != nil {
		return fmt.Sprintf("compiled Java frames are unnamed: the JVM did not write its perf map (%v; Compiler.perfmap needs JDK 17 or later)", err), remove
	}
	o.sym.Forget(o.PID)
	if !existed {
		remove = func() { os.Remove(path) }
	}
	return "", remove
}

// sampleUntilDone waits for the duration or Ctrl-C. Meanwhile it reads,
// four times a second, the mappings of every process sampled so far: stacks are
// named at the end, and a process that has exited by then could no longer
// be resolved.
func sampleUntilDone(ctx context.Context, p *cpuprofile.Profiler, sym *symbols.Symbolizer, d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	// Often enough to catch most short-lived commands (a shell pipeline's
	// grep, a compiler run), cheap because only the hash keys are read.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	seen := map[int]bool{}
	for {
		select {
		case <-ctx.Done(): // Ctrl-C: report what was sampled so far
			return
		case <-deadline.C:
			return
		case <-tick.C:
			pids, _ := p.PIDs() // best effort: a failed read only costs names
			for _, pid := range pids {
				if !seen[pid] && pid != 0 {
					seen[pid] = true
					sym.Prefetch(pid)
				}
			}
		}
	}
}

// summarize symbolizes every sample once and derives the flame graph, the
// folded stacks and the top functions from the same frames.
func (o *profileOptions) summarize(prof cpuprofile.Profile) (*flame.Profile, profileData) {
	d := profileData{Target: "all", PID: o.PID, FrequencyHz: o.Frequency, Stacks: stacksKindName(o.stacks), RootFrames: rootFrameName(o.root),
		Samples: prof.Total(), Lost: prof.Lost.Total(), LostBy: prof.Lost,
		TopFunctions: []functionSamples{}, Folded: []foldedStack{}}
	if o.PID != 0 {
		d.Target = "pid"
	}
	fp := flame.New(flame.Samples)
	folded := map[string]uint64{}
	self := map[string]uint64{}
	total := map[string]uint64{}
	for _, s := range prof.Samples {
		frames := cpuprofile.Frames(o.sym, s, o.root)
		fp.Add(frames, int64(s.Count))
		folded[strings.Join(frames, ";")] += s.Count
		fns := frames
		if o.root != cpuprofile.RootNone {
			fns = frames[1:] // the synthetic root is not a function
		}
		if len(fns) == 0 {
			continue
		}
		self[fns[len(fns)-1]] += s.Count
		seen := make(map[string]bool, len(fns))
		for _, f := range fns {
			if !seen[f] { // recursion counts once per sample
				seen[f] = true
				total[f] += s.Count
			}
		}
	}
	for stack, n := range folded {
		d.Folded = append(d.Folded, foldedStack{Stack: stack, Count: n})
	}
	sort.Slice(d.Folded, func(i, j int) bool {
		if d.Folded[i].Count != d.Folded[j].Count {
			return d.Folded[i].Count > d.Folded[j].Count
		}
		return d.Folded[i].Stack < d.Folded[j].Stack
	})
	for fn, n := range total {
		d.TopFunctions = append(d.TopFunctions, functionSamples{Function: fn, Self: self[fn], Total: n,
			SelfShare: share(self[fn], d.Samples), TotalShare: share(n, d.Samples)})
	}
	sort.Slice(d.TopFunctions, func(i, j int) bool {
		a, b := d.TopFunctions[i], d.TopFunctions[j]
		if a.Self != b.Self {
			return a.Self > b.Self
		}
		if a.Total != b.Total {
			return a.Total > b.Total
		}
		return a.Function < b.Function
	})
	d.Warnings = o.sym.Warnings()
	return fp, d
}

func share(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func profileOverhead(p *cpuprofile.Profiler, attached, window time.Duration, lost uint64) *evidence.Overhead {
	ov := &evidence.Overhead{AttachMethod: string(p.Method()), AttachNs: int64(attached), EventsLost: lost}
	var total time.Duration
	for _, c := range p.Costs() {
		ov.Programs = append(ov.Programs, evidence.NewProgramCost(c.Program, c.RunCount, c.RunTime))
		total += c.RunTime
	}
	if window > 0 && p.CPUs() > 0 {
		ov.BPFTimeShare = float64(total) / (float64(window) * float64(p.CPUs()))
	}
	return ov
}

// write renders to --out (removed again if rendering fails, so no partial
// file is left behind) or standard output.
func (o *profileOptions) write(g *Globals, r *report.Report, d profileData, fp *flame.Profile) error {
	if o.OutFile == "" {
		return o.render(g.Out, r, d, fp)
	}
	f, err := os.Create(o.OutFile)
	if err != nil {
		return asUsage(fmt.Errorf("--out: %w", err))
	}
	err = o.render(f, r, d, fp)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(o.OutFile)
		return fmt.Errorf("write %s: %w", o.OutFile, err)
	}
	fmt.Fprintf(g.Err, "wrote %s (%s, %d samples)\n", o.OutFile, o.format, d.Samples)
	return nil
}

func (o *profileOptions) render(w io.Writer, r *report.Report, d profileData, fp *flame.Profile) error {
	opts := flame.Options{Title: o.title(d), Subtitle: fmt.Sprintf("%d samples at %d Hz, %s stacks, %v", d.Samples, d.FrequencyHz, d.Stacks, time.Duration(d.DurationNs).Round(time.Millisecond))}
	switch o.format {
	case report.JSON:
		return report.WriteJSON(w, r)
	case formatFolded:
		return flame.WriteFolded(w, fp)
	case formatSVG:
		return flame.WriteSVG(w, fp, opts)
	case formatHTML:
		return flame.WriteHTML(w, fp, opts)
	case formatPprof:
		return flame.WritePprof(w, fp)
	case formatSpeedscope:
		return flame.WriteSpeedscope(w, fp, opts)
	}
	writeProfileText(w, r, d, o.Top)
	return nil
}

func (o *profileOptions) title(d profileData) string {
	if o.Title != "" {
		return o.Title
	}
	if d.PID != 0 {
		return fmt.Sprintf("CPU profile of process %d", d.PID)
	}
	return "CPU profile of all processes"
}

func writeProfileText(w io.Writer, r *report.Report, d profileData, top int) {
	target := "all processes"
	if d.PID != 0 {
		target = fmt.Sprintf("process %d", d.PID)
	}
	fmt.Fprintf(w, "perfscope profile — %s, %.2fs at %d Hz on %d CPUs, %s stacks: %d samples, %d lost\n",
		target, time.Duration(d.DurationNs).Seconds(), d.FrequencyHz, d.CPUs, d.Stacks, d.Samples, d.Lost)
	for _, warn := range d.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if d.Samples == 0 {
		fmt.Fprintln(w, "No samples: the target did not run on a CPU during the window.")
		return
	}
	fns := d.TopFunctions
	report.Heading(w, "Top functions by self samples (where the CPU was)")
	writeFunctionTable(w, fns, top)

	byTotal := append([]functionSamples(nil), fns...)
	sort.SliceStable(byTotal, func(i, j int) bool { return byTotal[i].Total > byTotal[j].Total })
	report.Heading(w, "Top functions by total samples (on the stack)")
	writeFunctionTable(w, byTotal, top)

	if d.Lost > 0 {
		l := d.LostBy
		fmt.Fprintf(w, "\nLost samples: %d kernel-stack and %d user-stack collisions, %d kernel-stack and %d user-stack faults, %d with the count table full\n",
			l.KernelStackCollisions, l.UserStackCollisions, l.KernelStackFaults, l.UserStackFaults, l.CountsFull)
	}
	if r != nil && r.Overhead != nil {
		ov := r.Overhead
		report.Heading(w, "perfscope's own cost")
		for _, p := range ov.Programs {
			fmt.Fprintf(w, "%s: %d runs, %s each, %s in all; BPF time %s of all CPU time\n",
				p.Program, p.RunCount, report.Nanos(p.PerRunNs), report.Nanos(float64(p.RunTimeNs)), report.Percent(ov.BPFTimeShare))
		}
	}
}

func writeFunctionTable(w io.Writer, fns []functionSamples, top int) {
	t := report.Table{Header: []string{"self", "self%", "total", "total%", "", "function"}}
	for i, f := range fns {
		if i == top {
			break
		}
		t.Add(fmt.Sprint(f.Self), report.Percent(f.SelfShare), fmt.Sprint(f.Total), report.Percent(f.TotalShare), report.Bar(f.SelfShare, 10), f.Function)
	}
	t.Write(w)
}
