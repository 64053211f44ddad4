// Package report is the envelope every perfscope command emits, and the
// renderers that print it: JSON (a versioned schema), the terminal text of
// each command, and the self-contained HTML page (page*.go, html/).
package report

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"golang.org/x/sys/unix"
)

// Schema names the JSON layout. It changes only with incompatible changes;
// new fields may be added within one version.
const Schema = "perfscope/v2"

// Report is one command's result.
type Report struct {
	Schema  string `json:"schema"`
	Command string `json:"command"`
	Meta    Meta   `json:"meta"`
	// Data is the command's own section; its layout is documented per
	// command in the README.
	Data      any                `json:"data"`
	Findings  []diagnose.Finding `json:"findings"`
	Overhead  *evidence.Overhead `json:"overhead,omitempty"`
	Artifacts []Artifact         `json:"artifacts,omitempty"`
	// Recipe is the recipe the run followed, with its parameters' values;
	// absent for commands that follow none.
	Recipe *RecipeRef `json:"recipe,omitempty"`

	// Flame is the run's stacks, for the graph formats (folded, svg,
	// html, pprof, speedscope); not part of the JSON.
	Flame *flame.Profile `json:"-"`
	// FlameDiff, when set, is drawn instead of Flame: a differential
	// graph (svg, html, folded).
	FlameDiff *flame.Diff `json:"-"`
	// FlameSets, when set, are the stack sets the HTML page draws instead
	// of Flame (a network run's NET_RX CPUs and other CPUs); not part of
	// the JSON.
	FlameSets []FlameSet `json:"-"`
	// Show tunes the text and graph renderers; not part of the JSON.
	Show Show `json:"-"`
}

// Show is how a report is drawn, beyond its data.
type Show struct {
	// Top limits the rows of "top" tables (0: the renderer's default).
	Top int
	// Title and Subtitle head a flame graph.
	Title, Subtitle string
	// Width, MinWidth and Icicle draw a flame graph (flame.Options).
	Width    int
	MinWidth float64
	Icicle   bool
}

// Meta describes where and when the run happened.
type Meta struct {
	Version    string    `json:"version"`
	Host       string    `json:"host"`
	Kernel     string    `json:"kernel"`
	CPUs       int       `json:"cpus"`
	Started    time.Time `json:"started"`
	DurationNs int64     `json:"duration_ns"`
}

// Artifact is a file a run wrote (a flame graph, folded stacks, a revert
// script).
type Artifact struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
}

// New starts a report for command with the host's metadata.
func New(command, version string, started time.Time) *Report {
	host, _ := os.Hostname()
	return &Report{
		Schema:   Schema,
		Command:  command,
		Findings: []diagnose.Finding{},
		Meta: Meta{
			Version: version,
			Host:    host,
			Kernel:  KernelRelease(),
			CPUs:    runtime.NumCPU(),
			Started: started.UTC(),
		},
	}
}

// KernelRelease is uname -r.
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// WriteJSON writes r as indented JSON.
//
// A NaN or infinity anywhere (a ratio over a zero denominator) would make
// encoding/json refuse the whole report, leaving the user with no output
// and exit 4; such numbers are written as described at finiteCopy.
func WriteJSON(w io.Writer, r any) error {
	b, err := json.MarshalIndent(r, "", "  ")
	var uv *json.UnsupportedValueError
	if errors.As(err, &uv) {
		b, err = json.MarshalIndent(finiteCopy(r), "", "  ")
	}
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
