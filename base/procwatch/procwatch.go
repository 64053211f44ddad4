// Package procwatch watches the process a command measures while the
// measurement window is open. A target that exits mid-window ends the
// window at once, so the command reports what was measured until the exit
// instead of waiting out the duration or the load against a dead process.
// `perfscope jvm` (which also samples the JVM's heap counters on each tick)
// and `perfscope go` both watch their target with it.
package procwatch

import (
	"context"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
)

// Watch is a running watch; Wait ends it and says what it saw.
type Watch struct {
	done   chan struct{}
	exited bool
	err    error
}

// Start checks the process every interval until ctx ends. alive says
// whether the process still runs; tick, when not nil, runs after each
// check that found it alive (a sample of its counters). The watch ends,
// and calls stop to end the window, when alive reports the process gone
// (an exit) or when tick fails: an exit if by then the process is gone (a
// target exiting between the two reads makes its counters unreadable),
// otherwise the watch's error. A panic in alive or tick ends the watch
// with a *gosafe.Panic instead of the program.
func Start(ctx context.Context, interval time.Duration, alive func() bool, tick func() error, stop func()) *Watch {
	w := &Watch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer gosafe.Recover(&w.err)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !alive() {
				w.exited = true
				stop()
				return
			}
			if tick == nil {
				continue
			}
			if err := tick(); err != nil {
				if !alive() {
					w.exited = true
				} else {
					w.err = err
				}
				stop()
				return
			}
		}
	}()
	return w
}

// Wait waits for the watch to end (end its context first, or let it end
// the window itself) and says whether it saw the process exit, and the
// error that ended it: a tick's, or a recovered panic.
func (w *Watch) Wait() (exited bool, err error) {
	<-w.done
	return w.exited, w.err
}
