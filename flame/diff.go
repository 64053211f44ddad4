package flame

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// Shape says whose widths a differential flame graph is drawn with.
type Shape string

const (
	// ShapeAfter draws the "after" profile and colours what changed since
	// "before" (FlameGraph's difffolded default): frames that are new show,
	// frames that disappeared do not.
	ShapeAfter Shape = "after"
	// ShapeBefore draws the "before" profile, so that frames that shrank
	// or vanished stay visible (blue).
	ShapeBefore Shape = "before"
)

// ParseShape accepts "after" and "before".
func ParseShape(s string) (Shape, error) {
	switch Shape(s) {
	case ShapeAfter, ShapeBefore:
		return Shape(s), nil
	}
	return "", fmt.Errorf("unknown diff shape %q (want after or before)", s)
}

// DiffOptions shape a differential flame graph.
type DiffOptions struct {
	Shape Shape
	// Absolute compares raw values. By default the other profile is scaled
	// to the drawn profile's total, so that a longer recording does not
	// paint everything red: the colours show shares, not amounts.
	Absolute bool
}

// Diff pairs two profiles of the same unit for a differential graph.
type Diff struct {
	Before, After *Profile
	Options       DiffOptions
}

// NewDiff checks that before and after can be compared.
func NewDiff(before, after *Profile, o DiffOptions) (*Diff, error) {
	if before.Unit != after.Unit {
		return nil, fmt.Errorf("cannot compare a profile in %s with one in %s", before.Unit, after.Unit)
	}
	if o.Shape == "" {
		o.Shape = ShapeAfter
	}
	return &Diff{Before: before, After: after, Options: o}, nil
}

// shapes returns the drawn profile and the other one.
func (d *Diff) shapes() (shape, other *Profile) {
	if d.Options.Shape == ShapeBefore {
		return d.Before, d.After
	}
	return d.After, d.Before
}

// scale is the factor applied to the other profile's values.
func (d *Diff) scale() float64 {
	shape, other := d.shapes()
	if d.Options.Absolute || other.Total() == 0 {
		return 1
	}
	return float64(shape.Total()) / float64(other.Total())
}

// view computes, for every node of the drawn profile, the other profile's
// inclusive value for the same stack (scaled).
func (d *Diff) view() *diffView {
	shape, other := d.shapes()
	v := &diffView{other: make([]float64, shape.count), shapeIsAfter: d.Options.Shape != ShapeBefore, normalised: !d.Options.Absolute}
	k := d.scale()
	var walk func(sn, on int32)
	walk = func(sn, on int32) {
		v.other[sn] = float64(other.node(on).total) * k
		for c := shape.node(sn).firstChild; c != noNode; c = shape.node(c).nextSibling {
			if oc := other.lookup(on, shape.names[shape.node(c).name]); oc != noNode {
				walk(c, oc)
			}
		}
	}
	walk(0, 0)
	return v
}

// Delta is the change of one node: After − Before in the drawn profile's
// scale, for the stack ending at that node, inclusive.
func (d *Diff) Delta(frames []string) (before, after float64, ok bool) {
	shape, other := d.shapes()
	sn, on := int32(0), int32(0)
	for _, f := range frames {
		if sn = shape.lookup(sn, f); sn == noNode {
			return 0, 0, false
		}
		if on != noNode {
			on = other.lookup(on, f)
		}
	}
	s := float64(shape.node(sn).total)
	o := 0.0
	if on != noNode {
		o = float64(other.node(on).total) * d.scale()
	}
	if d.Options.Shape == ShapeBefore {
		return s, o, true
	}
	return o, s, true
}

// WriteDiffSVG writes a differential flame graph: widths from the shape
// profile, red where "after" has more than "before", blue where it has
// less, deeper for larger changes.
func WriteDiffSVG(w io.Writer, d *Diff, o Options) error {
	o = o.withDefaults()
	shape, _ := d.shapes()
	return writeSVG(w, layout(shape, o, d.view()), false)
}

// WriteDiffHTML is WriteDiffSVG as an HTML page with WriteHTML's toolbar.
func WriteDiffHTML(w io.Writer, d *Diff, o Options) error {
	o = o.withDefaults()
	shape, _ := d.shapes()
	return writeHTML(w, layout(shape, o, d.view()))
}

// WriteDiffFolded writes FlameGraph's difffolded format, "stack before
// after" per line, the union of both profiles' stacks with raw values
// (flamegraph.pl normalises itself with -n).
func WriteDiffFolded(w io.Writer, d *Diff) error {
	union := New(d.After.Unit)
	_ = union.Merge(d.Before)
	_ = union.Merge(d.After)
	bw := bufio.NewWriterSize(w, 1<<16)
	var buf []byte
	err := union.Walk(func(frames []string, _ int64) error {
		buf = buf[:0]
		for i, f := range frames {
			if i > 0 {
				buf = append(buf, ';')
			}
			buf = append(buf, f...)
		}
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, d.Before.selfOf(frames), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, d.After.selfOf(frames), 10)
		buf = append(buf, '\n')
		_, err := bw.Write(buf)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// selfOf is the self value of the stack frames, 0 if absent.
func (p *Profile) selfOf(frames []string) int64 {
	n := int32(0)
	for _, f := range frames {
		if n = p.lookup(n, f); n == noNode {
			return 0
		}
	}
	return p.node(n).self
}
