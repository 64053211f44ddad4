package report

import (
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/evidence"
)

// GCPage is what the page shows of a GC log (`perfscope gclog`): the
// parse's health, the summary, heap and pauses over time, pauses by kind
// and full GCs by cause.
type GCPage struct {
	Files  []string
	Parse  gclog.Stats
	GC     evidence.GC
	Series []gclog.Point
}

const (
	gcChartH = 240.0
	gcPadL   = 64.0
	gcPadR   = 12.0
	gcPadT   = 12.0
	gcPadB   = 28.0
)

// gcKindClass draws pause markers by kind with a class per kind; the kind
// is also each marker's tooltip and the pause table's first column.
var gcKindClass = map[gclog.Kind]string{
	gclog.KindYoung: "k-young", gclog.KindMixed: "k-mixed", gclog.KindFull: "k-full",
	gclog.KindInitialMark: "k-initial", gclog.KindRemark: "k-remark", gclog.KindCleanup: "k-cleanup",
	gclog.KindPause: "k-pause", gclog.KindConcurrent: "k-concurrent",
}

// PageSections lays out the GC log's sections.
func (p GCPage) PageSections() []PageSection {
	g := p.GC
	collector := g.Collector
	if collector == "" {
		collector = "unknown collector"
	}
	s := PageSection{ID: "gc", Title: "GC log: " + collector}
	s.Notes = append(s.Notes, fmt.Sprintf("%s: %d lines, %d events, %d unrecognised lines; window %.1f s",
		strings.Join(p.Files, ", "), p.Parse.Lines, p.Parse.Events, p.Parse.Unknown, g.WindowSeconds))
	for _, w := range p.Parse.Warnings() {
		s.Notes = append(s.Notes, "Warning: "+w)
	}
	if n := p.Parse.UnrecognisedRecords; n > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("Warning: %d GC records could not be read (%s): the numbers below miss their pauses.", n, strings.Join(g.UnreadableAt, ", ")))
	}
	s.Notes = append(s.Notes, p.Parse.Notes()...)
	s.Tables = append(s.Tables, gcSummary(g))
	s.Charts = append(s.Charts, gcHeapChart(p.Series), gcPauseChart(p.Series))
	s.Tables = append(s.Tables, gcPauseTable(g))
	if len(g.FullGCCauses) > 0 {
		t := PageTable{Caption: "Full GCs by cause", Header: []string{"cause", "count", "total pause"}}
		for _, c := range g.FullGCCauses {
			t.Add(c.Cause, fmt.Sprint(c.Count), Nanos(float64(c.TotalNs)))
		}
		s.Tables = append(s.Tables, t)
	}
	return []PageSection{s}
}

// gcSection is a recipe's GC log section: the summary and pauses (a
// recipe's report keeps no series).
func gcSection(g evidence.GC, files []string) PageSection {
	return PageSection{ID: "gc", Title: "GC log (" + g.Collector + ")", Notes: []string{strings.Join(files, ", ")},
		Tables: []PageTable{gcSummary(g), gcPauseTable(g)}}
}

func gcSummary(g evidence.GC) PageTable {
	t := PageTable{Caption: "Summary", Header: []string{"measure", "value"}}
	if g.ThroughputKnown {
		t.Add("GC throughput", Percent(g.Throughput))
	} else {
		t.Add("GC throughput", "– (the log is too short)")
	}
	if sp := g.Safepoints; sp != nil {
		t.Add("safepoints", fmt.Sprintf("%d, %s stopped (%s); longest time to safepoint %s; not GC %s", sp.Count, Nanos(float64(sp.StoppedNs)), Percent(sp.StoppedShare), Nanos(float64(sp.TTSPMaxNs)), Nanos(float64(sp.NonGCNs))))
	}
	if c := g.Cycles; c != nil {
		t.Add("concurrent cycles", fmt.Sprintf("%d, mean %s, longest %s", c.Count, Nanos(float64(c.MeanNs)), Nanos(float64(c.MaxNs))))
	}
	if ls := g.LiveSet; ls.Verdict != "unknown" && ls.Verdict != "" {
		t.Add("live set", fmt.Sprintf("%s after %s (%s/hour)", ls.Verdict, ls.Basis, Bytes(ls.SlopeBytesPerHour)))
	}
	t.Add("allocation rate", fmt.Sprintf("%s/s (%s)", Bytes(g.AllocRate), g.AllocSource))
	if g.PromotionKnown {
		t.Add("promotion rate", Bytes(g.PromotionRate)+"/s")
	}
	t.Add("young GCs", fmt.Sprintf("%d, one every %.2f s", g.YoungGCs, g.YoungIntervalSeconds))
	t.Add("Eden / heap", Bytes(g.EdenBytes)+" / "+Bytes(g.HeapBytes))
	if m := g.Model; m != nil {
		t.Add("bytes per request", fmt.Sprintf("%s at %.0f req/s", Bytes(m.BytesPerRequest), m.RPS))
		t.Add(fmt.Sprintf("young GCs/min at %.0f req/s", m.TargetRPS), fmt.Sprintf("%.1f predicted (%.1f observed)", m.PredictedYoungGCsPerMinute, m.ObservedYoungGCsPerMinute))
	}
	return t
}

func gcPauseTable(g evidence.GC) PageTable {
	t := PageTable{Caption: "Pauses by kind", Header: []string{"kind", "count", "total", "mean", "p50", "p95", "p99", "max", "over goal"}}
	for _, p := range g.Pauses {
		t.Add(p.Kind, fmt.Sprint(p.Count), Nanos(float64(p.TotalNs)), Nanos(p.MeanNs), Nanos(float64(p.P50Ns)), Nanos(float64(p.P95Ns)),
			Nanos(float64(p.P99Ns)), Nanos(float64(p.MaxNs)), fmt.Sprint(p.OverGoal))
	}
	return t
}

type gcScale struct{ t0, t1, v0, v1 float64 }

func (s gcScale) x(t float64) float64 {
	if s.t1 <= s.t0 {
		return gcPadL
	}
	return gcPadL + (t-s.t0)/(s.t1-s.t0)*(chartWidth-gcPadL-gcPadR)
}

func (s gcScale) y(v float64) float64 {
	if s.v1 <= s.v0 {
		return gcChartH - gcPadB
	}
	return gcChartH - gcPadB - (v-s.v0)/(s.v1-s.v0)*(gcChartH-gcPadT-gcPadB)
}

func gcTimeRange(ps []gclog.Point) (float64, float64) {
	t0, t1 := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		t0, t1 = math.Min(t0, p.T), math.Max(t1, p.T)
	}
	if t1 <= t0 {
		t1 = t0 + 1
	}
	return t0, t1
}

func gcAxes(b *strings.Builder, sc gcScale, yLabel func(float64) string) {
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`, gcPadL, gcChartH-gcPadB, chartWidth-gcPadR, gcChartH-gcPadB)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`, gcPadL, gcPadT, gcPadL, gcChartH-gcPadB)
	for i := 0; i <= 4; i++ {
		v := sc.v0 + (sc.v1-sc.v0)*float64(i)/4
		y := sc.y(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`, gcPadL, y, chartWidth-gcPadR, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="lbl">%s</text>`, gcPadL-4, y+4, esc(yLabel(v)))
	}
	// Enough decimals that the ticks of a short log differ.
	decimals := 1
	if span := sc.t1 - sc.t0; span > 0 {
		decimals = max(1, min(4, int(math.Ceil(-math.Log10(span/5)))+1))
	}
	for i := 0; i <= 5; i++ {
		t := sc.t0 + (sc.t1-sc.t0)*float64(i)/5
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="tick">%.*fs</text>`, sc.x(t), gcChartH-8, decimals, t)
	}
}

// gcHeapChart is the heap before and after each collection: a sawtooth,
// and the heap's capacity dashed.
type gcHeapChart []gclog.Point

func (ps gcHeapChart) svg(seq *chartSeq) template.HTML {
	var max float64
	n := 0
	for _, p := range ps {
		if p.HeapBefore >= 0 {
			max = math.Max(max, float64(p.HeapBefore))
			n++
		}
		max = math.Max(max, float64(p.HeapCap))
	}
	if n == 0 {
		return template.HTML(`<p class="none">The log records no heap occupancy.</p>`)
	}
	t0, t1 := gcTimeRange(ps)
	sc := gcScale{t0, t1, 0, max * 1.05}
	var b strings.Builder
	b.WriteString(`<figcaption>Heap before and after each collection</figcaption>`)
	svgOpen(&b, seq.next(), chartWidth, gcChartH, "Heap before and after each collection",
		"The heap climbs to its occupancy before each GC and drops to the occupancy after it; the dashed line is the heap's capacity. Each GC's numbers are its marker's tooltip.")
	gcAxes(&b, sc, Bytes)
	var saw, caps strings.Builder
	for _, p := range ps {
		if p.HeapBefore < 0 || p.HeapAfter < 0 {
			continue
		}
		x := sc.x(p.T)
		fmt.Fprintf(&saw, "%.1f,%.1f %.1f,%.1f ", x, sc.y(float64(p.HeapBefore)), x, sc.y(float64(p.HeapAfter)))
		if p.HeapCap > 0 {
			fmt.Fprintf(&caps, "%.1f,%.1f ", x, sc.y(float64(p.HeapCap)))
		}
	}
	fmt.Fprintf(&b, `<polyline points="%s" class="cap"/>`, caps.String())
	fmt.Fprintf(&b, `<polyline points="%s" class="heap"/>`, saw.String())
	for _, p := range ps {
		if p.HeapBefore < 0 || p.HeapAfter < 0 {
			continue
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" class="%s"><title>%s</title></circle>`,
			sc.x(p.T), sc.y(float64(p.HeapAfter)), gcKindClass[p.Kind], esc(fmt.Sprintf("%.3fs %s: %s → %s", p.T, p.Kind, Bytes(float64(p.HeapBefore)), Bytes(float64(p.HeapAfter)))))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// gcPauseChart is each pause as a stem at its time, its height the
// pause's length.
type gcPauseChart []gclog.Point

func (ps gcPauseChart) svg(seq *chartSeq) template.HTML {
	var max float64
	n := 0
	kinds := map[gclog.Kind]bool{}
	for _, p := range ps {
		if p.Kind != gclog.KindConcurrent {
			max = math.Max(max, float64(p.PauseNs))
			kinds[p.Kind] = true
			n++
		}
	}
	if n == 0 {
		return template.HTML(`<p class="none">The log records no pauses.</p>`)
	}
	t0, t1 := gcTimeRange(ps)
	sc := gcScale{t0, t1, 0, math.Max(max*1.05, 1)}
	var b strings.Builder
	b.WriteString(`<figcaption>GC pauses over time</figcaption>`)
	svgOpen(&b, seq.next(), chartWidth, gcChartH, "GC pauses over time",
		"Each stop-the-world pause as a line at its time, as tall as the pause; its kind and length are its tooltip, and the table below gives the pauses by kind.")
	gcAxes(&b, sc, Nanos)
	for _, p := range ps {
		if p.Kind == gclog.KindConcurrent {
			continue
		}
		x, y := sc.x(p.T), sc.y(float64(p.PauseNs))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="stem %s"><title>%s</title></line>`,
			x, gcChartH-gcPadB, x, y, gcKindClass[p.Kind], esc(fmt.Sprintf("%.3fs %s pause %s", p.T, p.Kind, Nanos(float64(p.PauseNs)))))
	}
	b.WriteString(`</svg><p class="legend">`)
	// The legend names each kind by its colour and its dash: a printout
	// in grey still tells young from full.
	for k := gclog.KindYoung; k < gclog.KindConcurrent; k++ {
		if kinds[k] {
			fmt.Fprintf(&b, `<span><svg width="18" height="10" aria-hidden="true"><line x1="0" y1="5" x2="18" y2="5" class="stem %s"/></svg> %s</span>`, gcKindClass[k], esc(k.String()))
		}
	}
	b.WriteString(`</p>`)
	return template.HTML(b.String())
}
