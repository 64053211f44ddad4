package measure

import (
	"errors"
	"fmt"
)

// Sentinels for what a caller maps to an exit code. The errors carrying
// them print only their own sentence.
var (
	// ErrBadInput marks bad input the user can correct: an unknown
	// interface, a dead pid, a port out of range (exit 2).
	ErrBadInput = errors.New("bad input")
	// ErrUnavailable marks a missing privilege or kernel feature, or a
	// target perfscope must leave alone (exit 3).
	ErrUnavailable = errors.New("unavailable")
)

type markedError struct {
	err  error
	mark error
}

func (e *markedError) Error() string        { return e.err.Error() }
func (e *markedError) Unwrap() []error      { return []error{e.err, e.mark} }
func (e *markedError) Is(target error) bool { return target == e.mark }

// BadInput is one sentence marked ErrBadInput.
func BadInput(format string, args ...any) error {
	return &markedError{err: fmt.Errorf(format, args...), mark: ErrBadInput}
}

// Unavailable is one sentence marked ErrUnavailable.
func Unavailable(format string, args ...any) error {
	return &markedError{err: fmt.Errorf(format, args...), mark: ErrUnavailable}
}

// MarkBadInput marks err ErrBadInput; its sentence stays err's own.
func MarkBadInput(err error) error {
	return &markedError{err: err, mark: ErrBadInput}
}
