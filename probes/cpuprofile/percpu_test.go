package cpuprofile

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
)

// Start samples with the event ChooseEvent picks from this machine's own
// answer to cycles, for each request: here (no PMU) auto falls back to
// cpu-clock and cycles asked for is refused with ErrNotSupported, leaving
// nothing open; on a machine with a PMU auto and cycles sample cycles.
func TestStartChoosesTheEventThisMachineOffers(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	cpus, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	answer := probeEvent(cpus[0], DefaultFrequency, EventCycles)
	t.Logf("cycles on CPU %d: %v", cpus[0], answer)
	for _, want := range []Event{EventAuto, EventCPUClock, EventCycles} {
		t.Run(want.String(), func(t *testing.T) {
			expect, expectErr := ChooseEvent(want, answer)
			fds := openFDs(t)
			p, err := Open(Options{Event: want, Stacks: KernelOnly})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			err = p.Start()
			if expectErr != nil {
				if err == nil || !errors.Is(err, probes.ErrNotSupported) && !errors.Is(err, probes.ErrPermission) {
					t.Fatalf("Start = %v; want the refusal %v", err, expectErr)
				}
				p.Close()
				if n := openFDs(t); n != fds {
					t.Errorf("%d fds open after a refused Start and Close, %d before", n, fds)
				}
				t.Logf("refused as expected: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			got := p.EventChoice()
			if got.Event != expect.Event || got.PMU != expect.PMU || got.Reason != expect.Reason {
				t.Errorf("sampled with %+v; want %+v", got, expect)
			}
			time.Sleep(300 * time.Millisecond)
			prof, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var taken uint64
			for _, c := range prof.CPUs {
				taken += c.Taken
			}
			if len(prof.CPUs) != len(cpus) || taken == 0 {
				t.Errorf("%v: per-CPU counts %+v over %d CPUs; want every CPU, samples taken", got.Event, prof.CPUs, len(cpus))
			}
		})
	}
}

// With a busy loop pinned to CPU 0 and CPU 1 left alone, each CPU's count
// says what its event did: every run of the program is a sample kept or
// lost, CPU 0 takes its frequency over its enabled time, a paused
// profiler neither samples nor counts time, and — where this VM's
// cpu-clock stops while a vCPU halts — an idle CPU 1 takes under half of
// what its enabled time at the frequency gives (while a busy one does
// not: the truth is read from /proc/stat over the same span, since other
// work on a shared machine may keep CPU 1 busy).
func TestPerCPUCountsFollowWhatTheEventDid(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	spinner := testutil.StartSpinner(t, 6)
	var set unix.CPUSet
	set.Set(0)
	if err := unix.SchedSetaffinity(spinner.Process.Pid, &set); err != nil {
		t.Fatal(err)
	}
	const freq = 99
	p := startProfiler(t, Options{Frequency: freq, IncludeIdle: true, Stacks: KernelOnly})
	choice := p.EventChoice()
	t.Logf("event: %+v", choice)

	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	paused, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	still, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range still.Sub(paused).CPUs {
		if c.Taken > 1 || c.EnabledNs > uint64(20*time.Millisecond) {
			t.Errorf("paused CPU %d: %d samples, %v enabled in 300 ms", still.CPUs[i].CPU, c.Taken, time.Duration(c.EnabledNs))
		}
	}

	for attempt := 1; ; attempt++ {
		idle1, prof := countWindow(t, p, 2*time.Second)
		var taken uint64
		for _, c := range prof.CPUs {
			taken += c.Taken
			expected := freq * float64(c.EnabledNs) / 1e9
			t.Logf("attempt %d, CPU %d: %d samples taken, %.0f expected (%v enabled, %v running)", attempt, c.CPU, c.Taken, expected,
				time.Duration(c.EnabledNs), time.Duration(c.RunningNs))
			if d := time.Duration(c.EnabledNs) - 2*time.Second; d < -100*time.Millisecond || d > 300*time.Millisecond {
				t.Errorf("CPU %d enabled %v over a 2 s window", c.CPU, time.Duration(c.EnabledNs))
			}
			if c.CPU == 0 && choice.Event == EventCPUClock && (float64(c.Taken) < 0.8*expected || float64(c.Taken) > 1.1*expected) {
				t.Errorf("busy CPU 0 took %d samples, %.0f expected", c.Taken, expected)
			}
		}
		// Every run is a sample counted or lost (nothing is filtered with
		// IncludeIdle); a run in flight at the reading may be off by one.
		if kept := prof.Total() + prof.Lost.Total(); taken < kept || taken > kept+uint64(2*len(prof.CPUs)) {
			t.Errorf("%d samples taken, %d counted and %d lost", taken, prof.Total(), prof.Lost.Total())
		}
		c1 := prof.CPUs[1]
		ratio := float64(c1.Taken) / (freq * float64(c1.EnabledNs) / 1e9)
		t.Logf("CPU 1 was %.0f %% idle, took %.2f of its expected samples", 100*idle1, ratio)
		if choice.Event != EventCPUClock || choice.PMU != PMUAbsent {
			return // the halted-vCPU effect is this project's VMs'
		}
		switch {
		case idle1 >= 0.9:
			if ratio >= 0.5 {
				t.Errorf("idle CPU 1 took %.2f of its expected samples: its cpu-clock did not stop while it halted", ratio)
			}
			return
		case idle1 <= 0.4:
			if ratio < 0.5 {
				t.Errorf("busy CPU 1 (%.0f %% idle) took only %.2f of its expected samples", 100*idle1, ratio)
			}
		}
		if attempt == 3 {
			t.Logf("CPU 1 was never idle for a whole window: other work on this machine kept it busy")
			return
		}
	}
}

// countWindow samples for d and returns the share of d CPU 1 was idle
// (/proc/stat) and the window's profile.
func countWindow(t *testing.T, p *Profiler, d time.Duration) (float64, Profile) {
	t.Helper()
	before, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	idleBefore, totalBefore := cpuIdle(t, 1)
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	idleAfter, totalAfter := cpuIdle(t, 1)
	after, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return (idleAfter - idleBefore) / (totalAfter - totalBefore), after.Sub(before)
}

// cpuIdle is cpu's idle and total time in /proc/stat, in ticks.
func cpuIdle(t *testing.T, cpu int) (idle, total float64) {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu"+strconv.Itoa(cpu) {
			continue
		}
		for i, v := range f[1:9] {
			n, _ := strconv.ParseFloat(v, 64)
			total += n
			if i == 3 || i == 4 { // idle, iowait
				idle += n
			}
		}
		return idle, total
	}
	t.Fatalf("no cpu%d line in /proc/stat", cpu)
	return 0, 0
}

// A continuous profiler's counts are per window like its samples: each
// Drain's enabled time is the span since the last Drain, not since Start,
// and the counts stay readable after Stop.
func TestDrainCountsPerWindow(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	p := startProfiler(t, Options{Frequency: 99, IncludeIdle: true, Stacks: KernelOnly, Continuous: true})
	time.Sleep(400 * time.Millisecond)
	if _, err := p.Drain(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	w, err := p.Drain()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range w.CPUs {
		if d := time.Duration(c.EnabledNs); d < 250*time.Millisecond || d > 400*time.Millisecond {
			t.Errorf("CPU %d: %v enabled in a 300 ms window", c.CPU, d)
		}
		if c.Taken > 99*400/1000 {
			t.Errorf("CPU %d: %d samples taken in a 300 ms window at 99 Hz", c.CPU, c.Taken)
		}
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	after, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(after.CPUs) != len(w.CPUs) || len(after.CPUs) == 0 {
		t.Errorf("counts after Stop: %+v", after.CPUs)
	}
}
