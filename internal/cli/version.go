package cli

import (
	"errors"
	"os"
	"runtime"

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
			ap := report.AsyncProfilerVersion{Version: asprof.Version}
			if lib, err := o.locator.Bundled(); err == nil {
				ap.Bundled = lib
			} else if !errors.Is(err, os.ErrNotExist) {
				ap.BundleError = err.Error()
			}
			return report.WriteVersion(g.Out, report.VersionData{Version: Version(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, AsyncProfiler: ap}, f)
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", report.FormatUsage("version"))
	return cmd
}
