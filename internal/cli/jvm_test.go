package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/perfscope/perfscope/jvm/asprof"
)

func TestJVMFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--pid", "42"}, ExitOK},
		{[]string{"--pid", "42", "--load", "http://127.0.0.1:8080/x", "--requests", "100", "-H", "Content-Type: application/json", "--method", "post", "--body", "{}"}, ExitOK},
		{[]string{}, ExitUsage},
		{[]string{"--pid", "42", "--load", "http://127.0.0.1:8080/x"}, ExitUsage},
		{[]string{"--pid", "42", "--load", "127.0.0.1:8080/x", "--requests", "5"}, ExitUsage},
		{[]string{"--pid", "42", "--body", "{}"}, ExitUsage},
		{[]string{"--pid", "42", "--event", "itimer"}, ExitUsage},
		{[]string{"--pid", "42", "--alloc-interval", "lots"}, ExitUsage},
		{[]string{"--pid", "42", "--flame", "x.png"}, ExitUsage},
		{[]string{"--pid", "42", "-o", "yaml"}, ExitUsage},
		{[]string{"--pid", "42", "--body", "@/nonexistent", "--load", "http://x/", "-n", "1"}, ExitUsage},
	} {
		var ran *jvmOptions
		o := &jvmOptions{run: func(_ context.Context, o *jvmOptions, _ *Globals) error { ran = o; return nil }}
		g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
		cmd := jvmCmd(g, o)
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if got := CodeOf(cmd.ExecuteContext(context.Background())); got != tc.code {
			t.Errorf("%q: exit %d, want %d", tc.args, got, tc.code)
		}
		if tc.code == ExitOK && (ran == nil || ran.measure.Profile.Event != asprof.Alloc || ran.measure.Profile.AllocInterval != asprof.DefaultAllocInterval) {
			t.Errorf("%q: options %+v", tc.args, ran)
		}
	}
}
