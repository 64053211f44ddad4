package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/apply"
	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
	"github.com/perfscope/perfscope/report/compare"
)

// udpOptions are the flags of `perfscope udp` and `perfscope tcp`: one
// network run of a built-in recipe (udp-rx, tcp-rx).
type udpOptions struct {
	// proto is the command ("udp", "tcp") and recipe the built-in it runs.
	proto     string
	recipe    string
	Iface     string
	Port      int
	PID       int
	Duration  time.Duration
	Output    string
	FlameDir  string
	Freq      int
	Event     string
	NoProfile bool
	Method    string
	FailOn    string
	Apply     []string
	RevertDir string
	Revert    string
	Compare   []string
	Workload  workloadFlags
	// LockStacks is the lock probe's stack sampling: 1 in N contentions.
	LockStacks int
	// Budget is the overhead budget in percent of a CPU; Exact turns it
	// off (every event counted).
	Budget float64
	Exact  bool
	// Top and SampleEvery are tcp's connections listed and accept-queue
	// sampling period.
	Top         int
	SampleEvery time.Duration
	// budgetSet: --overhead-budget was given (it contradicts --exact).
	budgetSet bool

	failOn diagnose.Severity

	format report.Format
	method probes.AttachMethod
	budget budget.Budget
	// set are the udp-rx recipe's parameters, from the flags.
	set map[string]string
	src measure.Sources
	run func(ctx context.Context, o *udpOptions, g *Globals) error
}

func newUDPCmd(g *Globals) *cobra.Command {
	return udpCmd(g, &udpOptions{proto: "udp", recipe: "udp-rx", src: measure.Live(), run: runUDP})
}

func udpCmd(g *Globals, o *udpOptions) *cobra.Command {
	return netCmd(g, o, &cobra.Command{
		Use:   "udp --iface IF",
		Short: "Where UDP packets spend CPU and wait: per CPU, per queue, per lock, per socket",
		Long: `udp measures, in one run, the four things Makita's talk reads to take a UDP
server from 270k to 7M transactions/s: softirq load per CPU; packets per NIC
queue from the kernel and from the driver's own counters, with dead queues and
skew; which CPU serves which queue (IRQ affinity, NUMA); and an on-CPU profile
of every CPU, split into the CPUs that run NET_RX and the others, with the share
of the kernel functions Makita's talk removes (GRO, netfilter, FIB validation,
audit, IP ID, slab, qdisc and socket spin locks). The profile samples with the
hardware cycles event where it opens, else cpu-clock (--event), and names the
NET_RX CPUs it could not see — a virtual CPU without a PMU stops its cpu-clock
while it halts — with the softirq probe's NET_RX time there.

Sections whose source does not exist for the interface (no driver counters on
lo, no IRQs on veth) say so in one line; the rest still runs.`,
		Example: `  perfscope udp --iface ens1f0 --port 53 --duration 10s
  perfscope udp --iface eth0 --pid 1234 --flame /tmp/udp -o json > run.json
  perfscope udp --iface eth0 --apply net.rps-needed,net.xps-unset   # writes a revert file first
  perfscope udp --revert ./perfscope-revert-20261121T101500Z-1a2b3c4d.json
  perfscope udp --compare before.json after.json`,
	})
}

// netCmd gives cmd (its Use, Short, Long and Example set) the flags and
// the run of a network command; o.proto names the command.
func netCmd(g *Globals, o *udpOptions, cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case len(o.Compare) > 0:
			return o.runCompare(cmd.Context(), g)
		case o.Revert != "":
			return o.runRevert(cmd.Context(), g)
		}
		o.budgetSet = cmd.Flags().Changed("overhead-budget")
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), o, g)
	}
	f := cmd.Flags()
	f.StringVar(&o.FailOn, "fail-on", "", "exit 1 when a finding is at or above this severity: info, warn or crit")
	f.StringSliceVar(&o.Apply, "apply", nil, "make the typed changes of these findings' setting recommendations (after writing a revert file)")
	f.StringVar(&o.RevertDir, "revert-dir", ".", "directory for the revert file --apply writes (owned by you or root; sticky if others may write it)")
	f.StringVar(&o.Revert, "revert", "", "restore what a revert file written by --apply records, then exit")
	f.StringSliceVar(&o.Compare, "compare", nil, "compare two saved "+o.proto+" -o json runs: --compare before.json,after.json (or the flag twice)")
	f.StringVar(&o.Iface, "iface", "", "network interface to measure (required)")
	f.IntVar(&o.Port, "port", 0, "local "+strings.ToUpper(o.proto)+" port of the server to inspect")
	f.IntVar(&o.PID, "pid", 0, "pid of the server to inspect (its sockets and threads)")
	f.DurationVarP(&o.Duration, "duration", "d", 10*time.Second, "how long to measure")
	f.StringVarP(&o.Output, "output", "o", "text", report.FormatUsage(o.proto))
	f.StringVar(&o.FlameDir, "flame", "", "write folded stacks and flame graphs (NET_RX CPUs, other CPUs, all) to this directory")
	f.IntVar(&o.Freq, "freq", cpuprofile.DefaultFrequency, "CPU profile samples per second per CPU")
	eventFlag(f, &o.Event)
	f.BoolVar(&o.NoProfile, "no-profile", false, "skip the on-CPU profile")
	f.IntVar(&o.LockStacks, "lock-stacks", lockstat.DefaultStackEvery,
		"take the kernel stack of 1 in N lock contentions (1: every one; per-lock and per-socket waits stay exact, per-site ones are scaled estimates)")
	f.StringVar(&o.Method, "attach-method", "", "force tp_btf, raw_tp or tracepoint")
	o.Workload.register(f)
	budgetFlags(f, &o.Budget, &o.Exact)
	if o.proto == "tcp" {
		f.IntVar(&o.Top, "top-connections", measure.DefaultTCPTop, "connections (and per-connection retransmit and reset rows) listed, busiest first")
		f.DurationVar(&o.SampleEvery, "sample-interval", measure.DefaultTCPSampleEvery, "how often the listeners' accept queues are sampled")
	}
	return cmd
}

func (o *udpOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat(o.proto, o.Output); err != nil {
		return asUsage(err)
	}
	if o.method, err = probes.ParseMethod(o.Method); err != nil {
		return asUsage(err)
	}
	if o.Duration <= 0 {
		return usageError("--duration must be positive, got %v", o.Duration)
	}
	if o.budget, err = parseBudget(o.Budget, o.Exact, o.budgetSet); err != nil {
		return err
	}
	if o.Port < 0 || o.Port > 65535 {
		return usageError("--port %d is not a %s port (0-65535)", o.Port, strings.ToUpper(o.proto))
	}
	if o.Freq <= 0 || o.Freq > 10000 {
		return usageError("--freq must be between 1 and 10000 Hz, got %d", o.Freq)
	}
	if err := checkEvent(o.Event); err != nil {
		return err
	}
	if o.LockStacks < 1 || o.LockStacks > lockstat.MaxStackEvery {
		return usageError("--lock-stacks must be between 1 and %d, got %d", lockstat.MaxStackEvery, o.LockStacks)
	}
	if o.PID < 0 {
		return usageError("--pid must be positive, got %d", o.PID)
	}
	if o.PID > 0 {
		if err := measure.CheckProcess(o.src.Root, "--pid", o.PID); err != nil {
			return err
		}
	}
	if o.PID > 0 && o.Workload.given() {
		return usageError("--pid and --cgroup, --container or --pod exclude each other: give one")
	}
	if err := o.Workload.resolve(o.src); err != nil {
		return err
	}
	if o.FailOn != "" {
		if o.failOn, err = diagnose.ParseSeverity(o.FailOn); err != nil {
			return usageError("--fail-on: %v", err)
		}
	}
	if len(o.Apply) > 0 {
		d, err := apply.OpenTrustedDir(o.RevertDir)
		if err != nil {
			return usageError("--revert-dir: %v", err)
		}
		d.Close()
	}
	if o.FlameDir != "" {
		// Checked here for the sentence; the recipe's Prepare opens it
		// again and holds it until the files are written.
		d, err := safeio.OpenPrivateDir(o.FlameDir)
		if errors.Is(err, safeio.ErrUnsafeDir) {
			return usageError("--flame %s: %v; perfscope writes only into a directory that no other user can write to", o.FlameDir, err)
		}
		if err != nil {
			return usageError("--flame %s: %v", o.FlameDir, err)
		}
		d.Close()
	}
	if _, err := measure.ResolveInterface(o.src, o.Iface); err != nil {
		return err
	}
	if o.proto == "tcp" {
		if o.Top < 1 || o.Top > 10000 {
			return usageError("--top-connections must be between 1 and 10000, got %d", o.Top)
		}
		if o.SampleEvery < 10*time.Millisecond || o.SampleEvery > 10*time.Second {
			return usageError("--sample-interval must be between 10ms and 10s, got %v", o.SampleEvery)
		}
	}
	o.set = recipeSet("iface", o.Iface, "port", strconv.Itoa(o.Port), "pid", strconv.Itoa(o.PID), "duration", o.Duration.String(),
		"profile", strconv.FormatBool(!o.NoProfile), "freq", strconv.Itoa(o.Freq), "event", o.Event, "lock_stacks", strconv.Itoa(o.LockStacks),
		"attach_method", o.Method, "flame", o.FlameDir)
	if o.proto == "tcp" {
		o.set["top"], o.set["sample_interval"] = strconv.Itoa(o.Top), o.SampleEvery.String()
	}
	return nil
}

func runUDP(ctx context.Context, o *udpOptions, g *Globals) error {
	limitHeap(udpHeapLimit)
	// The flags are the udp-rx recipe's parameters; its window samples
	// bpf_stats (probes.StatsSampleOn of every StatsSamplePeriod): left
	// on, they cost each program run more than most programs do.
	plan, err := recipes.Load(o.recipe, o.set, o.src)
	if err == nil {
		plan.SetBudget(o.budget)
		o.Workload.apply(plan)
	}
	if err != nil {
		return err
	}
	res, err := plan.Run(ctx, o.src, recipes.Hooks{Started: g.Started})
	if err != nil {
		return err
	}
	r := res.Report(o.proto, Version())
	// --flame: the recipe's outputs, the NET_RX CPUs', the other CPUs'
	// and all CPUs' stacks as folded stacks and SVG flame graphs, created
	// through the private directory Prepare opened (safeio).
	if err := res.WriteOutputs(r); err != nil {
		return err
	}
	// --apply: only after the report is complete, so the user sees why.
	var applyErr error
	if len(o.Apply) > 0 {
		var path string
		path, applyErr = applyFindings(ctx, o, g, r)
		if path != "" {
			r.Artifacts = append(r.Artifacts, report.Artifact{Kind: "revert-file", Path: path})
		}
	}
	return finishRun(g, r, o.format, applyErr, o.failOn, nil)
}

// applyFindings makes the chosen findings' typed changes through
// apply; it reports to stderr so JSON on stdout stays clean.
// A Ctrl-C during the measurement window cancels ctx: nothing is applied
// and no revert file is written.
func applyFindings(ctx context.Context, o *udpOptions, g *Globals, r *report.Report) (string, error) {
	plan, err := apply.NewPlan(r.Findings, o.Apply)
	if err != nil {
		return "", asUsage(fmt.Errorf("--apply: %w", err))
	}
	res, err := apply.Apply(ctx, plan, apply.ApplyOptions{Dir: o.RevertDir, System: apply.LiveSystem(),
		Run: apply.RunInfo{Command: o.proto, Version: Version(), Started: r.Meta.Started, Interface: o.Iface, Findings: plan.IDs()}})
	if res.RevertFile != "" {
		fmt.Fprintf(g.Err, "revert file: %s (undo with: perfscope %s --revert %s)\n", res.RevertFile, o.proto, res.RevertFile)
	}
	report.WriteChangeLog(g.Err, res.Log())
	if err != nil {
		return res.RevertFile, fmt.Errorf("--apply: %w", err)
	}
	if len(res.Applied) == 0 {
		fmt.Fprintln(g.Err, "--apply: every change was already in place; nothing was changed and no revert file was written")
	}
	return res.RevertFile, nil
}

func (o *udpOptions) runRevert(ctx context.Context, g *Globals) error {
	res, err := apply.Revert(ctx, o.Revert, apply.LiveSystem(), apply.Identity{})
	report.WriteChangeLog(g.Out, res.Log())
	if errors.Is(err, apply.ErrBadRevertFile) {
		return asUsage(fmt.Errorf("--revert %w", err))
	}
	if isBadInputFile(err) {
		return asUsage(fmt.Errorf("--revert: %w", err))
	}
	if err != nil {
		return fmt.Errorf("--revert: %w", err)
	}
	return nil
}

func (o *udpOptions) runCompare(ctx context.Context, g *Globals) error {
	if len(o.Compare) != 2 {
		return usageError("--compare takes two saved runs: --compare before.json,after.json")
	}
	f, err := report.ParseFormat(o.proto+" compare", o.Output)
	if err != nil {
		return asUsage(err)
	}
	r, err := compare.Files(ctx, o.proto, Version(), g.Started, [2]string(o.Compare))
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return asUsage(err)
	}
	return report.Render(g.Out, r, f)
}
