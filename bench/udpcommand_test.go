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
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/probes"
)

// tracer is what runs beside a loopback flood in one round of
// BenchmarkUDPCommandOverhead.
type tracer string

const (
	tracerNone      tracer = "none"
	tracerPerfscope tracer = "perfscope"
	tracerBpftrace  tracer = "bpftrace"
	// Empty tp_btf programs on the tracepoints perfscope attaches to: the
	// floor any BPF tool pays there, whatever it does in its programs.
	tracerEmpty tracer = "empty"
)

// floorTracepoints are the tracepoints `perfscope udp --iface lo --port P`
// attaches to on this kernel (its CPU profile is a perf event, not among
// them); reportUDPCommand fails unless perfscope's report names exactly
// these, so the floor keeps matching the command.
var floorTracepoints = []string{
	"softirq_entry", "softirq_exit", // softirq (raise left off in udp)
	"netif_receive_skb", "net_dev_start_xmit", "qdisc_enqueue", "qdisc_dequeue", // netqueue
	"contention_begin", "contention_end", // lockstat
	"kfree_skb",                         // udpdrop (6.12+: kfree_skb names the socket)
	"sock_recv_length", "sk_data_ready", // udpsock
}

// roundResult is one flood under one tracer.
type roundResult struct {
	received float64 // datagrams/s the sink read
	sent     float64 // datagrams/s the senders sent
	// BPF programs' runs and run time over the flood (bpf_stats).
	runs   uint64
	runNs  uint64
	rssKiB int64 // peak RSS of the perfscope process
	costs  []evidence.ProgramCost
}

// BenchmarkUDPCommandOverhead measures what the whole `perfscope udp` costs
// a loopback UDP flood into one Go socket — 2 senders (receiver-bound, the
// senders and the reader share the 2 CPUs, socket locks contended) and 1
// sender (each side has a CPU) — every probe on (softirq, netqueue on lo, lockstat, udpdrop, udpsock on
// the sink's port, the 99 Hz CPU profile), against no tracer and against
// bpftrace running bench/udp.bt (the same tracepoints and comparable maps),
// in one run: each round floods once per tracer, in an order that rotates
// from round to round. It reports the datagrams/s the sink read under each,
// the loss against no tracer, the BPF time per event of each tracer, and
// the peak RSS of the perfscope process.
func BenchmarkUDPCommandOverhead(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	bin := buildBinary(b)
	bt, err := exec.LookPath("bpftrace")
	if err != nil {
		b.Fatalf("bpftrace is needed for the comparison (apt-get install -y bpftrace): %v", err)
	}
	// bpftrace finds tracepoints through tracefs, which it must see in
	// the host's mount namespace (perfscope mounts it only privately):
	// mount it for the benchmark if needed, and unmount it after.
	if _, err := os.Stat("/sys/kernel/tracing/events"); err != nil {
		if err := unix.Mount("nodev", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
			b.Fatalf("mount tracefs for bpftrace: %v", err)
		}
		defer unix.Unmount("/sys/kernel/tracing", 0)
	}
	script := filepath.Join(testutil.RepoRoot(), "bench", "udp.bt")
	for _, senders := range []int{2, 1} {
		b.Run(fmt.Sprintf("%d-senders", senders), func(b *testing.B) { benchUDPCommand(b, bin, bt, script, senders) })
	}
}

func benchUDPCommand(b *testing.B, bin, bt, script string, senders int) {
	const rounds, window = 8, 2 * time.Second
	order := []tracer{tracerNone, tracerPerfscope, tracerBpftrace, tracerEmpty}
	for i := 0; i < b.N; i++ {
		all := map[tracer][]roundResult{}
		for r := 0; r < rounds; r++ {
			for k := range order {
				tr := order[(k+r)%len(order)]
				res, err := floodUnder(tr, bin, bt, script, senders, window)
				if err != nil {
					b.Fatalf("round %d, %s: %v", r, tr, err)
				}
				b.Logf("round %d %-9s received %8.0f/s sent %8.0f/s  BPF %d runs %.0f ns/run  RSS %d KiB",
					r, tr, res.received, res.sent, res.runs, perRun(res.runNs, res.runs), res.rssKiB)
				all[tr] = append(all[tr], res)
			}
		}
		reportUDPCommand(b, all)
	}
}

func perRun(ns, runs uint64) float64 {
	if runs == 0 {
		return 0
	}
	return float64(ns) / float64(runs)
}

func reportUDPCommand(b *testing.B, all map[tracer][]roundResult) {
	mean := func(tr tracer) float64 {
		var sum float64
		for _, r := range all[tr] {
			sum += r.received
		}
		return sum / float64(len(all[tr]))
	}
	base := mean(tracerNone)
	b.ReportMetric(base, "pps-none")
	for _, tr := range []tracer{tracerPerfscope, tracerBpftrace, tracerEmpty} {
		m := mean(tr)
		b.ReportMetric(m, "pps-"+string(tr))
		b.ReportMetric(100*(base-m)/base, "loss-%-"+string(tr))
		// Paired per round, against the no-tracer flood of the same round.
		var losses []float64
		for i, r := range all[tr] {
			losses = append(losses, 100*(1-r.received/all[tracerNone][i].received))
		}
		sort.Float64s(losses)
		b.Logf("%s: loss per round (sorted) %.1f %%", tr, losses)
		var runs, ns uint64
		for _, r := range all[tr] {
			runs += r.runs
			ns += r.runNs
		}
		if tr != tracerEmpty { // its programs run without bpf_stats: nothing to report
			b.ReportMetric(perRun(ns, runs), string(tr)+"-ns/event")
		}
	}
	var rss int64
	perProgram := map[string][2]uint64{}
	for _, r := range all[tracerPerfscope] {
		rss = max(rss, r.rssKiB)
		for _, c := range r.costs {
			v := perProgram[c.Program]
			perProgram[c.Program] = [2]uint64{v[0] + c.RunCount, v[1] + c.RunTimeNs}
		}
	}
	b.ReportMetric(float64(rss)/1024, "peak-RSS-MB")
	var names []string
	for name := range perProgram {
		names = append(names, name)
	}
	sort.Strings(names)
	var attached []string
	for _, name := range names {
		v := perProgram[name]
		b.Logf("perfscope program %-28s %10d runs %8.0f ns/run", name, v[0], perRun(v[1], v[0]))
		if _, tp, ok := strings.Cut(name, ":"); ok {
			attached = append(attached, tp)
		}
	}
	floor := slices.Sorted(slices.Values(floorTracepoints))
	if slices.Sort(attached); !slices.Equal(attached, floor) {
		b.Errorf("perfscope attached to %v, the empty-program floor to %v: update floorTracepoints", attached, floor)
	}
}

// floodUnder runs one loopback flood with tr attached and measures it.
func floodUnder(tr tracer, bin, bt, script string, senders int, window time.Duration) (roundResult, error) {
	var res roundResult
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		return res, err
	}
	defer sink.Close()
	port := fmt.Sprint(sink.AddrPort().Port())

	before, err := programIDs()
	if err != nil {
		return res, err
	}
	var cmd *exec.Cmd
	var out, stderr bytes.Buffer
	switch tr {
	case tracerPerfscope:
		// Longer than the flood: the run is ended with SIGINT right after
		// it, as a user's Ctrl-C, and still reports.
		cmd = exec.Command(bin, "udp", "--iface", "lo", "--port", port, "--duration", "60s", "-o", "json")
	case tracerBpftrace:
		cmd = exec.Command(bt, script, port)
	}
	if cmd != nil {
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Start(); err != nil {
			return res, err
		}
		defer func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}()
		if err := waitAttached(before, 10, 30*time.Second); err != nil {
			return res, fmt.Errorf("%s did not attach: %w\n%s", tr, err, stderr.String())
		}
	}
	if tr == tracerEmpty {
		e, err := probes.AttachEmpty(floorTracepoints)
		if err != nil {
			return res, err
		}
		defer e.Close()
	}
	var stats interface{ Close() error }
	if tr == tracerBpftrace {
		// perfscope enables bpf_stats itself; for bpftrace the benchmark
		// does, to cost its programs the same way.
		if stats, err = probes.EnableStats(); err != nil {
			return res, err
		}
		defer stats.Close()
	}

	floodStart := time.Now()
	got0 := sink.Received()
	sent, err := udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: senders, Duration: window})
	if err != nil {
		return res, err
	}
	res.received = float64(sink.Received()-got0) / sent.Elapsed.Seconds()
	res.sent = float64(sent.Sent) / sent.Elapsed.Seconds()

	switch tr {
	case tracerBpftrace:
		progs, err := probes.LoadedPrograms()
		if err != nil {
			return res, err
		}
		for _, p := range progs {
			if !before[p.ID] {
				res.runs += p.RunCount
				res.runNs += uint64(p.RunTime)
			}
		}
		if err := interrupt(cmd); err != nil {
			return res, fmt.Errorf("bpftrace: %w", err)
		}
	case tracerPerfscope:
		if err := interrupt(cmd); err != nil {
			return res, fmt.Errorf("perfscope: %w\n%s", err, stderr.String())
		}
		var rep struct {
			Meta struct {
				Started time.Time `json:"started"`
			} `json:"meta"`
			Overhead evidence.Overhead `json:"overhead"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			return res, fmt.Errorf("perfscope output: %w\n%s", err, out.String())
		}
		if rep.Meta.Started.After(floodStart) {
			return res, fmt.Errorf("perfscope's window started %v after the flood", rep.Meta.Started.Sub(floodStart))
		}
		res.costs = rep.Overhead.Programs
		for _, c := range rep.Overhead.Programs {
			res.runs += c.RunCount
			res.runNs += c.RunTimeNs
		}
		res.rssKiB = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	}
	return res, nil
}

func programIDs() (map[uint32]bool, error) {
	progs, err := probes.LoadedPrograms()
	if err != nil {
		return nil, err
	}
	ids := map[uint32]bool{}
	for _, p := range progs {
		ids[p.ID] = true
	}
	return ids, nil
}

// waitAttached waits until at least min BPF programs that were not loaded
// before exist and their number has not changed for half a second: the
// tracer has loaded and attached everything.
func waitAttached(before map[uint32]bool, min int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, stableSince := -1, time.Now()
	for time.Now().Before(deadline) {
		ids, err := programIDs()
		if err != nil {
			return err
		}
		n := 0
		for id := range ids {
			if !before[id] {
				n++
			}
		}
		if n != last {
			last, stableSince = n, time.Now()
		} else if n >= min && time.Since(stableSince) >= 500*time.Millisecond {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%d new BPF programs after %v, want at least %d", last, limit, min)
}

// interrupt stops a tracer as Ctrl-C would and waits for it (15 s at most).
func interrupt(cmd *exec.Cmd) error {
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		return fmt.Errorf("did not stop within 15 s of SIGINT: %v", <-done)
	}
}
