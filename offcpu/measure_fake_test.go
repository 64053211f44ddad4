package offcpu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/probes"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// recorded is a probe that returns a recorded snapshot.
type recorded struct {
	snap   probe.Snapshot
	closed int
	opts   probe.Options
}

func (r *recorded) Snapshot() (probe.Snapshot, error) { return r.snap, nil }
func (r *recorded) Method() probes.AttachMethod       { return probes.MethodBTF }
func (r *recorded) Close() error                      { r.closed++; return nil }
func (r *recorded) SelfCosts() (probes.SelfCosts, error) {
	return probes.SelfCosts{"sched:sched_switch": {{Runs: 100, TimedRuns: 2, TimedNs: 4000}}}, nil
}

// Measure from fixtures: the process's name and threads from a recorded
// /proc, the probe replaced by a recording.
func TestMeasureFromFixtures(t *testing.T) {
	rec := &recorded{snap: fixture().Snapshot}
	started := false
	o := Options{PID: 100, Duration: 50 * time.Millisecond, Proc: procfs.FS{Root: "testdata/host"}, Symbols: symbols.FS{Root: "testdata/host"},
		Probe: probe.Options{MinBlock: time.Millisecond}, Started: func() { started = true },
		Open: func(po probe.Options) (Probe, error) { rec.opts = po; return rec, nil }}
	ev, err := Measure(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !started || rec.closed == 0 || rec.opts.PID != 100 || rec.opts.MinBlock != time.Millisecond {
		t.Errorf("started %v, closed %d, probe options %+v", started, rec.closed, rec.opts)
	}
	if ev.Comm != "app" || ev.AttachMethod != "tp_btf" || ev.Totals.ThreadsUnseen != 1 || len(ev.Programs) != 1 || ev.Programs[0].PerRunNs != 2000 {
		t.Errorf("evidence: comm %q method %s unseen %d programs %+v", ev.Comm, ev.AttachMethod, ev.Totals.ThreadsUnseen, ev.Programs)
	}
	if !strings.Contains(strings.Join(ev.Warnings, "\n"), "kernel frames are not named") {
		t.Errorf("warnings %q: want the missing kallsyms said", ev.Warnings)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o.Duration = time.Hour
	if ev, err := Measure(ctx, o); err != nil || !strings.Contains(strings.Join(ev.Warnings, "\n"), "interrupted") {
		t.Errorf("interrupted run: %v, warnings %q", err, ev.Warnings)
	}

	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{PID: 4242, Duration: time.Second, Proc: o.Proc, Open: o.Open}, "no such process"},
		{Options{PID: 100, Proc: o.Proc, Open: o.Open}, "duration"},
		{Options{PID: -1, Duration: time.Second}, "pid -1"},
	} {
		if _, err := Measure(context.Background(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	refused := Options{PID: 100, Duration: time.Second, Proc: o.Proc, Symbols: o.Symbols,
		Open: func(probe.Options) (Probe, error) { return nil, probes.ErrPermission }}
	if _, err := Measure(context.Background(), refused); !errors.Is(err, probes.ErrPermission) {
		t.Errorf("a probe refused: %v", err)
	}
}

// fakeNamer names every kernel address "from_the_namer" and counts its
// calls and the addresses it was asked.
type fakeNamer struct {
	opened, calls int
	asked         map[uint64]bool
}

func (n *fakeNamer) NameKernel(addrs []uint64) ([]symbols.KernelName, error) {
	n.calls++
	out := make([]symbols.KernelName, len(addrs))
	for i, a := range addrs {
		n.asked[a] = true
		out[i] = symbols.KernelName{Name: "from_the_namer", OK: true}
	}
	return out, nil
}
func (n *fakeNamer) Close() error { return nil }

// With a kernel namer, every kernel address of the run (waits' and
// wakers') is named in one batch and /proc/kallsyms is never needed.
func TestMeasureNamesKernelFramesInOneBatch(t *testing.T) {
	rec := &recorded{snap: fixture().Snapshot}
	n := &fakeNamer{asked: map[uint64]bool{}}
	o := Options{PID: 100, Duration: 10 * time.Millisecond, Proc: procfs.FS{Root: "testdata/host"}, Symbols: symbols.FS{Root: "testdata/host"},
		Open:        func(probe.Options) (Probe, error) { return rec, nil },
		KernelNamer: func() (symbols.KernelNamer, error) { n.opened++; return n, nil }}
	ev, err := Measure(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]bool{}
	for _, w := range rec.snap.Waits {
		for _, a := range symbols.CallSites(w.KernelStack) {
			want[a] = true
		}
		if w.Waker != nil {
			for _, a := range symbols.CallSites(w.Waker.KernelStack) {
				want[a] = true
			}
		}
	}
	if n.opened != 1 || n.calls != 1 || len(n.asked) != len(want) || len(want) == 0 {
		t.Errorf("namer opened %d times, called %d times for %d addresses; the run has %d", n.opened, n.calls, len(n.asked), len(want))
	}
	if strings.Contains(strings.Join(ev.Warnings, "\n"), "kernel frames are") {
		t.Errorf("warnings %q: kallsyms was needed", ev.Warnings)
	}
	named := false
	for _, w := range ev.Waits {
		for _, f := range w.Stack {
			named = named || f == "from_the_namer"+symbols.KernelSuffix
		}
	}
	if !named {
		t.Errorf("no kernel frame named by the namer in %+v", ev.Waits)
	}
}
