package cli

import (
	"context"
	"time"

	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

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
	r := report.New("jvm", Version(), time.Now())
	r.Data = report.NewJVMStopData(pid, rep)
	// As a run's report: -o json records that standard output has its
	// envelope, so jsonErrors does not write another.
	return finishRun(g, r, o.report.format, nil, 0, &o.wroteJSON)
}
