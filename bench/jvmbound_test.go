package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/integration/springapp"
	"github.com/perfscope/perfscope/lab/jvmapp"
)

// BenchmarkJVMAllocBound asks whether `perfscope jvm`'s bytes per request,
// and the bound it reports, hold the truth over repeated runs: the Spring
// Boot test service (Tomcat, Spring MVC, Jackson, logback) serves a steady
// external load, `perfscope jvm --pid PID -d 10s` runs round after round
// with its defaults (passive request count; the allocation interval
// chosen from the rate before the window), and each round is held against
// the service's own ThreadMXBean truth over the same stretch of traffic:
// the whole JVM's bytes per request (every thread), and the request
// threads' inside the filter chain (perfscope also sees Tomcat's parsing
// before the filter, about 1 KiB, so its request-thread figure may be
// above that truth by up to 10 %, never below by more than its bound).
// Knobs, from the environment:
//
//	PERFSCOPE_JVM_BOUND_ROUNDS  rounds (10)
//	PERFSCOPE_JVM_BOUND_RATE    requests per second of the external load (300)
//	PERFSCOPE_JVM_BOUND_ARGS    extra `perfscope jvm` flags, e.g. "--alloc-interval 512k"
//
// It takes /tmp/perfscope-bench.lock while measuring; do not wrap it in
// flock(1).
func BenchmarkJVMAllocBound(b *testing.B) {
	rounds, rate := 10, 300.0
	if v := os.Getenv("PERFSCOPE_JVM_BOUND_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 200 {
			b.Fatalf("PERFSCOPE_JVM_BOUND_ROUNDS=%q: want 1..200", v)
		}
		rounds = n
	}
	if v := os.Getenv("PERFSCOPE_JVM_BOUND_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 || r > 5000 {
			b.Fatalf("PERFSCOPE_JVM_BOUND_RATE=%q: want a rate up to 5000", v)
		}
		rate = r
	}
	args := strings.Fields(os.Getenv("PERFSCOPE_JVM_BOUND_ARGS"))
	jdk, err := jvmapp.FindJDK()
	if err != nil {
		b.Fatal(err)
	}
	bin := buildBinary(b)
	dir := b.TempDir()
	logf, err := os.Create(filepath.Join(dir, "app.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	jar, err := springapp.Build(context.Background(), true)
	if err != nil {
		if jar, err = springapp.Build(context.Background(), false); err != nil {
			b.Fatal(err)
		}
	}
	app, err := springapp.Start(context.Background(), springapp.Config{Java: jdk.Java, Jar: jar, Dir: dir, JVMArgs: jvmBenchFlags, Output: logf})
	if err != nil {
		b.Fatal(err)
	}
	pid := app.PID
	b.Cleanup(func() { stopAndCheckClean(b, benchApp{PID: app.PID, URL: app.URL, Stop: app.Stop}, pid) })
	path := app.URL("/api/orders-logged/17")
	if warm, err := httpload.Run(context.Background(), httpload.Spec{URL: path, Requests: 20000, Concurrency: 4}); err != nil || warm.Failures > 0 {
		b.Fatalf("warm-up: %v, %d failures", err, warm.Failures)
	}
	unlock := benchLock(b)
	defer unlock()
	// The steady load, for as long as the rounds run.
	ctx, stop := context.WithCancel(context.Background())
	loaded := make(chan error, 1)
	go func() {
		_, err := httpload.Run(ctx, httpload.Spec{URL: path, Requests: int(rate * 3600), Concurrency: 8, Rate: rate})
		loaded <- err
	}()
	defer func() { stop(); <-loaded }()
	time.Sleep(5 * time.Second)

	progress("| round | interval | samples | whole B/req | truth | error | within bound | request threads B/req | truth (filter) | error | within bound |")
	progress("|---|---|---|---|---|---|---|---|---|---|---|")
	var wholeIn, reqIn, n int
	var wholeErrs, reqErrs []float64
	for i := 0; i < b.N*rounds; i++ {
		before, err := app.Truth()
		if err != nil {
			b.Fatal(err)
		}
		var out, stderr bytes.Buffer
		cmd := exec.Command(bin, append([]string{"jvm", "-o", "json", "--pid", fmt.Sprint(pid), "-d", "10s"}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("perfscope jvm: %v\n%s", err, stderr.String())
		}
		after, err := app.Truth()
		if err != nil {
			b.Fatal(err)
		}
		var r struct {
			Data evidence.JVM `json:"data"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			b.Fatalf("json: %v", err)
		}
		d := r.Data
		if d.BytesPerRequest == nil || d.BytesPerRequestError == nil || d.Threads == nil || d.Threads.Request.BytesPerRequest == nil || d.AllocSampling == nil {
			b.Fatalf("round %d: no sampled bytes per request: %s", i, out.String())
		}
		reqTruth, jvmTruth, _ := springapp.PerRequest(before, after)
		whole, wholeErr := *d.BytesPerRequest, *d.BytesPerRequestError
		req, reqErr := *d.Threads.Request.BytesPerRequest, deref(d.Threads.Request.BytesPerRequestError)
		inWhole := math.Abs(whole-jvmTruth) <= wholeErr
		inReq := req+reqErr >= reqTruth && req-reqErr <= reqTruth*1.10
		n++
		if inWhole {
			wholeIn++
		}
		if inReq {
			reqIn++
		}
		wholeErrs = append(wholeErrs, whole/jvmTruth-1)
		reqErrs = append(reqErrs, req/reqTruth-1)
		progress("| %d | %s | %d | %.0f ±%.0f | %.0f | %+.1f %% | %v | %.0f ±%.0f | %.0f | %+.1f %% | %v |", i+1,
			intervalText(d.AllocSampling), d.AllocSampling.Samples, whole, wholeErr, jvmTruth, 100*(whole/jvmTruth-1), inWhole,
			req, reqErr, reqTruth, 100*(req/reqTruth-1), inReq)
	}
	progress("whole JVM: truth within the bound in %d of %d rounds, error mean %+.1f %% (sd %.1f %%); request threads: %d of %d, mean %+.1f %% (sd %.1f %%)",
		wholeIn, n, 100*mean(wholeErrs), 100*sd(wholeErrs), reqIn, n, 100*mean(reqErrs), 100*sd(reqErrs))
}

func intervalText(a *evidence.AllocSampling) string {
	s := fmt.Sprintf("%d KiB", a.IntervalBytes>>10)
	if a.IntervalAuto {
		s += fmt.Sprintf(" (auto, %.1f MB/s before)", a.RateBefore/1e6)
	}
	return s
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func sd(v []float64) float64 {
	m := mean(v)
	var s float64
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	if len(v) < 2 {
		return 0
	}
	return math.Sqrt(s / float64(len(v)-1))
}
