package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/internal/httpload"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type jvmOptions struct {
	PID              int
	Duration         time.Duration
	Requests         int64
	LoadURL          string
	Method           string
	Body             string
	Headers          []string
	Concurrency      int
	Event            string
	AllocInterval    string
	AsyncProfiler    string
	TargetRPS        float64
	TargetGCInterval time.Duration
	Top              int
	Flame            string
	Folded           string
	Output           string
	FailOn           string

	format   report.Format
	failOn   diagnose.Severity
	measure  jvm.Options
	hsperfFS hsperf.FS
	// run is the measurement; tests replace it to check flag handling.
	run func(ctx context.Context, o *jvmOptions, g *Globals) error
}

func newJVMCmd(g *Globals) *cobra.Command {
	return jvmCmd(g, &jvmOptions{hsperfFS: hsperf.Default, run: runJVM})
}

func jvmCmd(g *Globals, o *jvmOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jvm --pid PID",
		Short: "Bytes allocated per request, GC pressure and the fix, from a running JVM",
		Long: `jvm attaches to a running HotSpot JVM (no restart, no agent on the command
line), loads async-profiler into it, and measures over a window: the allocation
rate from async-profiler's totals and, independently, from hsperfdata's Eden
across GCs; young GCs per minute and their mean pause; and, when the request
count is known, the bytes allocated per request, with the allocating frames
(logging frameworks grouped) and the young-GC frequency that predicts at
--target-rps.

The window is --duration (tell perfscope how many requests you sent with
--requests), or a fixed-count HTTP load perfscope drives itself with --load.
async-profiler is stopped in the JVM when the window ends, on errors and on
Ctrl-C.`,
		Example: `  perfscope jvm --pid 4242 --load http://127.0.0.1:8080/orders --requests 20000 --concurrency 10
  perfscope jvm --pid 4242 --load http://127.0.0.1:8080/create --method POST --body @order.json \
      --header 'Content-Type: application/json' --requests 20000 --target-rps 500
  perfscope jvm --pid 4242 --duration 30s --requests 15000 -o json
  perfscope jvm --pid 4242 --duration 10s --event cpu --flame cpu.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.PID, "pid", "p", 0, "the JVM's pid (as seen from here)")
	f.DurationVarP(&o.Duration, "duration", "d", 10*time.Second, "measurement window when perfscope does not drive the load")
	f.Int64VarP(&o.Requests, "requests", "n", 0, "requests in the window: sent by you (with --duration) or by perfscope (with --load)")
	f.StringVar(&o.LoadURL, "load", "", "drive --requests HTTP requests at this URL and measure while they run")
	f.StringVar(&o.Method, "method", "GET", "HTTP method of the load")
	f.StringVar(&o.Body, "body", "", "request body of the load; @FILE reads it from a file")
	f.StringArrayVarP(&o.Headers, "header", "H", nil, "request header of the load, Name:value (repeatable)")
	f.IntVarP(&o.Concurrency, "concurrency", "c", 4, "concurrent connections of the load")
	f.StringVar(&o.Event, "event", "alloc", "async-profiler event: alloc, cpu, lock or wall (bytes per request needs alloc or falls back to hsperfdata)")
	f.StringVar(&o.AllocInterval, "alloc-interval", strconv.Itoa(asprof.DefaultAllocInterval>>10)+"k", "sample one allocation per this many bytes (k, m suffixes); smaller is more precise and costs the JVM more")
	f.StringVar(&o.AsyncProfiler, "async-profiler", os.Getenv("PERFSCOPE_ASYNC_PROFILER"), "libasyncProfiler.so, an async-profiler directory or its asprof launcher (default: $PERFSCOPE_ASYNC_PROFILER, asprof on PATH, else tools.profiler:async-profiler:"+asprof.Version+" via Maven)")
	f.Float64Var(&o.TargetRPS, "target-rps", 0, "request rate to predict young GCs at (default: the measured rate)")
	f.DurationVar(&o.TargetGCInterval, "target-gc-interval", diagnose.DefaultTargetGCInterval, "young-GC interval to size Eden for")
	f.IntVar(&o.Top, "top", 10, "allocation sites to list")
	f.StringVar(&o.Flame, "flame", "", "write a flame graph of the profile: .svg or .html")
	f.StringVar(&o.Folded, "folded", "", "write the profile as folded stacks")
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.FailOn, "fail-on", "", "exit 1 when a finding is at or above this severity: info, warn or crit")
	return cmd
}

func (o *jvmOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat(o.Output); err != nil {
		return asUsage(err)
	}
	if o.FailOn != "" {
		if o.failOn, err = diagnose.ParseSeverity(o.FailOn); err != nil {
			return asUsage(err)
		}
	}
	if o.PID <= 0 {
		return usageError("--pid is required: pass the pid of a running JVM (`jps` or `pgrep java` lists them)")
	}
	if o.Duration <= 0 {
		return usageError("--duration must be positive, got %v", o.Duration)
	}
	if o.Requests < 0 || o.Concurrency <= 0 || o.Top < 0 || o.TargetRPS < 0 || o.TargetGCInterval <= 0 {
		return usageError("--requests, --top and --target-rps must not be negative, --concurrency and --target-gc-interval must be positive")
	}
	event, err := asprof.ParseEvent(o.Event)
	if err != nil {
		return asUsage(err)
	}
	interval, err := parseSize(o.AllocInterval)
	if err != nil {
		return usageError("--alloc-interval: %v", err)
	}
	if o.Flame != "" && !strings.HasSuffix(o.Flame, ".svg") && !strings.HasSuffix(o.Flame, ".html") {
		return usageError("--flame %s: the file name must end in .svg or .html", o.Flame)
	}
	o.measure = jvm.Options{
		PID:              o.PID,
		FS:               o.hsperfFS,
		Duration:         o.Duration,
		Locator:          asprof.Locator{Explicit: o.AsyncProfiler},
		Profile:          asprof.Options{Event: event, AllocInterval: interval},
		TopSites:         o.Top,
		TargetRPS:        o.TargetRPS,
		TargetGCInterval: o.TargetGCInterval,
	}
	if o.LoadURL == "" {
		if o.Body != "" || len(o.Headers) > 0 || o.Method != "GET" {
			return usageError("--method, --body and --header shape the load: add --load URL")
		}
		o.measure.Requests = o.Requests
		return nil
	}
	if o.Requests == 0 {
		return usageError("--load needs --requests N: the fixed request count is what bytes per request divide by")
	}
	spec := &httpload.Spec{URL: o.LoadURL, Method: strings.ToUpper(o.Method), Header: http.Header{}, Requests: int(o.Requests), Concurrency: o.Concurrency}
	for _, h := range o.Headers {
		if err := httpload.ParseHeader(spec.Header, h); err != nil {
			return asUsage(err)
		}
	}
	if o.Body != "" {
		spec.Body = []byte(o.Body)
		if name, ok := strings.CutPrefix(o.Body, "@"); ok {
			if spec.Body, err = os.ReadFile(name); err != nil {
				return usageError("--body: %v", err)
			}
		}
	}
	if err := spec.Validate(); err != nil {
		return asUsage(err)
	}
	o.measure.Load = spec
	return nil
}

// parseSize reads "524288", "512k", "1m".
func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(strings.ToLower(s), "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(strings.ToLower(s), "m"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size like 128k", s)
	}
	return n * mult, nil
}

// jvmData is the JSON data section of `perfscope jvm`.
type jvmData struct {
	evidence.JVM
	Load *httpload.Result `json:"load,omitempty"`
	// Model is the Spring Boot allocation study's prediction at the planning rate.
	Model jvmModel `json:"model"`
}

type jvmModel struct {
	RPS               float64 `json:"rps"`
	RPSSource         string  `json:"rps_source,omitempty"`
	AllocRate         float64 `json:"alloc_rate"`
	YoungGCsPerMinute float64 `json:"young_gcs_per_minute"`
	// EdenForTarget is the Eden giving one young GC per
	// target_gc_interval, rounded up to whole G1 regions.
	EdenForTarget float64 `json:"eden_for_target"`
}

func model(e evidence.JVM) jvmModel {
	m := jvmModel{RPS: e.TargetRPS, RPSSource: "target"}
	if m.RPS == 0 && e.Requests > 0 && e.WindowNs > 0 {
		m.RPS, m.RPSSource = float64(e.Requests)/(float64(e.WindowNs)/1e9), "measured"
	}
	if m.RPS == 0 || e.BytesPerRequest == 0 {
		return jvmModel{}
	}
	m.AllocRate = diagnose.AllocRate(e.BytesPerRequest, m.RPS)
	m.YoungGCsPerMinute = diagnose.YoungGCsPerMinute(m.AllocRate, float64(e.EdenCapacity))
	m.EdenForTarget = diagnose.RoundUpToRegion(diagnose.EdenForInterval(m.AllocRate, time.Duration(e.TargetGCIntervalNs)), float64(e.RegionSize))
	return m
}

func runJVM(ctx context.Context, o *jvmOptions, g *Globals) error {
	started := time.Now()
	if o.format == report.Text && isTerminal(os.Stderr) {
		o.measure.Started = func() {
			if o.measure.Load != nil {
				fmt.Fprintf(g.Err, "profiling pid %d while sending %d requests…\n", o.PID, o.measure.Load.Requests)
			} else {
				fmt.Fprintf(g.Err, "profiling pid %d for %v…\n", o.PID, o.Duration)
			}
		}
	}
	res, err := recipes.RunJVM(ctx, recipes.Live(), o.measure)
	if err != nil {
		return jvmError(o.PID, err)
	}
	r := report.New("jvm", Version(), started)
	r.Meta.DurationNs = res.Evidence.WindowNs
	r.Overhead = &evidence.Overhead{AttachMethod: "hotspot-attach+async-profiler", AttachNs: res.AttachNs}
	data := jvmData{JVM: res.Evidence, Load: res.Load, Model: model(res.Evidence)}
	r.Data = data
	r.Findings = res.Findings
	if err := writeProfileFiles(o, r, res.Profile); err != nil {
		return err
	}
	if err := report.Render(g.Out, r, o.format); err != nil {
		return err
	}
	return failOn(r.Findings, o.failOn)
}

// WriteText implements report.Texter.
func (d jvmData) WriteText(w io.Writer, r *report.Report) error {
	writeJVMText(w, r, d)
	return nil
}

func writeProfileFiles(o *jvmOptions, r *report.Report, p *asprof.Profile) error {
	if o.Flame == "" && o.Folded == "" {
		return nil
	}
	unit := flame.Bytes
	if p.Event != asprof.Alloc {
		unit = flame.Nanoseconds
	}
	fp := flame.New(unit)
	for _, s := range p.Stacks {
		fp.Add(s.Frames, s.Weight)
	}
	write := func(path, kind string, out flame.Output, opts flame.Options) error {
		err := flame.WriteFile(context.Background(), path, fp, out, opts)
		if isBadInputFile(err) {
			return asUsage(err)
		}
		if err != nil {
			return err
		}
		abs, _ := filepath.Abs(path)
		r.Artifacts = append(r.Artifacts, report.Artifact{Kind: kind, Path: abs})
		return nil
	}
	if o.Folded != "" {
		if err := write(o.Folded, "folded", flame.OutputFolded, flame.Options{}); err != nil {
			return err
		}
	}
	if o.Flame != "" {
		out, _ := flame.OutputOf(o.Flame) // validate allowed .svg and .html only
		opts := flame.Options{Title: fmt.Sprintf("pid %d: %s", o.PID, p.Event), Subtitle: fmt.Sprintf("async-profiler %s, total %s", p.Event, report.Count(float64(p.Total)))}
		return write(o.Flame, "flamegraph", out, opts)
	}
	return nil
}

// jvmError turns what went wrong into one sentence with the way out. The
// preflight refused before anything was sent, so the JVM is untouched.
func jvmError(pid int, err error) error {
	switch {
	case errors.Is(err, attach.ErrNoProcess):
		return usageError("pid %d is not running: pass the pid of a running JVM (`jps` or `pgrep java` lists them)", pid)
	case errors.Is(err, attach.ErrNotJVM):
		return usageError("pid %d is not a HotSpot JVM: pass the pid of a java process (`jps` lists them)", pid)
	case errors.Is(err, attach.ErrSignalNotCaught):
		return unavailableError("pid %d runs with -Xrs, so the attach signal would kill it; perfscope left it alone — restart it without -Xrs, or use `perfscope gclog` on its GC log", pid)
	case errors.Is(err, attach.ErrAttachDisabled):
		return unavailableError("pid %d runs with -XX:+DisableAttachMechanism; perfscope left it alone — restart it without that flag, or use `perfscope gclog` on its GC log", pid)
	case errors.Is(err, attach.ErrNotReady):
		return unavailableError("pid %d has not finished starting; retry in a few seconds", pid)
	case errors.Is(err, attach.ErrRefused):
		return unavailableError("pid %d refused the attach connection (a JDK 8 JVM accepts only its own user); run perfscope as the JVM's user, e.g. sudo -u $(stat -c %%U /proc/%d) perfscope jvm --pid %d", pid, pid, pid)
	case errors.Is(err, attach.ErrNoListener):
		return unavailableError("pid %d did not open its attach socket (%v); check that it was not started with -XX:+DisableAttachMechanism and that its /tmp is writable", pid, err)
	case errors.Is(err, hsperf.ErrNotFound):
		return unavailableError("pid %d publishes no hsperfdata (-XX:-UsePerfData or -XX:+PerfDisableSharedMem), which perfscope needs for GC counters; restart it without those flags", pid)
	case errors.Is(err, asprof.ErrUnavailable), errors.Is(err, asprof.ErrChecksum):
		return unavailableError("%v; pass --async-profiler PATH (or set PERFSCOPE_ASYNC_PROFILER) to an async-profiler %s install, or let `mvn dependency:get -Dartifact=%s:%s:%s` reach your Maven repository", err, asprof.Version, asprof.GroupID, asprof.ArtifactID, asprof.Version)
	case errors.Is(err, asprof.ErrAlreadyRunning):
		return unavailableError("pid %d: %v", pid, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted; async-profiler was stopped in pid %d", pid)
	}
	return err
}

func writeJVMText(w io.Writer, r *report.Report, d jvmData) {
	e := d.JVM
	fmt.Fprintf(w, "JVM pid %d (%s), window %.1fs, async-profiler event %s\n", e.PID, e.Collector, float64(e.WindowNs)/1e9, e.ProfileEvent)
	if d.Load != nil {
		l := d.Load
		report.Heading(w, "Load (perfscope drove it)")
		t := report.Table{Header: []string{"requests", "failures", "non-2xx", "req/s", "p50", "p90", "p99", "max"}}
		t.Add(strconv.FormatInt(l.Completed, 10), strconv.FormatInt(l.Failures, 10), strconv.FormatInt(l.Non2xx, 10), fmt.Sprintf("%.0f", l.RPS),
			report.Nanos(float64(l.P50Ns)), report.Nanos(float64(l.P90Ns)), report.Nanos(float64(l.P99Ns)), report.Nanos(float64(l.MaxNs)))
		t.Write(w)
		if l.FirstError != "" {
			fmt.Fprintf(w, "first failure: %s\n", l.FirstError)
		}
	}
	report.Heading(w, "Allocation and GC")
	t := report.Table{Header: []string{"measure", "value"}}
	if e.ProfileEvent == string(asprof.Alloc) {
		t.Add("allocated (async-profiler)", report.Bytes(float64(e.AllocBytesProfiler)))
	}
	t.Add("allocated (hsperfdata Eden)", report.Bytes(float64(e.AllocBytesEden)))
	if e.ProfileEvent == string(asprof.Alloc) {
		t.Add("disagreement", report.Percent(e.Disagreement))
		t.Add("allocation rate (async-profiler)", report.Bytes(e.AllocRateProfiler)+"/s")
	}
	t.Add("allocation rate (Eden)", report.Bytes(e.AllocRateEden)+"/s")
	if e.Requests > 0 {
		t.Add("requests ("+e.RequestsSource+")", strconv.FormatInt(e.Requests, 10))
		t.Add("bytes per request", report.Bytes(e.BytesPerRequest))
		t.Add("bytes per request (Eden)", report.Bytes(e.BytesPerRequestEden))
	}
	t.Add("young GCs", fmt.Sprintf("%d (%.1f/min, mean pause %s)", e.YoungGCs, e.YoungGCsPerMinute, report.Nanos(e.MeanYoungPauseNs)))
	t.Add("full/old GCs", strconv.FormatInt(e.OldGCs, 10))
	t.Add("GC time share", report.Percent(e.GCTimeShare))
	t.Add("Eden capacity", report.Bytes(float64(e.EdenCapacity)))
	if e.RegionSize > 0 {
		t.Add("G1 region size", report.Bytes(float64(e.RegionSize)))
	}
	if e.Logging.Bytes > 0 {
		v := report.Percent(e.Logging.Share)
		if e.Logging.BytesPerRequest > 0 {
			v = fmt.Sprintf("%s per request (%s)", report.Bytes(e.Logging.BytesPerRequest), v)
		}
		t.Add("logging", v)
	}
	t.Write(w)
	if m := d.Model; m.RPS > 0 {
		report.Heading(w, fmt.Sprintf("At %.0f requests/s (%s)", m.RPS, m.RPSSource))
		mt := report.Table{Header: []string{"allocation rate", "young GCs/min", fmt.Sprintf("Eden for one GC per %v", time.Duration(e.TargetGCIntervalNs))}}
		mt.Add(report.Bytes(m.AllocRate)+"/s", fmt.Sprintf("%.1f", m.YoungGCsPerMinute), report.Bytes(m.EdenForTarget))
		mt.Write(w)
	}
	if len(e.Sites) > 0 {
		unit := "bytes"
		if e.ProfileEvent != string(asprof.Alloc) {
			unit = "weight"
		}
		report.Heading(w, "Top sites by "+unit)
		st := report.Table{Header: []string{"share", unit, "per request", "frame"}}
		for _, s := range e.Sites {
			name := s.Frame
			if s.Type != "" {
				name += " → " + s.Type
			}
			per := "-"
			if s.BytesPerRequest > 0 {
				per = report.Bytes(s.BytesPerRequest)
			}
			val := report.Bytes(float64(s.Bytes))
			if unit != "bytes" {
				val = report.Count(float64(s.Bytes))
			}
			st.Add(report.Percent(s.Share), val, per, name)
		}
		st.Write(w)
	}
	for _, a := range r.Artifacts {
		fmt.Fprintf(w, "wrote %s: %s\n", a.Kind, a.Path)
	}
	report.Heading(w, "Findings")
	report.WriteFindings(w, r.Findings)
}
