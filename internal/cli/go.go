package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

// goOptions are the flags of `perfscope go`.
type goOptions struct {
	// params are the go-alloc recipe's parameters as flags; --no-pools
	// and --exact-pools are its pools.
	params              *recipeFlags
	NoPools, ExactPools bool
	Flame, Folded       string

	report    reportFlags
	wroteJSON bool
	// Workload is --cgroup, --container or --pod: the one Go program among
	// its processes, instead of --pid.
	Workload workloadFlags
	src      measure.Sources
	// measure is what the command runs: golang.Measure, or a test's
	// stand-in to check flag handling and exit codes.
	measure func(ctx context.Context, o golang.Options) (*golang.Result, error)
	// plan is the go-alloc recipe bound to the flags: its options are
	// what measure runs with, its rules and report are the command's.
	plan *recipes.Plan
}

func newGoCmd(g *Globals) *cobra.Command {
	return goCmd(g, &goOptions{measure: golang.Measure, src: measure.Live()})
}

func goCmd(g *Globals, o *goOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "go --pid PID",
		Short: "Bytes allocated per request, GC cycles and sync.Pools of a running Go service",
		Long: `go measures a running Go program from outside — no code change, no restart,
no pprof endpoint; stripped, PIE, static and cgo binaries of Go 1.19 and later
on amd64 — over a window: the bytes and objects it allocated (its runtime's
own allocation samples, taken in runtime.mProf_Malloc and weighted the way
pprof weights them, with a 95 % bound), per request, by allocation site; the
GC cycles it completed (counted where the runtime counts them: exact), with
GOGC and GOMEMLIMIT from its environment; and, unless --no-pools, each
sync.Pool's Gets, Puts and misses (calls of its New function) — exact while
their hooks cost the program under 0.5 % of its CPU, else estimated from part
of the window with bounds (--exact-pools keeps them attached). It follows the
built-in recipe go-alloc (perfscope recipe run go-alloc --set pid=PID).

The window is --duration, or a fixed-count HTTP load perfscope drives itself
with --load. Without --load the requests are counted from --requests N (what
you sent during the window), from a Prometheus endpoint the service exposes
(--requests-from URL, or URL#metric), or passively from the program's own
HTTP/1.x and h2c (HTTP/2 without TLS, gRPC included) responses on its
listening ports (eBPF; TLS is not visible to it). Without any count, bytes
per request are reported as unknown, never as zero.

Every probe is a uprobe on the program's binary (never a uretprobe: Go moves
goroutine stacks); all are detached when the window ends, on errors, on
Ctrl-C and when the program exits. If the program exits mid-window, what
was measured until then is reported with a warning.`,
		Example: `  perfscope go --pid 4242 --duration 30s                       # production traffic, counted passively
  perfscope go --pid 4242 --load http://127.0.0.1:8080/orders --requests 20000 --concurrency 8
  perfscope go --pid 4242 -d 60s --requests-from 'http://127.0.0.1:9090/metrics#http_requests_total'
  perfscope go --pid 4242 -d 30s --requests 15000 -o json
  perfscope go --pid 4242 -d 30s --no-pools --flame alloc.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return jsonErrors(g, "go", &o.report.format, &o.wroteJSON, func() error {
				if err := o.validate(); err != nil {
					return err
				}
				return runGo(cmd.Context(), o, g)
			})
		},
	}
	f := cmd.Flags()
	g.lateFlags(cmd, func() { o.params = newServiceFlags(cmd, &o.Workload, "go-alloc") })
	f.BoolVar(&o.NoPools, "no-pools", false, "leave sync.Pool's Get and Put unprobed")
	f.BoolVar(&o.ExactPools, "exact-pools", false, "keep the sync.Pool hooks attached the whole window whatever they cost (default: over 0.5 % of the program's CPU they are attached for part of it and the counts are estimated, with bounds)")
	f.StringVar(&o.Flame, "flame", "", "write an allocation flame graph (bytes): .svg or .html")
	f.StringVar(&o.Folded, "folded", "", "write the allocation stacks as folded stacks (bytes)")
	o.report.register(f, "go", "text", false, true)
	return cmd
}

// validate checks the flags and binds the recipe to them; every refusal
// is one sentence and exit 2, before anything is attached.
func (o *goOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	if err := o.Workload.target(o.src, o.params, "a running Go program (`pgrep NAME` finds it)", func(sel *cgroup.Selection) (int, error) {
		return measure.SelectGo(sel.Filter.String(), sel.PIDs(), golang.FS{Root: o.src.Root.Root})
	}); err != nil {
		return err
	}
	switch {
	case o.NoPools && o.ExactPools:
		return usageError("--no-pools and --exact-pools exclude each other: give one")
	case o.NoPools:
		o.params.set["pools"] = "off"
	case o.ExactPools:
		o.params.set["pools"] = "exact"
	}
	if err := checkFlameFlags(o.Flame, o.Folded); err != nil {
		return err
	}
	var err error
	o.plan, err = o.params.loadService(o.src)
	return err
}

func runGo(ctx context.Context, o *goOptions, g *Globals) error {
	opts := *o.plan.GoOptions()
	if o.report.format == report.Text && isTerminal(os.Stderr) {
		opts.Started = func() {
			if opts.Load != nil {
				fmt.Fprintf(g.Err, "measuring pid %d while sending %d requests…\n", opts.PID, opts.Load.Requests)
			} else {
				fmt.Fprintf(g.Err, "measuring pid %d for %v…\n", opts.PID, opts.Duration)
			}
		}
	}
	res, err := o.measure(ctx, opts)
	exited := errors.Is(err, golang.ErrTargetExited)
	if err != nil && (res == nil || !exited) {
		return goError(opts.PID, err)
	}
	e := res.Evidence
	for _, w := range e.Warnings {
		fmt.Fprintf(g.Err, "perfscope: warning: %s\n", w)
	}
	// The recipe's envelope (which names it and its values), findings,
	// overhead and flame graph.
	r := o.plan.GoRun(o.src, res, g.Started, time.Now()).Report("go", Version())
	e = res.Evidence
	r.Show.Top = opts.TopSites
	if r.Flame != nil {
		if err := writeFlameFlags(r, r.Flame, o.Flame, o.Folded, r.Show.FlameOptions()); err != nil {
			return err
		}
	}
	// Ctrl-C ends the window early: the report covers it, exit 0 as for
	// every measuring command (README, "Exit codes").
	if res.Interrupted {
		fmt.Fprintf(g.Err, "perfscope: interrupted after %.1fs; the probes were detached from pid %d and the report covers the window so far\n", float64(e.WindowNs)/1e9, opts.PID)
	}
	return finishRun(g, r, o.report.format, nil, o.report.failOn, &o.wroteJSON)
}

// goError turns what went wrong into one sentence with the way out (the
// go-alloc recipe's, recipes.GoError). Everything attached was detached
// before Measure returned.
func goError(pid int, err error) error {
	if errors.Is(err, context.Canceled) {
		return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("interrupted before the window opened; nothing is left attached to pid %d", pid)}
	}
	return recipes.GoError(pid, err)
}
