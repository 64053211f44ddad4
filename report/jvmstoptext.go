package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/perfscope/perfscope/jvm/asprof"
)

// JVMStopData is the JSON data section of `perfscope jvm --stop PID`.
type JVMStopData struct {
	PID int `json:"pid"`
	// Stopped: async-profiler was profiling for a perfscope that is gone,
	// and perfscope stopped it; RanForNs is for how long it had run
	// (0 when async-profiler did not say).
	Stopped  bool  `json:"stopped"`
	RanForNs int64 `json:"ran_for_ns"`
	// OwnerPIDs are the perfscope runs whose sessions were taken over.
	OwnerPIDs []int `json:"owner_pids"`
	// Removed are the session directories removed (paths in the JVM's
	// mount namespace).
	Removed []string `json:"removed"`
	// ForeignLibraries are async-profiler libraries in the JVM that
	// perfscope did not load (asprof, an agent), left alone.
	ForeignLibraries []string `json:"foreign_libraries"`
	// Notes are sessions of other JVMs found on the way.
	Notes []string `json:"notes"`
}

// NewJVMStopData is what StopLeftover did in the JVM pid, with every list
// present in the JSON (empty, not null).
func NewJVMStopData(pid int, rep asprof.StopReport) JVMStopData {
	return JVMStopData{PID: pid, Stopped: rep.Stopped, RanForNs: int64(rep.RanFor), OwnerPIDs: orEmpty(rep.Owners),
		Removed: orEmpty(rep.Removed), ForeignLibraries: orEmpty(rep.Foreign), Notes: orEmpty(rep.Notes)}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// WriteText implements Texter: one sentence on what was stopped and
// removed, or that there was nothing to stop.
func (d JVMStopData) WriteText(w io.Writer, _ *Report) error {
	owners := make([]string, len(d.OwnerPIDs))
	for i, p := range d.OwnerPIDs {
		owners[i] = fmt.Sprint(p)
	}
	by := "a perfscope that recorded no owner (an older version)"
	if len(owners) > 0 {
		by = "perfscope pid " + strings.Join(owners, ", ")
	}
	switch {
	case d.Stopped:
		ran := ""
		if d.RanForNs > 0 {
			ran = fmt.Sprintf(" (it had run for %v)", time.Duration(d.RanForNs).Round(time.Second))
		}
		fmt.Fprintf(w, "pid %d: stopped the async-profiler session %s left running%s", d.PID, by, ran)
	case len(d.Removed) > 0:
		fmt.Fprintf(w, "pid %d: async-profiler was not running for %s", d.PID, by)
	default:
		fmt.Fprintf(w, "pid %d: no async-profiler session of perfscope runs in it: nothing to stop", d.PID)
	}
	if len(d.Removed) > 0 {
		fmt.Fprintf(w, "; removed %s", strings.Join(d.Removed, ", "))
	}
	fmt.Fprintln(w, ".")
	for _, lib := range d.ForeignLibraries {
		fmt.Fprintf(w, "async-profiler loaded from %s is not perfscope's and was left alone (`asprof stop %d` stops it if it profiles).\n", lib, d.PID)
	}
	for _, n := range d.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
