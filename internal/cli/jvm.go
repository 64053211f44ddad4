package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type jvmOptions struct {
	// params are the jvm-alloc recipe's parameters as flags.
	params        *recipeFlags
	Flame, Folded string
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
	g.lateFlags(cmd, func() {
		o.params = newServiceFlags(cmd, &o.Workload, "jvm-alloc", "event", "alloc_interval", "async_profiler", "target_rps", "target_gc_interval",
			"requests_match", "mappings", "request_threads", "handler_frames", "off_cpu")
		o.params.showDefault("alloc_interval", "auto")
		o.params.showDefault("async_profiler", os.Getenv("PERFSCOPE_ASYNC_PROFILER"))
	})
	f.StringVar(&o.Flame, "flame", "", "write a flame graph of the profile: .svg or .html")
	f.StringVar(&o.Folded, "folded", "", "write the profile as folded stacks")
	o.report.register(f, "jvm", "text", false, true)
	f.IntVar(&o.Stop, "stop", 0, "instead of measuring: stop the async-profiler session a killed perfscope left in JVM `PID`, and remove its files")
	return cmd
}

func (o *jvmOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	if o.Stop != 0 {
		return o.validateStop()
	}
	if err := o.Workload.target(o.src, o.params, "a running JVM (`jps` or `pgrep java` lists them)", func(sel *cgroup.Selection) (int, error) {
		return measure.SelectJVM(o.src, sel)
	}); err != nil {
		return err
	}
	// Checked before the JVM is profiled (and again when written).
	if err := checkFlameFlags(o.Flame, o.Folded); err != nil {
		return err
	}
	if strings.EqualFold(strings.TrimSpace(o.params.value("alloc_interval")), "auto") {
		o.params.set["alloc_interval"] = "0" // chosen from the allocation rate
	}
	o.params.set["async_profiler"] = o.params.value("async_profiler")
	var err error
	o.plan, err = o.params.loadService(o.src)
	return err
}

// validateStop checks --stop PID: it measures nothing, so it takes no
// measurement flag (a --pid, if given, must be the same JVM).
func (o *jvmOptions) validateStop() error {
	if o.Stop < 0 {
		return usageError("--stop %d: pass the pid of a running JVM", o.Stop)
	}
	if pid := o.params.value("pid"); pid != "" && pid != strconv.Itoa(o.Stop) {
		return usageError("--stop %d and --pid %s name different JVMs: --stop takes the pid itself", o.Stop, pid)
	}
	return nil
}

func runJVM(ctx context.Context, o *jvmOptions, g *Globals) error {
	hooks := recipes.Hooks{Started: time.Now()}
	v := o.plan.Values
	if o.report.format == report.Text && isTerminal(os.Stderr) {
		hooks.JVMStarted = func() {
			if v["load"] != "" {
				fmt.Fprintf(g.Err, "profiling pid %d while sending %d requests…\n", v["pid"], v["requests"])
			} else {
				fmt.Fprintf(g.Err, "profiling pid %d for %v…\n", v["pid"], v["duration"])
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
	r.Data = res.JVMData(v["off_cpu"].(bool))
	if j.Profile != nil {
		if werr := writeProfileFiles(o, r, j); werr != nil {
			return werr
		}
	}
	var exitErr error
	if exited != nil {
		// The JVM exited mid-run: the report says what was measured, and
		// the exit code says the run failed.
		exitErr = &ExitError{Code: ExitFailure, Err: fmt.Errorf("pid %d exited during the measurement (hsperfdata and attach socket went away); reported what was measured in %.1fs", v["pid"], float64(j.Evidence.WindowNs)/1e9)}
	}
	return finishRun(g, r, o.report.format, exitErr, o.report.failOn, &o.wroteJSON)
}

func writeProfileFiles(o *jvmOptions, r *report.Report, j *measure.JVMResult) error {
	if o.Flame == "" && o.Folded == "" {
		return nil
	}
	p := j.Profile
	opts := flame.Options{Title: fmt.Sprintf("pid %d: %s", o.plan.Values["pid"], p.Event), Subtitle: fmt.Sprintf("async-profiler %s, total %s", p.Event, report.Count(float64(p.Total)))}
	return writeFlameFlags(r, j.Flame(), o.Flame, o.Folded, opts)
}
