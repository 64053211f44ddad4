// Package gchtml renders `perfscope gclog`'s report as one self-contained
// HTML page: inline CSS and SVG charts (heap before/after over time, pauses
// over time), the pause table and the findings. Nothing is fetched from the
// network, so the page can be mailed or attached to a ticket as is.
package gchtml

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"github.com/perfscope/perfscope/collectors/gclog"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

const (
	chartW = 920.0
	chartH = 240.0
	padL   = 64.0
	padR   = 12.0
	padT   = 12.0
	padB   = 28.0
)

// kindColor colours pause markers by kind (young, mixed, full, ...).
var kindColor = map[gclog.Kind]string{
	gclog.KindYoung: "#2b8a3e", gclog.KindMixed: "#1971c2", gclog.KindFull: "#e03131",
	gclog.KindInitialMark: "#f08c00", gclog.KindRemark: "#9c36b5", gclog.KindCleanup: "#0c8599",
	gclog.KindPause: "#868e96", gclog.KindConcurrent: "#adb5bd",
}

// Page is what the page shows besides the report's findings.
type Page struct {
	Files  []string
	Parse  gclog.Stats
	GC     evidence.GC
	Series []gclog.Point
}

// Write renders r (whose data p holds) as HTML to w.
func Write(w io.Writer, r *report.Report, s Page) error {
	data := struct {
		R       *report.Report
		S       Page
		Heap    template.HTML
		Pauses  template.HTML
		Legend  []legendItem
		Bytes   func(float64) string
		Nanos   func(float64) string
		Percent func(float64) string
	}{r, s, heapChart(s.Series), pauseChart(s.Series), legend(), report.Bytes, report.Nanos, report.Percent}
	return page.Execute(w, data)
}

type legendItem struct {
	Kind  string
	Color string
}

func legend() []legendItem {
	var out []legendItem
	for k := gclog.KindYoung; k < gclog.KindConcurrent; k++ {
		out = append(out, legendItem{k.String(), kindColor[k]})
	}
	return out
}

type scale struct{ t0, t1, v0, v1 float64 }

func (s scale) x(t float64) float64 {
	if s.t1 <= s.t0 {
		return padL
	}
	return padL + (t-s.t0)/(s.t1-s.t0)*(chartW-padL-padR)
}

func (s scale) y(v float64) float64 {
	if s.v1 <= s.v0 {
		return chartH - padB
	}
	return chartH - padB - (v-s.v0)/(s.v1-s.v0)*(chartH-padT-padB)
}

func timeRange(ps []gclog.Point) (float64, float64) {
	t0, t1 := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		t0, t1 = math.Min(t0, p.T), math.Max(t1, p.T)
	}
	if t1 <= t0 {
		t1 = t0 + 1
	}
	return t0, t1
}

// axes draws the frame with min/max labels.
func axes(b *strings.Builder, sc scale, yLabel func(float64) string) {
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`, padL, chartH-padB, chartW-padR, chartH-padB)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`, padL, padT, padL, chartH-padB)
	for i := 0; i <= 4; i++ {
		v := sc.v0 + (sc.v1-sc.v0)*float64(i)/4
		y := sc.y(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`, padL, y, chartW-padR, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="yl">%s</text>`, padL-4, y+4, template.HTMLEscapeString(yLabel(v)))
	}
	for i := 0; i <= 5; i++ {
		t := sc.t0 + (sc.t1-sc.t0)*float64(i)/5
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="xl">%.1fs</text>`, sc.x(t), chartH-8, t)
	}
}

func heapChart(ps []gclog.Point) template.HTML {
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
	t0, t1 := timeRange(ps)
	sc := scale{t0, t1, 0, max * 1.05}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" role="img" aria-label="heap before and after each GC">`, chartW, chartH)
	axes(&b, sc, report.Bytes)
	// Sawtooth: the heap climbs to "before" and drops to "after" at each GC.
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
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"><title>%.3fs %s: %s → %s</title></circle>`,
			sc.x(p.T), sc.y(float64(p.HeapAfter)), kindColor[p.Kind], p.T, p.Kind, report.Bytes(float64(p.HeapBefore)), report.Bytes(float64(p.HeapAfter)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func pauseChart(ps []gclog.Point) template.HTML {
	var max float64
	n := 0
	for _, p := range ps {
		if p.Kind != gclog.KindConcurrent {
			max = math.Max(max, float64(p.PauseNs))
			n++
		}
	}
	if n == 0 {
		return template.HTML(`<p class="none">The log records no pauses.</p>`)
	}
	t0, t1 := timeRange(ps)
	sc := scale{t0, t1, 0, math.Max(max*1.05, 1)}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" role="img" aria-label="GC pauses over time">`, chartW, chartH)
	axes(&b, sc, report.Nanos)
	for _, p := range ps {
		if p.Kind == gclog.KindConcurrent {
			continue
		}
		x, y := sc.x(p.T), sc.y(float64(p.PauseNs))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"><title>%.3fs %s pause %s</title></line>`,
			x, chartH-padB, x, y, kindColor[p.Kind], p.T, p.Kind, report.Nanos(float64(p.PauseNs)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

var page = template.Must(template.New("gc").Funcs(template.FuncMap{
	"f64":   func(v int64) float64 { return float64(v) },
	"upper": strings.ToUpper,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>perfscope gclog — {{.S.GC.Collector}} {{range .S.Files}}{{.}} {{end}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:960px;color:#212529}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #dee2e6}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right}th{background:#f1f3f5}
td:first-child,th:first-child{text-align:left}
svg{width:100%;height:auto;background:#fcfcfd;border:1px solid #e9ecef}
.axis{stroke:#495057}.grid{stroke:#e9ecef}.yl{font-size:10px;text-anchor:end;fill:#495057}
.xl{font-size:10px;text-anchor:middle;fill:#495057}
.heap{fill:none;stroke:#1c7ed6;stroke-width:1}.cap{fill:none;stroke:#adb5bd;stroke-dasharray:4 3}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.f{border-left:4px solid #adb5bd;padding:4px 12px;margin:12px 0;background:#f8f9fa}
.f.crit{border-color:#e03131}.f.warn{border-color:#f08c00}.f.info{border-color:#1971c2}
code,pre{font-family:ui-monospace,monospace;font-size:12px}pre{background:#f1f3f5;padding:6px}
.none{color:#868e96}.meta{color:#495057}
</style></head><body>
<h1>GC log: {{if .S.GC.Collector}}{{.S.GC.Collector}}{{else}}unknown collector{{end}}</h1>
<p class="meta">{{range .S.Files}}<code>{{.}}</code> {{end}}<br>
{{.S.Parse.Lines}} lines, {{.S.Parse.Events}} events, {{.S.Parse.Unknown}} unrecognised lines;
window {{printf "%.1f" .S.GC.WindowSeconds}} s; perfscope {{.R.Meta.Version}}</p>
{{range .S.Parse.Warnings}}<p class="f crit"><b>{{.}}</b></p>{{end}}
{{range .S.Parse.Notes}}<p class="f info">{{.}}</p>{{end}}
{{if .S.Parse.UnrecognisedRecords}}<p class="f crit"><b>{{.S.Parse.UnrecognisedRecords}} GC records could not be read</b>
({{range .S.GC.UnreadableAt}}<code>{{.}}</code> {{end}}): the numbers below miss their pauses.</p>{{end}}

<h2>Summary</h2>
<table>
<tr><td>GC throughput</td><td>{{if .S.GC.ThroughputKnown}}{{call .Percent .S.GC.Throughput}}{{else}}– (the log is too short){{end}}</td></tr>
{{with .S.GC.Safepoints}}<tr><td>safepoints</td><td>{{.Count}}, {{call $.Nanos (f64 .StoppedNs)}} stopped ({{call $.Percent .StoppedShare}}); longest time to safepoint {{call $.Nanos (f64 .TTSPMaxNs)}}; not GC {{call $.Nanos (f64 .NonGCNs)}}</td></tr>{{end}}
{{with .S.GC.Cycles}}<tr><td>concurrent cycles</td><td>{{.Count}}, mean {{call $.Nanos (f64 .MeanNs)}}, longest {{call $.Nanos (f64 .MaxNs)}}</td></tr>{{end}}
{{with .S.GC.LiveSet}}{{if ne .Verdict "unknown"}}<tr><td>live set</td><td>{{.Verdict}} after {{.Basis}} ({{call $.Bytes .SlopeBytesPerHour}}/hour)</td></tr>{{end}}{{end}}
<tr><td>allocation rate</td><td>{{call .Bytes .S.GC.AllocRate}}/s ({{.S.GC.AllocSource}})</td></tr>
<tr><td>promotion rate</td><td>{{if .S.GC.PromotionKnown}}{{call .Bytes .S.GC.PromotionRate}}/s{{else}}–{{end}}</td></tr>
<tr><td>young GCs</td><td>{{.S.GC.YoungGCs}}, one every {{printf "%.2f" .S.GC.YoungIntervalSeconds}} s</td></tr>
<tr><td>Eden / heap</td><td>{{call .Bytes .S.GC.EdenBytes}} / {{call .Bytes .S.GC.HeapBytes}}</td></tr>
{{with .S.GC.Model}}<tr><td>bytes per request</td><td>{{call $.Bytes .BytesPerRequest}} at {{printf "%.0f" .RPS}} req/s</td></tr>
<tr><td>young GCs/min at {{printf "%.0f" .TargetRPS}} req/s</td><td>{{printf "%.1f" .PredictedYoungGCsPerMinute}} predicted ({{printf "%.1f" .ObservedYoungGCsPerMinute}} observed)</td></tr>{{end}}
</table>

<h2>Heap before and after each collection</h2>
{{.Heap}}
<h2>Pauses over time</h2>
{{.Pauses}}
<p class="legend">{{range .Legend}}<span><i style="background:{{.Color}}"></i>{{.Kind}}</span>{{end}}</p>

<h2>Pauses by kind</h2>
<table><tr><th>kind</th><th>count</th><th>total</th><th>mean</th><th>p50</th><th>p95</th><th>p99</th><th>max</th><th>over goal</th></tr>
{{range .S.GC.Pauses}}<tr><td>{{.Kind}}</td><td>{{.Count}}</td><td>{{call $.Nanos (f64 .TotalNs)}}</td><td>{{call $.Nanos .MeanNs}}</td><td>{{call $.Nanos (f64 .P50Ns)}}</td><td>{{call $.Nanos (f64 .P95Ns)}}</td><td>{{call $.Nanos (f64 .P99Ns)}}</td><td>{{call $.Nanos (f64 .MaxNs)}}</td><td>{{.OverGoal}}</td></tr>
{{end}}</table>
{{if .S.GC.FullGCCauses}}<h2>Full GCs by cause</h2>
<table><tr><th>cause</th><th>count</th><th>total pause</th></tr>
{{range .S.GC.FullGCCauses}}<tr><td>{{.Cause}}</td><td>{{.Count}}</td><td>{{call $.Nanos (f64 .TotalNs)}}</td></tr>{{end}}
</table>{{end}}

<h2>Findings</h2>
{{range .R.Findings}}<div class="f {{.Severity}}"><b>[{{upper .Severity.String}}] {{.Title}}</b> <code>{{.ID}}</code>
<ul>{{range .Evidence}}<li>{{.}}</li>{{end}}</ul>
{{with .Recommendation}}<p>{{.Why}}</p>
{{range .Apply}}<pre>apply:  {{.}}</pre>{{end}}{{range .Revert}}<pre>revert: {{.}}</pre>{{end}}
{{range .Code}}<pre>{{.Code}}</pre>{{end}}
{{range .Caveats}}<p><i>caveat:</i> {{.}}</p>{{end}}
{{if .Expected}}<p><i>expect:</i> {{.Expected}}</p>{{end}}{{end}}</div>
{{else}}<p class="none">No findings.</p>{{end}}
</body></html>
`))
