package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// ExitInterrupted is the exit code after a second Ctrl-C or SIGTERM: the
// shell's 128+SIGINT.
const ExitInterrupted = 130

// SignalContext returns a context cancelled by the first SIGINT or SIGTERM:
// commands then stop their probes, close every BPF link and map, stop any
// profiler they started and print what they measured. A second signal
// exits at once — whatever the command is stuck in (a read from a FIFO
// with no writer, a hung kernel call), the user can always get out; the
// kernel releases BPF objects, which are never pinned, with the process.
func SignalContext(parent context.Context, stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			cancel()
		case <-done:
			return
		}
		select {
		case <-ch:
			fmt.Fprintln(stderr, "perfscope: interrupted again, exiting now")
			os.Exit(ExitInterrupted)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

// recoverPanic turns a panic in the command's goroutine into one sentence
// and ExitFailure, instead of Go's stack trace and exit status 2, which is
// the documented code for bad usage. PERFSCOPE_DEBUG=1 prints the stack.
func recoverPanic(stderr io.Writer, code *int) {
	v := recover()
	if v == nil {
		return
	}
	fmt.Fprintf(stderr, "perfscope: internal error: %v (this is a bug in perfscope; set PERFSCOPE_DEBUG=1 for the stack trace)\n", v)
	if os.Getenv("PERFSCOPE_DEBUG") == "1" {
		stderr.Write(debug.Stack())
	}
	*code = ExitFailure
}
