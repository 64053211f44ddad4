package symbols

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

// resolveOwnCode names an address in pid's main executable, which reads
// that binary's symbols into the cache.
func resolveOwnCode(t *testing.T, s *Symbolizer, pid int) {
	t.Helper()
	s.Prefetch(pid)
	s.mu.Lock()
	p := s.procs[pid]
	s.mu.Unlock()
	for _, m := range p.maps {
		if m.FileBacked() {
			s.User(pid, []uint64{m.Start})
			return
		}
	}
	t.Fatalf("process %d maps no file (%v)", pid, p.mapsErr)
}

// A process that exits is dropped from the cache at the next Prune, and
// with it the binaries only it mapped; a process still running keeps its
// mappings and binaries.
func TestPruneDropsExitedProcessesAndTheirBinaries(t *testing.T) {
	s := New(Default)
	spinner := testutil.StartSpinner(t, 10)
	resolveOwnCode(t, s, spinner.Process.Pid)
	resolveOwnCode(t, s, os.Getpid())
	pids, bins := s.Cached()
	if procs := len(pids); procs != 2 || bins < 2 {
		t.Fatalf("cache holds %d processes and %d binaries; want 2 and at least 2 (the spinner's and the test's)", procs, bins)
	}
	if n := s.Prune(); n != 0 {
		t.Fatalf("Prune dropped %d running processes", n)
	}
	spinner.Process.Kill()
	spinner.Wait()
	if n := s.Prune(); n != 1 {
		t.Errorf("Prune dropped %d processes after the spinner exited; want 1", n)
	}
	if p, b := s.Cached(); len(p) != 1 || b != bins-1 {
		t.Errorf("after Prune the cache holds processes %v and %d binaries; want 1 and %d", p, b, bins-1)
	}
	// Still named: the test's own process was kept.
	resolveOwnCode(t, s, os.Getpid())
}

// A pid given to a new process (another start time in /proc/PID/stat) is
// not the process whose mappings were read: Prune drops it too.
func TestPruneDropsReusedPids(t *testing.T) {
	dir := t.TempDir()
	stat := func(pid int, start uint64) {
		t.Helper()
		d := filepath.Join(dir, "proc", fmt.Sprint(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		// Fields 3..22 after the command; starttime is the 22nd.
		line := fmt.Sprintf("%d (a b) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, start)
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(7, 100)
	stat(8, 100)
	s := New(FS{Root: dir})
	s.Prefetch(7)
	s.Prefetch(8)
	stat(7, 250) // pid 7 exited and was reused
	if n := s.Prune(); n != 1 {
		t.Fatalf("Prune dropped %d; want pid 7 only", n)
	}
	s.mu.Lock()
	_, kept := s.procs[8]
	s.mu.Unlock()
	if !kept {
		t.Error("Prune dropped pid 8, which still runs")
	}
}

// A return address past the leaf is looked up one byte back, inside the
// call; the leaf and zero stay.
func TestCallSites(t *testing.T) {
	got := CallSites([]uint64{0x1000, 0x2005, 0, 0x3000})
	if len(got) != 4 || got[0] != 0x1000 || got[1] != 0x2004 || got[2] != 0 || got[3] != 0x2fff {
		t.Errorf("CallSites = %#x", got)
	}
}
