package measure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/hsperf"
)

// A JVM's pauses over a window, read through Sources from
// collectors/hsperf's recorded JVM (pid 4242 of its fixture root): the
// counters are read, a window without GCs counts none, a JVM that exits
// mid-window and a pid that is no JVM each get one sentence.
func TestJVMPausesFromHsperfdata(t *testing.T) {
	const fixture = "../collectors/hsperf/testdata/root"
	dir := t.TempDir()
	copyTree(t, fixture, filepath.Join(dir, "root"))
	file := filepath.Join(dir, "root/proc/4242/root/tmp/hsperfdata_app/1")
	p := NewJVMPauses(JVMPauseOptions{PID: 4242, Timeline: true})
	src := Sources{JVMs: hsperf.FS{Root: filepath.Join(dir, "root")}}
	if err := p.Open(src); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Tick(ctx, time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := p.End(ctx); err != nil {
		t.Fatal(err)
	}
	ev := p.Evidence()
	if ev.PID != 4242 || ev.YoungGCs != 0 || ev.Safepoints == nil || *ev.Safepoints != 0 || len(ev.Intervals) != 1 {
		t.Errorf("unchanged counters: %+v", ev)
	}
	first := p.first.heap
	if first.YoungGCs == 0 || p.first.safepoints == nil || *p.first.safepoints == 0 {
		t.Errorf("the recording's counters were not read: %+v safepoints %v", first, p.first.safepoints)
	}
	// The JVM exits: the next reading says so in one sentence.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := p.End(ctx); err == nil || !errors.Is(err, hsperf.ErrNotFound) {
		t.Errorf("hsperfdata gone: %v", err)
	}
	// Not a JVM: bad input before anything is read.
	if err := NewJVMPauses(JVMPauseOptions{PID: 999999}).Open(src); !errors.Is(err, ErrBadInput) {
		t.Errorf("no such pid: %v", err)
	}
}
