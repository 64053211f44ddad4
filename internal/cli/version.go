package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/report"
)

type versionOptions struct {
	Output string
}

func newVersionCmd(g *Globals) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print perfscope's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := report.ParseFormat(o.Output)
			if err != nil {
				return asUsage(err)
			}
			v := struct {
				Version string `json:"version"`
				Go      string `json:"go"`
				OS      string `json:"os"`
				Arch    string `json:"arch"`
			}{Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH}
			if f == report.JSON {
				return report.WriteJSON(g.Out, v)
			}
			_, err = fmt.Fprintf(g.Out, "perfscope %s (%s %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
			return err
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	return cmd
}
