package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type jvmOptions struct {
	// JVMFlags are the flags that are the jvm-alloc recipe's parameters;
	// OffCPU is --off-cpu: the offcpu probe on the JVM in the same window.
	recipes.JVMFlags
	Flame  string
	Folded string
	// Stop is --stop PID: stop what a perfscope that is gone left running
	// in that JVM, instead of measuring.
	Stop int

	report    reportFlags
	wroteJSON bool
	// plan is the jvm-alloc recipe bound to the flags.
	plan *recipes.Plan
	src  measure.Sources
	// Workload is --cgroup, --container or --pod: the one JVM among its
	// processes, instead of --pid.
	Workload workloadFlags
	// pidGiven: --pid was on the command line (0 given is not 0 missing).
	pidGiven bool
	// run is the measurement and stop is --stop; tests replace them to
	// check flag handling.
	run  func(ctx context.Context, o *jvmOptions, g *Globals) error
	stop func(ctx context.Context, o *jvmOptions, g *Globals) error
}

func newJVMCmd(g *Globals) *cobra.Command {
	return jvmCmd(g, &jvmOptions{src: measure.Live(), run: runJVM, stop: runJVMStop})
}

func jvmCmd(g *Globals, o *jvmOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jvm --pid PID",
		Short: "Bytes allocated per request, GC pressure and the fix, from a running JVM",
		Long: `jvm attaches to a running HotSpot JVM (no restart, no agent on the command
line), loads async-profiler into it, and measures over a window: the allocation
rate from async-profiler's totals and, independently, from hsperfdata's Eden
across GCs; young GCs per minute and their mean pause; and, when the request
count is known, the bytes allocated per request, with the allocating frames
(logging frameworks grouped) and the young-GC frequency that predicts at
--target-rps.

The window is --duration, or a fixed-count HTTP load perfscope drives
itself with --load. Without --load the requests the JVM served are counted
without touching it: from a metrics endpoint it already exposes
(--requests-from, e.g. Spring Boot Actuator's Prometheus endpoint; any
protocol, TLS included), or passively from its own HTTP/1.x and h2c
socket writes on its listening ports (eBPF, root); --requests N overrides
both. Without any count, bytes per request are reported as unknown, never
as zero.
Allocation is split by request handler (per endpoint, with the logging
share) and between request-serving threads and background threads.
async-profiler is stopped in the JVM when the window ends, on errors and on
Ctrl-C; if the JVM exits mid-run, what was measured is reported (exit 4).

While it runs, async-profiler's files are in a directory of the JVM's /tmp
that only the JVM's user can read, with an owner file naming this run. If
perfscope is killed (SIGKILL) before it can stop the profiler, the next
jvm run on that JVM sees the owner is gone, stops the profiler and removes
the files; --stop PID does just that, and measures nothing. A session whose
perfscope still runs is left alone (exit 3).`,
		Example: `  perfscope jvm --pid 4242 --load http://127.0.0.1:8080/orders --requests 20000 --concurrency 10
  perfscope jvm --pid 4242 --load http://127.0.0.1:8080/create --method POST --body @order.json \
      --header 'Content-Type: application/json' --requests 20000 --target-rps 500
  perfscope jvm --pid 4242 --duration 60s --target-rps 2000          # production traffic, counted passively
  perfscope jvm --pid 4242 -d 60s --requests-from http://127.0.0.1:8080/actuator/prometheus
  perfscope jvm --pid 4242 --duration 30s --requests 15000 -o json
  perfscope jvm --pid 4242 --duration 10s --event cpu --flame cpu.html
  perfscope jvm --stop 4242                                           # after a perfscope was killed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.pidGiven = cmd.Flags().Changed("pid")
			return jsonErrors(g, "jvm", &o.report.format, &o.wroteJSON, func() error {
				if err := o.validate(); err != nil {
					return err
				}
				if o.Stop == 0 {
					return o.run(cmd.Context(), o, g)
				}
				var err error
				cmd.Flags().Visit(func(f *pflag.Flag) {
					if err == nil && f.Name != "stop" && f.Name != "pid" && f.Name != "output" {
						err = usageError("--stop measures nothing: it takes no --%s", f.Name)
					}
				})
				if err != nil {
					return err
				}
				stop := o.stop
				if stop == nil {
					stop = runJVMStop
				}
				return stop(cmd.Context(), o, g)
			})
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.PID, "pid", "p", 0, "the JVM's pid (as seen from here)")
	o.Workload.register(f)
	f.DurationVarP(&o.Duration, "duration", "d", 10*time.Second, "measurement window when perfscope does not drive the load")
	f.Int64VarP(&o.Requests, "requests", "n", 0, "requests in the window: sent by you (with --duration) or by perfscope (with --load)")
	registerLoadFlags(f, &o.LoadFlags)
	f.StringVar(&o.Event, "event", "alloc", "async-profiler event: alloc, cpu, lock or wall (bytes per request needs alloc or falls back to hsperfdata)")
	f.StringVar(&o.AllocInterval, "alloc-interval", "auto", "sample one allocation per this many bytes (k, m suffixes); smaller is more precise and costs the JVM more. auto: chosen from the allocation rate before the window for about 2500 samples (±4 %), 512k under --load")
	f.StringVar(&o.AsyncProfiler, "async-profiler", os.Getenv("PERFSCOPE_ASYNC_PROFILER"), "libasyncProfiler.so, an async-profiler directory or its asprof launcher (default: $PERFSCOPE_ASYNC_PROFILER, asprof on PATH, else tools.profiler:async-profiler:"+asprof.Version+" via Maven)")
	f.Float64Var(&o.TargetRPS, "target-rps", 0, "request rate to predict young GCs at (default: the measured rate)")
	f.DurationVar(&o.TargetGCInterval, "target-gc-interval", diagnose.DefaultTargetGCInterval, "young-GC interval to size Eden for")
	f.IntVar(&o.Top, "top", 10, "allocation sites to list")
	f.StringVar(&o.Flame, "flame", "", "write a flame graph of the profile: .svg or .html")
	f.StringVar(&o.Folded, "folded", "", "write the profile as folded stacks")
	o.report.register(f, "jvm", "text", false, true)
	f.StringVar(&o.RequestsFrom, "requests-from", "", "count requests from this Prometheus/OpenMetrics endpoint (Spring Boot Actuator, Micrometer, Dropwizard, OpenTelemetry), summed over the window")
	f.StringVar(&o.RequestsMetric, "requests-metric", "", "the request counter of --requests-from (default: "+strings.Join(jvm.KnownRequestMetrics[:2], ", ")+", …)")
	f.StringArrayVar(&o.RequestsMatch, "requests-match", nil, "keep --requests-from series whose LABEL=REGEX, or drop them with LABEL!=REGEX (repeatable; default drops uri=/actuator.*)")
	f.StringVar(&o.Mappings, "mappings", "", "Spring Boot Actuator's /actuator/mappings, to join handlers to endpoints (default: beside an Actuator --requests-from)")
	f.StringVar(&o.Count, "count", "auto", "passive HTTP/1.x and h2c request count from the JVM's socket writes (eBPF): auto (when nothing else counts), on (also as a cross-check; fail without it) or off")
	f.UintSliceVar(&o.HTTPPorts, "http-port", nil, "listening TCP ports the passive count watches (default: all of the JVM's)")
	f.StringVar(&o.RequestThreads, "request-threads", "", "thread names (regex) that serve requests, beside the known pools (http-nio-*, http-epoll-*, reactor-http-*, qtp*, XNIO-*)")
	f.StringVar(&o.HandlerFrames, "handler-frames", "", "frames (regex on dotted names) that are request handlers, instead of the outermost application frame under a known dispatcher")
	f.BoolVar(&o.OffCPU, "off-cpu", false, "also where the JVM's threads waited off CPU in the same window (the offcpu probe); with --event wall, async-profiler's wall clock and the kernel's off-CPU time side by side per thread pool")
	f.IntVar(&o.Stop, "stop", 0, "instead of measuring: stop the async-profiler session a killed perfscope left in JVM `PID`, and remove its files")
	return cmd
}

func (o *jvmOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	var err error
	if o.Stop != 0 {
		return o.validateStop()
	}
	if o.PID, err = o.Workload.target(o.src, o.PID, o.pidGiven, func(sel *cgroup.Selection) (int, error) {
		return measure.SelectJVM(o.src, sel)
	}); err != nil {
		return err
	}
	switch {
	case o.PID < 0 || o.PID == 0 && o.pidGiven:
		return usageError("--pid must be a positive process id, got %d: pass the pid of a running JVM (`jps` or `pgrep java` lists them)", o.PID)
	case o.PID == 0:
		return usageError("--pid is required: pass the pid of a running JVM (`jps` or `pgrep java` lists them), or its --container or --pod")
	}
	// Checked before the JVM is profiled (and again when written).
	if err := checkFlameFlags(o.Flame, o.Folded); err != nil {
		return err
	}
	o.plan, err = recipes.BindJVM(o.JVMFlags)
	return err
}

// validateStop checks --stop PID: it measures nothing, so it takes no
// measurement flag (a --pid, if given, must be the same JVM).
func (o *jvmOptions) validateStop() error {
	if o.Stop < 0 {
		return usageError("--stop %d: pass the pid of a running JVM", o.Stop)
	}
	if o.PID != 0 && o.PID != o.Stop {
		return usageError("--stop %d and --pid %d name different JVMs: --stop takes the pid itself", o.Stop, o.PID)
	}
	return nil
}

func runJVM(ctx context.Context, o *jvmOptions, g *Globals) error {
	hooks := recipes.Hooks{Started: time.Now()}
	if o.report.format == report.Text && isTerminal(os.Stderr) {
		hooks.JVMStarted = func() {
			if o.LoadURL != "" {
				fmt.Fprintf(g.Err, "profiling pid %d while sending %d requests…\n", o.PID, o.Requests)
			} else {
				fmt.Fprintf(g.Err, "profiling pid %d for %v…\n", o.PID, o.Duration)
			}
		}
	}
	res, err := o.plan.Run(ctx, o.src, hooks)
	exited, err := recipes.RunFailure(res, err)
	if err != nil {
		return err
	}
	j := res.JVM
	for _, w := range j.Warnings {
		fmt.Fprintf(g.Err, "perfscope: warning: %s\n", w)
	}
	// The recipe's envelope (which names it and its values, its overhead
	// and findings) with the jvm command's own data and text.
	r := res.Report("jvm", Version())
	r.Data = res.JVMData(o.OffCPU)
	if j.Profile != nil {
		if werr := writeProfileFiles(o, r, j); werr != nil {
			return werr
		}
	}
	var exitErr error
	if exited != nil {
		// The JVM exited mid-run: the report says what was measured, and
		// the exit code says the run failed.
		exitErr = &ExitError{Code: ExitFailure, Err: fmt.Errorf("pid %d exited during the measurement (hsperfdata and attach socket went away); reported what was measured in %.1fs", o.PID, float64(j.Evidence.WindowNs)/1e9)}
	}
	return finishRun(g, r, o.report.format, exitErr, o.report.failOn, &o.wroteJSON)
}

func writeProfileFiles(o *jvmOptions, r *report.Report, j *measure.JVMResult) error {
	if o.Flame == "" && o.Folded == "" {
		return nil
	}
	p := j.Profile
	opts := flame.Options{Title: fmt.Sprintf("pid %d: %s", o.PID, p.Event), Subtitle: fmt.Sprintf("async-profiler %s, total %s", p.Event, report.Count(float64(p.Total)))}
	return writeFlameFlags(r, j.Flame(), o.Flame, o.Folded, opts)
}
