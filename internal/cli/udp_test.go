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
		{[]string{"udp", "--iface", "lo", "--port", "70000"}, "--port 70000: want a port 0–65535"},
		{[]string{"udp", "--iface", "lo", "--duration", "-1s"}, "--duration -1s: want a duration"},
		{[]string{"udp", "--iface", "lo", "-o", "yaml"}, "unknown output format"},
		{[]string{"udp", "--iface", "lo", "--lock-stacks", "0"}, "--lock-stacks 0: want an integer 1–1024"},
		{[]string{"udp", "--iface", "lo", "--event", "cpu_clock"}, `--event cpu_clock: want one of "auto", "cycles", "cpu-clock"`},
		{[]string{"profile", "-e", "instructions"}, `--event instructions: want one of "auto", "cycles", "cpu-clock"`},
		{[]string{"udp", "--iface", "lo", "--exact", "--overhead-budget", "5"}, "--exact counts every event: it takes no --overhead-budget"},
		{[]string{"udp", "--iface", "lo", "--overhead-budget", "0"}, "--overhead-budget: want a percentage of one CPU above 0 and at most 100 (1.5%), or exact, got 0 (use --exact to count every event)"},
		{[]string{"softirq", "--overhead-budget", "150"}, "--overhead-budget: want a percentage"},
		{[]string{"recipe", "run", "softirq-balance", "--exact", "--overhead-budget", "1"}, "--exact counts every event"},
		{[]string{"recipe", "run", "softirq-balance", "--overhead-budget", "-1"}, "--overhead-budget: want a percentage"},
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

func TestLabUDPBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lab", "udp", "--scenario", "nosuch"}, `--scenario "nosuch": unknown; the scenarios are single-socket, `},
		{[]string{"lab", "udp", "--duration", "0s"}, "--duration must be between 1s and 1m"},
		{[]string{"lab", "udp", "--freq", "0"}, "--freq must be between 1 and 10000 Hz"},
		{[]string{"lab", "udp", "-o", "yaml"}, "unknown output format"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:9", "--rate", "-5"}, "--rate must be 0 (unpaced) or positive"},
		{[]string{"lab", "udp-flood", "--target", "192.0.2.1:9"}, "udp-flood only sends to loopback or the lab's 198.18.0.0/15"},
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

// The lab tools refuse what would run away or be silently adjusted.
func TestLabUDPToolsBoundsExit2(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lab", "udp-server", "--listen", "127.0.0.1:9000", "--threads", "100000"}, "threads must be between 1 and 1024"},
		{[]string{"lab", "udp-server", "--listen", "127.0.0.1:9000", "--threads", "0"}, "threads must be between 1 and 1024"},
		{[]string{"lab", "udp-server", "--listen", "127.0.0.1:9000", "--for", "-1s"}, "--for must be 0"},
		{[]string{"lab", "udp-server", "--listen", "127.0.0.1:9000", "--rcvbuf", "-1"}, "rcvbuf must be between 0"},
		{[]string{"lab", "udp-server", "--listen", "127.0.0.1:9000", "--progress", "-1s"}, "--progress must be 0"},
		{[]string{"lab", "udp-server", "--listen", "127.0.0.1:9000", "--pin", "99"}, "CPU 99 is not one this process may run on"},
		{[]string{"lab", "udp-server", "--listen", "127.0.0.1:0"}, "listen port 0"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:9", "--duration", "0s"}, "duration must be in (0, 10m0s]"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:9", "--duration", "11m"}, "duration must be in (0, 10m0s]"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:9", "--payload", "100000"}, "payload must be between"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:9", "--payload", "-1"}, "--payload must be between 1"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:9", "--senders", "0"}, "senders must be between 1 and 64"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:0"}, "target port 0"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:9", "--senders", "4", "--flows", "2"}, "flows must be between the number of senders (4) and 1024"},
		{[]string{"lab", "udp-flood", "--target", "127.0.0.1:9", "--flows", "5000"}, "flows must be between"},
	}
	for _, c := range cases {
		_, stderr, code := execute(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", c.args, code, stderr, c.want)
		}
	}
}

// In the host's namespace the lab's address routes out of the default
// gateway: udp-flood must refuse it (exit 2) before sending anything.
func TestLabUDPFloodRefusesRouteOffMachine(t *testing.T) {
	_, stderr, code := execute(t, "lab", "udp-flood", "--target", "198.18.0.2:9000", "--duration", "100ms")
	if code != ExitUsage || !(strings.Contains(stderr, "leaves this machine") || strings.Contains(stderr, "no route")) {
		t.Fatalf("exit %d, stderr %q; want exit 2: the route leaves the machine", code, stderr)
	}
}
