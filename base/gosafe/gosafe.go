// Package gosafe turns a panic in a goroutine perfscope starts into an
// error that reaches the command. The top-level recover in the CLI only
// covers the command's own goroutine: a panic in any other one (a sampling
// loop reading a JVM's hsperfdata, the symbolizer reading a process's ELF
// files, a lab server's receive loop) would print Go's stack trace and exit
// with status 2, the documented code for bad usage. With Recover or Go the
// panic becomes a *Panic, which the CLI prints as one sentence and exits 4.
package gosafe

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// Panic is a recovered panic: the value and the stack of the goroutine
// that panicked (printed with PERFSCOPE_DEBUG=1).
type Panic struct {
	Value any
	Stack []byte
}

func (p *Panic) Error() string {
	return fmt.Sprintf("internal error: %v (this is a bug in perfscope; set PERFSCOPE_DEBUG=1 for the stack trace)", p.Value)
}

// Unwrap lets errors.Is see through a panic whose value is an error.
func (p *Panic) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}

// Recover, deferred at the top of a goroutine, stores a panic of that
// goroutine in *err as a *Panic (joined with an error already there) and
// lets the goroutine end normally. It must be deferred directly:
//
//	go func() {
//		defer gosafe.Recover(&loopErr)
//		...
//	}()
func Recover(err *error) {
	v := recover()
	if v == nil {
		return
	}
	*err = errors.Join(*err, &Panic{Value: v, Stack: debug.Stack()})
}

// Call runs fn and returns its error, or a *Panic if fn panicked.
func Call(fn func() error) (err error) {
	defer Recover(&err)
	return fn()
}

// Go runs fn in a new goroutine; the channel delivers its error (a *Panic
// if it panicked) once, and never blocks the goroutine.
func Go(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Call(fn) }()
	return done
}
