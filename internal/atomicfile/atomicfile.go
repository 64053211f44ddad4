// Package atomicfile writes a file whole or not at all: into a temporary
// file beside it, renamed into place once everything is written, so a
// failed or interrupted run never leaves a truncated report or graph.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrCreate marks a file that could not be created at all (a missing
// directory, no permission): the caller's input is wrong, not the run.
var ErrCreate = errors.New("cannot create")

// Write creates path (mode 0644) with what write writes. On any error the
// temporary file is removed and path is left as it was.
func Write(path string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return &createError{path: path, err: err}
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename into place: %w", err)
	}
	return nil
}

// createError names the file, not the temporary one beside it.
type createError struct {
	path string
	err  error
}

func (e *createError) Error() string {
	why := e.err
	if u := errors.Unwrap(e.err); u != nil {
		why = u // the *PathError names the temporary file
	}
	return fmt.Sprintf("cannot write %s: %v", e.path, why)
}
func (e *createError) Unwrap() []error { return []error{ErrCreate, e.err} }
