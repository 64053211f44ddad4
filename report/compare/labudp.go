package compare

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/report"
)

// `perfscope lab udp`'s data and its rendering: each scenario is a
// before/after comparison of two `perfscope udp` runs.

// LabUDPScenario is what a lab udp scenario plants and expects, as its
// report shows it (lab/udplab's Scenario adds how to run it).
type LabUDPScenario struct {
	Name          string       `json:"name"`
	Fault         string       `json:"fault"`
	ReferenceStep string       `json:"reference_step"`
	Finding       string       `json:"finding,omitempty"`
	FixText       string       `json:"fix"`
	Fix           LabUDPFix    `json:"fix_kind"`
	Setup         [][]string   `json:"setup,omitempty"`
	Before        LabUDPServer `json:"server_before"`
	After         LabUDPServer `json:"server_after"`
	Flood         LabUDPFlood  `json:"flood"`
	Metrics       []string     `json:"metrics,omitempty"`
}

// LabUDPResult is one scenario's outcome.
type LabUDPResult struct {
	Scenario LabUDPScenario `json:"scenario"`
	// Namespaces are the lab's namespaces (deleted unless --keep).
	Namespaces []string `json:"namespaces"`
	// Found is the scenario's finding in the run before the fix (nil when
	// perfscope did not report it).
	Found *diagnose.Finding `json:"found"`
	// Applied are the changes (as their shell renditions) or the server
	// change that made the fix.
	Applied []string `json:"applied"`
	// Gone says the finding is absent after the fix.
	Gone bool `json:"gone"`
	// WarnOrWorse lists findings of severity warn or crit in the final
	// run (the tuned scenario must have none).
	WarnOrWorse []string `json:"warn_or_worse_after"`
	// Reports are the paths of the saved runs (kept with --keep).
	BeforeReport string `json:"before_report,omitempty"`
	AfterReport  string `json:"after_report,omitempty"`
	// Comparison is `perfscope udp --compare before after`.
	Comparison *Comparison `json:"comparison,omitempty"`
	// Server counts: datagrams the lab's server read in each phase.
	ServerBefore *LabUDPServerCount `json:"server_before_count,omitempty"`
	ServerAfter  *LabUDPServerCount `json:"server_after_count,omitempty"`
	// Checked are a FixCheck scenario's observations.
	Checked []string `json:"checked,omitempty"`
	// Problem says why the scenario did not prove its fix ("" when it did).
	Problem    string `json:"problem,omitempty"`
	DurationNs int64  `json:"duration_ns"`
}

// LabUDPServerCount is what `lab udp-server` printed when it stopped (the data
// of its JSON).
type LabUDPServerCount struct {
	Received uint64 `json:"received"`
	Sockets  int    `json:"sockets"`
	Mode     string `json:"mode"`
}

// OK says the scenario proved what it set out to.
func (r LabUDPResult) OK() bool { return r.Problem == "" }

// LabUDPServer is the lab server of one phase (`perfscope lab udp-server`).
type LabUDPServer struct {
	Mode    string `json:"mode"` // single, reuseport or reuseport-cpu
	Threads int    `json:"threads"`
	// Pin pins thread i to the i-th CPU of this list ("" = unpinned).
	Pin  string `json:"pin,omitempty"`
	Echo bool   `json:"echo,omitempty"`
	// RcvBuf is the sockets' SO_RCVBUF (0: the system default).
	RcvBuf int `json:"rcvbuf,omitempty"`
	// RcvBufFromFinding takes RcvBuf from the finding's so_rcvbuf_bytes
	// parameter: the fix the finding computed.
	RcvBufFromFinding bool `json:"rcvbuf_from_finding,omitempty"`
}

func (s LabUDPServer) String() string {
	text := fmt.Sprintf("%s, %d threads", s.Mode, s.Threads)
	if s.Pin != "" {
		text += " pinned to CPUs " + s.Pin
	}
	if s.Echo {
		text += ", echoing"
	}
	if s.RcvBuf > 0 {
		text += fmt.Sprintf(", SO_RCVBUF %d B", s.RcvBuf)
	}
	return text
}

// LabUDPFlood is the lab's load (`perfscope lab udp-flood` in the sender
// namespace).
type LabUDPFlood struct {
	Senders int `json:"senders"`
	// Rate is datagrams/s of all senders (0 = as fast as they can).
	Rate int `json:"rate,omitempty"`
	// CPUs confines the senders (taskset) so that the receive softirq,
	// which veth runs on the sending CPU, lands where the scenario needs.
	CPUs string `json:"cpus,omitempty"`
}

// LabUDPFix is how the lab applies the scenario's recommendation.
type LabUDPFix int

const (
	// LabFixApply: perfscope's own `udp --apply FINDING` changes the system
	// setting (inside the lab's receiver namespace) and writes its revert
	// file into the lab's private directory.
	LabFixApply LabUDPFix = iota
	// LabFixServer: the recommendation is a code change; the lab restarts its
	// server as the finding's code sketch would build it.
	LabFixServer
	// LabFixNone: a reference scenario without a fault.
	LabFixNone
	// LabFixNewNamespace: the fault cannot be undone in place (built-in
	// legacy iptables tables live as long as their namespace); the after
	// run is on a fresh namespace pair without the planted setup, which is
	// the finding's advice.
	LabFixNewNamespace
	// LabFixCheck: no finding to fix; Check judges the one run (the profile
	// of an idle CPU's NET_RX work).
	LabFixCheck
)

var labFixNames = []string{LabFixApply: "apply", LabFixServer: "server", LabFixNone: "none", LabFixNewNamespace: "new-namespace", LabFixCheck: "check"}

// MarshalText names the kind in JSON: "apply", "server" or "none".
func (f LabUDPFix) MarshalText() ([]byte, error) {
	if int(f) < 0 || int(f) >= len(labFixNames) {
		return nil, fmt.Errorf("lab udp: fix kind %d", int(f))
	}
	return []byte(labFixNames[f]), nil
}

// UnmarshalText reads a kind MarshalText wrote.
func (f *LabUDPFix) UnmarshalText(b []byte) error {
	for i, n := range labFixNames {
		if n == string(b) {
			*f = LabUDPFix(i)
			return nil
		}
	}
	return fmt.Errorf("lab udp: unknown fix kind %q", b)
}

// keyMetrics are the comparison rows each scenario shows: what the fix is
// for (packets received, drops), and the scenario's own lock class and
// function group.
func labUDPKeyMetrics(sc LabUDPScenario) []string {
	keys := []string{"packets_per_s", "drops_per_s", "lock_wait_ns_per_s"}
	keys = append(keys, sc.Metrics...)
	return append(keys, "net_rx.ns_per_packet", "net_rx.active_cpus")
}

// WriteLabUDPScenario prints one scenario: the fault, what perfscope found, the
// fix, and the before/after table.
func WriteLabUDPScenario(w io.Writer, r LabUDPResult) {
	sc := r.Scenario
	report.Heading(w, fmt.Sprintf("%s: %s", sc.Name, sc.Fault))
	fmt.Fprintf(w, "Makita (LinuxCon Japan 2016): %s\n", sc.ReferenceStep)
	if sc.Fix == LabFixCheck {
		for _, l := range r.Checked {
			fmt.Fprintln(w, l)
		}
		if r.Problem != "" {
			fmt.Fprintf(w, "problem: %s\n", r.Problem)
		}
		return
	}
	if sc.Fix == LabFixNone {
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
	byKey := map[string]Metric{}
	for _, m := range r.Comparison.Metrics {
		byKey[m.Key] = m
	}
	for _, k := range labUDPKeyMetrics(sc) {
		m, ok := byKey[k]
		if !ok {
			continue
		}
		change := "-"
		if m.Change != nil {
			change = fmt.Sprintf("%+.0f%%", *m.Change*100)
		}
		t.Add(m.Label, FormatValue(m.Unit, m.Before), FormatValue(m.Unit, m.After), change)
	}
	t.Write(w)
	if r.Problem != "" {
		fmt.Fprintf(w, "problem: %s\n", r.Problem)
	}
}

// writeLabUDPSummary prints one line per scenario and the verdict.
func writeLabUDPSummary(w io.Writer, results []LabUDPResult, took time.Duration) {
	report.Heading(w, "Summary")
	t := report.Table{Header: []string{"scenario", "finding", "before", "after the fix", "packets/s before", "after", "change"}}
	proved := 0
	for _, r := range results {
		if r.OK() {
			proved++
		}
		sc := r.Scenario
		if sc.Fix == LabFixCheck {
			verdict := "agrees"
			if !r.OK() {
				verdict = "DISAGREES"
			}
			t.Add(sc.Name, "(a check)", verdict, "", "", "", "")
			continue
		}
		if sc.Fix == LabFixNone {
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
					pb, pa = FormatValue(m.Unit, m.Before), FormatValue(m.Unit, m.After)
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

// WriteKept says where --keep left the reports (in dir) and the
// namespaces.
func (rs LabUDPData) WriteKept(w io.Writer, dir string) {
	fmt.Fprintf(w, "Kept: reports in %s; namespaces:", dir)
	for _, r := range rs {
		fmt.Fprintf(w, " %s", strings.Join(r.Namespaces, " "))
	}
	fmt.Fprintln(w, "\n(remove with: ip netns del NAME; look around with: ip netns exec NAME perfscope udp --iface vb)")
}

// LabUDPData are a lab run's scenarios, the data of `perfscope lab udp`'s
// report (a JSON array, as it always was).
type LabUDPData []LabUDPResult

// Finished counts the scenarios that ran to their end.
func (rs LabUDPData) Finished() int { return len(rs) }

// Failed counts the scenarios that did not prove their fix.
func (rs LabUDPData) Failed() int {
	n := 0
	for _, r := range rs {
		if !r.OK() {
			n++
		}
	}
	return n
}

// WriteText implements report.Texter: the summary table and verdict (each
// scenario's own table is printed as it finishes).
func (rs LabUDPData) WriteText(w io.Writer, r *report.Report) error {
	writeLabUDPSummary(w, rs, time.Duration(r.Meta.DurationNs))
	return nil
}

// Formats implements report.Formatted: the lab's results have their text,
// their JSON and their page.
func (LabUDPData) Formats() []report.Format { return report.PageFormats }
