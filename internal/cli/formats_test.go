package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command's -o comes from report: an unknown format is one
// sentence naming the formats the command's data renders, exit 2, and
// the flag's help lists them.
func TestEveryOutputFlagAsksReport(t *testing.T) {
	// Positional arguments a command checks before its flags' values.
	args := map[string][]string{"recipe show": {"udp-rx"}, "recipe validate": {"x.yaml"}, "recipe run": {"udp-rx"}, "flame": {"x.folded"}, "flame diff": {"a", "b"}, "gclog": {"gc.log"}}
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		f := c.Flags().Lookup("output")
		if f == nil {
			return
		}
		seen++
		path := strings.TrimPrefix(c.CommandPath(), "perfscope ")
		if !strings.HasPrefix(f.Usage, "output format: ") {
			t.Errorf("%s: -o help %q", path, f.Usage)
		}
		argv := append(strings.Fields(path), args[path]...)
		_, stderr, code := execute(t, append(argv, "-o", "bogus")...)
		if code != ExitUsage || !strings.Contains(stderr, `unknown output format "bogus": perfscope `) || !strings.Contains(stderr, " writes ") ||
			strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%s -o bogus: exit %d %q", path, code, stderr)
		}
	}
	walk(NewRoot(&Globals{}))
	if seen < 15 {
		t.Errorf("only %d commands have -o", seen)
	}
}
