package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/report"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/internal/serve"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/privilege"
	"github.com/perfscope/perfscope/probes"
)

func execute(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Execute(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"softirq", "--duration", "0s"},
		{"softirq", "--duration", "1s", "--interval", "2s"},
		{"softirq", "-o", "xml"},
		{"softirq", "--attach-method", "kprobe"},
		{"softirq", "--cpus", "x-y"},
		{"softirq", "--nope"},
		{"version", "extra"},
	} {
		_, stderr, code := execute(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, ExitUsage, stderr)
		}
		if strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%v: want one sentence (plus a usage hint), got %q", args, stderr)
		}
	}
}

func TestSoftirqFlagsReachRun(t *testing.T) {
	g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
	var got *softirqOptions
	// Replace the measurement: flag handling is tested without the kernel.
	cmd := softirqCmd(g, &softirqOptions{
		src: measure.Sources{Root: procfs.FS{Root: "../../collectors/procfs/testdata/vm2cpu"}},
		run: func(_ context.Context, o *softirqOptions, _ *Globals) error { got = o; return nil },
	})
	cmd.SetArgs([]string{"--duration", "3s", "--interval", "1s", "--cpus", "0", "-o", "json", "--attach-method", "raw_tp"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	v := got.plan.Values
	if got == nil || got.plan.Window().Duration != 3*time.Second || got.plan.Window().Interval != time.Second || got.report.format != "json" ||
		v["attach_method"] != string(probes.MethodRaw) || !v["cpus"].(cpuset.Set).Contains(0) {
		t.Fatalf("options = %+v, values %v", got, v)
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{usageError("x"), ExitUsage},
		{unavailableError("x"), ExitUnavailable},
		{probes.ErrPermission, ExitUnavailable},
		{errors.Join(errors.New("ctx"), probes.ErrNotSupported), ExitUnavailable},
		{errors.New("io"), ExitFailure},
		{failOn([]diagnose.Finding{{Severity: diagnose.Warn}}, diagnose.Warn), ExitFindings},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if failOn([]diagnose.Finding{{Severity: diagnose.Info}}, diagnose.Warn) != nil {
		t.Error("info finding must not fail --fail-on warn")
	}
}

func TestDoctorJSONAndVerdict(t *testing.T) {
	g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
	cmd := doctorCmd(g, &doctorOptions{checks: func(procfs.FS) []report.DoctorCheck {
		return []report.DoctorCheck{
			{Category: "program types", Name: "raw_tp", Status: report.StatusOK},
			{Category: "privileges", Name: "CAP_BPF + CAP_PERFMON", Status: report.StatusMissing},
		}
	}, inspect: hostEnvironment})
	cmd.SetArgs([]string{"-o", "json"})
	err := cmd.Execute()
	if CodeOf(err) != ExitUnavailable {
		t.Fatalf("missing privilege: exit %d (%v)", CodeOf(err), err)
	}
	var r struct {
		Schema string `json:"schema"`
		Data   struct {
			Checks []report.DoctorCheck `json:"checks"`
		} `json:"data"`
	}
	if err := json.Unmarshal(g.Out.(*bytes.Buffer).Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != report.Schema || len(r.Data.Checks) != 3 {
		t.Errorf("json = %+v", r)
	}
	if privilege.Verdict([]report.DoctorCheck{{Category: "program types", Name: "tp_btf", Status: report.StatusOK}}, "", nil) != nil {
		t.Error("attachable kernel with privileges must pass")
	}
}

func TestVersion(t *testing.T) {
	out, _, code := execute(t, "version", "-o", "json")
	if code != 0 || !strings.Contains(out, `"version"`) {
		t.Errorf("version: %d %q", code, out)
	}
}

// hostEnvironment is a host that is not a container.
func hostEnvironment(procfs.FS) (privilege.Environment, error) {
	return privilege.Environment{HostPID: true, CapEff: ^uint64(0)}, nil
}

// doctor --recipe in the recorded observe container: the recipe's lines,
// the run line, the pod spec; exit 3 when a required grant is missing.
func TestDoctorRecipe(t *testing.T) {
	ok := func(procfs.FS) []report.DoctorCheck {
		return []report.DoctorCheck{{Category: "program types", Name: "tp_btf", Status: report.StatusOK}}
	}
	observe := func(procfs.FS) (privilege.Environment, error) {
		return privilege.Inspect(procfs.FS{Root: "../../privilege/testdata/observe"}, "6.18.0")
	}
	run := func(args ...string) (string, error) {
		g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
		cmd := doctorCmd(g, &doctorOptions{checks: ok, inspect: observe})
		cmd.SetArgs(args)
		err := cmd.Execute()
		return g.Out.(*bytes.Buffer).String(), err
	}
	out, err := run("--recipe", "softirq-balance", "-o", "json")
	if err != nil {
		t.Fatalf("softirq-balance in the observe container: %v\n%s", err, out)
	}
	var r struct {
		Data report.DoctorData `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Data.Recipe != "softirq-balance" || !strings.Contains(r.Data.RunLine, "--cap-add PERFMON --cap-add BPF") || r.Data.Kubernetes == nil {
		t.Errorf("%+v", r.Data)
	}
	// jvm-alloc needs CAP_SYS_PTRACE (granted) and degrades without KILL;
	// gc-pressure's /logs is not mounted: a warning, not a failure.
	if out, err := run("--recipe", "gc-pressure"); err != nil || !strings.Contains(out, "[warn]    CAP_KILL") {
		t.Errorf("gc-pressure: %v\n%s", err, out)
	}
	// --apply: /proc/sys is read-only there and SYS_ADMIN is dropped.
	out, err = run("--recipe", "udp-rx", "--apply")
	if CodeOf(err) != ExitUnavailable || !strings.Contains(err.Error(), "CAP_SYS_ADMIN") || !strings.Contains(out, "--privileged") {
		t.Errorf("apply in the observe container: %v\n%s", err, out)
	}
	out, err = run("--recipe", "udp-rx", "--kubernetes")
	if err != nil || !strings.HasPrefix(out, "# perfscope doctor --recipe udp-rx --kubernetes") || !strings.Contains(out, "  - name: perfscope") {
		t.Errorf("--kubernetes: %v\n%s", err, out)
	}
	// A user's recipe file: its own parts decide (lock contention alone:
	// the probes' pair, kallsyms and socket owners, not NET_ADMIN).
	file := filepath.Join(t.TempDir(), "locks.yaml")
	os.WriteFile(file, []byte("version: 1\nname: locks-only\ndescription: lock contention\nprobes:\n  - lockstat: {}\nwindow:\n  duration: 1s\n"), 0o644)
	out, err = run("--recipe", file, "-o", "json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %v\n%s", file, err, out)
	}
	if line := r.Data.RunLine; !strings.Contains(line, "--cap-add SYS_PTRACE --cap-add SYSLOG --cap-add PERFMON --cap-add BPF ") || strings.Contains(line, "NET_ADMIN") {
		t.Errorf("locks-only run line %q (%v)", line, err)
	}
	// A host without tracefs mounted: the observe line binds an empty
	// directory. tracefs is a fallback only, so udp-rx runs (exit 0) and
	// its line says what it would add, that tp_btf makes that nothing
	// here, and to mount it on the host — not to add the -v again.
	noTracefs := testutil.WithoutHostTracefs(t, "../../privilege/testdata/observe")
	observe = func(procfs.FS) (privilege.Environment, error) {
		return privilege.Inspect(procfs.FS{Root: noTracefs}, "6.18.0")
	}
	out, err = run("--recipe", "udp-rx", "-o", "json")
	if err != nil {
		t.Fatalf("udp-rx on a host without tracefs: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	var tracefs report.DoctorCheck
	for _, c := range r.Data.Checks {
		if c.Category == "recipe udp-rx" && c.Name == "/sys/kernel/tracing" {
			tracefs = c
		}
	}
	if tracefs.Status != report.StatusWarn || !strings.Contains(tracefs.Detail, "the host has no tracefs") ||
		!strings.HasPrefix(tracefs.Affects, "nothing while tp_btf attaches") || !strings.Contains(tracefs.Affects, "classic-tracepoint fallback") ||
		!strings.HasPrefix(tracefs.Fix, "on the host: mount -t tracefs") {
		t.Errorf("tracefs line on a host without tracefs: %+v", tracefs)
	}
	for _, bad := range [][]string{{"--recipe", "nope"}, {"--kubernetes"}, {"--apply"}, {"--recipe", file + ".missing"}} {
		if _, err := run(bad...); CodeOf(err) != ExitUsage {
			t.Errorf("%v: exit %d (%v)", bad, CodeOf(err), err)
		}
	}
}

// serve's bad input, each one sentence and exit 2 before any probe: the
// recipes that measure once (async-profiler, gclog, output files) among
// them, built-in or a user's file.
func TestServeFlags(t *testing.T) {
	dir := t.TempDir()
	gclog := filepath.Join(dir, "gc.yaml")
	os.WriteFile(gclog, []byte("version: 1\nname: gc-once\ndescription: GC logs once\nparameters:\n  logs: {type: files, required: true, description: the logs}\ncollectors:\n  - gclog:\n      files: ${logs}\nwindow:\n  duration: 1s\n"), 0o644)
	for _, bad := range [][]string{
		{"serve"},
		{"serve", "--recipe", "jvm-alloc", "--set", "pid=1"},
		{"serve", "--recipe", "gc-pressure"},
		{"serve", "--recipe", gclog, "--set", "logs=/nonexistent"},
		{"serve", "--recipe", "no-such-recipe"},
		{"serve", "--recipe", "udp-rx", "--set", "iface=lo", "--set", "flame=" + dir},
		{"serve", "--recipe", "softirq-balance", "--interval", "10ms"},
		{"serve", "--recipe", "softirq-balance", "--listen", "nohost"},
		{"serve", "--recipe", "softirq-balance", "--listen", "example.org:80"},
		{"serve", "--recipe", "softirq-balance", "--set", "noequals"},
		{"serve", "--recipe", "softirq-balance", "--set", "iface=lo"},
		{"serve", "--recipe", "udp-rx"},
		{"serve", "--recipe", "udp-rx", "--set", "iface=lo", "--set", "port=x"},
	} {
		if _, errOut, code := execute(t, bad...); code != ExitUsage || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
			t.Errorf("%v: exit %d, %q", bad, code, errOut)
		}
	}
}

// --listen beyond loopback warns, once, naming what is exposed and what to
// pass instead; loopback does not.
func TestServeWarnsWhenExposed(t *testing.T) {
	for _, c := range []struct {
		listen, where string
	}{
		{"0.0.0.0:9742", "on every address of this host"},
		{":9742", "on every address of this host"},
		{"[::]:9742", "on every address of this host"},
		{"10.1.2.3:9100", "on 10.1.2.3"},
		{"[fd00::1]:9742", "on fd00::1"},
		{"127.0.0.1:9742", ""},
		{"127.0.0.53:9742", ""},
		{"[::1]:9742", ""},
		{"localhost:9742", ""},
	} {
		var ran bool
		g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
		o := &serveOptions{run: func(context.Context, *serveOptions, *Globals) error { ran = true; return nil }}
		cmd := serveCmd(g, o)
		cmd.SetArgs([]string{"--recipe", "softirq-balance", "--listen", c.listen})
		if err := cmd.Execute(); err != nil || !ran {
			t.Fatalf("%s: %v (ran %v)", c.listen, err, ran)
		}
		warning := g.Err.(*bytes.Buffer).String()
		if c.where == "" {
			if warning != "" {
				t.Errorf("%s: %q, want no warning on loopback", c.listen, warning)
			}
			continue
		}
		_, port, _ := net.SplitHostPort(c.listen)
		if strings.Count(warning, "\n") != 1 || !strings.Contains(warning, "warning: --listen "+c.listen+" serves /metrics "+c.where+" without TLS or authentication") ||
			!strings.Contains(warning, "pass --web.config.file with tls_server_config and basic_auth_users") ||
			!strings.Contains(warning, "--listen 127.0.0.1:"+port+" behind an authenticating proxy") {
			t.Errorf("%s: warning %q", c.listen, warning)
		}
	}
}

// With --web.config.file the warning is silent when scrapers authenticate
// over TLS, and says what is missing otherwise; a bad file is one
// sentence and exit 2.
func TestServeWebConfig(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "perfscope test CA")
	ca.LeafFiles(t, dir, "serve")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(text), 0o600)
		return path
	}
	tlsPart := "tls_server_config:\n  cert_file: serve.crt\n  key_file: serve.key\n"
	users := "basic_auth_users:\n  prometheus: " + string(hash) + "\n"
	for _, c := range []struct {
		file, warning string
	}{
		{write("both.yml", tlsPart+users), ""},
		{write("mtls.yml", tlsPart+"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: serve.crt\n"), ""},
		{write("tls.yml", tlsPart), "without authentication: --web.config.file " + filepath.Join(dir, "tls.yml") + " lists no basic_auth_users and requires no client certificate"},
		{write("auth.yml", users), "without TLS: --web.config.file " + filepath.Join(dir, "auth.yml") + " has basic_auth_users but no tls_server_config, so passwords cross the network in clear text"},
	} {
		var web *serve.WebConfig
		g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
		o := &serveOptions{run: func(_ context.Context, o *serveOptions, _ *Globals) error { web = o.opts.Web; return nil }}
		cmd := serveCmd(g, o)
		cmd.SetArgs([]string{"--recipe", "softirq-balance", "--listen", "0.0.0.0:9742", "--web.config.file", c.file})
		if err := cmd.Execute(); err != nil || web == nil || web.Path != c.file {
			t.Fatalf("%s: %v, web %+v", c.file, err, web)
		}
		warning := g.Err.(*bytes.Buffer).String()
		if (c.warning == "") != (warning == "") || !strings.Contains(warning, c.warning) || strings.Count(warning, "\n") > 1 {
			t.Errorf("%s: warning %q, want %q", filepath.Base(c.file), warning, c.warning)
		}
	}
	for _, bad := range []string{write("bad.yml", "tls_server_config:\n  cert_file: nope.crt\n  key_file: serve.key\n"),
		write("unknown.yml", "no_such_key: 1\n"), filepath.Join(dir, "absent.yml")} {
		_, errOut, code := execute(t, "serve", "--recipe", "softirq-balance", "--web.config.file", bad)
		if code != ExitUsage || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "perfscope: --web.config.file "+bad+": ") {
			t.Errorf("%s: exit %d, %q", filepath.Base(bad), code, errOut)
		}
	}
}

// serve --set duration=1s: one sentence, exit 2, before anything is
// loaded (it used to be accepted and ignored, the window lasting
// --interval). The deadline ends a serve that starts instead.
func TestServeRefusesDuration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Execute(ctx, []string{"serve", "--recipe", "softirq-balance", "--set", "duration=1s", "--listen", "127.0.0.1:0"}, &out, &errb)
	want := "perfscope: --set duration=1s: a served window lasts --interval, not the recipe's duration: pass --interval 1s instead\n"
	if code != ExitUsage || errb.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, errb.String(), ExitUsage, want)
	}
}

// serve's help names the built-ins it serves although building the command
// tree no longer parses them.
func TestServeHelpNamesServedRecipes(t *testing.T) {
	out, _, code := execute(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("serve --help exited %d", code)
	}
	names := strings.Join(serve.Names(), ", ")
	if !strings.Contains(out, "Built-ins served: "+names+".") || !strings.Contains(out, "a built-in or a file: "+names) {
		t.Errorf("serve --help does not name the served built-ins (%s):\n%s", names, out)
	}
	if strings.Contains(out, servedPlaceholder) {
		t.Errorf("serve --help shows the placeholder:\n%s", out)
	}
}
