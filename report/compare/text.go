package compare

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

// WriteText prints the comparison as tables: the metrics, the NET_RX share
// per CPU, and the findings gained, lost and kept.
func WriteText(w io.Writer, c Comparison) {
	fmt.Fprintf(w, "before: %s  %s  %s  %s (packets from %s)\n", c.Before.Host, c.Before.Interface, c.Before.Started.Format(time.RFC3339), report.Nanos(float64(c.Before.DurationNs)), orNone(c.Before.PacketSource))
	fmt.Fprintf(w, "after:  %s  %s  %s  %s (packets from %s)\n", c.After.Host, c.After.Interface, c.After.Started.Format(time.RFC3339), report.Nanos(float64(c.After.DurationNs)), orNone(c.After.PacketSource))
	if c.Before.PacketSource != c.After.PacketSource {
		fmt.Fprintln(w, "note: the two runs counted packets from different sources; compare packets/s with care")
	}

	report.Heading(w, "What changed")
	t := report.Table{Header: []string{"metric", "before", "after", "change", ""}}
	for _, m := range c.Metrics {
		verdict := ""
		if m.WithinError {
			verdict = "within error"
		}
		if m.Better != nil {
			verdict = "worse"
			if *m.Better {
				verdict = "better"
			}
		}
		change := "-"
		if m.Change != nil {
			change = fmt.Sprintf("%+.1f%%", *m.Change*100)
		}
		t.Add(m.Label, FormatValue(m.Unit, m.Before)+obtained(m.BeforeEstimate, m.Before), FormatValue(m.Unit, m.After)+obtained(m.AfterEstimate, m.After), change, verdict)
	}
	t.Write(w)

	if len(c.NetRX) > 0 {
		report.Heading(w, "NET_RX share of each CPU's time")
		t := report.Table{Header: []string{"cpu", "before", "", "after", ""}}
		for _, s := range c.NetRX {
			t.Add(fmt.Sprint(s.CPU), FormatValue("fraction", s.Before), bar(s.Before), FormatValue("fraction", s.After), bar(s.After))
		}
		t.Write(w)
	}

	if c.TCP != nil {
		writeTCPText(w, c.TCP)
	}

	report.Heading(w, "Findings")
	ft := report.Table{Header: []string{"", "id", "severity", "title"}}
	for _, group := range []struct {
		mark string
		refs []FindingRef
	}{{"lost (fixed)", c.Lost}, {"gained (new)", c.Gained}, {"kept", c.Kept}} {
		for _, f := range group.refs {
			ft.Add(group.mark, f.ID, f.Severity.String(), f.Title)
		}
	}
	if len(ft.Rows) == 0 {
		fmt.Fprintln(w, "No findings in either run.")
		return
	}
	ft.Write(w)
}

func orNone(s string) string {
	if s == "" {
		return "nowhere"
	}
	return s
}

func bar(v *float64) string {
	if v == nil {
		return ""
	}
	return report.Bar(*v, 20)
}

// FormatValue prints a metric value in its unit ("-" when unmeasured).
func FormatValue(unit string, v *float64) string {
	if v == nil {
		return "-"
	}
	switch unit {
	case "fraction":
		return report.Percent(*v)
	case "ratio":
		return fmt.Sprintf("%.2f", *v)
	case "cpus", "queues":
		return fmt.Sprintf("%.0f", *v)
	case "ns/s":
		return report.Nanos(*v) + "/s"
	case "ns":
		return report.Nanos(*v)
	case "events/s":
		// A few events in a window are fractions of one per second.
		if *v != 0 && math.Abs(*v) < 10 {
			return fmt.Sprintf("%.2f", *v)
		}
	}
	return report.Count(*v)
}

// WriteText implements report.Texter: `perfscope udp --compare` renders
// through report.Render like every report.
func (c Comparison) WriteText(w io.Writer, _ *report.Report) error {
	WriteText(w, c)
	return nil
}

// obtained marks an estimated number with its 95 % bound (±?: unknown);
// exact numbers stay as they are.
func obtained(e *evidence.Estimate, v *float64) string {
	switch {
	case e == nil || v == nil:
		return ""
	case e.RelError == nil:
		return " ±?"
	}
	return fmt.Sprintf(" ±%.0f%%", 100**e.RelError)
}

// Formats implements report.Formatted: a comparison has its text, its
// JSON and its page.
func (Comparison) Formats() []report.Format { return report.PageFormats }

func init() {
	// udp --compare and tcp --compare print a Comparison.
	report.Register("udp compare", Comparison{})
	report.Register("tcp compare", Comparison{})
	report.Register("lab udp", LabUDPData{})
}
