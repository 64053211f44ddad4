package cli

import (
	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/report"
)

type versionOptions struct {
	Output string
	// locator finds the bundled async-profiler; tests point it elsewhere.
	locator asprof.Locator
}

func newVersionCmd(g *Globals) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print perfscope's version and the async-profiler it carries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := report.ParseFormat("version", o.Output)
			if err != nil {
				return asUsage(err)
			}
			return report.WriteVersion(g.Out, report.NewVersionData(Version(), o.locator), f)
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("version"))
	return cmd
}
