package measure_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/report"
)

func TestProfileSummaryCountsSelfAndTotal(t *testing.T) {
	dir := replay.KallsymsRoot(t, "outer", "middle", "inner")
	part := measure.NewProfile(measure.ProfileOptions{Root: cpuprofile.RootComm, Frequency: 99})
	const outer, middle, inner = 0xffffffff81000010, 0xffffffff81001010, 0xffffffff81002010
	prof := cpuprofile.Profile{Samples: []cpuprofile.Sample{
		{PID: 1, Comm: "a", KernelStack: []uint64{inner, middle, outer}, Count: 5},
		{PID: 1, Comm: "a", KernelStack: []uint64{middle, outer}, Count: 3},
		// Recursion: middle twice on one stack counts once in total.
		{PID: 2, Comm: "b", KernelStack: []uint64{inner, middle, middle, outer}, Count: 2},
	}}
	part.Replace(symbols.New(symbols.FS{Root: dir}), prof)
	fp, d := measure.SummarizeProfile(part.Options(), prof, part.Samples())
	if d.Samples != 10 || fp.Total() != 10 {
		t.Fatalf("samples = %d, flame total = %d; want 10", d.Samples, fp.Total())
	}
	want := map[string][2]uint64{"inner_[k]": {7, 7}, "middle_[k]": {3, 10}, "outer_[k]": {0, 10}}
	if len(d.TopFunctions) != len(want) {
		t.Fatalf("top functions = %+v, want the 3 kernel functions only (no root frame)", d.TopFunctions)
	}
	for _, f := range d.TopFunctions {
		if w := want[f.Function]; f.Self != w[0] || f.Total != w[1] {
			t.Errorf("%s: self %d total %d, want %d %d", f.Function, f.Self, f.Total, w[0], w[1])
		}
	}
	if d.TopFunctions[0].Function != "inner_[k]" || d.TopFunctions[0].SelfShare != 0.7 {
		t.Errorf("first top function = %+v, want inner_[k] at 70%%", d.TopFunctions[0])
	}
	if d.Folded[0] != (evidence.FoldedStack{Stack: "a;outer_[k];middle_[k];inner_[k]", Count: 5}) {
		t.Errorf("first folded stack = %+v", d.Folded[0])
	}
	if d.TopFunctions[0].Kind != "kernel" {
		t.Errorf("kind of inner_[k] = %q", d.TopFunctions[0].Kind)
	}
	r := measure.ProfileResult{Evidence: d, Flame: fp}.Report("test")
	r.Show.Top = 2
	var text bytes.Buffer
	if err := report.Render(&text, r, report.Text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "70.0%") || !strings.Contains(text.String(), "inner_[k]") {
		t.Errorf("text output:\n%s", text.String())
	}
}

// The udp runner's profile keeps the idle task's softirq samples (NET_RX
// run from irq_exit on an idle CPU, as on a real NIC) and leaves out the
// idle loop: the profiler is opened with KeepIdleInterrupts, the part
// splits the window's idle samples per CPU, and the section's per-CPU
// NET_RX share counts every tick of the CPU, idle loop included.
func TestNetProfileKeepsSoftirqOnIdle(t *testing.T) {
	dir := replay.KallsymsRoot(t, "default_idle", "handle_softirqs", "net_rx_action", "udp_queue_rcv_skb", "do_syscall_64")
	const idle, softirq, netrx, udp, syscall = 0xffffffff81000010, 0xffffffff81001010, 0xffffffff81002010, 0xffffffff81003010, 0xffffffff81004010
	window := cpuprofile.Profile{Samples: []cpuprofile.Sample{
		// CPU 0 idles but for the receive work RPS sends it.
		{PID: 0, TID: 0, CPU: 0, Comm: "swapper/0", KernelStack: []uint64{udp, netrx, softirq, idle}, Count: 30},
		{PID: 0, TID: 0, CPU: 0, Comm: "swapper/0", KernelStack: []uint64{idle}, Count: 70},
		// CPU 1 runs the server, which takes its own softirqs.
		{PID: 7, TID: 7, CPU: 1, Comm: "server", KernelStack: []uint64{udp, netrx, softirq, syscall}, Count: 10},
		{PID: 7, TID: 7, CPU: 1, Comm: "server", KernelStack: []uint64{syscall}, Count: 90},
	}}
	var opened cpuprofile.Options
	rec := replay.Recording{Method: "perf_event/perf_link"}
	src := measure.Sources{Root: procfs.FS{Root: dir}, Symbols: symbols.FS{Root: dir}, Probes: measure.With(measure.Opener{}, &cpuprofile.Spec,
		func(o cpuprofile.Options) (measure.CPUProfileProbe, error) {
			opened = o
			// The first window counts from the profiler's start: one
			// snapshot, at its end.
			return replay.Profile{Probe: replay.New("cpuprofile", []cpuprofile.Profile{window}, rec), Freq: 99, NCPUs: 2}, nil
		})}
	n := measure.NewNetParts(measure.NetOptions{}, 0, 99)
	if _, err := measure.Measure(context.Background(), src, measure.Window{Duration: time.Millisecond}, n.Profile); err != nil {
		t.Fatal(err)
	}
	if !opened.KeepIdleInterrupts || opened.IncludeIdle {
		t.Fatalf("profiler opened with %+v: want the idle task's interrupt samples kept, its loop not", opened)
	}
	sec, flames := measure.ProfileSplit(n.Profile, []int{0}, evidence.SoftirqEvidence{})
	if sec.Samples != 130 || sec.IdleInterruptSamples != 30 || sec.IdleLoopSamples != 70 || flames["all"].Total() != 130 {
		t.Fatalf("samples %d (flame %d), idle interrupts %d, idle loop %d; want 130 kept, 30 and 70", sec.Samples, flames["all"].Total(), sec.IdleInterruptSamples, sec.IdleLoopSamples)
	}
	if sec.NetRXSamples != 30 || flames["netrx"].Total() != 30 || flames["other"].Total() != 100 {
		t.Errorf("NET_RX CPU 0: %d samples (flame %d), other %d; want the 30 softirq-on-idle samples", sec.NetRXSamples, flames["netrx"].Total(), flames["other"].Total())
	}
	if len(sec.CPUs) != 2 {
		t.Fatalf("per CPU = %+v", sec.CPUs)
	}
	c0, c1 := sec.CPUs[0], sec.CPUs[1]
	if c0.NetRXSamples != 30 || c0.IdleInterruptSamples != 30 || c0.IdleLoopSamples != 70 || c0.NetRXShare != 0.3 {
		t.Errorf("CPU 0 = %+v: 30 of its 100 ticks in NET_RX", c0)
	}
	if c1.NetRXSamples != 10 || c1.IdleLoopSamples != 0 || c1.NetRXShare != 0.1 {
		t.Errorf("CPU 1 = %+v: 10 of its 100 ticks in NET_RX", c1)
	}
}

// The profile part samples only its window (paused from Open until Begin)
// and sets each CPU's samples taken beside those its event should have
// delivered: on a VM without a PMU, NET_RX steered to an otherwise idle
// CPU 1 is barely sampled, so the section says CPU 1 was not seen, why,
// and what the softirq probe measured there, and the NET_RX CPUs the
// shares cover are CPU 0's alone.
func TestNetProfileSaysWhichNetRXCPUsItSaw(t *testing.T) {
	dir := replay.KallsymsRoot(t, "default_idle", "handle_softirqs", "net_rx_action", "udp_queue_rcv_skb", "do_syscall_64")
	const idle, softirq, netrx, udp, syscall = 0xffffffff81000010, 0xffffffff81001010, 0xffffffff81002010, 0xffffffff81003010, 0xffffffff81004010
	window := cpuprofile.Profile{Samples: []cpuprofile.Sample{
		// CPU 0 runs the sender, the server and their softirqs.
		{PID: 7, TID: 7, CPU: 0, Comm: "server", KernelStack: []uint64{udp, netrx, softirq, syscall}, Count: 30},
		{PID: 7, TID: 7, CPU: 0, Comm: "server", KernelStack: []uint64{syscall}, Count: 69},
		// CPU 1's receive work, steered there by RPS: 3 ticks of 99.
		{PID: 0, TID: 0, CPU: 1, Comm: "swapper/1", KernelStack: []uint64{udp, netrx, softirq, idle}, Count: 1},
		{PID: 0, TID: 0, CPU: 1, Comm: "swapper/1", KernelStack: []uint64{idle}, Count: 2},
	}, CPUs: []cpuprofile.CPUCount{{CPU: 0, Taken: 99, EnabledNs: 1e9, RunningNs: 1e9}, {CPU: 1, Taken: 3, EnabledNs: 1e9, RunningNs: 1e9}}}
	choice, err := cpuprofile.ChooseEvent(cpuprofile.EventAuto, fmt.Errorf("open cycles: %w", unix.ENOENT))
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	src := measure.Sources{Root: procfs.FS{Root: dir}, Symbols: symbols.FS{Root: dir}, Probes: measure.With(measure.Opener{}, &cpuprofile.Spec,
		func(o cpuprofile.Options) (measure.CPUProfileProbe, error) {
			return replay.Profile{Probe: replay.New("cpuprofile", []cpuprofile.Profile{window}, replay.Recording{Method: "perf_event/perf_link"}),
				Freq: 99, NCPUs: 2, Choice: choice, Calls: &calls}, nil
		})}
	n := measure.NewNetParts(measure.NetOptions{}, 0, 99)
	if _, err := measure.Measure(context.Background(), src, measure.Window{Duration: time.Millisecond}, n.Profile); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, ","); got != "start,pause,resume,snapshot" {
		t.Errorf("profiler calls %s: want it paused from Open to Begin", got)
	}
	soft := evidence.SoftirqEvidence{CPUs: []evidence.SoftirqCPU{
		{CPU: 0, Vectors: map[string]evidence.SoftirqVector{"NET_RX": {TimeNs: 3e8, Share: 0.3}}},
		{CPU: 1, Vectors: map[string]evidence.SoftirqVector{"NET_RX": {TimeNs: 69e6, Share: 0.069}}},
	}}
	sec, _ := measure.ProfileSplit(n.Profile, []int{0, 1}, soft)
	if sec.Event != "cpu-clock" || sec.EventRequested != "auto" || sec.PMU != "absent" || sec.ExpectedFrom != evidence.ExpectedFromOnline ||
		!strings.Contains(sec.EventReason, "ENOENT") {
		t.Errorf("sampling = %+v", sec.ProfileSampling)
	}
	if !reflect.DeepEqual(sec.UndersampledCPUs, []int{1}) || len(sec.CPUs) != 2 {
		t.Fatalf("undersampled %v, rows %+v", sec.UndersampledCPUs, sec.CPUs)
	}
	c0, c1 := sec.CPUs[0], sec.CPUs[1]
	if *c0.TakenSamples != 99 || *c0.ExpectedSamples != 99 || c0.Undersampled || *c1.TakenSamples != 3 || *c1.ExpectedSamples != 99 || !c1.Undersampled ||
		c1.UndersampledReason != "its sampling clock stops while it idles: a virtual CPU without a PMU" {
		t.Errorf("CPU 0 %+v\nCPU 1 %+v", c0, c1)
	}
	want := []evidence.UnseenCPU{{CPU: 1, TakenSamples: 3, ExpectedSamples: 99, Reason: c1.UndersampledReason, SoftirqNetRXNs: 69e6, SoftirqNetRXShare: 0.069}}
	if !reflect.DeepEqual(sec.NetRXSeen, []int{0}) || !reflect.DeepEqual(sec.NetRXUnseen, want) {
		t.Errorf("seen %v, unseen %+v", sec.NetRXSeen, sec.NetRXUnseen)
	}
}

// flippingProfile replays a profile and flips the root to its end/
// readings when the window's last snapshot is taken.
type flippingProfile struct {
	replay.Profile
	t    *testing.T
	root *replay.PhasedRoot
}

func (f flippingProfile) Snapshot() (cpuprofile.Profile, error) {
	f.root.Flip(f.t)
	return f.Profile.Snapshot()
}

// With cycles a CPU samples in proportion to its work, so what it should
// have taken is the frequency × its busy time, read from /proc/stat at
// the window's two ends: a halted CPU rightly takes nothing, a busy one
// that took too little is not seen.
func TestCyclesProfileExpectsSamplesFromBusyTime(t *testing.T) {
	dir := replay.KallsymsRoot(t, "f")
	fixture := t.TempDir()
	// user nice system idle iowait irq softirq steal, in 1/100 s.
	replay.WriteFile(t, filepath.Join(fixture, "start/proc/stat"), "cpu  0 0 0 0 0 0 0 0\ncpu0 1000 0 500 9000 0 0 0 0\ncpu1 10 0 10 9000 0 0 0 0\ncpu2 100 0 0 9000 0 0 0 0\n")
	// CPU 0 busy all second, CPU 1 10 ms, CPU 2 half a second (20 ms of
	// it stolen by another guest, not busy).
	replay.WriteFile(t, filepath.Join(fixture, "end/proc/stat"), "cpu  0 0 0 0 0 0 0 0\ncpu0 1080 0 510 9000 0 5 5 0\ncpu1 10 0 11 9099 0 0 0 0\ncpu2 150 0 0 9048 0 0 0 2\n")
	root := replay.NewPhasedRoot(t, fixture)
	window := cpuprofile.Profile{CPUs: []cpuprofile.CPUCount{
		{CPU: 0, Taken: 95, EnabledNs: 1e9, RunningNs: 1e9}, {CPU: 1, Taken: 0, EnabledNs: 1e9, RunningNs: 1e9}, {CPU: 2, Taken: 10, EnabledNs: 1e9, RunningNs: 1e9}}}
	choice, err := cpuprofile.ChooseEvent(cpuprofile.EventAuto, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := measure.Sources{Root: procfs.FS{Root: root.Link}, Symbols: symbols.FS{Root: dir}, Probes: measure.With(measure.Opener{}, &cpuprofile.Spec,
		func(o cpuprofile.Options) (measure.CPUProfileProbe, error) {
			r := replay.Profile{Probe: replay.New("cpuprofile", []cpuprofile.Profile{window}, replay.Recording{Method: "perf_event/perf_link"}), Freq: 99, NCPUs: 3, Choice: choice}
			return flippingProfile{r, t, root}, nil
		})}
	part := measure.NewProfile(measure.ProfileOptions{Frequency: 99})
	if _, err := measure.Measure(context.Background(), src, measure.Window{Duration: time.Millisecond}, part); err != nil {
		t.Fatal(err)
	}
	rows, s := part.PerCPU(part.Samples())
	if s.Event != "cycles" || s.ExpectedFrom != evidence.ExpectedFromBusy || s.ExpectedUnavailable != "" || !reflect.DeepEqual(s.UndersampledCPUs, []int{2}) {
		t.Fatalf("sampling %+v", s)
	}
	for i, want := range []struct {
		busy     int64
		expected uint64
	}{{1e9, 99}, {1e7, 1}, {5e8, 50}} {
		r := rows[i]
		if r.BusyNs == nil || *r.BusyNs != want.busy || *r.ExpectedSamples != want.expected {
			t.Errorf("CPU %d: busy %v, expected %v; want %d ns, %d", r.CPU, r.BusyNs, r.ExpectedSamples, want.busy, want.expected)
		}
	}
	if !strings.Contains(rows[2].UndersampledReason, "busy time at 99 Hz") {
		t.Errorf("CPU 2's reason: %q", rows[2].UndersampledReason)
	}
}
