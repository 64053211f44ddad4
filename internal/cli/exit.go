package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/offcpu"
	"github.com/perfscope/perfscope/probes"
)

// Exit codes, documented in the README.
const (
	ExitOK = 0
	// ExitFindings: findings at or above --fail-on severity.
	ExitFindings = 1
	// ExitUsage: bad flags, arguments or input (unknown interface, dead pid,
	// unreadable file).
	ExitUsage = 2
	// ExitUnavailable: a missing privilege or kernel feature.
	ExitUnavailable = 3
	// ExitFailure: the run itself failed (an I/O or kernel error mid-run).
	ExitFailure = 4
)

// ExitError carries an exit code with the one sentence printed for it.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// usageError marks bad input: exit 2.
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// asUsage marks an existing error as bad input.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// unavailableError marks a missing privilege or kernel feature: exit 3.
func unavailableError(format string, args ...any) error {
	return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf(format, args...)}
}

// CodeOf maps an error to the process exit code.
func CodeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	// A panic in one of perfscope's goroutines is a failure of the run
	// (4), also when a caller wrapped it as something else.
	var panicked *gosafe.Panic
	if errors.As(err, &panicked) {
		return ExitFailure
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		// Interrupted before the command had anything to report.
		return ExitInterrupted
	case errors.Is(err, measure.ErrBadInput), errors.Is(err, offcpu.ErrNoProcess):
		return ExitUsage
	case errors.Is(err, measure.ErrUnavailable), errors.Is(err, probes.ErrPermission), errors.Is(err, probes.ErrNotSupported):
		return ExitUnavailable
	}
	return ExitFailure
}

// Hint adds the way out to errors whose cause the user can fix.
func Hint(err error) string {
	switch {
	case errors.Is(err, probes.ErrPermission):
		return "run as root (or with CAP_BPF and CAP_PERFMON); `perfscope doctor` lists what is missing"
	case errors.Is(err, probes.ErrNotSupported):
		return "`perfscope doctor` shows which kernel features this machine has"
	}
	return ""
}

// failOn returns an ExitFindings error when a finding is at or above the
// threshold (0 = never).
func failOn(fs []diagnose.Finding, threshold diagnose.Severity) error {
	if threshold == 0 {
		return nil
	}
	if w := diagnose.Worst(fs); w >= threshold {
		return &ExitError{Code: ExitFindings, Err: fmt.Errorf("findings at or above %s (worst: %s)", threshold, w)}
	}
	return nil
}

// isBadInputFile says whether err is about the file the user named rather
// than about the run (safeio.PathFault: missing, unreadable, a directory,
// too large, below a file, or refused because another user could
// redirect it). Those are bad input (exit 2), as the README promises.
func isBadInputFile(err error) bool { return safeio.PathFault(err) }
