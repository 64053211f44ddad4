package cpuprofile

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/perfscope/perfscope/internal/testutil"
)

// mapKeys counts the keys of m.
func mapKeys(t *testing.T, m *ebpf.Map) int {
	t.Helper()
	n := 0
	var prev any
	for {
		var k []byte = make([]byte, m.KeySize())
		if err := m.NextKey(prev, k); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return n
			}
			t.Fatalf("list keys of %v: %v", m, err)
		}
		n++
		prev = k
	}
}

// shortLived runs n shell processes counting to 200,000 (a fraction of a
// second of CPU each) to completion and returns their pids.
func shortLived(t *testing.T, n int) map[int]bool {
	t.Helper()
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	pids := map[int]bool{}
	for _, c := range cmds {
		pids[c.Process.Pid] = true
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	return pids
}

// A continuous profiler read window after window: each Drain holds that
// window's samples — every tick of every CPU (the idle task's included),
// the window's own short-lived processes and none of the last window's —
// and leaves the generation it read empty in the kernel.
func TestDrainReadsEachWindowOnceAndEmptiesIt(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	const freq = 99
	p, err := Open(Options{Frequency: freq, IncludeIdle: true, Continuous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Drain(); err != nil { // from here on, whole windows
		t.Fatal(err)
	}
	last := time.Now()
	var before map[int]bool
	for w := 0; w < 4; w++ {
		pids := shortLived(t, 3)
		time.Sleep(300 * time.Millisecond)
		prof, err := p.Drain()
		if err != nil {
			t.Fatalf("window %d: %v", w, err)
		}
		now := time.Now()
		window := now.Sub(last)
		last = now

		counts, stacks := p.generation(p.gen ^ 1)
		if n, s := mapKeys(t, counts), mapKeys(t, stacks); n != 0 || s != 0 {
			t.Errorf("window %d: the drained generation still holds %d counts and %d stacks", w, n, s)
		}
		// Every CPU ticks freq times a second while it runs, idle task
		// included: the window's samples (and those lost, counted apart)
		// are at most that many, and no fewer than one CPU's ticks (on
		// this project's VMs a halted idle vCPU does not tick). A window
		// holding its predecessor's samples too would be twice as many.
		want := float64(freq*p.CPUs()) * window.Seconds()
		got := float64(prof.Total() + prof.Lost.Total())
		if got < float64(freq)*window.Seconds()/2 || got > want*1.5 {
			t.Errorf("window %d (%v): %.0f samples (lost %+v); want about %.0f", w, window, got, prof.Lost, want)
		}
		mine := 0
		for _, s := range prof.Samples {
			if pids[s.PID] {
				mine++
			}
			if before[s.PID] {
				t.Errorf("window %d holds a sample of process %d, which exited in window %d", w, s.PID, w-1)
			}
		}
		if mine == 0 {
			t.Errorf("window %d has no sample of its own processes %v", w, pids)
		}
		t.Logf("window %d: %v, %.0f samples (want ≈ %.0f), %d tuples, %d of this window's processes", w, window.Round(time.Millisecond), got, want, len(prof.Samples), mine)
		before = pids
	}
}
