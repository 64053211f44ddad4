package cli

import (
	"strings"
	"testing"
)

// Bad input to lab tcp exits 2 with one sentence, before any namespace
// exists.
func TestLabTCPBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lab", "tcp", "--scenario", "nosuch"}, `--scenario "nosuch": unknown; the scenarios are backlog-overflow, gro-off, `},
		{[]string{"lab", "tcp", "--duration", "0s"}, "--duration must be between 1s and 1m"},
		{[]string{"lab", "tcp", "--duration", "2m"}, "--duration must be between 1s and 1m"},
		{[]string{"lab", "tcp", "-o", "html"}, "unknown output format \"html\": perfscope lab tcp writes text or json"},
		{[]string{"lab", "tcp", "extra"}, "unknown command"},
	}
	for _, c := range cases {
		_, stderr, code := execute(t, c.args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%q)", c.args, code, ExitUsage, stderr)
		}
		if !strings.Contains(stderr, c.want) {
			t.Errorf("%v: stderr %q does not say %q", c.args, stderr, c.want)
		}
	}
}
