// Package jvmlab is `perfscope lab jvm`'s run: it builds and starts the
// sample service, measures bytes per request on three endpoints with a
// known extra allocation, and checks the measured difference.
package jvmlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/lab/jvmapp"
	"github.com/perfscope/perfscope/report"
)

// Options are the lab's flags.
type Options struct {
	Heap                      string
	Requests, Concurrency, KB int
	TargetRPS                 float64
	// AsyncProfiler is --async-profiler (as for perfscope jvm).
	AsyncProfiler string
	// Progress, when set, gets a line as each endpoint is measured.
	Progress io.Writer
}

// JDKError says no JDK was found to build the sample service with.
type JDKError struct{ Err error }

func (e *JDKError) Error() string { return e.Err.Error() }
func (e *JDKError) Unwrap() error { return e.Err }

// MeasureError is a failed measurement of the sample service, pid PID.
type MeasureError struct {
	PID int
	Err error
}

func (e *MeasureError) Error() string { return fmt.Sprintf("pid %d: %v", e.PID, e.Err) }
func (e *MeasureError) Unwrap() error { return e.Err }

// Run builds, starts, measures and stops the sample service; its files
// are removed at the end.
func Run(ctx context.Context, o Options) (report.LabJVMData, error) {
	jdk, err := jvmapp.FindJDK()
	if err != nil {
		return report.LabJVMData{}, &JDKError{Err: err}
	}
	dir, err := safeio.MkdirTemp("perfscope-lab-jvm-")
	if err != nil {
		return report.LabJVMData{}, err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	if err := jdk.Build(ctx, dir); err != nil {
		return report.LabJVMData{}, err
	}
	logf, err := os.Create(dir + "/app.log")
	if err != nil {
		return report.LabJVMData{}, err
	}
	defer logf.Close()
	app, err := jvmapp.Start(ctx, jvmapp.Config{Java: jdk.Java, ClassDir: dir, Log: logf,
		JVMArgs: []string{"-Xmx" + o.Heap, "-Xms" + o.Heap, "-XX:+UseG1GC"}})
	if err != nil {
		return report.LabJVMData{}, err
	}
	defer app.Stop()
	if err := waitAttachable(ctx, app.PID); err != nil {
		return report.LabJVMData{}, err
	}
	data := report.LabJVMData{ExtraBytesExpected: float64(o.KB) * 1024,
		Run: report.LabJVMRun{Heap: o.Heap, Requests: o.Requests, Concurrency: o.Concurrency, KB: o.KB, TargetRPS: o.TargetRPS}}
	endpoints := []string{"/alloc?kb=0", "/alloc?kb=" + strconv.Itoa(o.KB), "/log"}
	for _, ep := range endpoints {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "measuring %s with %d requests…\n", ep, o.Requests)
		}
		// A warm-up round lets the JIT compile the handler first, as in
		// a service that has been running; its allocation is not counted.
		if _, err := httpload.Run(ctx, httpload.Spec{URL: app.URL(ep), Requests: min(o.Requests, 1000), Concurrency: o.Concurrency}); err != nil {
			return report.LabJVMData{}, err
		}
		// The lab's windows are short (a few thousand requests in under a
		// second) and it demonstrates accuracy on a lab app, so it samples
		// allocations 4x more often than perfscope jvm's default.
		res, err := jvm.Measure(ctx, jvm.Options{
			PID:              app.PID,
			FS:               hsperf.Default,
			Load:             &httpload.Spec{URL: app.URL(ep), Requests: o.Requests, Concurrency: o.Concurrency},
			Locator:          asprof.Locator{Explicit: o.AsyncProfiler},
			Profile:          asprof.Options{Event: asprof.Alloc, AllocInterval: 128 << 10},
			TopSites:         5,
			TargetRPS:        o.TargetRPS,
			TargetGCInterval: diagnose.DefaultTargetGCInterval,
		})
		if err != nil {
			return report.LabJVMData{}, &MeasureError{PID: app.PID, Err: err}
		}
		d := report.NewJVMData(res.Evidence, res.Load, res.Warnings)
		data.Scenarios = append(data.Scenarios, report.LabJVMScenario{Endpoint: ep, Load: *res.Load, Data: d, Findings: diagnose.Run(diagnose.JVMRules, res.Evidence)})
	}
	base, _ := data.Scenarios[0].Data.PerRequest()
	extra, _ := data.Scenarios[1].Data.PerRequest()
	data.ExtraBytesMeasured = extra - base
	data.ExtraError = data.ExtraBytesMeasured/data.ExtraBytesExpected - 1
	return data, nil
}

// waitAttachable waits (bounded) until the freshly started JVM passes the
// attach preflight.
func waitAttachable(ctx context.Context, pid int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := attach.Preflight(hsperf.Default, pid)
		if err == nil || !(errors.Is(err, attach.ErrNotReady) || errors.Is(err, hsperf.ErrNotFound) || errors.Is(err, attach.ErrNotJVM)) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sample app pid %d not attachable after 30s: %w", pid, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
