package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestReplaceWord(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"requests_from", "--requests-from"},
		{"set requests_from, or requests_from#x", "set --requests-from, or --requests-from#x"},
		{"xrequests_from requests_fromx requests_from2", "xrequests_from requests_fromx requests_from2"},
		{"requests_fromrequests_from requests_from.", "requests_fromrequests_from --requests-from."},
		{"none here", "none here"},
	} {
		if got := replaceWord(c.in, "requests_from", "--requests-from"); got != c.want {
			t.Errorf("replaceWord(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestRecipeFlagsRegisteredWhenNeeded: under Execute a command's recipe
// flags are built only when it runs (version parses no recipe), and help
// and completion, which cobra adds as it executes, still see them all.
func TestRecipeFlagsRegisteredWhenNeeded(t *testing.T) {
	run := func(args ...string) (*Globals, string) {
		var out bytes.Buffer
		g := &Globals{Out: &out, Err: io.Discard, late: map[*cobra.Command]func(){}}
		execute1(context.Background(), g, NewRoot(g), args)
		return g, out.String()
	}
	g, _ := run("version")
	if len(g.late) != 7 {
		t.Errorf("version registered recipe flags: %d of 7 commands left late", len(g.late))
	}
	g, _ = run("softirq", "--help")
	if len(g.late) != 6 {
		t.Errorf("softirq --help: %d commands left late, want 6", len(g.late))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"udp", "--help"}, "--iface"},
		{[]string{"help", "tcp"}, "--top-connections"},
		{[]string{"__complete", "jvm", "--alloc-int"}, "--alloc-interval"},
		{[]string{"__complete", "offcpu", "--min-bl"}, "--min-block"},
		{[]string{"__complete", "softirq", "--attach-method", ""}, "tp_btf\nraw_tp\ntracepoint\n:4\n"},
		{[]string{"__complete", "go", "--count", ""}, "auto\non\noff\n:4\n"},
		{[]string{"__complete", "profile", "--jit-map="}, "true\nfalse\n:4\n"},
	} {
		if _, out := run(c.args...); !strings.Contains(out, c.want) {
			t.Errorf("%v: want %q in\n%s", c.args, c.want, out)
		}
	}
}
