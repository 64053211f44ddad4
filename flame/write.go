package flame

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/perfscope/perfscope/base/safeio"
)

// Output is a format a profile is written in.
type Output string

const (
	OutputSVG        Output = "svg"
	OutputHTML       Output = "html"
	OutputPprof      Output = "pprof"
	OutputSpeedscope Output = "speedscope"
	OutputFolded     Output = "folded"
)

// Outputs are every output format, in the order help texts list them.
var Outputs = []Output{OutputSVG, OutputHTML, OutputPprof, OutputSpeedscope, OutputFolded}

// DiffOutputs are the formats a differential profile is written in.
var DiffOutputs = []Output{OutputSVG, OutputHTML, OutputFolded}

// IsOutput says whether s names an output format.
func IsOutput(s string) bool {
	for _, o := range Outputs {
		if string(o) == s {
			return true
		}
	}
	return false
}

// Write writes p in format out: the one place a profile's format is
// chosen, for every command that writes one.
func Write(w io.Writer, p *Profile, out Output, o Options) error {
	switch out {
	case OutputSVG:
		return WriteSVG(w, p, o)
	case OutputHTML:
		return WriteHTML(w, p, o)
	case OutputPprof:
		return WritePprof(w, p)
	case OutputSpeedscope:
		return WriteSpeedscope(w, p, o)
	case OutputFolded:
		return WriteFolded(w, p)
	}
	return unknownOutput(out, Outputs)
}

// WriteDiff writes a differential profile in format out.
func WriteDiff(w io.Writer, d *Diff, out Output, o Options) error {
	switch out {
	case OutputSVG:
		return WriteDiffSVG(w, d, o)
	case OutputHTML:
		return WriteDiffHTML(w, d, o)
	case OutputFolded:
		return WriteDiffFolded(w, d)
	}
	return unknownOutput(out, DiffOutputs)
}

// WriteFile writes p to path in format out, through safeio.WriteOutput: a
// regular file whole or not at all, a device or link written through and
// never replaced. A path that cannot be created wraps fs.ErrNotExist or
// fs.ErrPermission (the caller's input, not the run).
func WriteFile(ctx context.Context, path string, p *Profile, out Output, o Options) error {
	err := safeio.WriteOutput(ctx, path, nil, func(w io.Writer) error { return Write(w, p, out, o) })
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// OutputOf is the output format a file name's extension asks for
// (".svg", ".html", ".pb.gz", ".folded", ".speedscope.json").
func OutputOf(path string) (Output, bool) {
	for _, c := range []struct {
		suffix string
		out    Output
	}{{".svg", OutputSVG}, {".html", OutputHTML}, {".pb.gz", OutputPprof}, {".speedscope.json", OutputSpeedscope}, {".folded", OutputFolded}} {
		if strings.HasSuffix(path, c.suffix) {
			return c.out, true
		}
	}
	return "", false
}

func unknownOutput(out Output, want []Output) error {
	names := make([]string, len(want))
	for i, o := range want {
		names[i] = string(o)
	}
	return fmt.Errorf("unknown output format %q (want %s)", out, strings.Join(names, ", "))
}
