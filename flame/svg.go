package flame

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Options shape a rendered flame graph.
type Options struct {
	Title    string
	Subtitle string
	// Width of the image in pixels (default 1200).
	Width int
	// MinWidth omits frames narrower than this many pixels (default 0.1,
	// as flamegraph.pl's --minwidth): they cannot be seen or clicked, and
	// pruning them keeps large profiles fast to draw and small to ship.
	MinWidth float64
	// Reverse draws an icicle graph: the root at the top, callees below.
	Reverse bool
	// FrameHeight in pixels (default 16) and FontSize in points (default 12).
	FrameHeight int
	FontSize    float64
}

func (o Options) withDefaults() Options {
	if o.Width <= 0 {
		o.Width = 1200
	}
	if o.MinWidth < 0 {
		o.MinWidth = 0
	} else if o.MinWidth == 0 {
		o.MinWidth = 0.1
	}
	if o.FrameHeight <= 0 {
		o.FrameHeight = 16
	}
	if o.FontSize <= 0 {
		o.FontSize = 12
	}
	if o.Title == "" {
		o.Title = "Flame Graph"
	}
	return o
}

// Layout margins, as FlameGraph's so that its users find things where they
// expect them: the title above, the details line and search match below.
const (
	xpad = 10.0
	// fontWidth is the average glyph width relative to the font size, used
	// to decide how many characters of a name fit in a frame.
	fontWidth = 0.59
)

//go:embed assets/flame.js
var flameJS string

//go:embed assets/flame.css
var flameCSS string

// frameBox is one frame that will be drawn.
type frameBox struct {
	node  int32
	depth int32
	x     int64 // offset from the left in value units
}

// diffView turns a render into a differential flame graph: widths come from
// the shape profile, colours from how much each frame changed.
type diffView struct {
	// other is, per node of the shape profile, the other profile's
	// inclusive value for the same stack, scaled to the shape's total.
	other []float64
	// shapeIsAfter says whether the shape is the "after" profile (delta =
	// shape − other) or the "before" one (delta = other − shape).
	shapeIsAfter bool
	normalised   bool
}

func (d *diffView) delta(p *Profile, n int32) float64 {
	v := float64(p.node(n).total)
	if d.shapeIsAfter {
		return v - d.other[n]
	}
	return d.other[n] - v
}

// graph is a laid-out flame graph, ready to be written as SVG.
type graph struct {
	p        *Profile
	o        Options
	diff     *diffView
	boxes    []frameBox
	maxDepth int32
	scale    float64 // pixels per value unit
	height   float64
	ypad1    float64 // above the frames: title, controls
	ypad2    float64 // below the frames: details, match
}

// layout picks the frames wide enough to draw and their positions. Frames
// are ordered by name within each parent, like FlameGraph.
func layout(p *Profile, o Options, d *diffView) *graph {
	g := &graph{p: p, o: o, diff: d}
	total := p.Total()
	if total > 0 {
		g.scale = (float64(o.Width) - 2*xpad) / float64(total)
	}
	// Minimum width in value units, compared in integers in the hot loop.
	minValue := int64(0)
	if g.scale > 0 {
		minValue = int64(o.MinWidth / g.scale)
		for float64(minValue)*g.scale < o.MinWidth {
			minValue++
		}
	}
	type pending struct {
		node  int32
		depth int32
		x     int64
	}
	stack := []pending{{0, 0, 0}}
	var kids []int32
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		g.boxes = append(g.boxes, frameBox(f))
		g.maxDepth = max(g.maxDepth, f.depth)
		kids = kids[:0]
		for c := p.node(f.node).firstChild; c != noNode; c = p.node(c).nextSibling {
			kids = append(kids, c)
		}
		if len(kids) == 0 {
			continue
		}
		sortByName(p, kids)
		x := f.x
		// Pushed in reverse so that frames are written left to right.
		first := len(stack)
		for _, c := range kids {
			if t := p.node(c).total; t >= minValue {
				stack = append(stack, pending{c, f.depth + 1, x})
			}
			x += p.node(c).total
		}
		for i, j := first, len(stack)-1; i < j; i, j = i+1, j-1 {
			stack[i], stack[j] = stack[j], stack[i]
		}
	}
	fs := o.FontSize
	g.ypad1 = fs * 3
	g.ypad2 = fs*2 + 10
	g.height = float64(g.maxDepth+1)*float64(o.FrameHeight) + g.ypad1 + g.ypad2
	return g
}

// frameY is the top of a row at depth.
func (g *graph) frameY(depth int32) float64 {
	fh := float64(g.o.FrameHeight)
	if g.o.Reverse {
		return g.ypad1 + float64(depth)*fh
	}
	return g.height - g.ypad2 - float64(depth+1)*fh
}

// svgWriter appends to a reused buffer and flushes it in large writes:
// fmt would dominate the time of drawing a big graph.
type svgWriter struct {
	w   *bufio.Writer
	buf []byte
}

func (s *svgWriter) str(v string) { s.buf = append(s.buf, v...) }
func (s *svgWriter) num(v float64) {
	s.buf = strconv.AppendFloat(s.buf, v, 'f', 2, 64)
	// Trim "12.00" to "12": a large graph has hundreds of thousands of them.
	n := len(s.buf)
	if s.buf[n-1] == '0' && s.buf[n-2] == '0' && s.buf[n-3] == '.' {
		s.buf = s.buf[:n-3]
	}
}
func (s *svgWriter) esc(v string) { s.buf = appendEscaped(s.buf, v) }
func (s *svgWriter) flush() error {
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	return err
}

// appendEscaped escapes text for XML content and attribute values.
func appendEscaped(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '<':
			dst = append(dst, "&lt;"...)
		case '>':
			dst = append(dst, "&gt;"...)
		case '&':
			dst = append(dst, "&amp;"...)
		case '"':
			dst = append(dst, "&quot;"...)
		case '\'':
			dst = append(dst, "&#39;"...)
		default:
			if c < 0x20 && c != '\t' {
				continue // not allowed in XML 1.0
			}
			dst = append(dst, c)
		}
	}
	return dst
}

// WriteSVG writes p as a self-contained interactive SVG flame graph: hover
// for details, click to zoom, search by regular expression with the share
// of samples matched, reset zoom. It loads nothing from the network.
func WriteSVG(w io.Writer, p *Profile, o Options) error {
	o = o.withDefaults()
	return writeSVG(w, layout(p, o, nil), false)
}

// script is the configuration the embedded JavaScript reads.
type scriptConfig struct {
	Width    int     `json:"width"`
	Height   float64 `json:"height"`
	FH       int     `json:"fh"`
	FS       float64 `json:"fs"`
	XPad     float64 `json:"xpad"`
	YPad1    float64 `json:"ypad1"`
	YPad2    float64 `json:"ypad2"`
	Icicle   bool    `json:"icicle"`
	Diff     bool    `json:"diff"`
	Embedded bool    `json:"embedded"`
}

func (g *graph) scriptConfig(embedded bool) ([]byte, error) {
	o := g.o
	return json.Marshal(scriptConfig{
		Width: o.Width, Height: g.height, FH: o.FrameHeight, FS: o.FontSize, XPad: xpad,
		YPad1: g.ypad1, YPad2: g.ypad2, Icicle: o.Reverse, Diff: g.diff != nil, Embedded: embedded,
	})
}

// writeSVG writes the graph; embedded leaves out the XML prolog and the
// onload hook, for inlining into the HTML page.
func writeSVG(w io.Writer, g *graph, embedded bool) error {
	s := &svgWriter{w: bufio.NewWriterSize(w, 1<<16), buf: make([]byte, 0, 1<<16)}
	o := g.o
	width := float64(o.Width)
	cfg, err := g.scriptConfig(embedded)
	if err != nil {
		return err
	}
	if !embedded {
		s.str(`<?xml version="1.0" encoding="UTF-8" standalone="no"?>` + "\n")
	}
	s.str(`<svg version="1.1" id="flamegraph" xmlns="http://www.w3.org/2000/svg" width="`)
	s.num(width)
	s.str(`" height="`)
	s.num(g.height)
	s.str(`" viewBox="0 0 `)
	s.num(width)
	s.str(" ")
	s.num(g.height)
	s.str(`"`)
	if !embedded {
		s.str(` onload="flameInit(this)"`)
	}
	s.str(">\n")
	if !embedded {
		// CDATA keeps the script's "<" and "&" from being read as markup.
		s.str("<style type=\"text/css\"><![CDATA[\n")
		s.str(flameCSS)
		s.str("]]></style>\n<script type=\"text/ecmascript\"><![CDATA[\n")
		s.buf = appendScript(s.buf, cfg)
		s.str("]]></script>\n")
	}
	s.str(`<rect class="background" x="0" y="0" width="`)
	s.num(width)
	s.str(`" height="`)
	s.num(g.height)
	s.str("\"/>\n")
	s.str(`<text id="title" x="`)
	s.num(width / 2)
	s.str(`" y="`)
	s.num(o.FontSize * 2)
	s.str(`">`)
	s.esc(o.Title)
	s.str("</text>\n")
	if o.Subtitle != "" {
		s.str(`<text id="subtitle" x="`)
		s.num(width / 2)
		s.str(`" y="`)
		s.num(o.FontSize * 2.9)
		s.str(`">`)
		s.esc(o.Subtitle)
		s.str("</text>\n")
	}
	textRow := func(id string, x, y float64, anchor, body string) {
		s.str(`<text id="` + id + `" x="`)
		s.num(x)
		s.str(`" y="`)
		s.num(y)
		s.str(`"`)
		if anchor != "" {
			s.str(` text-anchor="` + anchor + `"`)
		}
		s.str(">" + body + "</text>\n")
	}
	bottom := g.height - g.ypad2/2
	textRow("details", xpad, bottom, "", " ")
	textRow("matched", width-xpad, bottom, "end", " ")
	if !embedded {
		textRow("unzoom", xpad, o.FontSize*2, "", "Reset Zoom")
		textRow("search", width-xpad, o.FontSize*2, "end", "Search")
		textRow("invert", width-xpad-100, o.FontSize*2, "end", "Invert")
	}
	s.str("<g id=\"frames\">\n")
	if err := g.writeFrames(s); err != nil {
		return err
	}
	s.str("</g>\n</svg>\n")
	if err := s.flush(); err != nil {
		return err
	}
	return s.w.Flush()
}

func appendScript(dst, cfg []byte) []byte {
	dst = append(dst, "var flameConfig = "...)
	dst = append(dst, cfg...)
	dst = append(dst, ";\n"...)
	return append(dst, flameJS...)
}

func (g *graph) writeFrames(s *svgWriter) error {
	p, o := g.p, g.o
	total := p.Total()
	fh := float64(o.FrameHeight)
	charWidth := o.FontSize * fontWidth
	// Colour and escaped name per interned name, computed once each.
	colours := make([]string, len(p.names))
	escaped := make([]string, len(p.names))
	var maxAbs float64
	if g.diff != nil {
		for _, b := range g.boxes {
			if d := g.diff.delta(p, b.node); d > maxAbs {
				maxAbs = d
			} else if -d > maxAbs {
				maxAbs = -d
			}
		}
	}
	for _, b := range g.boxes {
		n := p.node(b.node)
		name := p.names[n.name]
		if b.node == 0 {
			name = "all"
		}
		if escaped[n.name] == "" {
			escaped[n.name] = string(appendEscaped(nil, name))
		}
		var fill string
		if g.diff != nil {
			fill = colourString(diffColour(g.diff.delta(p, b.node), maxAbs))
		} else {
			if colours[n.name] == "" {
				colours[n.name] = colourString(frameColour(name))
			}
			fill = colours[n.name]
		}
		x := xpad + float64(b.x)*g.scale
		wd := float64(n.total) * g.scale
		y := g.frameY(b.depth)
		s.str("<g><title>")
		s.str(escaped[n.name])
		s.str(" (")
		s.buf = appendValue(s.buf, p.Unit, n.total)
		s.str(", ")
		s.buf = appendPercent(s.buf, n.total, total)
		if g.diff != nil {
			s.buf = g.appendDiffDetail(s.buf, b.node, total)
		}
		s.str(`)</title><rect x="`)
		s.num(x)
		s.str(`" y="`)
		s.num(y)
		s.str(`" width="`)
		s.num(wd)
		s.str(`" height="`)
		s.num(fh - 1)
		s.str(`" fill="`)
		s.str(fill)
		s.str(`"/><text x="`)
		s.num(x + 3)
		s.str(`" y="`)
		s.num(y + fh/2 + o.FontSize/2 - 2)
		s.str(`">`)
		s.buf = appendFitted(s.buf, name, int((wd-3)/charWidth))
		s.str("</text></g>\n")
		if len(s.buf) > 1<<16 {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *graph) appendDiffDetail(dst []byte, n int32, total int64) []byte {
	other := g.diff.other[n]
	label := "before"
	if !g.diff.shapeIsAfter {
		label = "after"
	}
	dst = append(dst, "; "...)
	dst = append(dst, label...)
	dst = append(dst, ' ')
	dst = appendValue(dst, g.p.Unit, int64(other+0.5))
	if g.diff.normalised {
		dst = append(dst, " normalised"...)
	}
	dst = append(dst, "; change "...)
	d := g.diff.delta(g.p, n)
	if d >= 0 {
		dst = append(dst, '+')
	}
	if total > 0 {
		dst = strconv.AppendFloat(dst, 100*d/float64(total), 'f', 2, 64)
	} else {
		dst = append(dst, '0')
	}
	return append(dst, "% of total"...)
}

func colourString(c colour) string {
	b := []byte("rgb(")
	b = strconv.AppendUint(b, uint64(c.r), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(c.g), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(c.b), 10)
	return string(append(b, ')'))
}

// appendFitted appends as much of name as fits in chars characters,
// ending in ".." when cut, escaped; nothing when fewer than 3 fit.
func appendFitted(dst []byte, name string, chars int) []byte {
	if chars < 3 {
		return dst
	}
	if utf8.RuneCountInString(name) <= chars {
		return appendEscaped(dst, name)
	}
	cut, n := 0, 0
	for i := range name {
		if n == chars-2 {
			cut = i
			break
		}
		n++
	}
	dst = appendEscaped(dst, name[:cut])
	return append(dst, ".."...)
}

// appendValue formats v in unit for people: thousands separators for
// counts, scaled units for time and bytes.
func appendValue(dst []byte, u Unit, v int64) []byte {
	switch u {
	case Nanoseconds:
		return appendScaled(dst, float64(v), []string{"ns", "µs", "ms", "s"}, 1000)
	case Microseconds:
		return appendScaled(dst, float64(v), []string{"µs", "ms", "s"}, 1000)
	case Bytes:
		return appendScaled(dst, float64(v), []string{"B", "KiB", "MiB", "GiB", "TiB"}, 1024)
	}
	dst = appendThousands(dst, v)
	if v == 1 {
		return append(dst, " sample"...)
	}
	return append(dst, " samples"...)
}

func appendScaled(dst []byte, v float64, units []string, step float64) []byte {
	i := 0
	for v >= step && i < len(units)-1 {
		v /= step
		i++
	}
	prec := 2
	if i == 0 {
		prec = 0
	}
	dst = strconv.AppendFloat(dst, v, 'f', prec, 64)
	dst = append(dst, ' ')
	return append(dst, units[i]...)
}

func appendThousands(dst []byte, v int64) []byte {
	if v < 0 {
		dst = append(dst, '-')
		v = -v
	}
	var tmp [24]byte
	digits := strconv.AppendInt(tmp[:0], v, 10)
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c)
	}
	return dst
}

func appendPercent(dst []byte, v, total int64) []byte {
	if total <= 0 {
		return append(dst, "0%"...)
	}
	dst = strconv.AppendFloat(dst, 100*float64(v)/float64(total), 'f', 2, 64)
	return append(dst, '%')
}

// sortByName orders nodes by frame name.
func sortByName(p *Profile, nodes []int32) {
	if len(nodes) < 2 {
		return
	}
	slices.SortFunc(nodes, func(a, b int32) int {
		return strings.Compare(p.names[p.node(a).name], p.names[p.node(b).name])
	})
}
