package compare

import (
	"fmt"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

// PageSections implements report.PageSectioner: `perfscope udp --compare
// -o html` draws the two runs side by side, each metric before and after
// with its error bars, and says whether the change is within error.
func (c Comparison) PageSections() []report.PageSection {
	runs := report.PageTable{Caption: "The two runs", Header: []string{"", "before", "after"}}
	runs.Add("host", c.Before.Host, c.After.Host)
	runs.Add("interface", c.Before.Interface, c.After.Interface)
	runs.Add("started", c.Before.Started.Format(time.RFC3339), c.After.Started.Format(time.RFC3339))
	runs.Add("duration", report.Nanos(float64(c.Before.DurationNs)), report.Nanos(float64(c.After.DurationNs)))
	runs.Add("packets counted from", orNone(c.Before.PacketSource), orNone(c.After.PacketSource))
	head := report.PageSection{ID: "compare-runs", Title: "Before and after", Tables: []report.PageTable{runs}}
	if c.Before.PacketSource != c.After.PacketSource {
		head.Notes = append(head.Notes, "The two runs counted packets from different sources: compare packets/s with care.")
	}

	changed := report.PageSection{ID: "compare-metrics", Title: "What changed", Pairs: true}
	t := report.PageTable{Caption: "Metrics before and after", Header: []string{"metric", "before", "after", "change", "verdict"}}
	for _, m := range c.Metrics {
		unit := m.Unit
		format := func(v float64) string { return FormatValue(unit, &v) }
		title := m.Label
		if v := verdict(m); v != "" {
			title += " — " + v
		}
		chart := report.BarChart{Title: title, Format: format, Narrow: true,
			Desc: fmt.Sprintf("%s before and after, with the 95 %% bound of an estimated number. %s", m.Label, verdict(m))}
		if m.Before != nil {
			chart.Bars = append(chart.Bars, runBar("before", *m.Before, m.BeforeEstimate))
		}
		if m.After != nil {
			chart.Bars = append(chart.Bars, runBar("after", *m.After, m.AfterEstimate))
		}
		changed.Charts = append(changed.Charts, chart)
		change := "–"
		if m.Change != nil {
			change = fmt.Sprintf("%+.1f%%", *m.Change*100)
		}
		t.Add(m.Label, FormatValue(m.Unit, m.Before)+obtained(m.BeforeEstimate, m.Before), FormatValue(m.Unit, m.After)+obtained(m.AfterEstimate, m.After), change, verdict(m))
	}
	changed.Tables = append(changed.Tables, t)
	out := []report.PageSection{head, changed}

	if len(c.NetRX) > 0 {
		s := report.PageSection{ID: "compare-netrx", Title: "NET_RX share of each CPU's time"}
		chart := report.BarChart{Title: "NET_RX share of each CPU's time, before and after", Format: report.Percent,
			Desc: "For each CPU, the share of its time in NET_RX softirqs in the run before and the run after."}
		ct := report.PageTable{Caption: "NET_RX share per CPU", Header: []string{"CPU", "before", "after"}}
		for _, cs := range c.NetRX {
			label := fmt.Sprintf("cpu%d", cs.CPU)
			if cs.Before != nil {
				chart.Bars = append(chart.Bars, report.ChartBar{Label: label, Value: *cs.Before, Series: "before"})
			}
			if cs.After != nil {
				chart.Bars = append(chart.Bars, report.ChartBar{Label: label, Value: *cs.After, Series: "after"})
			}
			ct.Add(label, FormatValue("fraction", cs.Before), FormatValue("fraction", cs.After))
		}
		s.Charts, s.Tables = []report.Chart{chart}, []report.PageTable{ct}
		out = append(out, s)
	}

	if c.TCP != nil {
		out = append(out, tcpPageSection(c.TCP))
	}

	f := report.PageSection{ID: "compare-findings", Title: "Findings fixed, new and kept"}
	ft := report.PageTable{Caption: "Findings of the two runs", Header: []string{"", "id", "severity", "title"}}
	for _, group := range []struct {
		mark string
		refs []FindingRef
	}{{"lost (fixed)", c.Lost}, {"gained (new)", c.Gained}, {"kept", c.Kept}} {
		for _, r := range group.refs {
			ft.Add(group.mark, r.ID, r.Severity.String(), r.Title)
		}
	}
	if len(ft.Rows) == 0 {
		f.Notes = append(f.Notes, "No findings in either run.")
	} else {
		f.Tables = append(f.Tables, ft)
	}
	return append(out, f)
}

// runBar is one run's value of a metric, with its error bar when the run
// estimated it.
func runBar(run string, v float64, e *evidence.Estimate) report.ChartBar {
	b := report.ChartBar{Label: run, Value: v, Series: run}
	if e != nil {
		b.RelError, b.Estimated = e.RelError, e.RelError == nil
	}
	return b
}

// verdict is a metric's change in words: better, worse, within error or
// neither.
func verdict(m Metric) string {
	switch {
	case m.WithinError:
		return "within error"
	case m.Better == nil:
		return ""
	case *m.Better:
		return "better"
	}
	return "worse"
}
