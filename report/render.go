package report

import (
	"fmt"
	"io"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
)

// Format is an output format.
type Format string

// The output formats. The graph formats draw the report's stacks
// (Report.Flame) with flame.Write; HTML is the report's page (the flame
// command's HTML is the flame graph's own page).
const (
	Text       Format = "text"
	JSON       Format = "json"
	SVG        Format = Format(flame.OutputSVG)
	HTML       Format = Format(flame.OutputHTML)
	Pprof      Format = Format(flame.OutputPprof)
	Speedscope Format = Format(flame.OutputSpeedscope)
	Folded     Format = Format(flame.OutputFolded)
)

// GraphFormats are the formats that draw a report's stacks: every
// flame.Output, so a format added there reaches every command that draws.
var GraphFormats = func() []Format {
	out := make([]Format, len(flame.Outputs))
	for i, o := range flame.Outputs {
		out[i] = Format(o)
	}
	return out
}()

// PageFormats are the formats of a measurement's data: its text, its
// JSON and its HTML page.
var PageFormats = []Format{Text, JSON, HTML}

// Texter is report data that prints its own text: a data type with its
// renderer in its own file (jvmtext.go, gclogtext.go, …), or one that
// lives above this package (the lab's results).
type Texter interface {
	WriteText(w io.Writer, r *Report) error
}

// flameOnly says whether the report is the flame command's: its HTML is
// the flame graph's own page. Every other report's HTML is the report
// page (writePage), which embeds its flame graphs.
func flameOnly(r *Report) bool {
	switch r.Data.(type) {
	case FlameSummary, FlameDiffSummary:
		return true
	}
	return false
}

// Render writes r in format f. It is the one place a report's format is
// chosen: the JSON envelope; the command's text (through TerminalSafe); or
// a flame graph, pprof,
// speedscope or folded stacks of r.Flame.
func Render(w io.Writer, r *Report, f Format) error {
	switch f {
	case JSON:
		return WriteJSON(w, r)
	case Text:
		// Text quotes names from the system (comms, interfaces, frames):
		// control characters in them are escaped, for every command.
		return writeText(TerminalSafe(w), r)
	}
	if f == HTML && !flameOnly(r) {
		return writePage(w, r)
	}
	if flame.IsOutput(string(f)) {
		if r.FlameDiff != nil {
			return flame.WriteDiff(w, r.FlameDiff, flame.Output(f), r.Show.FlameOptions())
		}
		if r.Flame == nil {
			return fmt.Errorf("-o %s: %s has no stacks to draw", f, r.Command)
		}
		return flame.Write(w, r.Flame, flame.Output(f), r.Show.FlameOptions())
	}
	return fmt.Errorf("unknown output format %q", f)
}

// FlameOptions are the flame graph's title and drawing options.
func (s Show) FlameOptions() flame.Options {
	return flame.Options{Title: s.Title, Subtitle: s.Subtitle, Width: s.Width, MinWidth: s.MinWidth, Reverse: s.Icicle}
}

// writeText prints the command's text by its data's type.
func writeText(w io.Writer, r *Report) error {
	switch d := r.Data.(type) {
	case evidence.SoftirqEvidence:
		writeSoftirqText(w, r, d)
	case NetData:
		writeNetText(w, r, d.NetEvidence)
	case evidence.Profile:
		writeProfileText(w, r, d)
	case evidence.LockSection:
		writeLocksText(w, r, d)
	case evidence.OffCPU:
		writeOffCPUText(w, r, d)
	case FlameSummary:
		writeFlameText(w, d)
	case FlameDiffSummary:
		return writeFlameDiffText(w, d)
	case DoctorData:
		writeDoctorText(w, r, d)
	case RecipeData:
		return writeRecipeText(w, r, d)
	case Texter:
		return d.WriteText(w, r)
	default:
		return fmt.Errorf("%s has no text output", r.Command)
	}
	return nil
}
