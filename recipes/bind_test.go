package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/budget"
)

func mustParse(t *testing.T, yaml string) *Recipe {
	t.Helper()
	r, err := Parse("my.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// --set values meet the parameter's type, then every option they reach;
// each error names the value, the parameter and, for an option, its place.
func TestBindParameters(t *testing.T) {
	r := mustParse(t, goodRecipe)
	p, err := r.Bind(map[string]string{"every": "16", "duration": "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Window().Duration != 3*time.Second || p.Window().Interval != time.Second {
		t.Errorf("window %+v", p.Window())
	}
	if u, ok := p.use("lockstat"); !ok || u.opts["stacks_every"].(int64) != 16 || u.opts["tcp"].(bool) != true {
		t.Errorf("lockstat options %+v", u.opts)
	}
	if ref := p.ref(); ref.Parameters["every"] != "16" || ref.Parameters["duration"] != "3s" {
		t.Errorf("recipe ref %+v", ref)
	}
	for _, c := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"evry": "3"}, "--set evry=3: recipe softirq-locks has no parameter evry (parameters: duration, every)"},
		{map[string]string{"every": "eight"}, `--set every=eight: want an integer ≥ 1, got "eight"`},
		{map[string]string{"every": "0"}, `--set every=0: want an integer ≥ 1, got "0"`},
		// The parameter allows it, the option it feeds does not.
		{map[string]string{"every": "5000"}, "every=5000: probes[1].lockstat.stacks_every (my.yaml:10): want an integer 1–1024, got 5000"},
		{map[string]string{"duration": "500ms"}, "duration=500ms: window.duration (my.yaml:12): want a duration no shorter than window.interval (1s), got 500ms"},
	} {
		_, err := r.Bind(c.set)
		if err == nil || !errors.Is(err, measure.ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want bad input saying %q", c.set, err, c.want)
		}
	}
}

func TestBindRequiredAndEnabled(t *testing.T) {
	r := mustParse(t, `version: 1
name: port-drops
parameters:
  port: {type: port, min: 1, required: true, description: the port}
  reads: {type: bool, default: false}
  pid: {type: pid, default: 0}
probes:
  - udpdrop: {port: "${port}"}
  - udpsock:
      enabled: ${reads}
      port: ${port}
  - cpuprofile:
      enabled: ${pid}
      pid: ${pid}
window: {duration: 1s}
`)
	if _, err := r.Bind(nil); err == nil || !strings.Contains(err.Error(), "recipe port-drops needs --set port=VALUE: the port (a port 1–65535)") {
		t.Errorf("missing port: %v", err)
	}
	p, err := r.Bind(map[string]string{"port": "9000"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.use("udpsock"); ok {
		t.Error("udpsock is enabled by a false bool")
	}
	if _, ok := p.use("cpuprofile"); ok {
		t.Error("cpuprofile is enabled by an unset pid")
	}
	p, _ = r.Bind(map[string]string{"port": "9000", "reads": "true", "pid": "1"})
	if _, ok := p.use("udpsock"); !ok {
		t.Error("udpsock is not enabled by reads=true")
	}
	if _, ok := p.use("cpuprofile"); !ok {
		t.Error("cpuprofile is not enabled by a set pid")
	}
	if got := p.disabledWhy("udpsock"); got != "disabled (reads=true)" {
		t.Errorf("disabledWhy = %q", got)
	}
}

// Prepare checks the bound plan against the system before anything loads.
func TestPrepareChecksTheSystem(t *testing.T) {
	src := measure.Live()
	src.Root = procfs.FS{Root: "../collectors/procfs/testdata/vm2cpu"}
	for _, c := range []struct {
		recipe string
		set    map[string]string
		want   string
	}{
		{"softirq-balance", map[string]string{"cpus": "0-7"}, "CPU 2 is not online (online: 0-1)"},
		{"udp-rx", map[string]string{"iface": "nosuch0"}, "unknown interface nosuch0"},
		{"jvm-net", map[string]string{"pid": "2147483647", "port": "9000"}, "pid 2147483647: no such process"},
	} {
		r, _ := Builtin(c.recipe)
		p, err := r.Bind(c.set)
		if err != nil {
			t.Fatalf("%s: %v", c.recipe, err)
		}
		if err := p.Prepare(src); err == nil || !errors.Is(err, measure.ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want bad input saying %q", c.recipe, c.set, err, c.want)
		}
	}
}

// Finding files: a built-in by name, a file by path, neither in one
// sentence naming the built-ins.
func TestFind(t *testing.T) {
	if r, err := Find("udp-rx"); err != nil || r.Source != "builtin" {
		t.Errorf("udp-rx: %v %+v", err, r)
	}
	if _, err := Find("nosuch"); err == nil || !errors.Is(err, measure.ErrBadInput) || !strings.Contains(err.Error(), "no built-in recipe \"nosuch\" and no such file (built-ins: cpu-profile, ") {
		t.Errorf("nosuch: %v", err)
	}
	if _, err := Find("/nonexistent/x.yaml"); err == nil || !errors.Is(err, measure.ErrBadInput) || err.Error() != "recipe /nonexistent/x.yaml: no such file or directory" {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Find(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(fifo); err == nil || !errors.Is(err, measure.ErrBadInput) || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
}

// A recipe over the cap is refused with the file's real size (only the
// cap and one byte of it are read): a sparse 51 MiB file, written as
// nothing.
func TestRecipeTooLargeSaysItsSize(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte(goodRecipe), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 51<<20); err != nil {
		t.Fatal(err)
	}
	_, err := Find(big)
	if !errors.Is(err, measure.ErrBadInput) || err.Error() != big+": a recipe is at most 256 KiB, this file has 53477376 bytes" {
		t.Errorf("51 MiB recipe: %v", err)
	}
}

// The async-profiler collector's options become the JVM measurement's:
// request sources, the passive count, the attribution, a load; lists come
// one item per line from --set or as a YAML sequence; how they go together
// is checked when binding, each refusal naming the parameter (or flag).
func TestBindJVMOptions(t *testing.T) {
	r, _ := Builtin("jvm-alloc")
	p, err := r.Bind(map[string]string{"pid": "42", "requests_from": "http://127.0.0.1:8080/actuator/prometheus",
		"requests_match": "uri=/api/.*\nstatus!=5..", "http_port": "8080, 8443", "count": "on", "request_threads": "^worker-"})
	if err != nil {
		t.Fatal(err)
	}
	o := p.jvmOptions
	if o == nil || o.RequestsFrom == nil || !o.RequestsFrom.Match["uri"].MatchString("/api/orders") || o.RequestsFrom.Match["uri"].MatchString("/x/api/") ||
		!o.RequestsFrom.Exclude["status"].MatchString("503") || len(o.HTTPPorts) != 2 || o.HTTPPorts[1] != 8443 ||
		o.Passive != jvm.PassiveRequired || !o.Profile.Threads || o.Attribution.RequestThreads == nil || o.Load != nil {
		t.Fatalf("jvm options %+v", o)
	}
	p, err = r.Bind(map[string]string{"pid": "42", "load": "http://127.0.0.1:8080/orders", "requests": "100",
		"method": "POST", "header": "Content-Type: application/json\nX-A: b, c", "body": "{\n \"n\": 1\n}"})
	if err != nil {
		t.Fatal(err)
	}
	if l := p.jvmOptions.Load; l == nil || l.Requests != 100 || l.Method != "POST" || l.Header.Get("X-A") != "b, c" || string(l.Body) != "{\n \"n\": 1\n}" || p.jvmOptions.Requests != 0 {
		t.Errorf("load %+v", l)
	}
	for _, c := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"http_port": "70000"}, `--set http_port=70000: want a list of ports like 8080,8443, got "70000"`},
		{map[string]string{"requests_match": "uri=/x"}, "requests_metric and requests_match select series of requests_from"},
		{map[string]string{"requests_from": "http://x/m", "requests_match": "nolabel"}, `requests_match "nolabel": want LABEL=REGEX`},
		{map[string]string{"load": "http://x/"}, "load needs requests N"},
		{map[string]string{"load": "http://x/", "requests": "5", "requests_from": "http://x/m"}, "requests_from counts requests perfscope does not drive"},
		{map[string]string{"body": "{}"}, "method, body and header shape the load"},
		{map[string]string{"handler_frames": "("}, "handler_frames \"(\": error parsing regexp"},
		{map[string]string{"body": "a\x1b[2Jb"}, "--set body="},
	} {
		c.set["pid"] = "42"
		if _, err := r.Bind(c.set); err == nil || !errors.Is(err, measure.ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want bad input saying %q", c.set, err, c.want)
		}
	}
	// A command's flags name the values in its sentences.
	if _, err := r.BindFlags(map[string]string{"pid": "42", "load": "http://x/"}, nil); err == nil || err.Error() != "--load needs --requests N: the fixed request count is what bytes per request divide by" {
		t.Errorf("flags: %v", err)
	}
	// A recipe may give a list as a YAML sequence.
	lit := mustParse(t, `version: 1
name: lit
collectors:
  - async-profiler:
      pid: 42
      load: http://127.0.0.1:8080/x
      requests: 10
      header: ["A: b", "C: d, e"]
      http_ports: [8080]
window: {duration: 1s}
`)
	p, err = lit.Bind(nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := p.jvmOptions.Load.Header; h.Get("A") != "b" || h.Get("C") != "d, e" || len(p.jvmOptions.HTTPPorts) != 1 {
		t.Errorf("literal lists: %+v", p.jvmOptions)
	}
}

// The goalloc probe's requests_from may name its counter (URL#metric),
// once: with requests_metric too, the two must agree.
func TestBindGoRequestsFrom(t *testing.T) {
	r, _ := Builtin("go-alloc")
	p, err := r.Bind(map[string]string{"pid": "42", "requests_from": "http://127.0.0.1:9090/metrics#http_requests_total", "pools": "exact"})
	if err != nil {
		t.Fatal(err)
	}
	if o := p.GoOptions(); o.RequestsFrom == nil || o.RequestsFrom.URL != "http://127.0.0.1:9090/metrics" || o.RequestsFrom.Metric != "http_requests_total" || !o.ExactPools {
		t.Errorf("go options %+v", o)
	}
	_, err = r.BindFlags(map[string]string{"pid": "42", "requests_from": "http://x/m#a", "requests_metric": "b"}, nil)
	if want := `--requests-from http://x/m#a names the counter "a" and --requests-metric "b": give one`; err == nil || err.Error() != want {
		t.Errorf("%v, want %q", err, want)
	}
}

// window.budget: absent is the default budget, a percentage is that
// share of one CPU, exact counts every event; a command's flags replace
// it (SetBudget), and the value prints back as written.
func TestWindowBudget(t *testing.T) {
	for _, c := range []struct {
		line string
		want budget.Budget
	}{
		{"", budget.Budget{CPUShare: budget.Default}},
		{"  budget: 5%\n", budget.Budget{CPUShare: 0.05}},
		{"  budget: 0.5\n", budget.Budget{CPUShare: 0.005}},
		{"  budget: exact\n", budget.Budget{}},
	} {
		r, err := Parse("my.yaml", []byte(strings.Replace(goodRecipe, "  interval: 1s\n", "  interval: 1s\n"+c.line, 1)))
		if err != nil {
			t.Fatalf("%q: %v", c.line, err)
		}
		p, err := r.Bind(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Window().Budget; got != c.want {
			t.Errorf("%q: budget %+v, want %+v", c.line, got, c.want)
		}
		if b, err := budget.Parse(c.want.String()); err != nil || b != c.want {
			t.Errorf("%v prints as %q, which reads back as %+v, %v", c.want, c.want.String(), b, err)
		}
		p.SetBudget(budget.Budget{})
		if p.Window().Budget.On() {
			t.Error("SetBudget(exact) left a budget")
		}
	}
}
