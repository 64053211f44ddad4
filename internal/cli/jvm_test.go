package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
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
		{[]string{"--pid", "42", "--alloc-interval", "-5k"}, ExitUsage},
		{[]string{"--pid", "42", "--flame", "x.png"}, ExitUsage},
		{[]string{"--pid", "42", "-o", "yaml"}, ExitUsage},
		{[]string{"--pid", "42", "--requests-from", "http://127.0.0.1:8080/actuator/prometheus", "--requests-match", "uri=/api/.*", "--requests-match", "status!=5..", "--http-port", "8080", "--request-threads", "^worker-", "--handler-frames", `Controller\.`}, ExitOK},
		{[]string{"--pid", "42", "--requests-from", "ftp://x/metrics"}, ExitUsage},
		{[]string{"--pid", "42", "--requests-match", "uri=/x"}, ExitUsage},
		{[]string{"--pid", "42", "--requests-from", "http://x/m", "--requests-match", "nolabel"}, ExitUsage},
		{[]string{"--pid", "42", "--count", "maybe"}, ExitUsage},
		{[]string{"--pid", "42", "--http-port", "70000"}, ExitUsage},
		{[]string{"--pid", "42", "--request-threads", "("}, ExitUsage},
		{[]string{"--pid", "42", "--load", "http://x/", "-n", "5", "--requests-from", "http://x/m"}, ExitUsage},
	} {
		var ran *jvmOptions
		o := &jvmOptions{src: fakeProc(t, 42), run: func(_ context.Context, o *jvmOptions, _ *Globals) error { ran = o; return nil }}
		g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
		cmd := jvmCmd(g, o)
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if got := CodeOf(cmd.ExecuteContext(context.Background())); got != tc.code {
			t.Errorf("%q: exit %d, want %d", tc.args, got, tc.code)
		}
		// No --alloc-interval: 0, chosen from the allocation rate.
		if tc.code == ExitOK && (ran == nil || ran.plan.Values["event"] != string(asprof.Alloc) || ran.plan.Values["alloc_interval"] != int64(0)) {
			t.Errorf("%q: options %+v", tc.args, ran)
		}
	}
}

// The flags reach the jvm-alloc recipe, whose checks against the system
// (before anything is attached) name the flags: a body file that is not
// there, a regex that does not compile.
func TestJVMFlagsReachTheRecipe(t *testing.T) {
	src := fakeProc(t, 42)
	root := src.Root.Root
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pid", "42", "--body", "@/nonexistent", "--load", "http://x/", "-n", "1"}, "--body @FILE /nonexistent"},
		{[]string{"--pid", "42", "--body", "@" + root, "--load", "http://x/", "-n", "1"}, "not a regular file"},
		{[]string{"--pid", "42", "--request-threads", "("}, "--request-threads"},
		{[]string{"--pid", "42", "--requests-from", "http://x/m", "--requests-match", "nolabel"}, "--requests-match \"nolabel\": want LABEL=REGEX"},
		{[]string{"--pid", "42", "--load", "http://x/", "-n", "5", "--requests-from", "http://x/m"}, "--requests-from counts requests perfscope does not drive"},
		{[]string{"--pid", "43"}, "--pid 43: no such process"},
	} {
		o := &jvmOptions{src: src, run: func(_ context.Context, o *jvmOptions, _ *Globals) error { return o.plan.Prepare(o.src) }}
		g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
		cmd := jvmCmd(g, o)
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.ExecuteContext(context.Background())
		if CodeOf(err) != ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (exit %d), want exit 2 saying %q", tc.args, err, CodeOf(err), tc.want)
		}
	}
	body := filepath.Join(root, "order.json")
	os.WriteFile(body, []byte(`{"n": 1}`), 0o644)
	var plan *recipes.Plan
	o := &jvmOptions{src: src, run: func(_ context.Context, o *jvmOptions, _ *Globals) error { plan = o.plan; return o.plan.Prepare(o.src) }}
	cmd := jvmCmd(&Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, o)
	cmd.SetArgs([]string{"--pid", "42", "--body", "@" + body, "--load", "http://x/", "-n", "3", "--method", "post", "-H", "A: b, c", "-H", "X-Y: z",
		"--http-port", "8080,8443", "--http-port", "9090"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if plan.Values["method"] != "POST" || strings.Join(plan.Values["header"].([]string), "|") != "A: b, c|X-Y: z" || plan.Values["body_file"] != body ||
		fmt.Sprint(plan.Values["http_port"]) != "[8080 8443 9090]" {
		t.Errorf("values %v", plan.Values)
	}
	// A header is one line: a line break in one -H is not two headers.
	cmd = jvmCmd(&Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, &jvmOptions{src: src})
	cmd.SetArgs([]string{"--pid", "42", "--load", "http://x/", "-n", "3", "-H", "A: b\nC: d"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.ExecuteContext(context.Background()); CodeOf(err) != ExitUsage || !strings.Contains(err.Error(), "a header is one line") {
		t.Errorf("-H with a line break: %v", err)
	}
}

// Errors under -o json are a JSON document too, with the exit code.
func TestJVMJSONErrors(t *testing.T) {
	o := &jvmOptions{src: fakeProc(t, 42), run: func(context.Context, *jvmOptions, *Globals) error {
		return unavailableError("pid 42 runs with -XX:+DisableAttachMechanism")
	}}
	out := &bytes.Buffer{}
	cmd := jvmCmd(&Globals{Out: out, Err: &bytes.Buffer{}}, o)
	cmd.SetArgs([]string{"--pid", "42", "-o", "json"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if got := CodeOf(cmd.ExecuteContext(context.Background())); got != ExitUnavailable {
		t.Fatalf("exit %d", got)
	}
	var doc struct {
		Schema   string            `json:"schema"`
		Findings []json.RawMessage `json:"findings"`
		Error    struct {
			Message  string `json:"message"`
			ExitCode int    `json:"exit_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if doc.Error.ExitCode != ExitUnavailable || !strings.Contains(doc.Error.Message, "DisableAttachMechanism") || doc.Findings == nil {
		t.Errorf("%s", out)
	}
}

// --stop PID measures nothing: it takes the pid itself and no measurement
// flag, and runs instead of the measurement.
func TestJVMStopFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		code    int
		stopped bool
	}{
		{[]string{"--stop", "42"}, ExitOK, true},
		{[]string{"--stop", "42", "-o", "json"}, ExitOK, true},
		{[]string{"--stop", "42", "--pid", "42"}, ExitOK, true},
		{[]string{"--stop", "42", "--pid", "43"}, ExitUsage, false},
		{[]string{"--stop", "-3"}, ExitUsage, false},
		{[]string{"--stop", "42", "--duration", "5s"}, ExitUsage, false},
		{[]string{"--stop", "42", "--load", "http://x/", "-n", "5"}, ExitUsage, false},
		{[]string{"--stop", "42", "-o", "yaml"}, ExitUsage, false},
	} {
		ran, stopped := false, false
		o := &jvmOptions{
			run:  func(context.Context, *jvmOptions, *Globals) error { ran = true; return nil },
			stop: func(context.Context, *jvmOptions, *Globals) error { stopped = true; return nil },
		}
		cmd := jvmCmd(&Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, o)
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if got := CodeOf(cmd.ExecuteContext(context.Background())); got != tc.code || stopped != tc.stopped || ran {
			t.Errorf("%q: exit %d stopped %v measured %v, want exit %d stopped %v", tc.args, got, stopped, ran, tc.code, tc.stopped)
		}
	}
}

// A session of a perfscope that still runs, and async-profiler running
// for someone else, are exit 3 with one sentence naming who.
func TestJVMBusyErrors(t *testing.T) {
	since := time.Date(2025, 1, 2, 15, 4, 5, 0, time.Local)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&asprof.BusyError{OwnerPID: 777, Since: since, Dir: "/tmp/.perfscope-asprof-0123456789ab"}, "pid 42: perfscope pid 777 is profiling this JVM (since 15:04:05"},
		{&asprof.AlreadyRunningError{PID: 42, Lib: "/tmp/.perfscope-asprof-8d16556469ad/libasyncProfiler.so"}, "`perfscope jvm --stop 42`"},
		{&asprof.AlreadyRunningError{PID: 42, Lib: "/opt/async-profiler/lib/libasyncProfiler.so"}, "`asprof stop 42`"},
	} {
		err := recipes.JVMFailure(42, tc.err)
		if CodeOf(err) != ExitUnavailable || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v (exit %d), want exit 3 saying %q", err, CodeOf(err), tc.want)
		}
	}
}

// fakeProc is a machine whose /proc holds process pid, sleeping: what the
// recipe checks of a pid before the tests' stand-in measures it.
func fakeProc(t *testing.T, pid int) measure.Sources {
	root := t.TempDir()
	dir := filepath.Join(root, "proc", fmt.Sprint(pid))
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "status"), []byte(fmt.Sprintf("Name:\tjava\nState:\tS (sleeping)\nTgid:\t%d\nNStgid:\t%d\n", pid, pid)), 0o644)
	return measure.Sources{Root: procfs.FS{Root: root}}
}
