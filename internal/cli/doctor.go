package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/privilege"
	"github.com/perfscope/perfscope/report"
)

type doctorOptions struct {
	Output string
	// Recipe checks what that recipe needs against this container's
	// grants; Apply adds what --apply needs; Kubernetes prints only the
	// least pod spec for the recipe.
	Recipe     string
	Apply      bool
	Kubernetes bool
	format     report.Format
	fs         procfs.FS
	// checks and inspect are injectable so tests can run the command
	// without a kernel or a container.
	checks  func(procfs.FS) []report.DoctorCheck
	inspect func(procfs.FS) (privilege.Environment, error)
}

func newDoctorCmd(g *Globals) *cobra.Command {
	return doctorCmd(g, &doctorOptions{fs: procfs.Default, checks: privilege.HostChecks, inspect: inspectEnvironment})
}

func inspectEnvironment(fs procfs.FS) (privilege.Environment, error) {
	return privilege.Inspect(fs, report.KernelRelease())
}

// doctorCmd binds flags to o; tests pass options with fake checks.
func doctorCmd(g *Globals, o *doctorOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this kernel and these privileges can run perfscope's probes",
		Long: `doctor asks the kernel directly what perfscope can use here: it loads and
attaches a minimal program of each type (tracepoint, raw_tp, tp_btf,
perf_event, kprobe, fentry), looks up every tracepoint perfscope uses, and
reads the privileges and sysctls that decide the rest. Nothing is changed.

In a container it also says which capabilities, mounts and host namespaces
are missing. --recipe NAME checks what that recipe needs, says which report
sections degrade without each missing grant, and prints the docker/podman
run line that grants exactly that; --kubernetes prints the least pod spec
(securityContext, host namespaces, volumes) for the recipe instead.

Exit code 3 when no tracepoint attach method works, privileges are missing,
or the recipe needs something the container does not grant.`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := report.ParseFormat("doctor", o.Output)
			if err != nil {
				return asUsage(err)
			}
			o.format = f
			if o.Recipe != "" {
				if _, err := privilege.ForRecipe(o.Recipe); err != nil {
					return err // recipes' errors carry their exit code
				}
			} else if o.Kubernetes || o.Apply {
				return usageError("--kubernetes and --apply describe a recipe's needs: add --recipe NAME (%s)", strings.Join(privilege.RecipeNames(), ", "))
			}
			return o.run(g)
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("doctor")+" (with --kubernetes, text is the pod spec's YAML)")
	cmd.Flags().StringVar(&o.Recipe, "recipe", "", "check what this recipe (a built-in or a file) needs here: "+strings.Join(privilege.RecipeNames(), ", "))
	cmd.Flags().BoolVar(&o.Apply, "apply", false, "with --recipe: also what --apply/--revert need")
	cmd.Flags().BoolVar(&o.Kubernetes, "kubernetes", false, "with --recipe: print only the least Kubernetes pod spec for it")
	_ = cmd.RegisterFlagCompletionFunc("recipe", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return privilege.RecipeNames(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func (o *doctorOptions) run(g *Globals) error {
	if o.Kubernetes {
		// The least pod spec for the recipe, as YAML (text) or JSON, for
		// kubectl and for deploy/kubernetes' test.
		return report.WritePod(g.Out, privilege.Pod(privilege.RecipeNeeds(o.Recipe, o.Apply)), o.format, o.Recipe, o.Apply)
	}
	checks := o.checks(o.fs)
	env, envErr := o.inspect(o.fs)
	data, missing := privilege.Doctor(checks, env, envErr, o.Recipe, o.Apply)
	r := report.New("doctor", Version(), g.Started)
	r.Data = data
	if err := report.Render(g.Out, r, o.format); err != nil {
		return err
	}
	return privilege.Verdict(data.Checks, o.Recipe, missing)
}
