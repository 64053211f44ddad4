package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/offcpu"
	probe "github.com/perfscope/perfscope/probes/offcpu"
	"github.com/perfscope/perfscope/report"
)

type loadOptions struct {
	URL              string
	Concurrency      string
	DurationPerLevel time.Duration
	RequestsPerLevel int
	Method           string
	Body             string
	Headers          []string
	Timeout          time.Duration
	PIDs             []int
	StackEvery       int

	// load is the stepped load the flags ask for (offcpu.LoadOptions.Check).
	load   offcpu.LoadOptions
	report reportFlags
	proc   procfs.FS
	// run is the measurement; tests replace it to check flag handling.
	run func(ctx context.Context, o *loadOptions, g *Globals) error
}

func newLoadCmd(g *Globals) *cobra.Command {
	return loadCmd(g, &loadOptions{proc: procfs.Default, run: runLoad})
}

// loadCmd binds flags to o; tests pass options with a fake run.
func loadCmd(g *Globals, o *loadOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Step an HTTP load through rising concurrency and name the knee: where throughput stops rising, and why",
		Long: `load drives HTTP requests at --url (and nowhere else) at each --concurrency
level in turn, for --duration-per-level (or --requests-per-level requests,
whichever comes first), and prints per level the requests/s, p50/p99
latency and errors the client saw, the CPU the service used, and where its
threads spent the level: on CPU, runnable (waiting for a CPU), blocked, and
the top wait by reason and call site — from one off-CPU probe attached to
the service for the whole run (as perfscope offcpu --exact).

It then names the knee: the last level whose throughput still rose, before
one that gained less than 10 % of what its added concurrency would give
while p99 climbed 20 % or more; and why: the CPUs (runnable threads grew,
or the CPUs or the service's threads were saturated), a lock (the threads
waiting at a futex call site grew), a pool (nothing grew: the requests
queued before a thread took them), or the network (socket waits grew).

The service is --pid, or the local processes listening on the URL's port.`,
		Example: `  perfscope load --url http://127.0.0.1:8080/api --concurrency 1,2,4,8,16
  perfscope load --url http://127.0.0.1:8080/ --concurrency 4,8,16,32 --duration-per-level 10s -o json
  perfscope load --url http://127.0.0.1:8080/orders --method POST --body @order.json -H 'Content-Type: application/json' --pid 4242`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", "", "the URL to load (required); requests go nowhere else")
	f.StringVarP(&o.Concurrency, "concurrency", "c", "1,2,4,8,16,32", "the concurrency levels, rising, comma-separated (at most 32, each 1-10000)")
	f.DurationVar(&o.DurationPerLevel, "duration-per-level", 5*time.Second, "how long each level runs (100ms-10m)")
	f.IntVar(&o.RequestsPerLevel, "requests-per-level", 0, "end a level after this many requests if its duration has not passed (0: by time only)")
	f.StringVar(&o.Method, "method", "GET", "HTTP method")
	f.StringVar(&o.Body, "body", "", "request body; @FILE reads it from a file")
	f.StringArrayVarP(&o.Headers, "header", "H", nil, "request header, Name:value (repeatable)")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Second, "one request's time limit (a request past it counts as an error)")
	f.IntSliceVarP(&o.PIDs, "pid", "p", nil, "the service's process(es) (default: the local processes listening on the URL's port)")
	f.IntVar(&o.StackEvery, "stack-every", 1, fmt.Sprintf("take wait stacks at 1 in N switch-outs (1-%d): less cost, per-site times estimated", probe.MaxStackEvery))
	o.report.register(f, "load", "text", false, true)
	return cmd
}

func (o *loadOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	if o.URL == "" {
		return usageError("--url is required: the service's URL to load")
	}
	levels, err := offcpu.ParseLevels(o.Concurrency)
	if err != nil {
		return asUsage(err)
	}
	spec := httpload.Spec{URL: o.URL, Method: strings.ToUpper(o.Method), Header: http.Header{}, Timeout: o.Timeout,
		Concurrency: levels[0], Duration: o.DurationPerLevel}
	o.load = offcpu.LoadOptions{Spec: spec, Levels: levels, PerLevel: o.DurationPerLevel, RequestsPerLevel: o.RequestsPerLevel,
		PIDs: o.PIDs, PIDFrom: "flag", Probe: probe.Options{StackEvery: o.StackEvery}, Proc: o.proc}
	if err := o.load.Check(); err != nil {
		return asUsage(err)
	}
	if err := checkHeaders(o.Headers); err != nil {
		return err
	}
	if err := o.load.Spec.SetFlags(o.Headers, o.Body); err != nil {
		return asUsage(err)
	}
	if err := o.load.Spec.Validate(); err != nil {
		return usageError("--url: %v", err)
	}
	for _, pid := range o.PIDs {
		if err := measure.CheckProcess(o.proc, "--pid", pid); err != nil {
			return err
		}
	}
	return nil
}

func runLoad(ctx context.Context, o *loadOptions, g *Globals) error {
	lo := o.load
	if isTerminal(os.Stderr) {
		lo.Started, lo.Level = report.LoadProgress(g.Err, o.URL, len(lo.Levels), o.DurationPerLevel)
	}
	ev, findings, err := measure.RunLoad(ctx, lo)
	if err != nil {
		return err
	}
	r := report.New("load", Version(), g.Started)
	r.Data = report.LoadData{Load: *ev}
	r.Findings = findings
	for _, l := range ev.Levels {
		r.Meta.DurationNs += l.DurationNs
	}
	if err := renderRun(g.Out, g, r, o.report.format); err != nil {
		return err
	}
	if ctx.Err() != nil {
		// As lab udp: the levels that did not run proved nothing.
		return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("interrupted: %d of %d levels ran", len(ev.Levels), len(lo.Levels))}
	}
	return failOn(r.Findings, o.report.failOn)
}
