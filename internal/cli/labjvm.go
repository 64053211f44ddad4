package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

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

type labJVMOptions struct {
	Requests      int
	Concurrency   int
	KB            int
	TargetRPS     float64
	Heap          string
	AsyncProfiler string
	Output        string

	format report.Format
	run    func(ctx context.Context, o *labJVMOptions, g *Globals) error
}

func newLabJVMCmd(g *Globals) *cobra.Command {
	return labJVMCmd(g, &labJVMOptions{run: runLabJVM})
}

func labJVMCmd(g *Globals, o *labJVMOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jvm",
		Short: "Bytes per request end to end: bytes per request of a sample JVM service, and the GCs they cost",
		Long: `lab jvm compiles perfscope's sample HTTP service with the local JDK, starts it
on loopback with a small G1 heap, and runs ` + "`perfscope jvm`" + `'s measurement against
three endpoints with a known extra allocation: /alloc?kb=0, /alloc?kb=KB and
/log (one java.util.logging line per request). It prints the Spring Boot allocation study's table —
bytes per request, and young GCs per minute at --target-rps — and checks that
the measured difference between the two /alloc endpoints is KB. The service
is stopped and its files removed at the end.`,
		Example: `  perfscope lab jvm
  perfscope lab jvm --requests 5000 --kb 512 --target-rps 500 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.format, err = report.ParseFormat("lab jvm", o.Output); err != nil {
				return asUsage(err)
			}
			if o.Requests <= 0 || o.Concurrency <= 0 || o.KB <= 0 || o.TargetRPS <= 0 {
				return usageError("--requests, --concurrency, --kb and --target-rps must be positive")
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.Requests, "requests", "n", 3000, "requests per endpoint")
	f.IntVarP(&o.Concurrency, "concurrency", "c", 4, "concurrent connections")
	f.IntVar(&o.KB, "kb", 256, "extra KiB the /alloc endpoint allocates per request")
	f.Float64Var(&o.TargetRPS, "target-rps", 500, "request rate to predict young GCs at")
	f.StringVar(&o.Heap, "heap", "256m", "the sample service's -Xmx")
	f.StringVar(&o.AsyncProfiler, "async-profiler", os.Getenv("PERFSCOPE_ASYNC_PROFILER"), "as for `perfscope jvm`")
	f.StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("lab jvm"))
	return cmd
}

func runLabJVM(ctx context.Context, o *labJVMOptions, g *Globals) error {
	started := time.Now()
	jdk, err := jvmapp.FindJDK()
	if err != nil {
		return unavailableError("%v", err)
	}
	dir, err := safeio.MkdirTemp("perfscope-lab-jvm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	if err := jdk.Build(ctx, dir); err != nil {
		return err
	}
	logf, err := os.Create(dir + "/app.log")
	if err != nil {
		return err
	}
	defer logf.Close()
	app, err := jvmapp.Start(ctx, jvmapp.Config{Java: jdk.Java, ClassDir: dir, Log: logf,
		JVMArgs: []string{"-Xmx" + o.Heap, "-Xms" + o.Heap, "-XX:+UseG1GC"}})
	if err != nil {
		return err
	}
	defer app.Stop()
	if err := waitAttachable(ctx, app.PID); err != nil {
		return err
	}
	progress := o.format == report.Text && isTerminal(os.Stderr)
	data := report.LabJVMData{ExtraBytesExpected: float64(o.KB) * 1024,
		Run: report.LabJVMRun{Heap: o.Heap, Requests: o.Requests, Concurrency: o.Concurrency, KB: o.KB, TargetRPS: o.TargetRPS}}
	endpoints := []string{"/alloc?kb=0", "/alloc?kb=" + strconv.Itoa(o.KB), "/log"}
	for _, ep := range endpoints {
		if progress {
			fmt.Fprintf(g.Err, "measuring %s with %d requests…\n", ep, o.Requests)
		}
		// A warm-up round lets the JIT compile the handler first, as in
		// a service that has been running; its allocation is not counted.
		if _, err := httpload.Run(ctx, httpload.Spec{URL: app.URL(ep), Requests: min(o.Requests, 1000), Concurrency: o.Concurrency}); err != nil {
			return err
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
			return jvmError(app.PID, err)
		}
		d := report.NewJVMData(res.Evidence, res.Load, res.Warnings)
		data.Scenarios = append(data.Scenarios, report.LabJVMScenario{Endpoint: ep, Load: *res.Load, Data: d, Findings: diagnose.Run(diagnose.JVMRules, res.Evidence)})
	}
	base, _ := data.Scenarios[0].Data.PerRequest()
	extra, _ := data.Scenarios[1].Data.PerRequest()
	data.ExtraBytesMeasured = extra - base
	data.ExtraError = data.ExtraBytesMeasured/data.ExtraBytesExpected - 1
	r := report.New("lab jvm", Version(), started)
	r.Meta.DurationNs = int64(time.Since(started))
	r.Data = data
	for _, s := range data.Scenarios {
		r.Findings = append(r.Findings, s.Findings...)
	}
	diagnose.Rank(r.Findings)
	return report.Render(g.Out, r, o.format)
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
