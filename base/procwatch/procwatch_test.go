package procwatch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
)

// running says whether pid runs: /proc/PID/stat exists and its state is
// not zombie or dead (the test reaps its child only after the watch).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// TestWatchSeesExit starts a child that exits on its own and asserts the
// watch reports the exit and ends the window; a watch that missed it would
// run until the test's deadline and report no exit.
func TestWatchSeesExit(t *testing.T) {
	child := exec.Command("sleep", "0.3")
	if err := child.Start(); err != nil {
		t.Fatalf("start a short-lived child: %v", err)
	}
	defer child.Wait()
	pid := child.Process.Pid
	if !running(pid) {
		t.Fatalf("pid %d is not running right after it started", pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stopped := false
	w := Start(ctx, 10*time.Millisecond, func() bool { return running(pid) }, nil, func() {
		stopped = true
		cancel()
	})
	exited, err := w.Wait()
	if err != nil {
		t.Fatalf("watch error: %v", err)
	}
	if !exited {
		t.Fatalf("the watch did not see pid %d exit", pid)
	}
	if !stopped {
		t.Error("the watch saw the exit but did not end the window")
	}
}

// TestWatchLiveProcess: a process that keeps running is ticked until the
// window ends, and neither an exit nor an error is reported.
func TestWatchLiveProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := 0
	w := Start(ctx, time.Millisecond, func() bool { return true }, func() error {
		if ticks++; ticks == 3 {
			cancel()
		}
		return nil
	}, func() { t.Error("stop called for a process that runs") })
	exited, err := w.Wait()
	if exited || err != nil {
		t.Fatalf("Wait() = %v, %v; want no exit, no error", exited, err)
	}
	if ticks < 3 {
		t.Errorf("%d ticks before the window ended, want 3", ticks)
	}
}

// TestWatchTickError: a failing tick ends the window with its error while
// the process runs, and as an exit once the process is gone.
func TestWatchTickError(t *testing.T) {
	unreadable := errors.New("counters unreadable")
	for _, tc := range []struct {
		name       string
		goneOnTick bool
		wantExited bool
		wantErr    error
	}{
		{"process runs", false, false, unreadable},
		{"process exited between the reads", true, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			gone, stops := false, 0
			w := Start(ctx, time.Millisecond, func() bool { return !gone }, func() error {
				gone = tc.goneOnTick
				return unreadable
			}, func() { stops++ })
			exited, err := w.Wait()
			if exited != tc.wantExited || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Wait() = %v, %v; want %v, %v", exited, err, tc.wantExited, tc.wantErr)
			}
			if stops != 1 {
				t.Errorf("stop called %d times, want once", stops)
			}
		})
	}
}

// TestWatchPanic: a panic in a tick ends the watch with a *gosafe.Panic.
func TestWatchPanic(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := Start(ctx, time.Millisecond, func() bool { return true }, func() error { panic("boom") }, func() {})
	_, err := w.Wait()
	var p *gosafe.Panic
	if !errors.As(err, &p) {
		t.Fatalf("Wait() error = %v, want a *gosafe.Panic", err)
	}
}
