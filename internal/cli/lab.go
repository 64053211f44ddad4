package cli

import "github.com/spf13/cobra"

// newLabCmd groups the labs: self-contained rigs that reproduce a seed's
// problem on this machine and run the matching perfscope command on it.
func newLabCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Reproduce a known problem on this machine and measure it end to end",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newLabUDPCmd(g), newLabJVMCmd(g), newLabUDPServerCmd(g), newLabUDPFloodCmd(g), newLabTCPCmd(g))
	return cmd
}
