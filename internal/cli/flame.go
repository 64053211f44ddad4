package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/report"
)

// flameGraphOptions are the flags shared by `flame` and `flame diff`: how
// to read the inputs and how to draw and where to write the result.
type flameGraphOptions struct {
	Output string
	Out    string
	Title  string
	Icicle bool
	// GraphFlags are the flags flame checks: how to read and draw.
	flame.GraphFlags

	format     report.Format
	input      flame.InputOptions
	minWidthPx float64
}

type flameOptions struct {
	flameGraphOptions
	PerCPU     bool
	PerProcess bool
	PerThread  bool
	Files      []string

	// run draws the graph; tests replace it to check flag handling.
	run func(ctx context.Context, o *flameOptions, g *Globals) error
}

type flameDiffOptions struct {
	flameGraphOptions
	Shape    string
	Absolute bool
	Before   string
	After    string

	shape flame.Shape
	run   func(ctx context.Context, o *flameDiffOptions, g *Globals) error
}

func newFlameCmd(g *Globals) *cobra.Command {
	return flameCmd(g, &flameOptions{run: runFlame}, &flameDiffOptions{run: runFlameDiff})
}

// flameCmd binds flags to o and d; tests pass options with a fake run.
func flameCmd(g *Globals, o *flameOptions, d *flameDiffOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flame FILE...",
		Short: "Draw, convert and merge profiles: flame graph SVG/HTML, pprof, speedscope, folded",
		Long: `flame reads profiles — folded stacks (FlameGraph, async-profiler collapsed),
perf script output or pprof, detected from their first bytes — merges them and
writes an interactive flame graph (self-contained SVG or HTML: hover for
details, click to zoom, regex search with the share matched, reset zoom; the
HTML page adds an icicle toggle), or converts them to pprof, speedscope JSON or
folded stacks. "-" reads standard input; the result goes to standard output
unless --out is given, so it composes in pipes like flamegraph.pl.
-o text and -o json summarise the functions with the most self time.

Frames are coloured by kind, stable per name: kernel (orange, "_[k]"), JIT
Java (green, "_[j]"), inlined (aqua, "_[i]"), interpreted (yellow, "_[0]"),
Go (blue), other native code (red-yellow).`,
		Example: `  perfscope flame out.folded > cpu.svg
  perf script | perfscope flame - --per-process -o html --out cpu.html
  perfscope flame a.folded b.pb.gz -o pprof --out merged.pb.gz
  perfscope flame cpu.folded --include 'Handler' --exclude '^Interpreter' --minwidth 0.5
  perfscope flame diff before.folded after.folded -o svg --out diff.svg`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Files = args
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	o.bind(cmd, "flame", "svg")
	f.BoolVar(&o.PerCPU, "per-cpu", false, "put a [cpu N] root frame under each stack (perf script, pprof with a cpu label)")
	f.BoolVar(&o.PerProcess, "per-process", false, "put a comm-pid root frame under each stack (perf script, pprof with pid labels)")
	f.BoolVar(&o.PerThread, "per-thread", false, "put a comm-pid/tid root frame under each stack (perf script, pprof with tid labels)")
	cmd.AddCommand(flameDiffCmd(g, d))
	return cmd
}

func flameDiffCmd(g *Globals, d *flameDiffOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff BEFORE AFTER",
		Short: "Differential flame graph: red where AFTER spends more, blue where it spends less",
		Long: `flame diff draws AFTER's flame graph (or BEFORE's with --shape before) and
colours each frame by how its inclusive share changed: red = more in AFTER,
blue = less, white = unchanged, deeper for larger changes. BEFORE is scaled to
AFTER's total first (--absolute compares raw values), so a longer recording
does not paint everything red. Frames that exist only in the profile not drawn
are invisible: draw the other shape to see them.

-o folded writes FlameGraph's difffolded format ("stack before after", raw
values); -o text and -o json list the functions whose self value moved most.`,
		Example: `  perfscope flame diff before.folded after.folded -o svg --out diff.svg
  perfscope flame diff before.pb.gz after.pb.gz --shape before -o html --out vanished.html
  perfscope flame diff before.folded after.folded -o text --top 10`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d.Before, d.After = args[0], args[1]
			if err := d.validate(); err != nil {
				return err
			}
			return d.run(cmd.Context(), d, g)
		},
	}
	d.bind(cmd, "flame diff", "svg")
	f := cmd.Flags()
	f.StringVar(&d.Shape, "shape", "after", "draw the graph in the shape of after or before (before shows frames that shrank away)")
	f.BoolVar(&d.Absolute, "absolute", false, "compare raw values instead of scaling before to after's total")
	return cmd
}

func (o *flameGraphOptions) bind(cmd *cobra.Command, command, defaultOutput string) {
	f := cmd.Flags()
	f.StringVarP(&o.Output, "output", "o", defaultOutput, report.FormatUsage(command))
	f.StringVar(&o.Out, "out", "", "write to this file instead of standard output")
	f.StringVar(&o.Title, "title", "", "graph title (default: \"Flame Graph\" or \"Differential Flame Graph\")")
	f.IntVar(&o.Width, "width", 1200, "image width in pixels")
	f.StringVar(&o.MinWidth, "minwidth", "0.1", "omit frames narrower than this: pixels (as flamegraph.pl), or a percentage of the width like 0.01% (as inferno)")
	f.BoolVar(&o.Icicle, "icicle", false, "draw an icicle graph: root at the top (the HTML page can also toggle it)")
	f.StringVar(&o.Format, "format", "auto", "input format: auto, folded, perf or pprof")
	f.StringVar(&o.Unit, "unit", "samples", "what folded or perf script values count: samples, nanoseconds, microseconds or bytes (pprof files carry their own)")
	f.StringVar(&o.Include, "include", "", "keep only stacks with a frame matching this regular expression")
	f.StringVar(&o.Exclude, "exclude", "", "drop stacks with a frame matching this regular expression")
	f.IntVar(&o.Top, "top", 20, "functions listed by -o text and -o json")
	f.IntVar(&o.MaxMemory, "max-memory", int(flame.MaxBytes>>20), "MiB of memory one profile may take (16-1048576); an input needing more fails instead of being drawn in part")
}

func (o *flameGraphOptions) validate(command string) error {
	var err error
	if o.format, err = report.ParseFormat(command, o.Output); err != nil {
		return asUsage(err)
	}
	o.input, o.minWidthPx, err = o.GraphFlags.Check()
	return asUsage(err)
}

func (o *flameOptions) validate() error {
	if err := o.flameGraphOptions.validate("flame"); err != nil {
		return err
	}
	return asUsage(flame.CheckInputs(o.Files...))
}

func (d *flameDiffOptions) validate() error {
	if err := d.flameGraphOptions.validate("flame diff"); err != nil {
		return err
	}
	var err error
	if d.shape, err = flame.ParseShape(d.Shape); err != nil {
		return asUsage(err)
	}
	return asUsage(flame.CheckInputs(d.Before, d.After))
}

func (o *flameGraphOptions) show(defaultTitle string) report.Show {
	title := o.Title
	if title == "" {
		title = defaultTitle
	}
	return report.Show{Title: title, Width: o.Width, MinWidth: o.minWidthPx, Icicle: o.Icicle}
}

// readProfiles reads and merges the inputs (flame.ReadInputs): an
// unreadable or malformed one is bad input (exit 2).
func (o *flameGraphOptions) readProfiles(ctx context.Context, g *Globals, paths []string, roots flame.RootFrames) (*flame.Profile, []flame.Input, error) {
	opts := o.input
	opts.Roots, opts.Stdin, opts.Waiting = roots, os.Stdin, waitingFor(g, "a writer")
	p, in, err := flame.ReadInputs(ctx, paths, opts)
	if err != nil && ctx.Err() == nil {
		err = asUsage(err)
	}
	return p, in, err
}

// waitingFor tells the user, once, why a FIFO open is taking long.
func waitingFor(g *Globals, other string) safeio.WaitingOpen {
	return func(path string) {
		fmt.Fprintf(g.Err, "perfscope: waiting for %s on %s (Ctrl-C to stop)\n", other, path)
	}
}

// writeOutput renders r to --out or standard output (see
// safeio.WriteOutput: a regular file is replaced atomically, so an
// interrupted or failed run never leaves a truncated graph behind; a
// device, FIFO or symlink is written through and never replaced).
func (o *flameGraphOptions) writeOutput(ctx context.Context, g *Globals, r *report.Report) error {
	if o.Out == "" || o.Out == "-" {
		return report.Render(g.Out, r, o.format)
	}
	err := safeio.WriteOutput(ctx, o.Out, waitingFor(g, "a reader"), func(w io.Writer) error {
		return report.Render(w, r, o.format)
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case isBadInputFile(err):
		return usageError("cannot write %s: %v", o.Out, err)
	}
	return fmt.Errorf("write %s: %w", o.Out, err)
}

func runFlame(ctx context.Context, o *flameOptions, g *Globals) error {
	merged, inputs, err := o.readProfiles(ctx, g, o.Files, flame.RootFrames{CPU: o.PerCPU, Process: o.PerProcess, Thread: o.PerThread})
	if err != nil {
		return err
	}
	r := report.New("flame", Version(), g.Started)
	r.Data, r.Flame, r.Show = report.NewFlameSummary(inputs, merged, o.Top), merged, o.show("Flame Graph")
	return o.writeOutput(ctx, g, r)
}

func runFlameDiff(ctx context.Context, d *flameDiffOptions, g *Globals) error {
	var ps [2]*flame.Profile
	var ins [2]report.FlameInput
	for i, path := range []string{d.Before, d.After} {
		p, in, err := d.readProfiles(ctx, g, []string{path}, flame.RootFrames{})
		if err != nil {
			return err
		}
		ps[i], ins[i] = p, in[0]
	}
	diff, err := flame.NewDiff(ps[0], ps[1], flame.DiffOptions{Shape: d.shape, Absolute: d.Absolute})
	if err != nil {
		return asUsage(err)
	}
	r := report.New("flame diff", Version(), g.Started)
	r.Data = report.NewFlameDiffSummary(ins, ps, diff, d.shape, d.Absolute, d.Top)
	r.FlameDiff, r.Show = diff, d.show("Differential Flame Graph")
	return d.writeOutput(ctx, g, r)
}
