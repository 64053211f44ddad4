package cli

import (
	"context"
	"time"

	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// runJVMStop is `perfscope jvm --stop PID`: it stops the async-profiler
// session a perfscope that is gone left in the JVM and removes its files.
// A session of a perfscope that still runs is left alone (exit 3).
func runJVMStop(ctx context.Context, o *jvmOptions, g *Globals) error {
	pid := o.Stop
	t, err := attach.Preflight(o.src.JVMs, pid)
	if err != nil {
		return recipes.JVMFailure(pid, err)
	}
	rep, err := asprof.StopLeftover(ctx, t)
	if err != nil {
		return recipes.JVMFailure(pid, err)
	}
	d := report.JVMStopData{PID: pid, Stopped: rep.Stopped, RanForNs: int64(rep.RanFor), OwnerPIDs: orEmpty(rep.Owners),
		Removed: orEmpty(rep.Removed), ForeignLibraries: orEmpty(rep.Foreign), Notes: orEmpty(rep.Notes)}
	r := report.New("jvm", Version(), time.Now())
	r.Data = d
	if o.report.format == report.JSON {
		o.wroteJSON = true
		return writeJSONReport(g.Out, r, nil)
	}
	return report.Render(g.Out, r, o.report.format)
}
