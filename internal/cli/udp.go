package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/apply"
	"github.com/perfscope/perfscope/measure"
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
	params    *recipeFlags
	NoProfile bool
	Apply     []string
	RevertDir string
	Revert    string
	Compare   []string
	Workload  workloadFlags
	report    reportFlags
	budget    budgetFlags

	// plan is the recipe bound to the flags.
	plan *recipes.Plan
	src  measure.Sources
	run  func(ctx context.Context, o *udpOptions, g *Globals) error
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
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), o, g)
	}
	f := cmd.Flags()
	params := []string{"iface", "port", "pid", "duration/d", "freq", "event/e", "lock_stacks", "attach_method", "flame"}
	if o.proto == "tcp" {
		params = append(params, "top=top-connections", "sample_interval")
	}
	g.lateFlags(cmd, func() { o.params = newRecipeFlags(cmd, o.recipe, params...) })
	f.BoolVar(&o.NoProfile, "no-profile", false, "skip the on-CPU profile")
	f.StringSliceVar(&o.Apply, "apply", nil, "make the typed changes of these findings' setting recommendations (after writing a revert file)")
	f.StringVar(&o.RevertDir, "revert-dir", ".", "directory for the revert file --apply writes (owned by you or root; sticky if others may write it)")
	f.StringVar(&o.Revert, "revert", "", "restore what a revert file written by --apply records, then exit")
	f.StringSliceVar(&o.Compare, "compare", nil, "compare two saved "+o.proto+" -o json runs: --compare before.json,after.json (or the flag twice)")
	o.report.register(f, o.proto, "text", false, true)
	o.Workload.register(f)
	o.budget.register(f)
	return cmd
}

func (o *udpOptions) validate() error {
	if err := o.report.check(); err != nil {
		return err
	}
	if _, err := o.budget.check(); err != nil {
		return err
	}
	if o.params.value("pid") != "0" && o.Workload.given() {
		return usageError("--pid and --cgroup, --container or --pod exclude each other: give one")
	}
	if err := o.Workload.resolve(o.src); err != nil {
		return err
	}
	if len(o.Apply) > 0 {
		d, err := apply.OpenTrustedDir(o.RevertDir)
		if err != nil {
			return usageError("--revert-dir: %v", err)
		}
		d.Close()
	}
	// Asked first for its sentence, which lists the interfaces.
	if _, err := measure.ResolveInterface(o.src, o.params.value("iface")); err != nil {
		return err
	}
	o.params.set["profile"] = strconv.FormatBool(!o.NoProfile)
	var err error
	o.plan, err = o.params.load(o.src)
	return err
}

func runUDP(ctx context.Context, o *udpOptions, g *Globals) error {
	limitHeap(udpHeapLimit)
	plan := o.plan
	plan.SetBudget(o.budget.budget)
	o.Workload.apply(plan)
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
	return finishRun(g, r, o.report.format, applyErr, o.report.failOn, nil)
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
		Run: apply.RunInfo{Command: o.proto, Version: Version(), Started: r.Meta.Started, Interface: o.params.value("iface"), Findings: plan.IDs()}})
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
	f, err := report.ParseFormat(o.proto+" compare", o.report.output)
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
