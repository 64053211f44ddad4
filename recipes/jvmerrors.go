package recipes

import (
	"context"
	"errors"
	"fmt"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/measure"
)

// JVMFailure turns what went wrong profiling the JVM pid into one
// sentence with the way out, marked bad input or unavailable where it is.
// The preflight refused before anything was sent, so the JVM is
// untouched.
func JVMFailure(pid int, err error) error {
	var busy *asprof.BusyError
	switch {
	case errors.Is(err, attach.ErrNoProcess):
		return measure.BadInput("pid %d is not running: pass the pid of a running JVM (`jps` or `pgrep java` lists them)", pid)
	case errors.Is(err, attach.ErrNotJVM):
		return measure.BadInput("pid %d is not a HotSpot JVM: pass the pid of a java process (`jps` lists them)", pid)
	case errors.Is(err, attach.ErrSignalNotCaught):
		return measure.Unavailable("pid %d runs with -Xrs and its attach socket is not open, so the attach signal would kill it; perfscope left it alone — restart it without -Xrs, or use `perfscope gclog` on its GC log", pid)
	case errors.Is(err, attach.ErrAttachDisabled):
		return measure.Unavailable("pid %d runs with -XX:+DisableAttachMechanism; perfscope left it alone — restart it without that flag, or use `perfscope gclog` on its GC log", pid)
	case errors.Is(err, attach.ErrNotReady):
		return measure.Unavailable("pid %d has not finished starting; retry in a few seconds", pid)
	case errors.Is(err, attach.ErrRefused):
		return measure.Unavailable("pid %d refused the attach connection (a JDK 8 JVM accepts only its own user); run perfscope as the JVM's user, e.g. sudo -u $(stat -c %%U /proc/%d) perfscope jvm --pid %d", pid, pid, pid)
	case errors.Is(err, attach.ErrNoListener):
		return measure.Unavailable("pid %d did not open its attach socket (%v); check that it was not started with -XX:+DisableAttachMechanism and that its /tmp is writable", pid, err)
	case errors.Is(err, hsperf.ErrNotFound):
		return measure.Unavailable("pid %d publishes no hsperfdata (-XX:-UsePerfData or -XX:+PerfDisableSharedMem), which perfscope needs for GC counters; restart it without those flags", pid)
	case errors.Is(err, asprof.ErrUnavailable), errors.Is(err, asprof.ErrChecksum):
		return measure.Unavailable("%v; pass --async-profiler PATH (or set PERFSCOPE_ASYNC_PROFILER) to an async-profiler %s install, or let `mvn dependency:get -Dartifact=%s:%s:%s` reach your Maven repository", err, asprof.Version, asprof.GroupID, asprof.ArtifactID, asprof.Version)
	case errors.As(err, &busy):
		return measure.Unavailable("pid %d: %v", pid, busy)
	case errors.Is(err, asprof.ErrAlreadyRunning):
		return measure.Unavailable("pid %d: %v", pid, err)
	case errors.Is(err, jvm.ErrBadSource):
		return measure.BadInput("%v; nothing was sent to pid %d", err, pid)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted; async-profiler was stopped in pid %d", pid)
	}
	return err
}

// RunFailure is Run's error as the user reads it. An async-profiler
// failure is one sentence (JVMFailure); when the JVM exited mid-run and
// res holds what was measured until then, failure is nil and exited says
// which JVM: report res, and fail.
func RunFailure(res *Result, err error) (exited *JVMError, failure error) {
	var je *JVMError
	switch {
	case errors.As(err, &je) && (res == nil || !errors.Is(err, jvm.ErrTargetExited)):
		return nil, JVMFailure(je.PID, je.Err)
	case err != nil && res == nil:
		return nil, err
	case err != nil:
		return je, nil
	}
	return nil, nil
}
