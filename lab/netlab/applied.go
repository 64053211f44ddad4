package netlab

import "strings"

// AppliedCommands picks the "applied [ID]: command" lines that `perfscope
// udp --apply` and `tcp --apply` write to stderr: what a lab's fix ran.
func AppliedCommands(stderr string) []string {
	var cmds []string
	for _, line := range strings.Split(stderr, "\n") {
		if _, rest, ok := strings.Cut(line, "applied ["); ok {
			if _, cmd, ok := strings.Cut(rest, "]: "); ok {
				cmds = append(cmds, cmd)
			}
		}
	}
	return cmds
}
