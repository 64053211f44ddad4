package recipes

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/probes"
	probe "github.com/perfscope/perfscope/probes/offcpu"
	"github.com/perfscope/perfscope/report"
)

// recordedOffCPU is an off-CPU probe replaying one snapshot.
type recordedOffCPU struct {
	snap   probe.Snapshot
	opts   probe.Options
	closed int
}

func (r *recordedOffCPU) Snapshot() (probe.Snapshot, error)    { return r.snap, nil }
func (r *recordedOffCPU) Method() probes.AttachMethod          { return probes.MethodBTF }
func (r *recordedOffCPU) Costs() []probes.ProgramCost          { return nil }
func (r *recordedOffCPU) Missing() map[string]error            { return nil }
func (r *recordedOffCPU) SelfCosts() (probes.SelfCosts, error) { return probes.SelfCosts{}, nil }
func (r *recordedOffCPU) Close() error                         { r.closed++; return nil }

// The offcpu recipe, run on a recording: the parameters reach the probe,
// the evidence names the process and its lock, the off-CPU rules judge
// it (two pool threads serialized on one futex), and the folded output
// is microseconds off CPU.
func TestOffCPURecipeOnARecording(t *testing.T) {
	root := replay.KallsymsRoot(t, "futex_wait_queue", "futex_wait", "do_futex", "__x64_sys_futex", "do_nanosleep", "hrtimer_nanosleep")
	k := func(i int) uint64 { return 0xffffffff81000010 + uint64(i)*0x1000 }
	lock := []uint64{k(0), k(1), k(2), k(3)}
	sleep := []uint64{k(4), k(5)}
	ms := time.Millisecond
	tot := func(on, blocked time.Duration) probe.ThreadTotals {
		t := probe.ThreadTotals{OnCPU: on, Waits: 10}
		t.Blocked[probe.Sleeping] = blocked
		return t
	}
	holder := &probe.Waker{PID: 100, TID: 102, Comm: "pool-1-thread-2", KernelStack: []uint64{k(1)}}
	rec := &recordedOffCPU{snap: probe.Snapshot{Mono: 2 * time.Second, WindowStart: time.Second, MinBlock: ms, StackEvery: 1,
		Threads: []probe.Thread{
			{TID: 101, PID: 100, Comm: "pool-1-thread-1", Totals: tot(50*ms, 950*ms)},
			{TID: 102, PID: 100, Comm: "pool-1-thread-2", Totals: tot(50*ms, 950*ms)},
			{TID: 103, PID: 100, Comm: "pool-1-thread-3", Totals: tot(50*ms, 950*ms)},
		},
		Waits: []probe.Wait{
			{PID: 100, TID: 101, State: probe.Sleeping, KernelStack: lock, Waker: holder, Count: 40, Total: 900 * ms, Max: 30 * ms},
			{PID: 100, TID: 103, State: probe.Sleeping, KernelStack: lock, Waker: holder, Count: 40, Total: 900 * ms, Max: 30 * ms},
			{PID: 100, TID: 102, State: probe.Sleeping, KernelStack: sleep, Count: 3, Total: 30 * ms, Max: 10 * ms},
		},
	}}
	replay.WriteFile(t, filepath.Join(root, "proc/100/comm"), "app\n")
	replay.WriteFile(t, filepath.Join(root, "proc/100/status"), "Name:\tapp\nState:\tS (sleeping)\nTgid:\t100\nPid:\t100\nNStgid:\t100\n")
	src := measure.Sources{Root: procfs.FS{Root: root}, Symbols: symbols.FS{Root: root},
		Probes: measure.With(measure.Opener{}, &probe.Spec, func(o probe.Options) (measure.OffCPUProbe, error) { rec.opts = o; return rec, nil })}
	plan, err := Load("offcpu", map[string]string{"pid": "100", "duration": "20ms", "min_block": "1ms", "stacks": "kernel",
		"stack_every": "4", "waker_stacks": "false", "top": "2"}, src)
	if err != nil {
		t.Fatal(err)
	}
	plan.SetBudget(budget.Budget{}) // exact: a recording has no hooks to sample
	res, err := plan.Run(context.Background(), src, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	o := rec.opts
	if o.PID != 100 || o.MinBlock != ms || o.Stacks != probe.KernelOnly || o.StackEvery != 4 || !o.NoWakerStacks || rec.closed == 0 {
		t.Errorf("probe options %+v, closed %d", o, rec.closed)
	}
	ev := res.OffCPU
	if ev == nil || ev.Comm != "app" || ev.PID != 100 || len(ev.Waits) != 2 || ev.Coverage != nil {
		t.Fatalf("evidence %+v", ev)
	}
	if len(ev.ByReason) == 0 || ev.ByReason[0].Reason != "lock" || ev.ByReason[0].Ns != int64(1800*ms) {
		t.Errorf("by reason %+v, want lock first with 1.8 s", ev.ByReason)
	}
	found := false
	for _, f := range res.Findings {
		found = found || f.ID == "offcpu.lock-serializes-pool"
	}
	if !found {
		t.Errorf("findings %+v: want the lock that serializes pool-1-thread-*", res.Findings)
	}

	rep := res.Report("offcpu", "test")
	var folded bytes.Buffer
	if err := report.Render(&folded, rep, report.Folded); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, line := range strings.Split(strings.TrimSpace(folded.String()), "\n") {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("folded line %q", line)
		}
		sum += n
	}
	if sum != 1830000 {
		t.Errorf("folded total %d µs, want 1830000 (1.83 s off CPU)\n%s", sum, folded.String())
	}
	var text bytes.Buffer
	if err := report.Render(&text, rep, report.Text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"perfscope offcpu — app (pid 100)", "lock", "futex_wait_queue_[k]", "woken by thread pool-1-thread-2/102", "pool-1-thread-*"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}
