package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/goapp"
)

// processCPU is a process's user+system CPU time so far.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}

// BenchmarkGoAllocOverhead is what `perfscope go` costs the Go program it
// measures: the Go lab service (current Go, stripped; /work allocates 4
// buffers of 4 KiB per request, 18 KB with net/http's own) under load from
// 4 connections, in rounds alternating without and with the goalloc probe
// attached (golang.Measure over the round's load):
//
//   - closed loop (as fast as the service answers): requests/s lost;
//   - fixed rate (2000 requests/s): the service's CPU time per request;
//
// at the runtime's default sampling rate (one sample per 512 KiB); with
// every allocation sampled (MemProfileRate 1, 1000 allocations of 64 B per
// request), whose extra CPU over the samples taken is the cost of one
// sampled allocation; and with sync.Pool probed ("pooled" mode: 4 Gets and
// 4 Puts per request).
//
//	go test -run '^$' -bench GoAllocOverhead -benchtime 1x -timeout 30m ./bench/
//
// PERFSCOPE_GO_BENCH_SCENARIOS=default-rate,default-no-pools runs only
// those.
func BenchmarkGoAllocOverhead(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	path, err := goapp.BuildCurrent(context.Background(), goapp.Variant{Stripped: true})
	if err != nil {
		b.Fatal(err)
	}
	const rounds, perRound, rate = 4, 20000, 2000.0
	only := os.Getenv("PERFSCOPE_GO_BENCH_SCENARIOS") // comma-separated names; all when empty
	for _, sc := range []struct {
		name    string
		cfg     goapp.Config
		noPools bool
	}{
		{"default-rate", goapp.Config{Mode: "plain", Count: 4, Size: 4096}, false},
		// The same without sync.Pool's hooks (--no-pools): net/http alone
		// calls Get and Put about 3 times each per request.
		{"default-no-pools", goapp.Config{Mode: "plain", Count: 4, Size: 4096}, true},
		// Every allocation sampled, 1000 per request: the extra CPU per
		// request over 1000 is the probe's cost per sampled allocation.
		{"every-alloc", goapp.Config{Mode: "plain", Count: 1000, Size: 64, MemProfileRate: 1}, true},
		{"pooled", goapp.Config{Mode: "pooled", Count: 4, Size: 4096}, false},
	} {
		if only != "" && !strings.Contains(","+only+",", ","+sc.name+",") {
			continue
		}
		srv, err := goapp.Start(context.Background(), path, sc.cfg)
		if err != nil {
			b.Fatal(err)
		}
		run := func(probe bool, spec httpload.Spec) (httpload.Result, time.Duration, *golang.Result) {
			cpu0 := processCPU(b, srv.PID)
			if !probe {
				lr, err := httpload.Run(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				return lr, processCPU(b, srv.PID) - cpu0, nil
			}
			res, err := golang.Measure(context.Background(), golang.Options{PID: srv.PID, Load: &spec, NoPools: sc.noPools})
			if err != nil {
				b.Fatal(err)
			}
			return *res.Load, processCPU(b, srv.PID) - cpu0, res
		}
		httpload.Run(context.Background(), httpload.Spec{URL: srv.URL("/work"), Requests: 5000, Concurrency: 4})
		var rpsOff, rpsOn, cpuOff, cpuOn float64
		var samples, runs float64
		var perRun float64
		for r := 0; r < rounds; r++ {
			closed := httpload.Spec{URL: srv.URL("/work"), Requests: perRound, Concurrency: 4}
			fixed := httpload.Spec{URL: srv.URL("/work"), Requests: perRound / 2, Concurrency: 4, Rate: rate}
			if sc.cfg.Count > 100 {
				// Far slower requests: a rate the service keeps up with.
				closed.Requests, fixed.Requests, fixed.Rate = perRound/10, perRound/20, rate/10
			}
			off, _, _ := run(false, closed)
			on, _, res := run(true, closed)
			rpsOff += off.RPS
			rpsOn += on.RPS
			_, c0, _ := run(false, fixed)
			_, c1, res2 := run(true, fixed)
			cpuOff += float64(c0) / float64(fixed.Requests)
			cpuOn += float64(c1) / float64(fixed.Requests)
			samples += float64(res2.Evidence.Sampling.Samples)
			for _, c := range append(res.Costs, res2.Costs...) {
				runs += float64(c.RunCount)
				perRun += c.PerRunNs * float64(c.RunCount)
			}
		}
		srv.Stop()
		lost := 1 - rpsOn/rpsOff
		extra := (cpuOn - cpuOff) / rounds
		b.Logf("%s: closed loop %.0f → %.0f requests/s (%.2f %% lost); at %.0f/s the service's CPU per request %.1f → %.1f µs (%+.1f µs); %.1f samples per request; probe programs %.0f ns per run (self-timed)",
			sc.name, rpsOff/rounds, rpsOn/rounds, 100*lost, rate, cpuOff/rounds/1e3, cpuOn/rounds/1e3, extra/1e3, samples/rounds/float64(requestsFixed(sc.cfg)), perRun/runs)
		b.ReportMetric(100*lost, sc.name+"-rps-lost-%")
		b.ReportMetric(extra/1e3, sc.name+"-cpu-µs/req")
		if s := samples / rounds / float64(requestsFixed(sc.cfg)); s > 10 {
			b.ReportMetric(extra/s/1e3, sc.name+"-µs/sample")
		}
	}
}

// requestsFixed is the fixed-rate phase's request count for cfg.
func requestsFixed(cfg goapp.Config) int {
	if cfg.Count > 100 {
		return 20000 / 20
	}
	return 20000 / 2
}
