package cli

import (
	"errors"
	"fmt"
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

// asyncProfilerVersion says which async-profiler `perfscope jvm` loads and
// whether this perfscope carries it (the container image does).
type asyncProfilerVersion struct {
	Version string `json:"version"`
	// Bundled is the library packaged with this binary; empty when none
	// is, and `perfscope jvm` then finds one on the host or through Maven.
	Bundled string `json:"bundled,omitempty"`
	// BundleError says why a packaged library is not used.
	BundleError string `json:"bundle_error,omitempty"`
}

func newVersionCmd(g *Globals) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print perfscope's version and the async-profiler it carries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := report.ParseFormat(o.Output)
			if err != nil {
				return asUsage(err)
			}
			ap := asyncProfilerVersion{Version: asprof.Version}
			if lib, err := o.locator.Bundled(); err == nil {
				ap.Bundled = lib
			} else if !errors.Is(err, os.ErrNotExist) {
				ap.BundleError = err.Error()
			}
			v := struct {
				Version       string               `json:"version"`
				Go            string               `json:"go"`
				OS            string               `json:"os"`
				Arch          string               `json:"arch"`
				AsyncProfiler asyncProfilerVersion `json:"async_profiler"`
			}{Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH, ap}
			if f == report.JSON {
				return report.WriteJSON(g.Out, v)
			}
			if _, err = fmt.Fprintf(g.Out, "perfscope %s (%s %s/%s)\n", v.Version, v.Go, v.OS, v.Arch); err != nil {
				return err
			}
			switch {
			case ap.Bundled != "":
				_, err = fmt.Fprintf(g.Out, "async-profiler %s, bundled: %s\n", ap.Version, ap.Bundled)
			case ap.BundleError != "":
				_, err = fmt.Fprintf(g.Out, "async-profiler %s, bundled library refused: %s\n", ap.Version, ap.BundleError)
			default:
				_, err = fmt.Fprintf(g.Out, "async-profiler %s, not bundled (perfscope jvm takes it from --async-profiler, asprof on PATH or Maven)\n", ap.Version)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	return cmd
}
