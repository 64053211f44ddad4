package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/perfscope/perfscope/flame"
)

// FlameInput is one profile `perfscope flame` read (flame.ReadInput).
type FlameInput = flame.Input

// FlameSummary is the data of `perfscope flame -o json|text`.
type FlameSummary struct {
	Inputs    []FlameInput         `json:"inputs"`
	Unit      flame.Unit           `json:"unit"`
	Total     int64                `json:"total"`
	Frames    int                  `json:"frames"`
	Functions []flame.FunctionCost `json:"functions"`
}

// FlameDiffSummary is the data of `perfscope flame diff -o json|text`.
type FlameDiffSummary struct {
	Before      FlameInput             `json:"before"`
	After       FlameInput             `json:"after"`
	Unit        flame.Unit             `json:"unit"`
	Shape       flame.Shape            `json:"shape"`
	Normalised  bool                   `json:"normalised"`
	BeforeScale float64                `json:"before_scale"`
	Changes     []flame.FunctionChange `json:"changes"`
}

// NewFlameSummary is the data of `perfscope flame`: the inputs, and the
// merged profile's totals and top functions.
func NewFlameSummary(inputs []FlameInput, merged *flame.Profile, top int) FlameSummary {
	d := FlameSummary{Inputs: inputs, Unit: merged.Unit, Total: merged.Total(), Frames: merged.Frames(), Functions: merged.Functions(top)}
	if d.Functions == nil {
		d.Functions = []flame.FunctionCost{}
	}
	return d
}

// NewFlameDiffSummary is the data of `perfscope flame diff`: the two
// inputs, how before was scaled to after (unless absolute), and the top
// changes.
func NewFlameDiffSummary(inputs [2]FlameInput, profiles [2]*flame.Profile, diff *flame.Diff, shape flame.Shape, absolute bool, top int) FlameDiffSummary {
	scale := 1.0
	if !absolute && profiles[0].Total() > 0 {
		scale = float64(profiles[1].Total()) / float64(profiles[0].Total())
	}
	d := FlameDiffSummary{Before: inputs[0], After: inputs[1], Unit: profiles[1].Unit, Shape: shape,
		Normalised: !absolute, BeforeScale: scale, Changes: diff.Changes(top)}
	if d.Changes == nil {
		d.Changes = []flame.FunctionChange{}
	}
	return d
}

func writeFlameText(w io.Writer, d FlameSummary) {
	Heading(w, "Profile")
	fmt.Fprintf(w, "%s %s in total, %s distinct frames, from %d input(s)\n", flameValue(d.Unit, d.Total), d.Unit, Count(float64(d.Frames)), len(d.Inputs))
	if len(d.Functions) == 0 {
		return
	}
	Heading(w, "Functions by self "+string(d.Unit))
	t := Table{Header: []string{"SELF", "SELF%", "TOTAL", "TOTAL%", "KIND", "FUNCTION"}}
	for _, f := range d.Functions {
		t.Add(flameValue(d.Unit, f.Self), Percent(flameShare(f.Self, d.Total)),
			flameValue(d.Unit, f.Total), Percent(flameShare(f.Total, d.Total)), f.Kind, f.Name)
	}
	t.Write(w)
}

func writeFlameDiffText(w io.Writer, d FlameDiffSummary) error {
	Heading(w, "Change in self "+string(d.Unit)+" (before scaled ×"+strconv.FormatFloat(d.BeforeScale, 'f', 3, 64)+")")
	if len(d.Changes) == 0 {
		_, err := fmt.Fprintln(w, "No function's share changed.")
		return err
	}
	t := Table{Header: []string{"BEFORE", "AFTER", "DELTA", "KIND", "FUNCTION"}}
	for _, c := range d.Changes {
		t.Add(strconv.FormatFloat(c.Before, 'f', 1, 64), strconv.FormatFloat(c.After, 'f', 1, 64),
			strconv.FormatFloat(c.Delta, 'f', 1, 64), c.Kind, c.Name)
	}
	t.Write(w)
	return nil
}

func flameShare(v, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(v) / float64(total)
}

func flameValue(u flame.Unit, v int64) string {
	switch u {
	case flame.Nanoseconds:
		return Nanos(float64(v))
	case flame.Microseconds:
		return Nanos(1000 * float64(v))
	case flame.Bytes:
		return Bytes(float64(v))
	}
	return Count(float64(v))
}
