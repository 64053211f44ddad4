package gosafe

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestGoReturnsAPanicAsAnError(t *testing.T) {
	var s []int
	err := <-Go(func() error {
		_ = s[3] // index out of range, in another goroutine
		return nil
	})
	var p *Panic
	if !errors.As(err, &p) {
		t.Fatalf("err = %v, want a *Panic", err)
	}
	if !strings.Contains(err.Error(), "index out of range") || !strings.Contains(err.Error(), "bug in perfscope") {
		t.Errorf("message = %q", err.Error())
	}
	if !strings.Contains(string(p.Stack), "gosafe_test.go") {
		t.Errorf("stack does not name the panicking function:\n%s", p.Stack)
	}
}

func TestGoPassesErrorsAndPanickedErrorsThrough(t *testing.T) {
	if err := <-Go(func() error { return io.EOF }); err != io.EOF {
		t.Errorf("err = %v, want io.EOF unchanged", err)
	}
	if err := <-Go(func() error { return nil }); err != nil {
		t.Errorf("err = %v, want nil", err)
	}
	if err := <-Go(func() error { panic(io.ErrUnexpectedEOF) }); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want it to wrap the panicked error", err)
	}
}

func TestRecoverJoinsWithAnEarlierError(t *testing.T) {
	err := io.EOF
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer Recover(&err)
		panic("boom")
	}()
	<-done
	var p *Panic
	if !errors.Is(err, io.EOF) || !errors.As(err, &p) || p.Value != "boom" {
		t.Fatalf("err = %v, want io.EOF joined with the panic", err)
	}
}
