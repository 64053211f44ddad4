package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfscope/perfscope/integration/springapp"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/lab/jvmapp"
)

// springReport is the part of `perfscope jvm -o json` these tests read.
type springReport struct {
	Overhead *struct {
		Programs []struct {
			Program    string `json:"program"`
			RunCount   uint64 `json:"run_count"`
			RunTimeNs  uint64 `json:"run_time_ns"`
			PerRunFrom string `json:"per_run_from"`
		} `json:"programs"`
	} `json:"overhead"`
	Data struct {
		Requests           *int64           `json:"requests"`
		RequestsSource     string           `json:"requests_source"`
		RequestsUnknown    string           `json:"requests_unknown"`
		StatusClasses      map[string]int64 `json:"status_classes"`
		BytesPerRequest    *float64         `json:"bytes_per_request"`
		BytesPerRequestWhy string           `json:"bytes_per_request_unknown"`
		BytesPerRequestErr *float64         `json:"bytes_per_request_error"`
		AllocSampling      *struct {
			Samples         int64   `json:"samples"`
			ProfilerBytes   int64   `json:"profiler_bytes"`
			RelativeError   float64 `json:"relative_error"`
			TruncatedStacks int64   `json:"truncated_stacks"`
			NoStack         int64   `json:"no_stack"`
			SettleNs        int64   `json:"settle_ns"`
		} `json:"alloc_sampling"`
		AllocBytesProfiler int64 `json:"alloc_bytes_profiler"`
		WindowNs           int64 `json:"window_ns"`
		YoungGCs           int64 `json:"young_gcs"`
		RequestsCrossCheck *struct {
			Source   string `json:"source"`
			Requests int64  `json:"requests"`
		} `json:"requests_cross_check"`
		Threads *struct {
			Request struct {
				Share              float64  `json:"share"`
				BytesPerRequest    *float64 `json:"bytes_per_request"`
				BytesPerRequestErr *float64 `json:"bytes_per_request_error"`
			} `json:"request"`
			Pools []struct {
				Pool    string `json:"pool"`
				Request bool   `json:"request"`
				Bytes   int64  `json:"bytes"`
			} `json:"pools"`
		} `json:"threads"`
		Endpoints []struct {
			Endpoint               string   `json:"endpoint"`
			Handler                string   `json:"handler"`
			Requests               *int64   `json:"requests"`
			BytesPerRequest        *float64 `json:"bytes_per_request"`
			LoggingBytesPerRequest *float64 `json:"logging_bytes_per_request"`
			BytesPerRequestErr     *float64 `json:"bytes_per_request_error"`
		} `json:"endpoints"`
		Fixes []struct {
			Kind  string `json:"kind"`
			Where string `json:"where"`
		} `json:"fixes"`
		Model struct {
			RPSSource string `json:"rps_source"`
		} `json:"model"`
		Warnings []string `json:"warnings"`
	} `json:"data"`
	Findings []json.RawMessage `json:"findings"`
	Error    *struct {
		ExitCode int `json:"exit_code"`
	} `json:"error"`
}

func startSpring(t *testing.T) *springapp.App {
	t.Helper()
	ctx := context.Background()
	jar, err := springapp.Build(ctx, true)
	if err != nil {
		t.Logf("offline build failed, trying the Maven repository: %v", err)
		if jar, err = springapp.Build(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	jdk, err := jvmapp.FindJDK()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "perfscope-springapp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	app, err := springapp.Start(ctx, springapp.Config{Java: jdk.Java, Jar: jar, Dir: dir, JVMArgs: []string{"-Xms256m", "-Xmx256m", "-XX:+UseG1GC"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Stop)
	return app
}

// client is the external load: n GET requests at rate per second over
// kept-alive connections, alternating between paths; it returns how many
// were answered.
func client(ctx context.Context, app interface{ URL(string) string }, n int, rate float64, paths ...string) int64 {
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var answered atomic.Int64
	sem := make(chan struct{}, 8)
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		}
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem }()
			resp, err := c.Get(app.URL(fmt.Sprintf("%s%d", paths[i%len(paths)], i)))
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered.Add(1)
		}(i)
	}
	for i := 0; i < cap(sem); i++ {
		sem <- struct{}{}
	}
	return answered.Load()
}

// runDuring starts `perfscope jvm -o json args...`, waits until
// async-profiler runs in the JVM, calls warm (when not nil) until shortly
// before the window begins, after the sampler's settling time, then
// during, and returns the exit code and report once perfscope ends.
func runDuring(t *testing.T, pid int, warm func(until time.Time), during func(), args ...string) (int, springReport, string) {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), append([]string{"jvm", "-o", "json", "--pid", fmt.Sprint(pid)}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitProfilerStarted(t, pid, cmd, &stderr)
	// Traffic while the sampler settles gives the threads that serve it
	// new TLABs, which the JVM samples (the requests are not counted:
	// they end before the window).
	window := time.Now().Add(jvm.DefaultSamplerSettle)
	if warm != nil {
		warm(window.Add(-400 * time.Millisecond))
	}
	// The passive count's first reading follows the settling time.
	time.Sleep(time.Until(window.Add(300 * time.Millisecond)))
	during()
	return decodeRun(t, cmd.Wait(), &out, &stderr)
}

// warmUntil is traffic at rate until a deadline.
func warmUntil(app interface{ URL(string) string }, rate float64, paths ...string) func(time.Time) {
	return func(until time.Time) {
		if n := int(rate * time.Until(until).Seconds()); n > 0 {
			client(context.Background(), app, n, rate, paths...)
		}
	}
}

// decodeRun turns a finished `perfscope jvm -o json` into its exit code,
// report and stderr; every exit prints a JSON document.
func decodeRun(t *testing.T, err error, out, stderr *bytes.Buffer) (int, springReport, string) {
	t.Helper()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r springReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("exit %d, not JSON: %v\n%s\nstderr: %s", code, err, out.String(), stderr.String())
	}
	return code, r, stderr.String()
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	t.Logf("%s: perfscope %.1f KiB, truth %.1f KiB (%+.1f%%)", what, got/1024, want/1024, (got/want-1)*100)
	if math.Abs(got/want-1) > tol {
		t.Errorf("%s: %.1f KiB, truth %.1f KiB: outside ±%.0f%%", what, got/1024, want/1024, tol*100)
	}
}

// bounded checks a sampled figure against the truth, which perfscope sees
// all of and may exceed by the share above, known to be outside the
// truth: truth ≤ got + e and got − e ≤ truth·(1+above), where e is the
// reported 95 % error widened to 3σ (×1.53). A right 95 % bound misses
// one run in twenty by definition, and this test checks several: CI
// failed on a whole-process figure 23.3 ± 1.0 KiB against 24.3. At 3σ a
// right bound fails about one run in 370 per figure; a wrong one still
// fails.
func bounded(t *testing.T, what string, got, err, truth, above float64) {
	t.Helper()
	t.Logf("%s: perfscope %.1f ±%.1f KiB, truth %.1f KiB (%+.1f%%)", what, got/1024, err/1024, truth/1024, (got/truth-1)*100)
	err *= 3 / 1.96
	if math.IsNaN(err) || got+err < truth || got-err > truth*(1+above) {
		t.Errorf("%s: %.1f ±%.1f KiB, truth %.1f KiB: outside [truth − error, truth·%.2f + error]", what, got/1024, err/1024, truth/1024, 1+above)
	}
}

// A real Spring Boot service taking traffic from a client perfscope does
// not drive: the passive count matches the client's, bytes per request
// match the in-app ThreadMXBean truth, the endpoints differ by their log
// line, and request threads are told from the scheduler.
func TestJVMSpringBootWithoutLoad(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSpring(t)
	paths := []string{"/api/orders/", "/api/orders-logged/"}
	// Warm-up, so C2 has compiled the request path (escape analysis
	// removes allocations the interpreter makes).
	if n := client(context.Background(), app, 20000, 0, paths...); n != 20000 {
		t.Fatalf("warm-up: %d of 20000 answered", n)
	}
	const sent = 3000
	var answered int64
	var before, after springapp.Truth
	code, r, stderr := runDuring(t, app.PID, warmUntil(app, 500, paths...), func() {
		var err error
		if before, err = app.Truth(); err != nil {
			t.Error(err)
		}
		answered = client(context.Background(), app, sent, 500, paths...)
		if after, err = app.Truth(); err != nil {
			t.Error(err)
		}
	}, "-d", "9s", "--alloc-interval", "32k", "--target-rps", "500", "--mappings", app.URL("/actuator/mappings"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	d := r.Data
	// The passive count sees the client's requests and the two /truth
	// readings, nothing else.
	if d.RequestsSource != "passive-http" || d.Requests == nil || *d.Requests != answered+2 || answered != sent {
		t.Fatalf("requests %v from %q (%s), client answered %d + 2 truth readings", d.Requests, d.RequestsSource, d.RequestsUnknown, answered)
	}
	if d.StatusClasses["2xx"] != *d.Requests {
		t.Errorf("status classes %v", d.StatusClasses)
	}
	reqTruth, jvmTruth, byURI := springapp.PerRequest(before, after)
	if d.Threads == nil || d.Threads.Request.BytesPerRequest == nil || d.BytesPerRequest == nil {
		t.Fatalf("no per-request figures: %+v", d)
	}
	t.Logf("sampling %+v; pools %+v; warnings %q", d.AllocSampling, d.Threads.Pools, d.Warnings)
	// perfscope's figures are sampled and come with their error (±2σ,
	// from the samples' own weights): the truth must lie within it,
	// plus what perfscope sees and the truth does not. The truth filter
	// sees the filter chain only; Tomcat's parsing before it runs on
	// request threads too (about 1 KiB, 4-5 % here), so perfscope's
	// request threads may be above the truth by that, never below it by
	// more than the sampling error. Its profile also covers a wider
	// window than the two truth readings (the scheduler's 2.7 KB/s
	// background adds about 1 %).
	reqGot, reqErr := *d.Threads.Request.BytesPerRequest, deref(d.Threads.Request.BytesPerRequestErr)
	bounded(t, "request threads", reqGot, reqErr, reqTruth, 0.10)
	bounded(t, "whole process", *d.BytesPerRequest, deref(d.BytesPerRequestErr), jvmTruth, 0.05)
	if *d.BytesPerRequest < *d.Threads.Request.BytesPerRequest {
		t.Errorf("whole process %.0f < request threads %.0f", *d.BytesPerRequest, *d.Threads.Request.BytesPerRequest)
	}
	if a := d.AllocSampling; a == nil || a.TruncatedStacks != 0 || a.NoStack != 0 || a.SettleNs == 0 {
		t.Errorf("alloc sampling %+v", a)
	}
	background := false
	for _, p := range d.Threads.Pools {
		background = background || (p.Pool == "scheduling-#" && !p.Request)
	}
	if !background || d.Threads.Request.Share < 0.8 {
		t.Errorf("thread split: request share %.2f, pools %+v", d.Threads.Request.Share, d.Threads.Pools)
	}
	eps := map[string]int{}
	for i, e := range d.Endpoints {
		eps[e.Endpoint] = i
	}
	plainI, ok1 := eps["/api/orders/{id}"]
	loggedI, ok2 := eps["/api/orders-logged/{id}"]
	if !ok1 || !ok2 {
		t.Fatalf("endpoints %+v", d.Endpoints)
	}
	plain, logged := d.Endpoints[plainI], d.Endpoints[loggedI]
	if plain.Requests == nil || logged.Requests == nil || *plain.Requests != sent/2 || *logged.Requests != sent/2 {
		t.Errorf("per-endpoint requests: %v %v", plain.Requests, logged.Requests)
	}
	if logged.LoggingBytesPerRequest == nil || *logged.LoggingBytesPerRequest < 1024 || plain.LoggingBytesPerRequest == nil || *plain.LoggingBytesPerRequest > 256 {
		t.Errorf("logging per request: logged %v, plain %v", logged.LoggingBytesPerRequest, plain.LoggingBytesPerRequest)
	}
	// A difference of two sampled figures, each with its error; the
	// framework's share, in both, cancels.
	diff, diffErr := *logged.BytesPerRequest-*plain.BytesPerRequest, math.Hypot(deref(logged.BytesPerRequestErr), deref(plain.BytesPerRequestErr))
	diffTruth := byURI["/api/orders-logged/{id}"] - byURI["/api/orders/{id}"]
	t.Logf("logged − plain endpoint: perfscope %.1f ±%.1f KiB, truth %.1f KiB (%+.1f%%)", diff/1024, diffErr/1024, diffTruth/1024, (diff/diffTruth-1)*100)
	if math.IsNaN(diffErr) || math.Abs(diff-diffTruth) > diffErr+0.05*diffTruth {
		t.Errorf("logged − plain endpoint: %.1f ±%.1f KiB, truth %.1f KiB", diff/1024, diffErr/1024, diffTruth/1024)
	}
	if r.Findings == nil || d.Model.RPSSource != "target" {
		t.Errorf("findings %v model %+v", r.Findings, d.Model)
	}
	if !app.Healthy() {
		t.Error("the service stopped answering")
	}
}

// The metrics the service exposes count the requests (Actuator's
// Prometheus endpoint), the passive count cross-checks them, and handlers
// map to endpoints through the Actuator's mappings without being asked.
// Under perfscope's own load, a 400 answer is one request.
func TestJVMSpringBootMetricsSourceAndLoad(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSpring(t)
	client(context.Background(), app, 10000, 0, "/api/orders/", "/api/orders-logged/")
	var answered int64
	code, r, stderr := runDuring(t, app.PID, nil, func() {
		answered = client(context.Background(), app, 2000, 500, "/api/orders/", "/api/orders-logged/")
	}, "-d", "7s", "--alloc-interval", "128k", "--requests-from", app.URL("/actuator/prometheus"), "--count", "on")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	d := r.Data
	if d.RequestsSource != "metrics" || d.Requests == nil || *d.Requests != answered {
		t.Errorf("metrics counted %v (%s), the client %d", d.Requests, d.RequestsSource, answered)
	}
	// The passive count's window lies between perfscope's two scrapes.
	if c := d.RequestsCrossCheck; c == nil || c.Source != "passive-http" || c.Requests != answered {
		t.Errorf("cross-check %+v", c)
	}
	mapped := 0
	for _, e := range d.Endpoints {
		if e.Handler != "" && e.Endpoint != "" && e.BytesPerRequest != nil {
			mapped++
		}
	}
	if mapped != 2 {
		t.Errorf("endpoints mapped through /actuator/mappings: %+v", d.Endpoints)
	}

	// /api/orders/abc is HTTP 400: 2000 sent, 2000 requests.
	code, lr, stderr := perfscopeJVMRaw(t, "--pid", fmt.Sprint(app.PID), "--load", app.URL("/api/orders/abc"), "--requests", "2000", "--concurrency", "4")
	if code != 0 {
		t.Fatalf("load: exit %d: %s", code, stderr)
	}
	if lr.Data.Requests == nil || *lr.Data.Requests != 2000 || lr.Data.StatusClasses["4xx"] != 2000 {
		t.Errorf("non-2xx load: requests %v classes %v", lr.Data.Requests, lr.Data.StatusClasses)
	}
	if lr.Data.Model.RPSSource != "saturation" {
		t.Errorf("a closed-loop load's rate is a saturation rate: %q", lr.Data.Model.RPSSource)
	}
	for _, f := range lr.Findings {
		if strings.Contains(string(f), "jvm.young-gc-frequency") {
			t.Errorf("young-GC finding predicted at the saturation rate: %s", f)
		}
	}
}

func perfscopeJVMRaw(t *testing.T, args ...string) (int, springReport, string) {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), append([]string{"jvm", "-o", "json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	return decodeRun(t, cmd.Run(), &out, &stderr)
}

// The JDK's own HTTP server (the sample app) under an external client:
// the passive count is the client's count, and bytes per request follow
// the endpoint's known allocation.
func TestJVMSampleAppPassiveCount(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	app := startSample(t, nil)
	client(context.Background(), app, 3000, 0, "/alloc?kb=16&n=")
	var answered int64
	code, r, stderr := runDuring(t, app.PID, warmUntil(app, 1000, "/alloc?kb=16&n="), func() {
		answered = client(context.Background(), app, 4000, 1000, "/alloc?kb=16&n=")
	}, "-d", "6s", "--alloc-interval", "64k")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	d := r.Data
	if d.RequestsSource != "passive-http" || d.Requests == nil || *d.Requests != answered || answered != 4000 {
		t.Fatalf("passive count %v (%s; %s), client answered %d of 4000", d.Requests, d.RequestsSource, d.RequestsUnknown, answered)
	}
	// The count's own cost, timed by its programs: a send per response
	// at least, and a receive per request.
	var sends, recvs uint64
	if r.Overhead != nil {
		for _, p := range r.Overhead.Programs {
			if p.PerRunFrom != "self-timed" || p.RunTimeNs == 0 {
				continue
			}
			switch p.Program {
			case "sock:sock_send_length":
				sends = p.RunCount
			case "sock:sock_recv_length":
				recvs = p.RunCount
			}
		}
	}
	if sends < uint64(answered) || recvs < uint64(answered) {
		t.Errorf("the own-cost table has %d timed sends and %d receives for %d requests: %+v", sends, recvs, answered, r.Overhead)
	}
	// The same endpoint under perfscope's own load, whose count is exact.
	// 64k samples ~2 000 times per run: each total to about ±2 %.
	code, lr, stderr := perfscopeJVMRaw(t, "--pid", fmt.Sprint(app.PID), "--load", app.URL("/alloc?kb=16"), "--requests", "4000", "--alloc-interval", "64k")
	if code != 0 || lr.Data.BytesPerRequest == nil {
		t.Fatalf("load: exit %d: %s", code, stderr)
	}
	if d.BytesPerRequest == nil || *d.BytesPerRequest < 16*1024 {
		t.Fatalf("bytes per request %v for /alloc?kb=16", deref(d.BytesPerRequest))
	}
	within(t, "passive vs load", *d.BytesPerRequest, *lr.Data.BytesPerRequest, 0.10)
}

func deref(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}
