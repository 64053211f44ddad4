package udplab

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/perfscope/perfscope/report"
	"github.com/perfscope/perfscope/report/compare"
)

// keyMetrics are the comparison rows each scenario shows: what the fix is
// for (packets received, drops), and the scenario's own lock class and
// function group.
func keyMetrics(sc Scenario) []string {
	keys := []string{"packets_per_s", "drops_per_s", "lock_wait_ns_per_s"}
	keys = append(keys, sc.Metrics...)
	return append(keys, "net_rx.ns_per_packet", "net_rx.active_cpus")
}

// WriteScenario prints one scenario: the fault, what perfscope found, the
// fix, and the before/after table.
func WriteScenario(w io.Writer, r Result) {
	sc := r.Scenario
	report.Heading(w, fmt.Sprintf("%s: %s", sc.Name, sc.Fault))
	fmt.Fprintf(w, "Makita (LinuxCon Japan 2016): %s\n", sc.Step)
	if sc.Fix == FixCheck {
		for _, l := range r.Checked {
			fmt.Fprintln(w, l)
		}
		if r.Problem != "" {
			fmt.Fprintf(w, "problem: %s\n", r.Problem)
		}
		return
	}
	if sc.Fix == FixNone {
		if len(r.WarnOrWorse) == 0 {
			fmt.Fprintln(w, "findings of severity warn or worse: none")
		} else {
			fmt.Fprintf(w, "findings of severity warn or worse: %v\n", r.WarnOrWorse)
		}
		return
	}
	if r.Found == nil {
		fmt.Fprintf(w, "found:   NOT %s\n", sc.Finding)
	} else {
		fmt.Fprintf(w, "found:   %s (%s): %s\n", r.Found.ID, r.Found.Severity, r.Found.Title)
	}
	for _, a := range r.Applied {
		fmt.Fprintf(w, "applied: %s\n", a)
	}
	if r.Comparison == nil {
		if r.Problem != "" {
			fmt.Fprintf(w, "problem: %s\n", r.Problem)
		}
		return
	}
	verdict := "gone"
	if !r.Gone {
		verdict = "STILL REPORTED"
	}
	fmt.Fprintf(w, "after:   %s %s\n", sc.Finding, verdict)
	t := report.Table{Header: []string{"", "before", "after", "change"}}
	byKey := map[string]compare.Metric{}
	for _, m := range r.Comparison.Metrics {
		byKey[m.Key] = m
	}
	for _, k := range keyMetrics(sc) {
		m, ok := byKey[k]
		if !ok {
			continue
		}
		change := "-"
		if m.Change != nil {
			change = fmt.Sprintf("%+.0f%%", *m.Change*100)
		}
		t.Add(m.Label, compare.FormatValue(m.Unit, m.Before), compare.FormatValue(m.Unit, m.After), change)
	}
	t.Write(w)
	if r.Problem != "" {
		fmt.Fprintf(w, "problem: %s\n", r.Problem)
	}
}

// WriteSummary prints one line per scenario and the verdict.
func WriteSummary(w io.Writer, results []Result, took time.Duration) {
	report.Heading(w, "Summary")
	t := report.Table{Header: []string{"scenario", "finding", "before", "after the fix", "packets/s before", "after", "change"}}
	proved := 0
	for _, r := range results {
		if r.OK() {
			proved++
		}
		sc := r.Scenario
		if sc.Fix == FixCheck {
			verdict := "agrees"
			if !r.OK() {
				verdict = "DISAGREES"
			}
			t.Add(sc.Name, "(a check)", verdict, "", "", "", "")
			continue
		}
		if sc.Fix == FixNone {
			verdict := "no warn+"
			if len(r.WarnOrWorse) > 0 {
				verdict = fmt.Sprintf("%d warn+", len(r.WarnOrWorse))
			}
			t.Add(sc.Name, "(none expected)", verdict, "", "", "", "")
			continue
		}
		found, after := "missing", "-"
		if r.Found != nil {
			found = r.Found.Severity.String()
		}
		if r.Comparison != nil {
			after = "still there"
			if r.Gone {
				after = "gone"
			}
		}
		pb, pa, ch := "-", "-", "-"
		if r.Comparison != nil {
			for _, m := range r.Comparison.Metrics {
				if m.Key == "packets_per_s" {
					pb, pa = compare.FormatValue(m.Unit, m.Before), compare.FormatValue(m.Unit, m.After)
					if m.Change != nil {
						ch = fmt.Sprintf("%+.0f%%", *m.Change*100)
					}
				}
			}
		}
		t.Add(sc.Name, sc.Finding, found, after, pb, pa, ch)
	}
	t.Write(w)
	fmt.Fprintf(w, "%d of %d scenarios proved their fix in %s.\n", proved, len(results), took.Round(time.Second))
	for _, r := range results {
		if !r.OK() {
			fmt.Fprintf(w, "  %s: %s\n", r.Scenario.Name, r.Problem)
		}
	}
}

// WriteKept says where --keep left the reports and the namespaces.
func WriteKept(w io.Writer, dir string, results []Result) {
	fmt.Fprintf(w, "Kept: reports in %s; namespaces:", dir)
	for _, r := range results {
		fmt.Fprintf(w, " %s", strings.Join(r.Namespaces, " "))
	}
	fmt.Fprintln(w, "\n(remove with: ip netns del NAME; look around with: ip netns exec NAME perfscope udp --iface vb)")
}

// Results are a lab run's scenarios, the data of `perfscope lab udp`'s
// report (a JSON array, as it always was).
type Results []Result

// WriteText implements report.Texter: the summary table and verdict (each
// scenario's own table is printed as it finishes).
func (rs Results) WriteText(w io.Writer, r *report.Report) error {
	WriteSummary(w, rs, time.Duration(r.Meta.DurationNs))
	return nil
}

// Formats implements report.Formatted: the lab's results have their text,
// their JSON and their page.
func (Results) Formats() []report.Format { return report.PageFormats }

func init() {
	report.Register("lab udp", Results{})
}
