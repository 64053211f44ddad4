package cli

import (
	"strings"
	"testing"
)

// perfscope tcp's bad input exits 2 with one sentence, as udp's does.
func TestTCPBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"tcp"}, "--iface is required (interfaces here: "},
		{[]string{"tcp", "--iface", "nosuch0"}, "unknown interface nosuch0 (interfaces here: "},
		{[]string{"tcp", "--iface", "lo", "--pid", "999999999"}, "--pid 999999999: no such process"},
		{[]string{"tcp", "--iface", "lo", "--port", "70000"}, "--port 70000 is not a TCP port (0-65535)"},
		{[]string{"tcp", "--iface", "lo", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"tcp", "--iface", "lo", "-o", "yaml"}, "unknown output format"},
		{[]string{"tcp", "--iface", "lo", "--top-connections", "0"}, "--top-connections must be between 1 and 10000, got 0"},
		{[]string{"tcp", "--iface", "lo", "--sample-interval", "1ms"}, "--sample-interval must be between 10ms and 10s, got 1ms"},
		{[]string{"tcp", "--iface", "lo", "--fail-on", "loud"}, "--fail-on: "},
		{[]string{"tcp", "--iface", "lo", "--exact", "--overhead-budget", "5"}, "--exact counts every event: it takes no --overhead-budget"},
		{[]string{"tcp", "--compare", "a.json,b.json"}, "unknown flag: --compare"},
		{[]string{"tcp", "--revert", "/nonexistent/perfscope-revert.json"}, "--revert"},
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

// tcp's own flags are tcp's: udp does not take them.
func TestTCPFlagsAreNotUDPs(t *testing.T) {
	for _, flag := range []string{"--top-connections", "--sample-interval"} {
		_, stderr, code := execute(t, "udp", "--iface", "lo", flag, "5")
		if code != ExitUsage || !strings.Contains(stderr, "unknown flag: "+flag) {
			t.Errorf("udp %s: exit %d, stderr %q", flag, code, stderr)
		}
	}
}
