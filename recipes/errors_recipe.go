package recipes

import (
	"fmt"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/measure"
)

// FieldError is one problem in a recipe: the file and line, the field's
// path, and what was expected — "udp.yaml:14: probes[2].lockstat.
// stacks_every: want an integer 1–1024, got "eight"".
type FieldError struct {
	File string
	Line int
	// Path is the field's path from the top of the recipe
	// ("window.duration", "probes[2].lockstat.stacks_every"); "" for the
	// document itself.
	Path string
	Msg  string
}

func (e FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors are every problem found in one recipe, in file order. They are
// bad input (exit 2).
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrBadInput) hold.
func (es Errors) Is(target error) bool { return target == measure.ErrBadInput }

// maxErrors bounds what one recipe reports: past it the rest is noise.
const maxErrors = 50

func (es Errors) sorted() Errors {
	sort.SliceStable(es, func(i, j int) bool { return es[i].Line < es[j].Line })
	if len(es) > maxErrors {
		es = es[:maxErrors]
	}
	return es
}
