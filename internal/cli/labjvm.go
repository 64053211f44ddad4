package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/lab/jvmlab"
	"github.com/perfscope/perfscope/recipes"
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
	var progress io.Writer
	if o.format == report.Text && isTerminal(os.Stderr) {
		progress = g.Err
	}
	data, err := jvmlab.Run(ctx, jvmlab.Options{Heap: o.Heap, Requests: o.Requests, Concurrency: o.Concurrency, KB: o.KB,
		TargetRPS: o.TargetRPS, AsyncProfiler: o.AsyncProfiler, Progress: progress})
	var noJDK *jvmlab.JDKError
	var failed *jvmlab.MeasureError
	switch {
	case errors.As(err, &noJDK):
		return unavailableError("%v", noJDK.Err)
	case errors.As(err, &failed):
		return recipes.JVMFailure(failed.PID, failed.Err)
	case err != nil:
		return err
	}
	r := report.New("lab jvm", Version(), started)
	r.Meta.DurationNs = int64(time.Since(started))
	r.Data = data
	r.Findings = data.Findings()
	return report.Render(g.Out, r, o.format)
}
