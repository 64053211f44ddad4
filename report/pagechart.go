package report

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
)

// The HTML page's charts are SVG drawn here, like the flame graphs: no
// charting library, no script needed to see them, nothing fetched. Each
// chart carries a <title> and <desc>, writes every value as text beside
// its mark (colour never carries information alone) and is followed on
// the page by a table of the same numbers.

const (
	chartWidth  = 920.0
	labelWidth  = 190.0
	valueWidth  = 170.0
	barRow      = 18.0
	barGap      = 4.0
	chartTop    = 8.0
	chartBottom = 22.0
)

// ChartBar is one bar of a BarChart.
type ChartBar struct {
	Label string
	Value float64
	// RelError, when set, is the 95 % relative bound of an estimated
	// value: drawn as an error bar and written as ±.
	RelError *float64
	// Estimated marks a value that was scaled from sampling windows
	// whose bound is unknown: written "±?".
	Estimated bool
	// Series names the group the bar belongs to in a chart with more
	// than one ("kernel", "driver", "before", "after"); it is written
	// beside the value and drawn with its own fill pattern.
	Series string
}

// BarChart is a horizontal bar chart.
type BarChart struct {
	Title, Desc string
	Bars        []ChartBar
	// Format writes a value (Count when nil).
	Format func(float64) string
	// Max is the axis's end; 0: the largest bar or error bar.
	Max float64
	// Narrow draws the chart half as wide, for charts laid out two
	// abreast (PageSection.Pairs), so its text stays readable.
	Narrow bool
}

// chartSeq numbers the charts of one page for their title ids; a page is
// drawn by one goroutine (pageBuilder).
type chartSeq struct{ n int }

func (s *chartSeq) next() string {
	s.n++
	return fmt.Sprintf("chart%d", s.n)
}

func esc(s string) string { return template.HTMLEscapeString(s) }

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// svgOpen writes the chart's root element with its accessible name.
func svgOpen(b *strings.Builder, id string, w, h float64, title, desc string) {
	fmt.Fprintf(b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="%s-t %s-d" preserveAspectRatio="xMinYMin meet">`, w, h, id, id)
	fmt.Fprintf(b, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, id, esc(title), id, esc(desc))
}

// seriesClass gives each series of a chart its fill: solid, hatched,
// dotted, outlined, so that a printout in black and white still tells
// them apart (their names are written beside the values too).
func seriesClass(series []string, s string) string {
	for i, name := range series {
		if name == s {
			return fmt.Sprintf("s%d", i%4)
		}
	}
	return "s0"
}

// Chart is what a page section draws: a BarChart or a HeatMap.
type Chart interface {
	svg(seq *chartSeq) template.HTML
}

// svg draws the chart; a chart without bars is a sentence saying so.
func (c BarChart) svg(seq *chartSeq) template.HTML {
	if len(c.Bars) == 0 {
		return template.HTML(`<p class="none">` + esc(c.Title) + `: nothing was measured.</p>`)
	}
	format := c.Format
	if format == nil {
		format = Count
	}
	var series []string
	max := finite(c.Max)
	for _, b := range c.Bars {
		if b.Series != "" && !slices.Contains(series, b.Series) {
			series = append(series, b.Series)
		}
		if c.Max == 0 {
			hi := finite(b.Value)
			if b.RelError != nil {
				hi = finite(b.Value * (1 + *b.RelError))
			}
			max = math.Max(max, hi)
		}
	}
	if max <= 0 {
		max = 1
	}
	id := seq.next()
	width, labelWidth, valueWidth := chartWidth, labelWidth, valueWidth
	if c.Narrow {
		width, labelWidth, valueWidth = chartWidth/2, 60, 120
	}
	h := chartTop + float64(len(c.Bars))*(barRow+barGap) + chartBottom
	plot := width - labelWidth - valueWidth
	x := func(v float64) float64 { return labelWidth + math.Min(math.Max(finite(v), 0), max)/max*plot }
	var b strings.Builder
	fmt.Fprintf(&b, `<figcaption>%s</figcaption>`, esc(c.Title))
	svgOpen(&b, id, width, h, c.Title, c.Desc)
	for i, bar := range c.Bars {
		y := chartTop + float64(i)*(barRow+barGap)
		label := bar.Label
		value := format(finite(bar.Value))
		switch {
		case bar.RelError != nil:
			value += fmt.Sprintf(" ±%.0f%%", *bar.RelError*100)
		case bar.Estimated:
			value += " ±?"
		}
		if bar.Series != "" && bar.Series != bar.Label {
			value += " " + bar.Series
		}
		fmt.Fprintf(&b, `<g class="bar"><title>%s: %s</title>`, esc(label), esc(value))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="lbl">%s</text>`, labelWidth-6, y+barRow-5, esc(label))
		w := x(bar.Value) - labelWidth
		if bar.Value > 0 && w < 1 {
			w = 1
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="%s"/>`, labelWidth, y, w, barRow, seriesClass(series, bar.Series))
		end := x(bar.Value)
		if bar.RelError != nil {
			lo, hi := x(bar.Value*(1-*bar.RelError)), x(bar.Value*(1+*bar.RelError))
			cy := y + barRow/2
			fmt.Fprintf(&b, `<path class="err" d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f"/>`,
				lo, cy, hi, lo, cy-5, cy+5, hi, cy-5, cy+5)
			end = math.Max(end, hi)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="val">%s</text></g>`, end+6, y+barRow-5, esc(value))
	}
	axisY := h - chartBottom + 2
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`, labelWidth, axisY, labelWidth+plot, axisY)
	for i := 0; i <= 4; i++ {
		v := max * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick">%s</text>`, x(v), axisY+14, esc(format(v)))
	}
	b.WriteString(`</svg>`)
	// A legend when the series are not already the bars' labels.
	legend := false
	for _, bar := range c.Bars {
		legend = legend || bar.Series != bar.Label
	}
	if len(series) > 1 && legend {
		b.WriteString(`<p class="legend">`)
		for _, s := range series {
			fmt.Fprintf(&b, `<span><svg width="14" height="10" aria-hidden="true"><rect width="14" height="10" class="%s"/></svg> %s</span>`, seriesClass(series, s), esc(s))
		}
		b.WriteString(`</p>`)
	}
	return template.HTML(b.String())
}

// HeatMap is a grid of values: rows by columns (CPUs by intervals,
// queues by CPUs). A cell's shade grows with its value; the value is
// written in the cell when it fits and is the cell's tooltip always, and
// the section's table repeats the numbers.
type HeatMap struct {
	Title, Desc string
	Rows, Cols  []string
	// Cells[row][col]; nil: not measured (drawn hatched, written "–").
	Cells  [][]*float64
	Format func(float64) string
	// Max is the value of the darkest shade; 0: the largest cell.
	Max float64
}

// svg draws the heat map.
func (m HeatMap) svg(seq *chartSeq) template.HTML {
	if len(m.Rows) == 0 || len(m.Cols) == 0 {
		return template.HTML(`<p class="none">` + esc(m.Title) + `: nothing was measured.</p>`)
	}
	format := m.Format
	if format == nil {
		format = Count
	}
	max := finite(m.Max)
	if max == 0 {
		for _, row := range m.Cells {
			for _, v := range row {
				if v != nil {
					max = math.Max(max, finite(*v))
				}
			}
		}
	}
	if max <= 0 {
		max = 1
	}
	id := seq.next()
	const rowH, top, left = 22.0, 24.0, 110.0
	cellW := (chartWidth - left - 8) / float64(len(m.Cols))
	h := top + float64(len(m.Rows))*rowH + 6
	var b strings.Builder
	fmt.Fprintf(&b, `<figcaption>%s</figcaption>`, esc(m.Title))
	svgOpen(&b, id, chartWidth, h, m.Title, m.Desc)
	// Column labels: at most ~12 written, the rest in tooltips.
	every := int(math.Ceil(float64(len(m.Cols)) / 12))
	for j, c := range m.Cols {
		if j%every == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick">%s</text>`, left+(float64(j)+0.5)*cellW, top-8, esc(c))
		}
	}
	for i, r := range m.Rows {
		y := top + float64(i)*rowH
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="lbl">%s</text>`, left-6, y+rowH-7, esc(r))
		for j, c := range m.Cols {
			var v *float64
			if i < len(m.Cells) && j < len(m.Cells[i]) {
				v = m.Cells[i][j]
			}
			cx := left + float64(j)*cellW
			if v == nil {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="heat-none"><title>%s, %s: not measured</title></rect>`,
					cx, y, math.Max(cellW-1, 0.5), rowH-2, esc(r), esc(c))
				continue
			}
			shade := math.Min(math.Max(finite(*v)/max, 0), 1)
			text := format(finite(*v))
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="heat" fill-opacity="%.2f"><title>%s, %s: %s</title></rect>`,
				cx, y, math.Max(cellW-1, 0.5), rowH-2, 0.08+0.92*shade, esc(r), esc(c), esc(text))
			if cellW >= 7*float64(len(text))+4 {
				cls := "heat-v"
				if shade > 0.55 {
					cls = "heat-v dark"
				}
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="%s">%s</text>`, cx+cellW/2, y+rowH-8, cls, esc(text))
			}
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
