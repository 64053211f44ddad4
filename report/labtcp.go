package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/perfscope/perfscope/diagnose"
)

// LabTCPData is the data of `perfscope lab tcp`: the scenarios run and
// those this machine cannot reproduce, with the reason.
type LabTCPData struct {
	Scenarios []LabTCPScenario `json:"scenarios"`
	Skipped   []LabTCPSkipped  `json:"skipped"`
}

// LabTCPScenario is one planted fault, what perfscope found, the fix it
// applied and the before/after table.
type LabTCPScenario struct {
	Name  string `json:"name"`
	Fault string `json:"fault"`
	// Finding is the rule that must fire before the fix and be gone after.
	Finding string `json:"finding"`
	// Fix says how the lab applies the finding's recommendation.
	Fix        string   `json:"fix"`
	Namespaces []string `json:"namespaces"`
	// Found is the finding in the run before the fix (nil: not reported).
	Found *diagnose.Finding `json:"found"`
	// Applied are the changes `perfscope tcp --apply` made (as commands),
	// then what the lab restarted.
	Applied []string `json:"applied"`
	Gone    bool     `json:"gone"`
	// Rows are the before/after table.
	Rows []LabTCPRow `json:"rows"`
	// Problem says why the scenario did not prove its fix ("" when it did).
	Problem    string `json:"problem,omitempty"`
	DurationNs int64  `json:"duration_ns"`
}

// LabTCPRow is one number before and after the fix. Source says who
// measured it: "perfscope" (the `perfscope tcp` run) or "lab" (the lab's
// own servers and clients over the same run). Nil: not measured.
type LabTCPRow struct {
	Key    string   `json:"key"`
	Label  string   `json:"label"`
	Unit   string   `json:"unit"`
	Source string   `json:"source"`
	Before *float64 `json:"before"`
	After  *float64 `json:"after"`
}

// LabTCPSkipped is a scenario this machine cannot reproduce.
type LabTCPSkipped struct {
	Name   string `json:"name"`
	Fault  string `json:"fault"`
	Reason string `json:"reason"`
}

// OK says the scenario proved its fix.
func (s LabTCPScenario) OK() bool { return s.Problem == "" }

// Finished counts the scenarios that ran to their end (not the skipped).
func (d LabTCPData) Finished() int { return len(d.Scenarios) }

// Failed counts the scenarios that did not prove their fix.
func (d LabTCPData) Failed() int {
	n := 0
	for _, s := range d.Scenarios {
		if !s.OK() {
			n++
		}
	}
	return n
}

// WriteLabTCPScenario prints one scenario as it finishes: the fault, the
// finding, what was applied, whether the finding went, and the table.
func WriteLabTCPScenario(w io.Writer, s LabTCPScenario) {
	Heading(w, fmt.Sprintf("%s: %s", s.Name, s.Fault))
	if s.Found == nil {
		fmt.Fprintf(w, "found:   NOT %s\n", s.Finding)
	} else {
		fmt.Fprintf(w, "found:   %s (%s): %s\n", s.Found.ID, s.Found.Severity, s.Found.Title)
	}
	for _, a := range s.Applied {
		fmt.Fprintf(w, "applied: %s\n", a)
	}
	if len(s.Rows) > 0 {
		verdict := "gone"
		if !s.Gone {
			verdict = "STILL REPORTED"
		}
		fmt.Fprintf(w, "after:   %s %s\n", s.Finding, verdict)
		t := Table{Header: []string{"", "before", "after", "change", "measured by"}}
		for _, r := range s.Rows {
			t.Add(r.Label, labValue(r.Unit, r.Before), labValue(r.Unit, r.After), labChange(r.Before, r.After), r.Source)
		}
		t.Write(w)
	}
	if s.Problem != "" {
		fmt.Fprintf(w, "problem: %s\n", s.Problem)
	}
}

func labValue(unit string, v *float64) string {
	if v == nil {
		return "-"
	}
	switch unit {
	case "fraction":
		return fmt.Sprintf("%.1f%%", *v*100)
	case "bytes/s":
		return fmt.Sprintf("%.1f MB/s", *v/1e6)
	case "ns/MB":
		return fmt.Sprintf("%.0f µs/MB", *v/1e3)
	case "bytes":
		if math.Abs(*v) >= 1e6 {
			return fmt.Sprintf("%.1f MB", *v/1e6)
		}
		return fmt.Sprintf("%.1f KB", *v/1e3)
	case "ms":
		return fmt.Sprintf("%.1f ms", *v)
	}
	if *v == float64(int64(*v)) || *v >= 100 || *v <= -100 {
		return strconv.FormatInt(int64(math.Round(*v)), 10)
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

func labChange(before, after *float64) string {
	if before == nil || after == nil || *before == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.0f%%", (*after / *before - 1)*100)
}

// WriteText implements Texter: the summary (each scenario's own table is
// printed as it finishes) and the scenarios skipped on this machine.
func (d LabTCPData) WriteText(w io.Writer, r *Report) error {
	Heading(w, "Summary")
	t := Table{Header: []string{"scenario", "finding", "before", "after the fix"}}
	for _, s := range d.Scenarios {
		found, after := "missing", "-"
		if s.Found != nil {
			found = s.Found.Severity.String()
		}
		if len(s.Rows) > 0 {
			after = map[bool]string{true: "gone", false: "still there"}[s.Gone]
		}
		t.Add(s.Name, s.Finding, found, after)
	}
	for _, s := range d.Skipped {
		t.Add(s.Name, "", "skipped", "")
	}
	t.Write(w)
	fmt.Fprintf(w, "%d of %d scenarios proved their fix in %s.\n", len(d.Scenarios)-d.Failed(), len(d.Scenarios), time.Duration(r.Meta.DurationNs).Round(time.Second))
	for _, s := range d.Scenarios {
		if !s.OK() {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, s.Problem)
		}
	}
	for _, s := range d.Skipped {
		fmt.Fprintf(w, "  skipped %s (%s): %s\n", s.Name, s.Fault, s.Reason)
	}
	return nil
}

// WriteKept says where --keep left the reports (in dir) and the
// namespaces.
func (d LabTCPData) WriteKept(w io.Writer, dir string) {
	fmt.Fprintf(w, "Kept: reports in %s; namespaces:", dir)
	for _, s := range d.Scenarios {
		for _, ns := range s.Namespaces {
			fmt.Fprintf(w, " %s", ns)
		}
	}
	fmt.Fprintln(w, "\n(remove with: ip netns del NAME; look around with: ip netns exec NAME perfscope tcp --iface vb)")
}
