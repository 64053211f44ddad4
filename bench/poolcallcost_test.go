package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

// poolLoopSource is the program BenchmarkPoolCallCost measures: on one
// goroutine locked to its thread, it runs a tight loop of sync.Pool Get+Put
// (4 KiB buffers, always a hit) or of plain 4 KiB allocations for as many
// milliseconds as each line on stdin asks ("pool 50", "alloc 50"), and
// answers each with the loop count, the thread's CPU time, the process's
// CPU time and the wall time, in nanoseconds. The call of runtime.MemProfile
// (never made) keeps the runtime's allocation sampling on, as in any
// program that can serve a profile.
const poolLoopSource = `package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const size = 4096

var pool = sync.Pool{New: func() any { return new([size]byte) }}

var sink *[size]byte

func threadCPU() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func poolLoop(n int) {
	for i := 0; i < n; i++ {
		p := pool.Get().(*[size]byte)
		p[0]++
		pool.Put(p)
	}
}

func allocLoop(n int) {
	for i := 0; i < n; i++ {
		sink = new([size]byte)
	}
}

func main() {
	if len(os.Args) > 99 {
		runtime.MemProfile(nil, false)
	}
	runtime.LockOSThread()
	sc := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		ms, _ := strconv.Atoi(f[1])
		loop := poolLoop
		if f[0] == "alloc" {
			loop = allocLoop
		}
		end := time.Now().Add(time.Duration(ms) * time.Millisecond)
		n := 0
		t0, p0, w0 := threadCPU(), processCPU(), time.Now()
		for time.Now().Before(end) {
			loop(256)
			n += 256
		}
		fmt.Println(n, threadCPU()-t0, processCPU()-p0, time.Since(w0).Nanoseconds())
	}
}
`

// poolLoop is the running loop program.
type poolLoop struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// poolBatch is one batch's loops and times (ns).
type poolBatch struct {
	n                       int
	thread, process, wallNs float64
}

func (l *poolLoop) run(b *testing.B, kind string, ms int) poolBatch {
	b.Helper()
	fmt.Fprintf(l.in, "%s %d\n", kind, ms)
	if !l.out.Scan() {
		b.Fatalf("loop program: no answer: %v", l.out.Err())
	}
	var r poolBatch
	if _, err := fmt.Sscan(l.out.Text(), &r.n, &r.thread, &r.process, &r.wallNs); err != nil {
		b.Fatalf("loop program: %q: %v", l.out.Text(), err)
	}
	return r
}

// poolSpan is one configuration's batches over one span: the pool loop's
// and the allocation loop's, alternating.
type poolSpan struct {
	pool, alloc []poolBatch
	report      *poolReport
}

// poolReport is what `perfscope go -o json` said of its pool hooks.
type poolReport struct {
	Data struct {
		Pools []struct {
			Name string  `json:"name"`
			Gets float64 `json:"gets"`
			Puts float64 `json:"puts"`
		} `json:"pools"`
		PoolSampling *struct {
			Mode          string  `json:"mode"`
			OnFraction    float64 `json:"on_fraction"`
			Periods       int     `json:"periods"`
			CostShare     float64 `json:"cost_share"`
			CostPerCallNs float64 `json:"cost_per_call_ns"`
			Note          string  `json:"note"`
		} `json:"pool_sampling"`
		Sampling struct {
			RateSource string `json:"rate_source"`
		} `json:"sampling"`
	} `json:"data"`
	Overhead struct {
		AttachNs int64 `json:"attach_ns"`
		Programs []struct {
			Name     string  `json:"program"`
			RunCount uint64  `json:"run_count"`
			PerRunNs float64 `json:"per_run_ns"`
		} `json:"programs"`
	} `json:"overhead"`
}

// perLoop is ns per loop, thread CPU, over the batches from skip on.
func perLoop(bs []poolBatch, skip int) float64 {
	var n, t float64
	for i, x := range bs {
		if i < skip {
			continue
		}
		n += float64(x.n)
		t += x.thread
	}
	if n == 0 {
		return 0
	}
	return t / n
}

// perLoopProcess is ns per loop, the whole process's CPU (the allocation
// loop's GC runs on other threads).
func perLoopProcess(bs []poolBatch) float64 {
	var n, t float64
	for _, x := range bs {
		n += float64(x.n)
		t += x.process
	}
	if n == 0 {
		return 0
	}
	return t / n
}

// BenchmarkPoolCallCost is what `perfscope go --pid`'s sync.Pool hooks cost
// per call, measured where nothing else moves: a small Go program (built
// here with the go on PATH, not stripped) runs, on one goroutine locked to
// its thread, a tight loop of sync.Pool Get+Put of a 4 KiB buffer (always a
// hit: no New) alternating in 50 ms batches with a loop of plain 4 KiB
// allocations, and reports each batch's thread CPU time. Spans of
// PERFSCOPE_POOL_BENCH_SPAN (default 4s) rotate, round after round, what
// runs beside it:
//
//   - none;
//   - perfscope: `perfscope go --pid PID -d (span+4s) -o json`, the real
//     binary built from the tree, default settings (pool hooks under the
//     cost guard); the span starts 2.5 s after it, once attached;
//   - perfscope-no-pools: the same with --no-pools;
//   - perfscope-exact-pools: the same with --exact-pools (the pool hooks
//     attached the whole window): the loop's extra CPU per Get+Put over
//     none is two hook hits, set against what the guard's model charged
//     per hit in the same run (pool_sampling.cost_per_call_ns: the
//     programs' self-timed run plus the uprobe trap it timed).
//
// With the defaults the guard sees the loop's hooks cost far over its
// budget: it keeps them on for its first 200 ms, then for 20 ms every few
// seconds, so the span's mean is reported whole and without its first
// second (the guard's reaction).
//
//	go test -run '^$' -bench PoolCallCost -benchtime 1x -timeout 15m -v ./bench/
//
// (the benchmark takes the root tests' lock itself, testutil.LockBPF:
// wrapped in flock(1) on that lock it would wait on itself).
// PERFSCOPE_POOL_BENCH_ROUNDS (default 3) sizes it; PERFSCOPE_POOL_BENCH_CONFIGS=perfscope runs that
// configuration (and none) only; PERFSCOPE_POOL_BENCH_SERIES=1 logs each
// span's pool batches one by one (when the hooks were on).
//
// With the defaults it also sets how many times the pool hooks ran (their
// programs' own count) against the calls the guard counted and charged:
// closing a hook's uprobe takes ~70–140 ms here; closed one after the
// other, the hooks fired through each other's closes, uncounted (3.6–29×).
// Closed together, and counted until the detach returns, they are 1.0×.
func BenchmarkPoolCallCost(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	bin := buildBinary(b)
	dir := b.TempDir()
	for name, src := range map[string]string{
		"go.mod":  "module poolloop\n\ngo 1.19\n",
		"main.go": poolLoopSource,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	prog := filepath.Join(dir, "poolloop")
	build := exec.Command("go", "build", "-o", prog, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the loop program: %v\n%s", err, out)
	}
	cmd := exec.Command(prog)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	loop := &poolLoop{cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	defer func() {
		in.Close()
		cmd.Wait()
	}()
	if !loop.out.Scan() || loop.out.Text() != "ready" {
		b.Fatalf("loop program did not start: %q", loop.out.Text())
	}
	// Warm up (the pool's first New, the heap's growth).
	for i := 0; i < 10; i++ {
		loop.run(b, "pool", 20)
		loop.run(b, "alloc", 20)
	}

	rounds := envInt(b, "PERFSCOPE_POOL_BENCH_ROUNDS", 3)
	span := 4 * time.Second
	if s := os.Getenv("PERFSCOPE_POOL_BENCH_SPAN"); s != "" {
		if span, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	const batchMs = 50
	configs := []struct {
		name  string
		extra []string // nil: no tracer
	}{
		{"none", nil},
		{"perfscope", []string{}},
		{"perfscope-no-pools", []string{"--no-pools"}},
		{"perfscope-exact-pools", []string{"--exact-pools"}},
	}
	runSpan := func(extra []string) poolSpan {
		var s poolSpan
		var cmd *exec.Cmd
		var out strings.Builder
		if extra != nil {
			args := append([]string{"go", "--pid", strconv.Itoa(loop.cmd.Process.Pid), "-d", (span + 4*time.Second).String(), "-o", "json"}, extra...)
			cmd = exec.Command(bin, args...)
			cmd.Stdout = &out
			cmd.Stderr = io.Discard
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			time.Sleep(2500 * time.Millisecond)
		}
		for start := time.Now(); time.Since(start) < span; {
			s.pool = append(s.pool, loop.run(b, "pool", batchMs))
			s.alloc = append(s.alloc, loop.run(b, "alloc", batchMs))
		}
		if cmd != nil {
			if err := cmd.Wait(); err != nil {
				b.Fatalf("perfscope %v: %v\n%s", cmd.Args, err, out.String())
			}
			s.report = &poolReport{}
			if err := json.Unmarshal([]byte(out.String()), s.report); err != nil {
				b.Fatalf("perfscope's JSON: %v\n%s", err, out.String())
			}
			if s.report.Overhead.AttachNs > int64(2500*time.Millisecond) {
				b.Logf("perfscope %v attached after %.0f ms: AFTER the span started", extra, float64(s.report.Overhead.AttachNs)/1e6)
			}
		}
		return s
	}

	load0, _ := os.ReadFile("/proc/loadavg")
	b.Logf("load average at the start %s", strings.TrimSpace(string(load0)))
	spans := map[string][]poolSpan{}
	skip := int(time.Second / (2 * batchMs * time.Millisecond)) // batches in the first second
	only := os.Getenv("PERFSCOPE_POOL_BENCH_CONFIGS")           // comma-separated names; all when empty
	for r := 0; r < rounds; r++ {
		for i := range configs {
			c := configs[(i+r)%len(configs)]
			if only != "" && c.name != "none" && !strings.Contains(","+only+",", ","+c.name+",") {
				continue
			}
			s := runSpan(c.extra)
			spans[c.name] = append(spans[c.name], s)
			note := ""
			if rep := s.report; rep != nil {
				note = fmt.Sprintf("attach %.0f ms; rate from %s", float64(rep.Overhead.AttachNs)/1e6, rep.Data.Sampling.RateSource)
				if p := rep.Data.PoolSampling; p != nil {
					note += fmt.Sprintf("; pools %s, attached %.2f %% of the window in %d stretch(es), cost %.1f %% while attached, %.0f ns a call (model); %s",
						p.Mode, 100*p.OnFraction, p.Periods, 100*p.CostShare, p.CostPerCallNs, p.Note)
				}
				for _, pl := range rep.Data.Pools {
					if pl.Name == "main.pool" {
						note += fmt.Sprintf("; main.pool %.0f Gets, %.0f Puts", pl.Gets, pl.Puts)
					}
				}
				for _, pr := range rep.Overhead.Programs {
					note += fmt.Sprintf("; %s %d runs %.0f ns self-timed", pr.Name, pr.RunCount, pr.PerRunNs)
				}
			}
			var pairs int
			var series []string
			for _, x := range s.pool {
				pairs += x.n
				series = append(series, fmt.Sprintf("%.1f", x.thread/float64(x.n)))
			}
			if os.Getenv("PERFSCOPE_POOL_BENCH_SERIES") != "" {
				b.Logf("round %d %s: ns per Get+Put, batch by batch: %s", r+1, c.name, strings.Join(series, " "))
			}
			b.Logf("round %d %-22s pool Get+Put %7.1f ns (after 1 s %7.1f; %d pairs), alloc 4 KiB %6.1f ns thread, %6.1f ns process  %s",
				r+1, c.name, perLoop(s.pool, 0), perLoop(s.pool, skip), pairs, perLoop(s.alloc, 0), perLoopProcess(s.alloc), note)
		}
	}

	// Medians over the rounds, and per round against none.
	none := spans["none"]
	results := map[string]float64{}
	for _, c := range configs {
		var pool, poolLate, alloc, allocProc, dPool, dPoolLate, dAlloc []float64
		for r, s := range spans[c.name] {
			pool = append(pool, perLoop(s.pool, 0))
			poolLate = append(poolLate, perLoop(s.pool, skip))
			alloc = append(alloc, perLoop(s.alloc, 0))
			allocProc = append(allocProc, perLoopProcess(s.alloc))
			dPool = append(dPool, perLoop(s.pool, 0)-perLoop(none[r].pool, 0))
			dPoolLate = append(dPoolLate, perLoop(s.pool, skip)-perLoop(none[r].pool, skip))
			dAlloc = append(dAlloc, perLoop(s.alloc, 0)-perLoop(none[r].alloc, 0))
		}
		base := median(func() []float64 {
			var v []float64
			for _, s := range none {
				v = append(v, perLoop(s.pool, 0))
			}
			return v
		}())
		b.Logf("%-22s median of %d: Get+Put %8.1f ns (%+8.1f ns, %+7.1f %%; after the first second %8.1f ns, %+8.1f ns), alloc 4 KiB %6.1f ns thread (%+6.1f ns), %6.1f ns process",
			c.name, rounds, median(pool), median(dPool), 100*median(dPool)/base, median(poolLate), median(dPoolLate), median(alloc), median(dAlloc), median(allocProc))
		results[c.name] = median(dPool)
		if c.name != "none" {
			b.ReportMetric(median(dPool), c.name+"-ns/pair-added")
		} else {
			b.ReportMetric(median(pool), "none-ns/pair")
			b.ReportMetric(median(alloc), "none-ns/alloc")
		}
	}

	// The exact-pools spans: the measured cost of a hit against the
	// guard's model of it in the same run.
	trapRe := regexp.MustCompile(`([0-9.]+) µs stepped out of line, ([0-9.]+) µs emulated`)
	var modelNs, measuredNs []float64
	for r, s := range spans["perfscope-exact-pools"] {
		p := s.report.Data.PoolSampling
		if p == nil {
			continue
		}
		perHit := (perLoop(s.pool, 0) - perLoop(none[r].pool, 0)) / 2
		modelNs = append(modelNs, p.CostPerCallNs)
		measuredNs = append(measuredNs, perHit)
		trap := ""
		if m := trapRe.FindStringSubmatch(p.Note); m != nil {
			trap = fmt.Sprintf(" (traps timed by perfscope: %s µs stepped, %s µs emulated)", m[1], m[2])
		}
		// The guard's share is over the whole program's CPU: the pool
		// batches' thread and the allocation batches' with their GC.
		var pairs, cpu float64
		for _, x := range s.pool {
			pairs += float64(x.n)
			cpu += x.process
		}
		for _, x := range s.alloc {
			cpu += x.process
		}
		b.Logf("round %d: a pool hook's hit measured %.0f ns on the loop's thread; the guard's model %.0f ns%s; the hooks' share of the program's CPU over the span measured %.1f %%, the guard said %.1f %%",
			r+1, perHit, p.CostPerCallNs, trap, 100*2*perHit*pairs/cpu, 100*p.CostShare)
	}
	if len(modelNs) > 0 {
		ratio := median(measuredNs) / median(modelNs)
		b.Logf("a hook's hit: measured %.0f ns (median), the guard's model %.0f ns: the model is %.2f× the measured cost", median(measuredNs), median(modelNs), 1/ratio)
		b.ReportMetric(median(measuredNs), "ns/hit-measured")
		b.ReportMetric(median(modelNs), "ns/hit-model")
	}
	// The defaults: how often the hooks really ran (the programs' own
	// count) against the calls the guard counted and charged.
	for r, s := range spans["perfscope"] {
		p := s.report.Data.PoolSampling
		if p == nil {
			continue
		}
		var runs uint64
		for _, pr := range s.report.Overhead.Programs {
			if strings.HasPrefix(pr.Name, "uprobe:sync.(*Pool).") {
				runs += pr.RunCount
			}
		}
		var calls float64
		if m := regexp.MustCompile(`\((\d+) calls,`).FindStringSubmatch(p.Note); m != nil {
			calls, _ = strconv.ParseFloat(m[1], 64)
		}
		b.Logf("round %d defaults: the pool hooks ran %d times (their programs' count), the guard counted %.0f calls (%.1f×); planned on %.2f %% of the window",
			r+1, runs, calls, float64(runs)/calls, 100*p.OnFraction)
	}
	load1, _ := os.ReadFile("/proc/loadavg")
	b.Logf("load average at the end %s", strings.TrimSpace(string(load1)))
}
