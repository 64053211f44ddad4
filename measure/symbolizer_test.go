package measure_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/measure/replay"
)

// servedOnce serves content at a FIFO path to every reader that opens it,
// counting the opens: a file the test can tell was read how many times.
func servedOnce(t *testing.T, path string, content []byte) *atomic.Int32 {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	var opens atomic.Int32
	var done atomic.Bool
	go func() {
		for !done.Load() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until a reader opens
			if err != nil {
				return
			}
			if !done.Load() {
				opens.Add(1)
				f.Write(content)
			}
			f.Close()
			// Wait for this reader to close: while it holds the FIFO
			// open, opening it again would not wait for the next one.
			for !done.Load() {
				w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
				if err != nil {
					break // ENXIO: no reader left
				}
				w.Close()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() {
		done.Store(true)
		// Release the writer blocked in open.
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			time.Sleep(10 * time.Millisecond)
			f.Close()
		}
	})
	return &opens
}

// A network run names kernel frames for its lock sites and its profile
// from one reading of /proc/kallsyms: the parts of a session share one
// symbolizer (each used to read and index the whole file for itself).
func TestNetRunReadsKallsymsOnce(t *testing.T) {
	src, rec, root := replay.Sources(t, netFixture)
	kallsyms, err := os.ReadFile(filepath.Join(netFixture, "end", "proc", "kallsyms"))
	if err != nil {
		t.Fatal(err)
	}
	syms := t.TempDir()
	if err := os.MkdirAll(filepath.Join(syms, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	opens := servedOnce(t, filepath.Join(syms, "proc", "kallsyms"), kallsyms)
	src.Symbols = symbols.FS{Root: syms}

	ev := replayNetFrom(t, src, rec, root).Evidence

	lockNamed := false
	for _, site := range ev.Locks.Sites {
		lockNamed = lockNamed || (len(site.Stack) > 0 && !strings.HasPrefix(site.Stack[0], "0x"))
	}
	// The profile's function groups are found by kernel function names.
	g, ok := ev.Profile.Group("socket-lock")
	profNamed := ok && g.Samples > 0
	if !lockNamed || !profNamed {
		t.Fatalf("kernel frames named: lock sites %v, profile %v; want both", lockNamed, profNamed)
	}
	if got := opens.Load(); got != 1 {
		t.Errorf("/proc/kallsyms read %d times in one run, want once", got)
	}
}
