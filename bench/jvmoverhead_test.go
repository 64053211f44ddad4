package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/integration/springapp"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/lab/jvmapp"
)

// Knobs of BenchmarkJVMOverhead, from the environment so a run can be
// shaped without editing the file (defaults in parentheses):
//
//	PERFSCOPE_JVM_BENCH_RATES   request rates, req/s, or "max" for a
//	                            closed loop of 4 connections (the app's 4
//	                            handler threads) as fast as it answers
//	                            (500,1000,2000,max)
//	PERFSCOPE_JVM_BENCH_ROUNDS  rounds per rate; each is one window without
//	                            and one with perfscope attached (5)
//	PERFSCOPE_JVM_BENCH_WINDOW  load window of one round (10s)
//	PERFSCOPE_JVM_BENCH_PATH    endpoint (/alloc?kb=32: about the Spring Boot allocation study's
//	                            34 KB per Spring Boot request)
//	PERFSCOPE_JVM_BENCH_ARGS    extra `perfscope jvm` flags, space separated,
//	                            to compare settings (none: the defaults)
//	PERFSCOPE_JVM_BENCH_BIN     a perfscope binary to measure instead of one
//	                            built from this checkout (e.g. a release)
//	PERFSCOPE_JVM_BENCH_APP     sample (the JDK HttpServer sample app) or
//	                            spring (the Spring Boot test service:
//	                            Tomcat, Jackson, logback; path
//	                            /api/orders-logged/17 unless set) (sample)
type jvmBenchConfig struct {
	// rates are requests per second; 0 is "max".
	rates  []float64
	rounds int
	window time.Duration
	path   string
	args   []string
	// maxRequests sizes the "max" load to about one window, from the
	// warm-up's rate.
	maxRequests int
	app         string
}

// benchApp is the service under load: the sample app or the Spring Boot
// service.
type benchApp struct {
	PID  int
	URL  func(path string) string
	Stop func()
}

func jvmBenchConfigFromEnv(b *testing.B) jvmBenchConfig {
	c := jvmBenchConfig{rates: []float64{500, 1000, 2000, 0}, rounds: 5, window: 10 * time.Second, path: "/alloc?kb=32"}
	if v := os.Getenv("PERFSCOPE_JVM_BENCH_RATES"); v != "" {
		c.rates = nil
		for _, f := range strings.Split(v, ",") {
			if strings.TrimSpace(f) == "max" {
				c.rates = append(c.rates, 0)
				continue
			}
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || r <= 0 {
				b.Fatalf("PERFSCOPE_JVM_BENCH_RATES=%q: %q is not a positive rate", v, f)
			}
			c.rates = append(c.rates, r)
		}
	}
	if v := os.Getenv("PERFSCOPE_JVM_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 100 {
			b.Fatalf("PERFSCOPE_JVM_BENCH_ROUNDS=%q: want 1..100", v)
		}
		c.rounds = n
	}
	if v := os.Getenv("PERFSCOPE_JVM_BENCH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 10*time.Minute {
			b.Fatalf("PERFSCOPE_JVM_BENCH_WINDOW=%q: want a duration from 1s to 10m", v)
		}
		c.window = d
	}
	c.app = "sample"
	if v := os.Getenv("PERFSCOPE_JVM_BENCH_APP"); v != "" {
		if v != "sample" && v != "spring" {
			b.Fatalf("PERFSCOPE_JVM_BENCH_APP=%q: want sample or spring", v)
		}
		c.app = v
		if v == "spring" {
			c.path = "/api/orders-logged/17"
		}
	}
	if v := os.Getenv("PERFSCOPE_JVM_BENCH_PATH"); v != "" {
		c.path = v
	}
	c.args = strings.Fields(os.Getenv("PERFSCOPE_JVM_BENCH_ARGS"))
	return c
}

// The sample app's JVM flags: a fixed heap so RSS and GC frequency do not
// drift with heap sizing between rounds, G1 as JDK 17's default, and
// otherwise the JIT and GC defaults a service would run with.
var jvmBenchFlags = []string{"-Xms256m", "-Xmx256m", "-XX:+UseG1GC"}

// BenchmarkJVMOverhead judges perfscope jvm's cost the way the APM-agent overhead study judges
// an APM agent: the sample app under a fixed request rate, rounds
// alternating without and with `perfscope jvm --pid PID` (its default
// settings unless PERFSCOPE_JVM_BENCH_ARGS says otherwise) attached for
// the whole load window, reporting per round the
// achieved req/s, p50/p99 latency, the JVM's CPU (from /proc/PID/stat)
// and RSS, perfscope's own CPU, and the machine's idle share (to show the
// baseline does not saturate the two cores). A "max" rate runs a closed
// loop instead, where the profiler's cost shows as lost throughput.
//
// Targets: < 3 % throughput loss and < 1 ms added p99.
//
// The benchmark takes /tmp/perfscope-bench.lock itself while measuring
// (not while building and warming up); do not wrap it in flock(1).
func BenchmarkJVMOverhead(b *testing.B) {
	cfg := jvmBenchConfigFromEnv(b)
	jdk, err := jvmapp.FindJDK()
	if err != nil {
		b.Fatal(err)
	}
	bin := os.Getenv("PERFSCOPE_JVM_BENCH_BIN")
	if bin == "" {
		bin = buildBinary(b)
	}
	classes := b.TempDir()
	logf, err := os.Create(filepath.Join(classes, "app.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	var app benchApp
	switch cfg.app {
	case "spring":
		jar, err := springapp.Build(context.Background(), true)
		if err != nil {
			if jar, err = springapp.Build(context.Background(), false); err != nil {
				b.Fatal(err)
			}
		}
		sa, err := springapp.Start(context.Background(), springapp.Config{Java: jdk.Java, Jar: jar, Dir: classes, JVMArgs: jvmBenchFlags, Output: logf})
		if err != nil {
			b.Fatal(err)
		}
		app = benchApp{PID: sa.PID, URL: sa.URL, Stop: sa.Stop}
	default:
		if err := jdk.Build(context.Background(), classes); err != nil {
			b.Fatal(err)
		}
		ja, err := jvmapp.Start(context.Background(), jvmapp.Config{Java: jdk.Java, ClassDir: classes, JVMArgs: jvmBenchFlags, Log: logf})
		if err != nil {
			b.Fatal(err)
		}
		app = benchApp{PID: ja.PID, URL: ja.URL, Stop: ja.Stop}
	}
	pid := app.PID
	// Registered after TempDir, so it runs before the classes are removed.
	b.Cleanup(func() { stopAndCheckClean(b, app, pid) })

	// Warm-up: enough requests for C2 to compile the handler and the HTTP
	// server's paths, so the first round is not slower for the JIT's sake.
	warm, err := httpload.Run(context.Background(), httpload.Spec{URL: app.URL(cfg.path), Requests: 60000, Concurrency: maxConcurrency})
	if err != nil || warm.Failures > 0 {
		b.Fatalf("warm-up: %v, %d failures (%s)", err, warm.Failures, warm.FirstError)
	}
	progress("warm-up: %d requests, %.0f req/s with %d connections unthrottled", warm.Completed, warm.RPS, maxConcurrency)
	cfg.maxRequests = int(warm.RPS * cfg.window.Seconds())

	unlock := benchLock(b)
	defer unlock()
	progress("| rate | round | perfscope | req/s | p50 ms | p99 ms | max ms | schedule lag p99 ms | JVM CPU %% | JVM CPU µs/request | perfscope CPU %% | machine idle %% | JVM RSS MB | notes |")
	progress("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, rate := range cfg.rates {
		b.Run("rate="+rateName(rate), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchJVMRate(b, bin, &app, cfg, rate)
			}
		})
	}
	if err := profilerInactive(b, pid); err != nil {
		b.Error(err)
	}
}

// maxConcurrency matches the sample app's 4 handler threads: the "max"
// load keeps each busy without queueing in the server.
const maxConcurrency = 4

func rateName(rate float64) string {
	if rate == 0 {
		return "max"
	}
	return strconv.FormatFloat(rate, 'f', 0, 64)
}

// progress prints one line of the per-round table to standard output:
// b.Log would keep only the first lines of a benchmark's log.
func progress(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

// jvmRound is what one load window measured.
type jvmRound struct {
	with        bool
	load        httpload.Result
	jvmCPU      float64 // share of one CPU
	perfCPU     float64 // perfscope's own, share of one CPU
	idle        float64 // machine idle share over all CPUs
	rssMB       float64
	attachMs    float64
	allocPerReq float64 // bytes, from perfscope's report
	// bpfCPU is the passive request count's BPF run time (bpf_stats),
	// share of one CPU; passive is the requests it counted.
	bpfCPU  float64
	passive int64
}

func benchJVMRate(b *testing.B, bin string, app *benchApp, cfg jvmBenchConfig, rate float64) {
	var rounds []jvmRound
	for r := 0; r < cfg.rounds; r++ {
		for _, with := range []bool{false, true} {
			rd := jvmLoadRound(b, bin, app, cfg, rate, with)
			rounds = append(rounds, rd)
			progress("| %s | %d | %s | %.0f | %.3f | %.3f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %.1f |%s |",
				rateName(rate), r, map[bool]string{false: "without", true: "with"}[with], rd.load.RPS,
				float64(rd.load.P50Ns)/1e6, float64(rd.load.P99Ns)/1e6, float64(rd.load.MaxNs)/1e6,
				float64(rd.load.ScheduleLagP99Ns)/1e6, 100*rd.jvmCPU, rd.cpuPerRequestUs(), 100*rd.perfCPU, 100*rd.idle, rd.rssMB, rd.attachNote())
		}
	}
	agg := func(with bool, f func(jvmRound) float64) float64 {
		var v []float64
		for _, rd := range rounds {
			if rd.with == with {
				v = append(v, f(rd))
			}
		}
		return median(v)
	}
	rps := func(rd jvmRound) float64 { return rd.load.RPS }
	p50 := func(rd jvmRound) float64 { return float64(rd.load.P50Ns) / 1e6 }
	p99 := func(rd jvmRound) float64 { return float64(rd.load.P99Ns) / 1e6 }
	cpu := func(rd jvmRound) float64 { return 100 * rd.jvmCPU }
	rss := func(rd jvmRound) float64 { return rd.rssMB }
	without, with := agg(false, rps), agg(true, rps)
	b.ReportMetric(without, "req/s-without")
	b.ReportMetric(with, "req/s-with")
	b.ReportMetric(100*(without-with)/without, "loss-%")
	b.ReportMetric(agg(false, p50), "p50-ms-without")
	b.ReportMetric(agg(true, p50), "p50-ms-with")
	b.ReportMetric(agg(false, p99), "p99-ms-without")
	b.ReportMetric(agg(true, p99), "p99-ms-with")
	b.ReportMetric(agg(true, p99)-agg(false, p99), "p99-added-ms")
	b.ReportMetric(agg(false, cpu), "jvm-cpu-%-without")
	b.ReportMetric(agg(true, cpu), "jvm-cpu-%-with")
	perReq := func(rd jvmRound) float64 { return rd.cpuPerRequestUs() }
	b.ReportMetric(agg(false, perReq), "jvm-cpu-µs/req-without")
	b.ReportMetric(agg(true, perReq), "jvm-cpu-µs/req-with")
	b.ReportMetric(agg(true, func(rd jvmRound) float64 { return 100 * rd.perfCPU }), "perfscope-cpu-%")
	b.ReportMetric(agg(true, func(rd jvmRound) float64 { return 100 * rd.bpfCPU }), "bpf-cpu-%")
	b.ReportMetric(agg(false, func(rd jvmRound) float64 { return 100 * rd.idle }), "idle-%-without")
	b.ReportMetric(agg(false, rss), "rss-MB-without")
	b.ReportMetric(agg(true, rss), "rss-MB-with")
}

// cpuPerRequestUs is the JVM's CPU per request: unlike throughput it
// hardly moves when other work shares the CPUs, so it shows the
// profiler's own cost on a busy machine.
func (rd jvmRound) cpuPerRequestUs() float64 {
	if rd.load.RPS == 0 {
		return 0
	}
	return rd.jvmCPU / rd.load.RPS * 1e6
}

func (rd jvmRound) attachNote() string {
	if !rd.with {
		return ""
	}
	return fmt.Sprintf(" attach %.0f ms, %.1f KiB/request, passive count %d of %d, its BPF %.2f%% of a CPU", rd.attachMs, rd.allocPerReq/1024, rd.passive, rd.load.Completed, 100*rd.bpfCPU)
}

// jvmLoadRound drives one window at rate; with perfscope, the profiler is
// running before the first request and stopped after the last.
func jvmLoadRound(b *testing.B, bin string, app *benchApp, cfg jvmBenchConfig, rate float64, with bool) jvmRound {
	b.Helper()
	rd := jvmRound{with: with}
	var perf *exec.Cmd
	var perfOut, perfErr bytes.Buffer
	if with {
		// The window is ended with SIGINT once the load is done; the
		// duration is only a bound.
		args := append([]string{"jvm", "--pid", strconv.Itoa(app.PID), "--duration", (3*cfg.window + 30*time.Second).String(), "-o", "json"}, cfg.args...)
		perf = exec.Command(bin, args...)
		perf.Stdout, perf.Stderr = &perfOut, &perfErr
		if err := perf.Start(); err != nil {
			b.Fatal(err)
		}
		if err := waitProfilerRunning(app.PID, perf, 30*time.Second); err != nil {
			perf.Process.Kill()
			perf.Wait()
			b.Fatalf("%v: %s", err, perfErr.String())
		}
	}
	// Let the attach's own work (listener start, library load, VM.flags)
	// finish before the window: the window measures steady overhead.
	time.Sleep(500 * time.Millisecond)
	spec := httpload.Spec{URL: app.URL(cfg.path), Requests: int(rate * cfg.window.Seconds()), Concurrency: 32, Rate: rate}
	if rate == 0 {
		spec.Requests, spec.Concurrency = cfg.maxRequests, maxConcurrency
	}
	jvm0, _ := procCPU(app.PID)
	var perf0 time.Duration
	if perf != nil {
		perf0, _ = procCPU(perf.Process.Pid)
	}
	idle0, total0 := machineIdle()
	t0 := time.Now()
	res, err := httpload.Run(context.Background(), spec)
	elapsed := time.Since(t0)
	jvm1, _ := procCPU(app.PID)
	idle1, total1 := machineIdle()
	if perf != nil {
		perf1, _ := procCPU(perf.Process.Pid)
		rd.perfCPU = float64(perf1-perf0) / float64(elapsed)
	}
	rd.rssMB = procRSSMB(app.PID)
	if err != nil || res.Failures > 0 || res.Non2xx > 0 {
		if perf != nil {
			perf.Process.Signal(syscall.SIGINT)
			perf.Wait()
		}
		b.Fatalf("load at %s req/s: %v, %d failures, %d non-2xx (%s)", rateName(rate), err, res.Failures, res.Non2xx, res.FirstError)
	}
	rd.load = res
	rd.jvmCPU = float64(jvm1-jvm0) / float64(elapsed)
	if total1 > total0 {
		rd.idle = float64(idle1-idle0) / float64(total1-total0)
	}
	if perf != nil {
		perf.Process.Signal(syscall.SIGINT)
		if err := perf.Wait(); err != nil {
			b.Fatalf("perfscope jvm: %v: %s", err, perfErr.String())
		}
		var rep struct {
			Overhead struct {
				AttachNs int64 `json:"attach_ns"`
				Programs []struct {
					RunCount  uint64 `json:"run_count"`
					RunTimeNs uint64 `json:"run_time_ns"`
				} `json:"programs"`
			} `json:"overhead"`
			Data struct {
				AllocBytesProfiler int64  `json:"alloc_bytes_profiler"`
				WindowNs           int64  `json:"window_ns"`
				Requests           *int64 `json:"requests"`
				RequestsSource     string `json:"requests_source"`
			} `json:"data"`
		}
		if err := json.Unmarshal(perfOut.Bytes(), &rep); err != nil {
			b.Fatalf("perfscope jvm report: %v: %s", err, perfOut.String())
		}
		// The profiler must have run over the whole load.
		if time.Duration(rep.Data.WindowNs) < elapsed {
			b.Fatalf("perfscope's window %v is shorter than the load's %v", time.Duration(rep.Data.WindowNs), elapsed)
		}
		rd.attachMs = float64(rep.Overhead.AttachNs) / 1e6
		rd.allocPerReq = float64(rep.Data.AllocBytesProfiler) / float64(res.Completed)
		for _, p := range rep.Overhead.Programs {
			rd.bpfCPU += float64(p.RunTimeNs) / float64(rep.Data.WindowNs)
		}
		if rep.Data.Requests != nil {
			rd.passive = *rep.Data.Requests
		}
	}
	return rd
}

// waitProfilerRunning waits for async-profiler's log file, which perfscope
// names in the start command: it exists once the profiler runs.
func waitProfilerRunning(pid int, perf *exec.Cmd, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		logs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/root/tmp/.perfscope-asprof-*/*.log", pid))
		if len(logs) > 0 {
			return nil
		}
		if err := unix.Kill(perf.Process.Pid, 0); err != nil || time.Now().After(deadline) {
			return fmt.Errorf("perfscope jvm did not start the profiler within %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procCPU is a process's user+system CPU time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// comm (field 2) may hold spaces; fields after its ')' are fixed.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	// USER_HZ is 100 on every Linux ABI Go supports.
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// machineIdle returns idle+iowait and total jiffies over all CPUs.
func machineIdle() (idle, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseUint(f, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total
}

func procRSSMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// benchLock takes the machine-wide benchmark lock, so two throughput
// benchmarks never share the two CPUs.
func benchLock(b *testing.B) func() {
	f, err := os.OpenFile("/tmp/perfscope-bench.lock", os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		b.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b.Log("waiting for /tmp/perfscope-bench.lock (another benchmark is measuring)…")
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			b.Fatal(err)
		}
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }
}

// profilerInactive asks async-profiler inside the JVM for its status
// through the attach protocol: after the last round it must say it is not
// active. The library stays mapped (a JVMTI agent cannot be unloaded) and
// is addressed by the path it was loaded from, even though perfscope
// deleted the file: the dynamic loader matches an already loaded library
// by name.
func profilerInactive(b *testing.B, pid int) error {
	lib := mappedAsyncProfiler(pid)
	if lib == "" {
		return fmt.Errorf("async-profiler was never loaded into pid %d: the with rounds did not attach", pid)
	}
	t, err := attach.Preflight(hsperf.Default, pid)
	if err != nil {
		return err
	}
	out := filepath.Join(b.TempDir(), "status")
	if _, err := t.Load(context.Background(), lib, "status,file="+out); err != nil {
		return fmt.Errorf("async-profiler status: %w", err)
	}
	status, err := os.ReadFile(out)
	if err != nil {
		return fmt.Errorf("async-profiler status: %w", err)
	}
	if !strings.Contains(string(status), "not active") {
		return fmt.Errorf("async-profiler still runs in pid %d after perfscope exited: %s", pid, strings.TrimSpace(string(status)))
	}
	progress("after the last round async-profiler says: %s", strings.TrimSpace(string(status)))
	return nil
}

// mappedAsyncProfiler is the path async-profiler was loaded from, from
// the JVM's maps (where a deleted file is marked " (deleted)").
func mappedAsyncProfiler(pid int) string {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(maps), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && strings.HasSuffix(f[5], "/libasyncProfiler.so") {
			return f[5]
		}
	}
	return ""
}

// stopAndCheckClean stops the JVM and checks it left nothing behind:
// perfscope's scratch directory, the attach socket and trigger, and the
// hsperfdata file.
func stopAndCheckClean(b *testing.B, app benchApp, pid int) {
	leftovers, _ := filepath.Glob("/tmp/.perfscope-asprof-*")
	app.Stop()
	for _, p := range []string{fmt.Sprintf("/tmp/.java_pid%d", pid), fmt.Sprintf("/tmp/.attach_pid%d", pid)} {
		if _, err := os.Stat(p); err == nil {
			leftovers = append(leftovers, p)
		}
	}
	hs, _ := filepath.Glob(fmt.Sprintf("/tmp/hsperfdata_*/%d", pid))
	leftovers = append(leftovers, hs...)
	if len(leftovers) > 0 {
		b.Errorf("left behind after the benchmark: %v", leftovers)
	}
}
