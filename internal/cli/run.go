package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/report"
)

// The plumbing every measuring command shares after its run: render the
// report, write it to --out, carry a failed run in -o json, and exit on
// --fail-on.

// renderRun renders a measuring command's report, its overhead stamped
// first with the whole process's cost from exec to this moment
// (measure.StampRun): start-up, attaching, the window, naming the stacks
// and building the report — everything but formatting it.
func renderRun(w io.Writer, g *Globals, r *report.Report, f report.Format) error {
	measure.StampRun(r.Overhead, g.Started)
	return report.Render(w, r, f)
}

// finishRun renders a measuring command's report to standard output and
// returns its exit: runErr (the run failed after it measured), else the
// findings at or above sev. With wroteJSON (jvm, go), -o json carries
// runErr and its exit code in the envelope, and *wroteJSON records that
// standard output has its JSON.
func finishRun(g *Globals, r *report.Report, f report.Format, runErr error, sev diagnose.Severity, wroteJSON *bool) error {
	if f == report.JSON && wroteJSON != nil {
		*wroteJSON = true
		measure.StampRun(r.Overhead, g.Started)
		if err := writeJSONReport(g.Out, r, runErr); err != nil {
			return err
		}
	} else if err := renderRun(g.Out, g, r, f); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	return failOn(r.Findings, sev)
}

// writeOut renders r to --out (path), or to standard output without it,
// and says on stderr what it wrote, (about). A regular file is replaced
// atomically (no partial file if rendering fails); a device, FIFO or
// symlink is written through, never replaced (safeio.WriteOutput). Not
// the command's context: a Ctrl-C that ended the window early still
// wants the report written.
func writeOut(g *Globals, path string, r *report.Report, f report.Format, about string) error {
	if path == "" {
		return renderRun(g.Out, g, r, f)
	}
	err := safeio.WriteOutput(context.Background(), path, waitingFor(g, "a reader"), func(w io.Writer) error {
		return renderRun(w, g, r, f)
	})
	if isBadInputFile(err) {
		return asUsage(fmt.Errorf("--out: %w", err))
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(g.Err, "wrote %s (%s)\n", path, about)
	return nil
}

// writeJSONReport writes r as JSON with err, when the run failed, and
// its exit code.
func writeJSONReport(w io.Writer, r *report.Report, err error) error {
	return report.WriteJSONWithError(w, r, err, CodeOf(err))
}

// writeJSONError prints a failed run as JSON: the envelope with no data
// and the error, so -o json never prints plain text on stdout.
func writeJSONError(w io.Writer, command string, err error) {
	r := report.New(command, Version(), time.Now())
	writeJSONReport(w, r, err)
}

// jsonErrors is the RunE of a command whose -o json carries its errors
// (jvm, go): run's error, when nothing was written yet, is printed as
// the JSON envelope too.
func jsonErrors(g *Globals, command string, format *report.Format, wroteJSON *bool, run func() error) error {
	err := run()
	if err != nil && *format == report.JSON && !*wroteJSON {
		writeJSONError(g.Out, command, err)
	}
	return err
}
