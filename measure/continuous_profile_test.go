package measure

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

// The profile part served window after window on one session: each
// window's profile is that window's (its own short-lived processes, none
// of the last window's, about freq × CPUs ticks a second at most), and
// the symbol cache forgets the processes of a window once they have
// exited and been named.
func TestContinuousProfileWindowsAndSymbolCache(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	const freq = 99
	part := NewProfile(ProfileOptions{Frequency: freq, Continuous: true})
	s, err := Open(Live(), part)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := part.OpenErr(); err != nil {
		t.Fatal(err)
	}
	var before map[int]bool
	for w := 0; w < 4; w++ {
		pids := map[int]bool{}
		run, err := s.Measure(context.Background(), Window{Duration: 100 * time.Millisecond, OnStart: func() {
			// Three processes of a fraction of a second of CPU each, run
			// to completion inside the window.
			var cmds []*exec.Cmd
			for i := 0; i < 3; i++ {
				c := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
				if err := c.Start(); err != nil {
					t.Error(err)
					continue
				}
				pids[c.Process.Pid] = true
				cmds = append(cmds, c)
			}
			for _, c := range cmds {
				c.Wait()
			}
		}})
		if err != nil {
			t.Fatalf("window %d: %v", w, err)
		}
		cached, _ := part.sym.Cached()
		for _, pid := range cached {
			if before[pid] {
				t.Errorf("window %d: the symbol cache still holds process %d, which exited in window %d and was named then", w, pid, w-1)
			}
		}
		raw := part.Raw()
		mine := 0
		for _, smp := range raw.Samples {
			if before[smp.PID] {
				t.Errorf("window %d holds a sample of process %d of window %d", w, smp.PID, w-1)
			}
			if pids[smp.PID] {
				mine++
			}
		}
		if mine == 0 {
			t.Errorf("window %d has no sample of its processes %v", w, pids)
		}
		if most := float64(freq*part.probe.CPUs()) * run.Duration().Seconds() * 1.5; float64(raw.Total()) > most {
			t.Errorf("window %d (%v): %d samples, more than %.0f: earlier windows' samples counted again", w, run.Duration(), raw.Total(), most)
		}
		// Naming the window caches its processes (read while they ran).
		named := part.Samples()
		after, bins := part.sym.Cached()
		t.Logf("window %d: %v, %d samples in %d stacks, %d of its processes; symbol cache: %d processes (was %d before naming), %d binaries",
			w, run.Duration().Round(time.Millisecond), raw.Total(), len(named), mine, len(after), len(cached), bins)
		before = pids
	}
}
