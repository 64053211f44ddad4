package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/goapp"
)

// goTracer is what runs beside the lab service's load in one span of
// BenchmarkGoCommandOverhead.
type goTracer struct {
	name string
	// start begins it for a span of d, returning when it measures (the
	// span's load starts then) and a wait for its end.
	start func(b *testing.B, pid int, url string, d time.Duration) (wait func() string)
}

// goSpan is one fixed-rate load under one tracer.
type goSpan struct {
	rps, p50, p99 float64 // requests/s achieved, latency in ms
	cpuPerReq     float64 // the service's CPU per request, µs
	note          string
}

// BenchmarkGoCommandOverhead is what `perfscope go --pid` costs the Go
// service it measures, as a user runs it, against what the user would do
// instead: the Go lab service (current Go, not stripped so that bpftrace
// finds runtime.mProf_Malloc; /work allocates 4 × 4 KiB, ~18 KB a request
// with net/http's own; net/http/pprof served) under a fixed-rate HTTP load
// from 4 connections, in rounds of spans that alternate the tracer, each
// span's load running while the tracer measures:
//
//   - none;
//   - perfscope: `perfscope go --pid PID -d …` (default settings: the pool
//     hooks under their cost guard, the passive request count);
//   - perfscope-no-pools: the same with --no-pools;
//   - perfscope-no-count: the pool hooks under their guard, --count off;
//   - perfscope-no-pools-no-count: and --count off (no passive request
//     count);
//   - pprof: a `net/http/pprof` allocation profile over the span
//     (/debug/pprof/allocs?seconds=N, the delta a user would fetch);
//   - bpftrace: a uprobe on runtime.mProf_Malloc counting user stacks;
//   - base (PERFSCOPE_GO_BENCH_BASE=path): another perfscope binary, e.g.
//     one built from before a change, with default settings.
//
// Two offered rates: half the service's capacity (measured closed-loop
// first; achieved = offered, so the figures are latency and the service's
// CPU per request) and 1.5× it (the service saturated: achieved
// requests/s is its capacity, and its loss is the target < 1 %).
//
//	go test -run '^$' -bench GoCommandOverhead -benchtime 1x -timeout 60m ./bench/
//
// PERFSCOPE_GO_BENCH_ROUNDS (default 5) and PERFSCOPE_GO_BENCH_SPAN
// (default 6s) size it; PERFSCOPE_GO_BENCH_RATES=saturated (or
// half-capacity) runs one rate only.
func BenchmarkGoCommandOverhead(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	bin := buildBinary(b)
	path, err := goapp.BuildCurrent(context.Background(), goapp.Variant{})
	if err != nil {
		b.Fatal(err)
	}
	rounds := envInt(b, "PERFSCOPE_GO_BENCH_ROUNDS", 5)
	span := 6 * time.Second
	if s := os.Getenv("PERFSCOPE_GO_BENCH_SPAN"); s != "" {
		if span, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	tracers := []goTracer{
		{name: "none", start: func(*testing.B, int, string, time.Duration) func() string { return func() string { return "" } }},
		{name: "perfscope", start: perfscopeGo(bin)},
		{name: "perfscope-no-pools", start: perfscopeGo(bin, "--no-pools")},
		{name: "perfscope-no-count", start: perfscopeGo(bin, "--count", "off")},
		// Without the passive request count either (its syscall
		// tracepoints run for every task: the load generator's too).
		{name: "perfscope-no-pools-no-count", start: perfscopeGo(bin, "--no-pools", "--count", "off")},
		{name: "pprof", start: pprofAllocs},
	}
	if bt, err := exec.LookPath("bpftrace"); err == nil {
		tracers = append(tracers, goTracer{name: "bpftrace", start: bpftraceMalloc(bt)})
	}
	if base := os.Getenv("PERFSCOPE_GO_BENCH_BASE"); base != "" {
		tracers = append(tracers, goTracer{name: "base", start: perfscopeGo(base)})
	}
	srv, err := goapp.Start(context.Background(), path, goapp.Config{Mode: "plain", Count: 4, Size: 4096, Pprof: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	load0, _ := os.ReadFile("/proc/loadavg")
	capRes, err := httpload.Run(context.Background(), httpload.Spec{URL: srv.URL("/work"), Requests: 30000, Concurrency: 4})
	if err != nil {
		b.Fatal(err)
	}
	capacity := capRes.RPS
	b.Logf("service capacity (closed loop, 4 connections): %.0f requests/s; load average %s", capacity, strings.TrimSpace(string(load0)))
	for _, offered := range []struct {
		name string
		rate float64
	}{{"half-capacity", capacity / 2}, {"saturated", capacity * 1.5}} {
		if only := os.Getenv("PERFSCOPE_GO_BENCH_RATES"); only != "" && !strings.Contains(","+only+",", ","+offered.name+",") {
			continue
		}
		spans := map[string][]goSpan{}
		for r := 0; r < rounds; r++ {
			// Rotate the order from round to round.
			for i := range tracers {
				tr := tracers[(i+r)%len(tracers)]
				s := runGoSpan(b, srv, tr, offered.rate, span)
				spans[tr.name] = append(spans[tr.name], s)
				b.Logf("%s round %d %-18s %7.0f req/s  p50 %6.2f ms  p99 %6.2f ms  %6.1f µs CPU/req %s",
					offered.name, r+1, tr.name, s.rps, s.p50, s.p99, s.cpuPerReq, s.note)
			}
		}
		none := spans["none"]
		for _, tr := range tracers {
			var lost, cpu, p99 []float64
			for r, s := range spans[tr.name] {
				lost = append(lost, 100*(1-s.rps/none[r].rps))
				cpu = append(cpu, 100*(s.cpuPerReq/none[r].cpuPerReq-1))
				p99 = append(p99, s.p99-none[r].p99)
			}
			b.Logf("%s %-18s median requests/s lost %5.2f %%, CPU per request %+5.1f %%, p99 %+6.2f ms (offered %.0f/s, %d rounds)",
				offered.name, tr.name, median(lost), median(cpu), median(p99), offered.rate, rounds)
			if tr.name != "none" {
				b.ReportMetric(median(lost), offered.name+"-"+tr.name+"-rps-lost-%")
				b.ReportMetric(median(cpu), offered.name+"-"+tr.name+"-cpu-%")
			}
		}
	}
	load1, _ := os.ReadFile("/proc/loadavg")
	b.Logf("load average at the end %s", strings.TrimSpace(string(load1)))
}

func runGoSpan(b *testing.B, srv *goapp.Server, tr goTracer, rate float64, d time.Duration) goSpan {
	b.Helper()
	wait := tr.start(b, srv.PID, srv.URL(""), d)
	cpu0 := processCPU(b, srv.PID)
	lr, err := httpload.Run(context.Background(), httpload.Spec{URL: srv.URL("/work"), Requests: int(rate * d.Seconds()), Concurrency: 4, Rate: rate})
	if err != nil {
		b.Fatal(err)
	}
	cpu := processCPU(b, srv.PID) - cpu0
	note := wait()
	return goSpan{rps: lr.RPS, p50: float64(lr.P50Ns) / 1e6, p99: float64(lr.P99Ns) / 1e6,
		cpuPerReq: float64(cpu.Microseconds()) / float64(lr.Completed), note: note}
}

// perfscopeGo runs `perfscope go --pid PID -d (span + 4s) -o json` and
// lets the span's load start 2 s later, once it has attached (its report
// says how long attaching took; a span that started before is flagged).
func perfscopeGo(bin string, extra ...string) func(*testing.B, int, string, time.Duration) func() string {
	return func(b *testing.B, pid int, _ string, d time.Duration) func() string {
		args := append([]string{"go", "--pid", strconv.Itoa(pid), "-d", (d + 4*time.Second).String(), "-o", "json"}, extra...)
		cmd := exec.Command(bin, args...)
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		return func() string {
			if err := cmd.Wait(); err != nil {
				b.Fatalf("perfscope %v: %v\n%s", args, err, out.String())
			}
			var env struct {
				Data struct {
					PoolSampling *struct {
						Mode       string  `json:"mode"`
						OnFraction float64 `json:"on_fraction"`
						CostShare  float64 `json:"cost_share"`
					} `json:"pool_sampling"`
				} `json:"data"`
				Overhead struct {
					AttachNs int64 `json:"attach_ns"`
				} `json:"overhead"`
			}
			if err := json.Unmarshal([]byte(out.String()), &env); err != nil {
				b.Fatalf("perfscope's JSON: %v", err)
			}
			note := fmt.Sprintf("(attach %.0f ms", float64(env.Overhead.AttachNs)/1e6)
			if env.Overhead.AttachNs > int64(2*time.Second) {
				note += ", AFTER the load started"
			}
			if p := env.Data.PoolSampling; p != nil {
				note += fmt.Sprintf("; pools %s, attached %.0f %%, cost %.1f %% while attached", p.Mode, 100*p.OnFraction, 100*p.CostShare)
			}
			return note + ")"
		}
	}
}

// pprofAllocs fetches the allocation profile's delta over the span, as
// `go tool pprof http://HOST/debug/pprof/allocs?seconds=N` does.
func pprofAllocs(b *testing.B, _ int, base string, d time.Duration) func() string {
	done := make(chan string, 1)
	go func() {
		c := http.Client{Timeout: d + 30*time.Second}
		resp, err := c.Get(fmt.Sprintf("%s/debug/pprof/allocs?seconds=%d", base, int(d.Seconds())))
		if err != nil {
			done <- "(pprof: " + err.Error() + ")"
			return
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- fmt.Sprintf("(pprof: %s, %d bytes)", resp.Status, n)
	}()
	return func() string { return <-done }
}

// bpftraceMalloc counts user stacks at runtime.mProf_Malloc for the span.
func bpftraceMalloc(bt string) func(*testing.B, int, string, time.Duration) func() string {
	return func(b *testing.B, pid int, _ string, d time.Duration) func() string {
		prog := fmt.Sprintf("uprobe:/proc/%d/exe:runtime.mProf_Malloc /pid == %d/ { @[ustack] = count(); } interval:s:%d { exit(); }",
			pid, pid, int(d.Seconds())+4)
		cmd := exec.Command(bt, "-e", prog)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		return func() string {
			if err := cmd.Wait(); err != nil {
				b.Fatalf("bpftrace: %v\n%s", err, out.String())
			}
			return fmt.Sprintf("(bpftrace: %d stacks)", strings.Count(out.String(), "]: "))
		}
	}
}
