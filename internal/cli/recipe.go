package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

func newRecipeCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recipe",
		Short: "Run, list, show and check declarative recipes: probes, collectors and rules in one window",
		Long: `A recipe is a YAML file naming what to measure — probes and collectors from
perfscope's catalog, with options — for how long and in what intervals, which
rules judge it and which files to write, with typed parameters set on the
command line (--set NAME=VALUE). Recipes are data: they run no commands and
read or write only files named by their parameters.

Built-in recipes are embedded in the binary (perfscope udp, softirq, profile
and jvm follow udp-rx, softirq-balance, cpu-profile and jvm-alloc); any file
can be run the same way. Rules are chosen by id or family, with threshold
overrides (perfscope recipe catalog lists them). recipes/README.md documents
the format.`,
		Example: `  perfscope recipe list
  perfscope recipe show jvm-net > my-recipe.yaml
  perfscope recipe run lock-contention --set duration=30s --set interval=1s
  perfscope recipe run jvm-net --set pid=4242 --set port=9000 -o json
  perfscope recipe validate my-recipe.yaml`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newRecipeListCmd(g), newRecipeShowCmd(g), newRecipeRunCmd(g), newRecipeValidateCmd(g), newRecipeCatalogCmd(g))
	return cmd
}

// completeRecipes offers the built-ins' names, then recipe files.
func completeRecipes(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, r := range recipes.Builtins() {
		out = append(out, r.Name+"\t"+r.Summary())
	}
	return out, cobra.ShellCompDirectiveDefault
}

// --- list ------------------------------------------------------------------

func newRecipeListCmd(g *Globals) *cobra.Command {
	return dataCmd(g, "list", "List the built-in recipes", cobra.NoArgs, func([]string) (any, error) {
		return recipes.List(), nil
	})
}

// dataCmd is a recipe subcommand that prints one report's data as text or
// JSON; build's error, when the data is there too, comes after it.
func dataCmd(g *Globals, use, short string, args cobra.PositionalArgs, build func(args []string) (any, error)) *cobra.Command {
	var output string
	name, _, _ := strings.Cut(use, " ")
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(_ *cobra.Command, args []string) error {
			f, err := report.ParseFormat("recipe "+name, output)
			if err != nil {
				return asUsage(err)
			}
			data, buildErr := build(args)
			if data == nil {
				return buildErr
			}
			rep := report.New("recipe "+name, Version(), g.Started)
			rep.Data = data
			if err := report.Render(g.Out, rep, f); err != nil {
				return err
			}
			return buildErr
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", report.FormatUsage("recipe "+name))
	return cmd
}

// --- show ------------------------------------------------------------------

func newRecipeShowCmd(g *Globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "show NAME|FILE",
		Short:             "Print a recipe's YAML (a starting point for your own), or its parameters with -o json",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeRecipes,
		RunE: func(_ *cobra.Command, args []string) error {
			f, err := report.ParseFormat("recipe show", output)
			if err != nil {
				return asUsage(err)
			}
			r, err := recipes.Find(args[0])
			if err != nil {
				return err
			}
			if f == report.JSON {
				rep := report.New("recipe show", Version(), g.Started)
				rep.Data = recipes.Info(r)
				return report.WriteJSON(g.Out, rep)
			}
			_, err = g.Out.Write(r.Text)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", report.FormatUsage("recipe show"))
	return cmd
}

// --- validate --------------------------------------------------------------

func newRecipeValidateCmd(g *Globals) *cobra.Command {
	return dataCmd(g, "validate FILE...", "Check recipe files: every error with its line, field and what was expected (exit 2 when any)",
		cobra.MinimumNArgs(1), func(args []string) (any, error) {
			v, bad := recipes.Validate(args)
			if bad > 0 {
				return v, &ExitError{Code: ExitUsage, Err: fmt.Errorf("%d of %d recipes have errors", bad, len(args))}
			}
			return v, nil
		})
}

// --- catalog ---------------------------------------------------------------

func newRecipeCatalogCmd(g *Globals) *cobra.Command {
	return dataCmd(g, "catalog", "What a recipe can name: probes and collectors with their options, rules with their thresholds",
		cobra.NoArgs, func([]string) (any, error) { return recipes.Catalog(), nil })
}

// --- run -------------------------------------------------------------------

type recipeRunOptions struct {
	Recipe string
	Set    []string
	Output string
	FailOn string
	// Budget overrides the recipe's window.budget when given.
	Budget budgetFlags
	// Workload is --cgroup, --container or --pod.
	Workload workloadFlags

	format report.Format
	failOn diagnose.Severity
	// budgetGiven: --overhead-budget or --exact was given; else the
	// recipe's budget holds.
	budgetGiven bool
	// set are the --set values by name, in the order given: a list
	// parameter may be given once per item.
	set map[string][]string
	src measure.Sources
	run func(ctx context.Context, o *recipeRunOptions, g *Globals) error
}

func newRecipeRunCmd(g *Globals) *cobra.Command {
	return recipeRunCmd(g, &recipeRunOptions{src: measure.Live(), run: runRecipe})
}

func recipeRunCmd(g *Globals, o *recipeRunOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run NAME|FILE [--set NAME=VALUE]...",
		Short: "Run a built-in recipe or a recipe file",
		Long: `run loads the recipe, gives its parameters the --set values (the rest keep
their defaults), checks them against this system (interfaces, processes, CPUs,
files), measures, applies the recipe's rules and prints the report. A recipe
with one section of a measuring command (udp-rx, softirq-balance,
lock-contention, cpu-profile) prints that command's report; any other prints
each section, the joined timeline and the findings. A list parameter takes
--set once per item.`,
		Example: `  perfscope recipe run udp-rx --set iface=eth0 --set port=53
  perfscope recipe run softirq-balance --set duration=10s --set interval=1s -o json
  perfscope recipe run ./softirq-locks.yaml --set duration=30s`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeRecipes,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Recipe = args[0]
			var err error
			if o.budgetGiven, err = o.Budget.check(); err != nil {
				return err
			}
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.Set, "set", nil, "give a parameter a value, NAME=VALUE (repeatable, a list parameter once per item; `perfscope recipe show NAME` lists them)")
	f.StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("recipe run")+" (the graph formats when the recipe takes stacks)")
	f.StringVar(&o.FailOn, "fail-on", "", "exit 1 when a finding is at or above this severity: info, warn or crit")
	o.Workload.register(f)
	o.Budget.register(f)
	cmd.RegisterFlagCompletionFunc("set", completeSet)
	return cmd
}

// completeSet offers the recipe's parameters as NAME=, and an enum's or a
// bool's values after the =.
func completeSet(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	r, err := recipes.Find(args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out, c := r.CompleteSet(toComplete)
	return out, completionDirective[c]
}

// completionDirective tells the shell what to do with a recipe
// parameter's completions.
var completionDirective = map[recipes.Completion]cobra.ShellCompDirective{
	recipes.CompleteWords: cobra.ShellCompDirectiveNoFileComp,
	recipes.CompleteNames: cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp,
	recipes.CompleteDirs:  cobra.ShellCompDirectiveFilterDirs,
	recipes.CompleteFiles: cobra.ShellCompDirectiveDefault,
}

func (o *recipeRunOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat("recipe run", o.Output); err != nil {
		return asUsage(err)
	}
	if o.FailOn != "" {
		if o.failOn, err = diagnose.ParseSeverity(o.FailOn); err != nil {
			return usageError("--fail-on: %v", err)
		}
	}
	o.set = map[string][]string{}
	for _, kv := range o.Set {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return usageError("--set %q: want NAME=VALUE", kv)
		}
		o.set[name] = append(o.set[name], value)
	}
	return o.Workload.resolve(o.src)
}

func runRecipe(ctx context.Context, o *recipeRunOptions, g *Globals) error {
	plan, err := recipes.LoadValues(o.Recipe, o.set, o.src)
	if err != nil {
		return err
	}
	if o.budgetGiven {
		plan.SetBudget(o.Budget.budget)
	}
	o.Workload.apply(plan)
	if o.format != report.Text && o.format != report.JSON && !plan.HasStacks() {
		return usageError("-o %s draws stacks, and recipe %s samples none with these parameters (no cpuprofile or async-profiler): use -o text or json", o.format, plan.Recipe.Name)
	}
	hooks := recipes.Hooks{Started: g.Started}
	progress := newProgress(g.Err, plan.Window().Duration)
	if progress.Enabled() {
		hooks.OnStart = func() {
			fmt.Fprintf(g.Err, "recipe %s: measuring for %v (Ctrl-C stops early and still reports)…\n", plan.Recipe.Name, plan.Window().Duration)
		}
		hooks.TickEvery = time.Second
		hooks.OnTick = func(_ time.Time, left time.Duration) { progress.Left(left) }
	}
	res, err := plan.Run(ctx, o.src, hooks)
	progress.Clear()
	exited, err := recipes.RunFailure(res, err)
	if err != nil {
		return err
	}
	rep := res.Report("recipe", Version())
	if err := res.WriteOutputs(rep); err != nil {
		return err
	}
	var runErr error
	if exited != nil {
		// The JVM exited mid-run: reported what was measured; the run
		// failed.
		runErr = &ExitError{Code: ExitFailure, Err: fmt.Errorf("pid %d exited during the measurement; reported what was measured until then", exited.PID)}
	}
	return finishRun(g, rep, o.format, runErr, o.failOn, nil)
}

// recipeSet turns a command's flags into its recipe's parameters, in a
// stable order for messages.
func recipeSet(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
