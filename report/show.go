package report

import (
	"fmt"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// ProfileShow heads `perfscope profile`'s flame graph and top table: the
// --title, else one naming what was profiled — of, as "process 1234" or a
// workload, "" for every process.
func ProfileShow(d evidence.Profile, top int, title, of string) Show {
	s := Show{Top: top, Title: title,
		Subtitle: fmt.Sprintf("%d samples at %d Hz (%s), %s stacks, %v", d.Samples, d.FrequencyHz, d.Event, d.Stacks, time.Duration(d.DurationNs).Round(time.Millisecond))}
	switch {
	case s.Title != "":
	case of == "":
		s.Title = "CPU profile of all processes"
	default:
		s.Title = "CPU profile of " + of
	}
	return s
}

// OffCPUShow heads `perfscope offcpu`'s graph and top table: pid's waits,
// or every process's (pid 0).
func OffCPUShow(ev *evidence.OffCPU, top, pid int) Show {
	s := Show{Top: top, Title: "Off-CPU time of all processes",
		Subtitle: fmt.Sprintf("microseconds off CPU, %s stacks, waits of %v or more, %v", ev.Stacks, time.Duration(ev.MinBlockNs), time.Duration(ev.DurationNs).Round(time.Millisecond))}
	if pid != 0 {
		s.Title = fmt.Sprintf("Off-CPU time of %s (pid %d)", ev.Comm, pid)
	}
	return s
}
