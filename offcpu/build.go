package offcpu

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// Symbolizer names addresses (collectors/symbols.Symbolizer does).
type Symbolizer interface {
	Kernel(addrs []uint64) []string
	User(pid int, addrs []uint64) []string
}

// DefaultTop is how many waits the evidence lists by default.
const DefaultTop = 20

// maxReasonSites is how many call sites each reason lists.
const maxReasonSites = 5

// Input is everything Build reads: what the probe counted and what /proc
// said around it.
type Input struct {
	Snapshot probe.Snapshot
	Symbols  Symbolizer
	// PID is the watched process (0: every process).
	PID int
	// Comm names the watched process; Comms every process the run saw
	// (for pools and run-queue tables; a missing one is named by its
	// first thread).
	Comm  string
	Comms map[int]string
	// Duration is the window: from the probe's window start to the
	// snapshot.
	Duration time.Duration
	CPUs     int
	// Busy is each CPU's busy share over the window (nil: unknown).
	Busy []evidence.CPUBusy
	// TasksStart and TasksEnd are the watched processes' threads from
	// /proc at the window's start and end, by pid: threads that never
	// switched are counted from them (start and end schedstat when both
	// are there, else the end's state for the whole window).
	TasksStart, TasksEnd map[int][]procfs.Task
	AttachMethod         string
	Stacks               string
	// Top bounds the waits listed (0: DefaultTop).
	Top      int
	Programs []evidence.ProgramCost
	// Warnings are the caller's, added to the evidence's.
	Warnings []string
}

// threadTime is one thread's time over the window.
type threadTime struct {
	pid, tid              int
	comm                  string
	on, runnable, unknown time.Duration
	blocked               [probe.StateCount]time.Duration
	runnableWaits         uint64
	waits, shortWaits     uint64
	short                 time.Duration
	unseen                bool
}

func (t threadTime) blockedTotal() time.Duration {
	var d time.Duration
	for _, b := range t.blocked {
		d += b
	}
	return d
}

func (t threadTime) seen() time.Duration { return t.on + t.runnable + t.blockedTotal() + t.unknown }

// threadTimes closes each thread's in-flight time at the snapshot and
// adds the threads of the watched processes that never switched.
func threadTimes(in Input) []threadTime {
	s := in.Snapshot
	byTID := map[int]int{}
	var out []threadTime
	for _, th := range s.Threads {
		if in.PID != 0 && th.PID != in.PID {
			continue
		}
		tt := th.Totals
		t := threadTime{pid: th.PID, tid: th.TID, comm: th.Comm, on: tt.OnCPU, runnable: tt.RunnableTotal(), unknown: tt.Before,
			blocked: tt.Blocked, waits: tt.Waits, shortWaits: tt.ShortWaits, short: tt.Short}
		for _, n := range tt.RunnableCount {
			t.runnableWaits += n
		}
		if th.Current && s.Mono > 0 {
			switch {
			case th.OnSince > 0 && s.Mono > th.OnSince:
				t.on += s.Mono - th.OnSince
			case th.OffSince > 0 && s.Mono > th.OffSince:
				off := s.Mono - th.OffSince
				runq := time.Duration(0)
				if th.RunnableSince > 0 && s.Mono > th.RunnableSince {
					runq = min(off, s.Mono-th.RunnableSince)
				}
				if th.OffState == probe.Runnable {
					runq = off
				}
				t.runnable += runq
				if th.OffState < probe.StateCount {
					t.blocked[th.OffState] += off - runq
				}
			case th.RunnableSince > 0 && s.Mono > th.RunnableSince:
				t.runnable += s.Mono - th.RunnableSince
			}
		}
		byTID[th.TID] = len(out)
		out = append(out, t)
	}
	start := map[int]procfs.Task{}
	for _, tasks := range in.TasksStart {
		for _, tk := range tasks {
			start[tk.TID] = tk
		}
	}
	for pid, tasks := range in.TasksEnd {
		for _, tk := range tasks {
			if i, ok := byTID[tk.TID]; ok {
				if out[i].comm == "" {
					out[i].comm = tk.Comm
				}
				continue
			}
			t := threadTime{pid: pid, tid: tk.TID, comm: tk.Comm, unseen: true}
			st := stateOfLetter(tk.State)
			if s0, ok := start[tk.TID]; ok && s0.Sched != nil && tk.Sched != nil && tk.Sched.OnCPU >= s0.Sched.OnCPU {
				// The scheduler's own accounting over the window.
				t.on = min(tk.Sched.OnCPU-s0.Sched.OnCPU, in.Duration)
				t.runnable = min(max(0, tk.Sched.RunQueueWait-s0.Sched.RunQueueWait), in.Duration-t.on)
				rest := in.Duration - t.on - t.runnable
				if st == probe.Runnable {
					t.unknown = rest
				} else {
					t.blocked[st] = rest
				}
			} else if st == probe.Runnable || tk.State == 'Z' || tk.State == 'X' {
				t.unknown = in.Duration
			} else {
				t.blocked[st] = in.Duration
			}
			out = append(out, t)
		}
	}
	return out
}

// stateOfLetter maps /proc's state letter to the probe's states.
func stateOfLetter(c byte) probe.State {
	switch c {
	case 'R':
		return probe.Runnable
	case 'S':
		return probe.Sleeping
	case 'D':
		return probe.Uninterruptible
	case 'I':
		return probe.Idle
	}
	return probe.Other
}

// namedWait is a probe wait with its frames named and classified.
type namedWait struct {
	probe.Wait
	kernel, user []string // leaf first, kernel without "_[k]"
	reason       Reason
	site         string
	waker        *evidence.OffCPUWaker
	comm         string
	pool         poolKey
}

func kernelNames(sym Symbolizer, stack []uint64) []string {
	if len(stack) == 0 {
		return nil
	}
	names := sym.Kernel(symbols.CallSites(stack))
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, symbols.KernelSuffix)
	}
	return names
}

func userNames(sym Symbolizer, pid int, stack []uint64) []string {
	if len(stack) == 0 {
		return nil
	}
	return sym.User(pid, symbols.CallSites(stack))
}

// rootFirst is the folded order: user frames from the outermost, then
// kernel frames (with "_[k]") down to the wait.
func rootFirst(kernel, user []string) []string {
	out := make([]string, 0, len(kernel)+len(user))
	for i := len(user) - 1; i >= 0; i-- {
		out = append(out, user[i])
	}
	for i := len(kernel) - 1; i >= 0; i-- {
		out = append(out, kernel[i]+symbols.KernelSuffix)
	}
	return out
}

// Build turns a run's probe snapshot and /proc readings into evidence.
func Build(in Input) evidence.OffCPU {
	s := in.Snapshot
	ev := evidence.OffCPU{Target: "all", PID: in.PID, Comm: in.Comm, DurationNs: int64(in.Duration), CPUs: in.CPUs,
		AttachMethod: in.AttachMethod, Stacks: in.Stacks, MinBlockNs: int64(s.MinBlock), StackEvery: max(1, s.StackEvery),
		CPUBusy: in.Busy, Totals: evidence.OffCPUTotals{BlockedByState: map[string]int64{}}, Lost: evidence.OffCPULost(s.Lost)}
	if in.PID != 0 {
		ev.Target = "pid"
	}
	top := in.Top
	if top <= 0 {
		top = DefaultTop
	}
	pools, comms, threadComm := tallyThreads(in, &ev.Totals)
	t := newWaitTally(pools)
	for i, w := range namedWaits(in, uint64(ev.StackEvery), threadComm) {
		ev.Totals.KeptNs += int64(w.Total)
		if i < top {
			ev.Waits = append(ev.Waits, evidence.OffCPUWait{PID: w.PID, TID: w.TID, Comm: w.comm, Pool: w.pool.name, State: w.State.String(),
				Reason: string(w.reason), Site: w.site, Count: w.Count, TotalNs: int64(w.Total), RunnableNs: int64(w.Runnable),
				MaxNs: int64(w.Max), Stack: rootFirst(w.kernel, w.user), Waker: w.waker})
		}
		t.add(w)
	}
	ev.Folded = t.foldedStacks()
	ev.ByReason = t.byReason(ev.Totals.KeptNs)
	ev.Pools = t.finishPools()
	ev.RunQueue = runQueue(s, in.PID, comms)
	ev.Programs = in.Programs
	ev.Warnings = append(warnings(ev, s), in.Warnings...)
	return ev
}

// tallyThreads adds every thread's times to totals and to its pool's: the
// pools by key, and the names of processes and threads.
func tallyThreads(in Input, totals *evidence.OffCPUTotals) (pools map[poolKey]*evidence.ThreadPool, comms, threadComm map[int]string) {
	threads := threadTimes(in)
	comms = map[int]string{}
	for pid, c := range in.Comms {
		comms[pid] = c
	}
	threadComm = map[int]string{}
	for _, t := range threads {
		threadComm[t.tid] = t.comm
		if t.tid == t.pid && comms[t.pid] == "" {
			comms[t.pid] = t.comm
		}
	}
	pools = map[poolKey]*evidence.ThreadPool{}
	for _, t := range threads {
		totals.Threads++
		if t.unseen {
			totals.ThreadsUnseen++
		}
		totals.OnCPUNs += int64(t.on)
		totals.RunnableNs += int64(t.runnable)
		totals.UnknownNs += int64(t.unknown)
		for st, b := range t.blocked {
			if b > 0 {
				totals.BlockedByState[probe.State(st).String()] += int64(b)
				totals.BlockedNs += int64(b)
			}
		}
		totals.Waits += t.waits
		totals.ShortWaits += t.shortWaits
		totals.ShortNs += int64(t.short)
		k := poolOf(t.pid, t.tid, t.comm)
		p := pools[k]
		if p == nil {
			p = &evidence.ThreadPool{PID: k.pid, Name: k.name, Process: comms[k.pid], ByReason: map[string]int64{}}
			if k.pid == 0 {
				p.Process = KernelProcess
			}
			pools[k] = p
		}
		p.Threads++
		p.OnCPUNs += int64(t.on)
		p.RunnableNs += int64(t.runnable)
		p.BlockedNs += int64(t.blockedTotal())
		p.UnknownNs += int64(t.unknown)
		p.SeenNs += int64(t.seen())
		p.RunnableWaits += t.runnableWaits
	}
	return pools, comms, threadComm
}

// namedWaits are the snapshot's waits (of in.PID's threads, when given),
// named and classified, scaled by 1 in scale stacks sampled, longest first.
func namedWaits(in Input, scale uint64, threadComm map[int]string) []namedWait {
	var waits []namedWait
	for _, w := range in.Snapshot.Waits {
		if in.PID != 0 && w.PID != in.PID {
			continue
		}
		nw := namedWait{Wait: w}
		nw.Count *= scale
		nw.Total *= time.Duration(scale)
		nw.Runnable *= time.Duration(scale)
		nw.kernel = trimWaitLeaf(kernelNames(in.Symbols, w.KernelStack))
		nw.user = userNames(in.Symbols, w.PID, w.UserStack)
		nw.reason = Classify(w.State, nw.kernel, nw.user)
		nw.site = Site(nw.reason, nw.kernel, nw.user)
		nw.comm = threadComm[w.TID]
		nw.pool = poolOf(w.PID, w.TID, nw.comm)
		if w.Waker != nil {
			nw.waker = wakerOf(in.Symbols, w.Waker)
		}
		waits = append(waits, nw)
	}
	sort.SliceStable(waits, func(i, j int) bool { return waits[i].Total > waits[j].Total })
	return waits
}

// poolSite is where one pool's threads blocked for one reason.
type poolSite struct {
	pool   poolKey
	reason Reason
	site   string
}

// waitTally sums the named waits by folded stack, by reason and site, and
// by pool and site (the time blocked there, who woke it, which threads).
type waitTally struct {
	pools           map[poolKey]*evidence.ThreadPool
	folded          map[string]int64
	reasons         map[Reason]*evidence.OffCPUReason
	reasonSites     map[Reason]map[string]int64
	reasonSiteWaits map[Reason]map[string]uint64
	poolSites       map[poolSite]int64
	poolSiteWakers  map[poolSite]map[string]int64
	poolSiteThreads map[poolSite]map[int]bool
}

func newWaitTally(pools map[poolKey]*evidence.ThreadPool) *waitTally {
	return &waitTally{pools: pools, folded: map[string]int64{}, reasons: map[Reason]*evidence.OffCPUReason{},
		reasonSites: map[Reason]map[string]int64{}, reasonSiteWaits: map[Reason]map[string]uint64{},
		poolSites: map[poolSite]int64{}, poolSiteWakers: map[poolSite]map[string]int64{}, poolSiteThreads: map[poolSite]map[int]bool{}}
}

func (t *waitTally) add(w namedWait) {
	root := strings.ReplaceAll(w.comm, ";", ":")
	if root == "" {
		root = fmt.Sprintf("[tid %d]", w.TID)
	}
	stack := append([]string{root}, rootFirst(w.kernel, w.user)...)
	for j, f := range stack {
		stack[j] = strings.ReplaceAll(f, ";", ":")
	}
	t.folded[strings.Join(stack, ";")] += int64(w.Total)

	r := t.reasons[w.reason]
	if r == nil {
		r = &evidence.OffCPUReason{Reason: string(w.reason)}
		t.reasons[w.reason] = r
		t.reasonSites[w.reason] = map[string]int64{}
		t.reasonSiteWaits[w.reason] = map[string]uint64{}
	}
	r.Ns += int64(w.Total)
	r.Waits += w.Count
	t.reasonSites[w.reason][w.site] += int64(w.Total)
	t.reasonSiteWaits[w.reason][w.site] += w.Count

	if w.reason == Preempted {
		return
	}
	k := poolSite{w.pool, w.reason, w.site}
	blocked := int64(w.Total - w.Runnable)
	t.poolSites[k] += blocked
	if t.poolSiteThreads[k] == nil {
		t.poolSiteThreads[k] = map[int]bool{}
	}
	t.poolSiteThreads[k][w.TID] = true
	if p := t.pools[w.pool]; p != nil {
		p.ByReason[string(w.reason)] += blocked
	}
	if w.waker != nil {
		if t.poolSiteWakers[k] == nil {
			t.poolSiteWakers[k] = map[string]int64{}
		}
		t.poolSiteWakers[k][wakerLabel(w.waker)] += blocked
	}
}

// foldedStacks are the folded stacks in microseconds, the longest first.
func (t *waitTally) foldedStacks() []evidence.FoldedTime {
	var out []evidence.FoldedTime
	for stack, ns := range t.folded {
		if us := int64(math.Round(float64(ns) / 1e3)); us > 0 {
			out = append(out, evidence.FoldedTime{Stack: stack, Us: us})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Us != out[j].Us {
			return out[i].Us > out[j].Us
		}
		return out[i].Stack < out[j].Stack
	})
	return out
}

// byReason are the reasons with their shares of kept time and their
// sites, the longest first.
func (t *waitTally) byReason(keptNs int64) []evidence.OffCPUReason {
	var out []evidence.OffCPUReason
	for reason, r := range t.reasons {
		if keptNs > 0 {
			r.Share = float64(r.Ns) / float64(keptNs)
		}
		r.TopSite = largest(t.reasonSites[reason])
		for site, ns := range t.reasonSites[reason] {
			r.Sites = append(r.Sites, evidence.OffCPUSite{Site: site, Ns: ns, Waits: t.reasonSiteWaits[reason][site]})
		}
		sort.Slice(r.Sites, func(i, j int) bool {
			if r.Sites[i].Ns != r.Sites[j].Ns {
				return r.Sites[i].Ns > r.Sites[j].Ns
			}
			return r.Sites[i].Site < r.Sites[j].Site
		})
		if len(r.Sites) > maxReasonSites {
			r.Sites = r.Sites[:maxReasonSites]
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ns != out[j].Ns {
			return out[i].Ns > out[j].Ns
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}

// finishPools gives each pool its shares and the site it was blocked in
// longest, the pools seen longest first.
func (t *waitTally) finishPools() []evidence.ThreadPool {
	for k, ns := range t.poolSites {
		p := t.pools[k.pool]
		if p == nil || ns <= p.TopSiteNs && !(ns == p.TopSiteNs && k.site < p.TopSite) {
			continue
		}
		p.TopSite, p.TopSiteReason, p.TopSiteNs = k.site, string(k.reason), ns
		p.TopSiteWaker = largest(t.poolSiteWakers[k])
		p.TopSiteThreads = len(t.poolSiteThreads[k])
	}
	var out []evidence.ThreadPool
	for _, p := range t.pools {
		if p.SeenNs > 0 {
			p.OnCPUShare = float64(p.OnCPUNs) / float64(p.SeenNs)
			p.RunnableShare = float64(p.RunnableNs) / float64(p.SeenNs)
			p.BlockedShare = float64(p.BlockedNs) / float64(p.SeenNs)
		}
		if p.BlockedNs > 0 {
			p.TopSiteShare = min(1, float64(p.TopSiteNs)/float64(p.BlockedNs))
		}
		if p.RunnableWaits > 0 {
			p.MeanRunnableNs = p.RunnableNs / int64(p.RunnableWaits)
		}
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.SeenNs != b.SeenNs {
			return a.SeenNs > b.SeenNs
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.Name < b.Name
	})
	return out
}

// wakerOf names a waker's stacks and reads its context.
func wakerOf(sym Symbolizer, w *probe.Waker) *evidence.OffCPUWaker {
	kernel := kernelNames(sym, w.KernelStack)
	user := userNames(sym, w.PID, w.UserStack)
	kind, by := WakerContext(kernel)
	kernel = trimWakerLeaf(kernel)
	site := by
	if site != "" {
		site += symbols.KernelSuffix
	}
	if kind == WakerThread {
		for _, f := range user {
			if named(f) && !isPrimitive(f) {
				site = f + " → " + site
				break
			}
		}
	}
	if site == "" {
		site = symbols.Unknown
	}
	comm := w.Comm
	if w.PID == 0 && w.TID == 0 {
		comm = "[idle]"
	}
	return &evidence.OffCPUWaker{PID: w.PID, TID: w.TID, Comm: comm, Kind: kind, Site: site, Stack: rootFirst(kernel, user)}
}

// wakerLabel says in a few words who woke a wait, for a pool's summary.
func wakerLabel(w *evidence.OffCPUWaker) string {
	switch w.Kind {
	case WakerThread:
		return fmt.Sprintf("%s (%s)", w.Comm, w.Site)
	case WakerSoftirq:
		return fmt.Sprintf("a softirq (%s) in %s", w.Site, w.Comm)
	}
	return fmt.Sprintf("an interrupt (%s)", w.Site)
}

func largest(m map[string]int64) string {
	best, bestN := "", int64(-1)
	for k, n := range m {
		if n > bestN || n == bestN && k < best {
			best, bestN = k, n
		}
	}
	return best
}

// runQueue reads the probe's histograms: every CPU's, and every process's
// (only the watched one's in a pid run).
func runQueue(s probe.Snapshot, pid int, comms map[int]string) evidence.RunQueue {
	var rq evidence.RunQueue
	var all, wake, pre probe.Hist
	for cpu, hs := range s.RunqCPU {
		w, p := hs[probe.AfterWakeup], hs[probe.AfterPreemption]
		wake, pre = wake.Add(w), pre.Add(p)
		all = all.Add(w).Add(p)
		if w.Count+p.Count == 0 {
			continue
		}
		rq.PerCPU = append(rq.PerCPU, evidence.CPURunQueue{CPU: cpu, All: hist(w.Add(p)), Wakeup: hist(w), Preempted: hist(p)})
	}
	if pid != 0 {
		// The CPUs' histograms hold every process's waits: in a pid run
		// the whole's are the process's.
		hs := s.RunqProcess[pid]
		all, wake, pre = hs[probe.AfterWakeup].Add(hs[probe.AfterPreemption]), hs[probe.AfterWakeup], hs[probe.AfterPreemption]
	}
	rq.All, rq.Wakeup, rq.Preempted = hist(all), hist(wake), hist(pre)
	for p, hs := range s.RunqProcess {
		if pid != 0 && p != pid {
			continue
		}
		w, pr := hs[probe.AfterWakeup], hs[probe.AfterPreemption]
		if w.Count+pr.Count == 0 {
			continue
		}
		rq.PerProc = append(rq.PerProc, evidence.ProcessRunQueue{PID: p, Comm: comms[p], All: hist(w.Add(pr)), Wakeup: hist(w), Preempted: hist(pr)})
	}
	sort.Slice(rq.PerProc, func(i, j int) bool {
		a, b := rq.PerProc[i].All, rq.PerProc[j].All
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return rq.PerProc[i].PID < rq.PerProc[j].PID
	})
	return rq
}

func hist(h probe.Hist) evidence.LatencyHist {
	return evidence.NewLatencyHist(h.Slots[:], uint64(h.Sum))
}

// warnings say what the evidence did not see.
func warnings(ev evidence.OffCPU, s probe.Snapshot) []string {
	var out []string
	l := s.Lost
	if l.ThreadsFull > 0 {
		out = append(out, fmt.Sprintf("%d context switches of threads beyond the thread map's capacity were not followed: those threads are missing", l.ThreadsFull))
	}
	if l.WaitsFull > 0 {
		out = append(out, fmt.Sprintf("%d waits found the wait map full: they are in the thread totals but in no stack", l.WaitsFull))
	}
	if n := l.KernelStacksFull + l.UserStacksFull; n > 0 {
		out = append(out, fmt.Sprintf("%d stacks found the stack map full: those waits are kept without that half of their stack", n))
	}
	if n := l.KernelStackFaults + l.UserStackFaults; n > 0 && ev.Totals.Waits > 0 && n*100 > ev.Totals.Waits {
		out = append(out, fmt.Sprintf("%d stack walks failed (a user stack not resident, a binary without frame pointers ends its walk early)", n))
	}
	if l.ProcessesFull > 0 {
		out = append(out, fmt.Sprintf("%d run-queue waits found the per-process histogram map full: the per-CPU histograms have them", l.ProcessesFull))
	}
	if ev.StackEvery > 1 {
		out = append(out, fmt.Sprintf("stacks were taken at 1 in %d switches: the waits table and the folded stacks are estimates scaled by %d; thread, pool and run-queue numbers are exact",
			ev.StackEvery, ev.StackEvery))
	}
	if ev.Totals.UnknownNs > 0 && ev.Totals.OnCPUNs+ev.Totals.RunnableNs+ev.Totals.BlockedNs > 0 {
		share := float64(ev.Totals.UnknownNs) / float64(ev.Totals.OnCPUNs+ev.Totals.RunnableNs+ev.Totals.BlockedNs+ev.Totals.UnknownNs)
		if share > 0.05 {
			out = append(out, fmt.Sprintf("%.0f %% of the threads' time was off CPU before they were first seen, in a state the probe did not see (counted as unknown)", 100*share))
		}
	}
	return out
}
