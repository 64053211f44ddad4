package flame

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/base/safeio"
)

// Input is one profile a command read: where from, in what format, and
// its total.
type Input struct {
	Path   string `json:"path"`
	Format string `json:"format"`
	Total  int64  `json:"total"`
}

// InputOptions say how ReadInput reads `perfscope flame`'s profiles; the
// sentences of its errors name the flags that set them.
type InputOptions struct {
	// Format is --format: FormatAuto detects it from the first bytes.
	Format Format
	// Unit is --unit: what folded stacks and perf script values count.
	Unit Unit
	// Filter is --include and --exclude.
	Filter Filter
	Roots  RootFrames
	// MaxMemoryMiB is --max-memory: MaxBytes in MiB.
	MaxMemoryMiB int
	// Stdin is read for "-".
	Stdin io.Reader
	// Waiting is told when opening a FIFO waits for a writer.
	Waiting safeio.WaitingOpen
}

// ReadInput reads one input ("-" is o.Stdin), stopping when ctx is
// cancelled (the error is then ctx's). Any other error is one sentence
// about the input: unreadable or malformed input, the user's to correct.
func ReadInput(ctx context.Context, path string, o InputOptions) (*Profile, Input, error) {
	r := safeio.ContextReader(ctx, o.Stdin)
	name := "standard input"
	if path != "-" {
		in, err := safeio.OpenInput(ctx, path, o.Waiting)
		if err != nil {
			if ctx.Err() != nil {
				return nil, Input{}, ctx.Err()
			}
			return nil, Input{}, fmt.Errorf("cannot read profile: %v", err)
		}
		defer in.Close()
		r, name = in, path
	}
	MaxBytes = int64(o.MaxMemoryMiB) << 20
	p, format, err := Read(r, o.Format, o.Roots)
	switch {
	case ctx.Err() != nil:
		return nil, Input{}, ctx.Err()
	case errors.Is(err, ErrTooLarge):
		return nil, Input{}, fmt.Errorf("%s: %v; raise --max-memory (now %d MiB) if the machine has the memory, or narrow the input", name, err, o.MaxMemoryMiB)
	case errors.Is(err, ErrUnknownFormat):
		return nil, Input{}, fmt.Errorf("%s: %v; pass --format folded, perf or pprof", name, err)
	case err != nil && o.Format == FormatAuto:
		return nil, Input{}, fmt.Errorf("%s: read as %s (detected from its first bytes): %v; if it is another format, pass --format folded, perf or pprof", name, format, err)
	case err != nil:
		return nil, Input{}, fmt.Errorf("%s: %v", name, err)
	}
	if format != FormatPprof {
		p.Unit = o.Unit // folded stacks and perf script carry no unit
	}
	if o.Filter.Include != nil || o.Filter.Exclude != nil {
		if p = p.Filter(o.Filter); p.Err() != nil {
			return nil, Input{}, fmt.Errorf("%s: %v; raise --max-memory (now %d MiB) if the machine has the memory", name, p.Err(), o.MaxMemoryMiB)
		}
	}
	return p, Input{Path: path, Format: string(format), Total: p.Total()}, nil
}

// ReadInputs reads paths (ReadInput) and merges them into one profile.
func ReadInputs(ctx context.Context, paths []string, o InputOptions) (*Profile, []Input, error) {
	var merged *Profile
	var inputs []Input
	for _, path := range paths {
		p, in, err := ReadInput(ctx, path, o)
		if err != nil {
			return nil, nil, err
		}
		inputs = append(inputs, in)
		if merged == nil {
			merged = p
		} else if err := merged.Merge(p); errors.Is(err, ErrTooLarge) {
			return nil, nil, fmt.Errorf("merging %s: %v; raise --max-memory (now %d MiB) if the machine has the memory", path, err, o.MaxMemoryMiB)
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", path, err)
		}
	}
	return merged, inputs, nil
}

// GraphFlags are the flags of `perfscope flame` and `flame diff` that say
// how to read the inputs and how to draw them, as the user typed them.
type GraphFlags struct {
	// Format is --format and Unit --unit (ParseFormat, ParseUnit).
	Format string
	Unit   string
	// Width is --width in pixels and MinWidth --minwidth (pixels, or a
	// percentage of the width).
	Width    int
	MinWidth string
	// Include and Exclude are --include and --exclude.
	Include string
	Exclude string
	// Top is --top: functions listed by -o text and -o json.
	Top int
	// MaxMemory is --max-memory: the memory in MiB one profile may take
	// (MaxBytes).
	MaxMemory int
}

// Check reads the flags into the options ReadInputs reads with (Roots,
// Stdin and Waiting left for the caller) and the graph's minimum frame
// width in pixels (Options.MinWidth). The sentences name the flags, in
// the order they are checked.
func (f GraphFlags) Check() (InputOptions, float64, error) {
	var o InputOptions
	var err error
	if o.Format, err = ParseFormat(f.Format); err != nil {
		return o, 0, err
	}
	if o.Unit, err = ParseUnit(f.Unit); err != nil {
		return o, 0, err
	}
	if f.Width < 100 || f.Width > 100000 {
		return o, 0, fmt.Errorf("--width must be between 100 and 100000 pixels, got %d", f.Width)
	}
	minWidth, err := parseMinWidth(f.MinWidth, f.Width)
	if err != nil {
		return o, 0, err
	}
	if f.Top < 0 {
		return o, 0, fmt.Errorf("--top must not be negative, got %d", f.Top)
	}
	if f.MaxMemory < 16 || f.MaxMemory > 1<<20 {
		return o, 0, fmt.Errorf("--max-memory must be between 16 and 1048576 MiB, got %d", f.MaxMemory)
	}
	o.MaxMemoryMiB = f.MaxMemory
	o.Filter, err = parseFilter(f.Include, f.Exclude)
	return o, minWidth, err
}

// CheckInputs refuses inputs that name standard input ("-") more than once:
// it can be read only once.
func CheckInputs(paths ...string) error {
	if stdin := slices.Index(paths, "-"); stdin >= 0 && slices.Contains(paths[stdin+1:], "-") {
		return errors.New("standard input (-) can be read only once")
	}
	return nil
}

// parseMinWidth reads --minwidth: pixels, or with "%" a share of the
// drawable width of a graph width pixels wide, which is how inferno's
// --minwidth counts. It returns Options.MinWidth: negative draws every
// frame.
func parseMinWidth(s string, width int) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || v < 0 || v != v {
		return 0, fmt.Errorf("--minwidth %q: want a non-negative number of pixels, or a percentage like 0.01%%", s)
	}
	if pct {
		v = v / 100 * (float64(width) - 20)
	}
	if v == 0 {
		v = -1 // Options: negative draws every frame, zero means the default
	}
	return v, nil
}

// parseFilter compiles --include and --exclude (either may be empty).
func parseFilter(include, exclude string) (Filter, error) {
	var f Filter
	for _, re := range []struct {
		flag, expr string
		dst        **regexp.Regexp
	}{{"--include", include, &f.Include}, {"--exclude", exclude, &f.Exclude}} {
		if re.expr == "" {
			continue
		}
		var err error
		if *re.dst, err = regexp.Compile(re.expr); err != nil {
			return f, fmt.Errorf("%s %q is not a regular expression: %v", re.flag, re.expr, err)
		}
	}
	return f, nil
}
