package cli

import (
	"strings"
	"testing"
)

// Bad input exits 2 with one sentence that shows the way out.
func TestUDPBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"udp"}, "--iface is required (interfaces here: "},
		{[]string{"udp", "--iface", "nosuch0"}, "unknown interface nosuch0 (interfaces here: "},
		{[]string{"udp", "--iface", "lo", "--pid", "999999999"}, "--pid 999999999: no such process"},
		{[]string{"udp", "--iface", "lo", "--port", "70000"}, "is not a UDP port"},
		{[]string{"udp", "--iface", "lo", "--duration", "-1s"}, "--duration must be positive"},
		{[]string{"udp", "--iface", "lo", "-o", "yaml"}, "unknown output format"},
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
