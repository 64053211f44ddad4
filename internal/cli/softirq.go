package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

type softirqOptions struct {
	Duration time.Duration
	Interval time.Duration
	CPUs     string
	Output   string
	Method   string

	format report.Format
	cpus   cpuset.Set
	method probes.AttachMethod
	fs     procfs.FS
	// run is the measurement; tests replace it to check flag handling.
	run func(ctx context.Context, o *softirqOptions, g *Globals) error
}

func newSoftirqCmd(g *Globals) *cobra.Command {
	return softirqCmd(g, &softirqOptions{fs: procfs.Default, run: runSoftirq})
}

// softirqCmd binds flags to o; tests pass options with a fake run.
func softirqCmd(g *Globals, o *softirqOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "softirq",
		Short: "Softirq count, time and raise→run latency per CPU, checked against /proc/softirqs",
		Long: `softirq attaches to irq:softirq_raise/entry/exit and measures, per CPU and
vector, how often softirqs ran and for how long, with a bar of NET_RX and NET_TX
share per CPU and the raise→entry latency histograms of NET_RX and NET_TX.
The same counts read from /proc/softirqs over the same window are printed
beside the probe's, so the numbers can be trusted.

With --interval a line per interval is printed while it runs, like mpstat.`,
		Example: `  perfscope softirq
  perfscope softirq --duration 10s --interval 1s --cpus 0-3
  perfscope softirq -o json | jq '.data.cpus[] | {cpu, share}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.DurationVarP(&o.Duration, "duration", "d", 5*time.Second, "how long to measure")
	f.DurationVarP(&o.Interval, "interval", "i", 0, "print a summary line every interval while measuring (e.g. 1s)")
	f.StringVar(&o.CPUs, "cpus", "", "only these CPUs, as a list like 0-3,8")
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.Method, "attach-method", "", "force tp_btf, raw_tp or tracepoint (default: the best the kernel accepts)")
	return cmd
}

func (o *softirqOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat(o.Output); err != nil {
		return asUsage(err)
	}
	if o.Duration <= 0 {
		return usageError("--duration must be positive, got %v", o.Duration)
	}
	if o.Interval < 0 || o.Interval > o.Duration {
		return usageError("--interval must be between 0 and --duration (%v), got %v", o.Duration, o.Interval)
	}
	if o.method, err = probes.ParseMethod(o.Method); err != nil {
		return asUsage(err)
	}
	if o.CPUs != "" {
		if o.cpus, err = cpuset.ParseList(o.CPUs); err != nil {
			return usageError("--cpus %q: %v", o.CPUs, err)
		}
		online, err := o.fs.Softirqs()
		if err != nil {
			return fmt.Errorf("read /proc/softirqs: %w", err)
		}
		for _, c := range o.cpus.CPUs() {
			if _, ok := online.ByCPU("NET_RX", c); !ok {
				return usageError("--cpus: CPU %d is not online (online: %s)", c, cpuset.Of(online.CPUs...).List())
			}
		}
	}
	return nil
}

// softirqSample is one reading of the probe and of /proc together.
type softirqSample struct {
	probe softirq.Snapshot
	proc  procfs.Softirqs
	stat  procfs.Stat
}

func takeSoftirqSample(p *softirq.Probe, fs procfs.FS) (softirqSample, error) {
	var s softirqSample
	var err error
	// Probe first, /proc right after: the two windows then differ only by
	// the few microseconds between the reads.
	if s.probe, err = p.Snapshot(); err != nil {
		return s, err
	}
	if s.proc, err = fs.Softirqs(); err != nil {
		return s, fmt.Errorf("read /proc/softirqs: %w", err)
	}
	if s.stat, err = fs.Stat(); err != nil {
		return s, fmt.Errorf("read /proc/stat: %w", err)
	}
	return s, nil
}

func softirqInput(a, b softirqSample, cpus cpuset.Set) recipes.SoftirqInput {
	d := b.probe.Sub(a.probe)
	in := recipes.SoftirqInput{
		Duration: b.probe.Taken.Sub(a.probe.Taken),
		Vectors:  softirq.Vectors,
		Proc:     b.proc.Sub(a.proc),
		Stat:     b.stat.Sub(a.stat),
		CPUs:     cpus,
	}
	for _, cpu := range d.PerCPU {
		row := make([]recipes.SoftirqCounts, len(cpu))
		for i, v := range cpu {
			row[i] = recipes.SoftirqCounts{Count: v.Count, TimeNs: uint64(v.Time)}
		}
		in.Probe = append(in.Probe, row)
	}
	in.NetRXLatency, in.NetTXLatency = d.NetRXLatency, d.NetTXLatency
	return in
}

func runSoftirq(ctx context.Context, o *softirqOptions, g *Globals) error {
	p, err := softirq.Open(softirq.Options{Method: o.method})
	if err != nil {
		return err
	}
	defer p.Close()
	attached := time.Since(g.Started)

	stats, statsErr := probes.EnableStats()
	if statsErr == nil {
		defer stats.Close()
	}

	first, err := takeSoftirqSample(p, o.fs)
	if err != nil {
		return err
	}
	ev, err := measureSoftirq(ctx, o, g, p, first)
	if err != nil {
		return err
	}

	r := report.New("softirq", Version(), first.probe.Taken)
	r.Meta.DurationNs = ev.DurationNs
	r.Data = ev
	r.Overhead = softirqOverhead(p, attached, time.Duration(ev.DurationNs), len(ev.CPUs))
	if o.format == report.JSON {
		return report.WriteJSON(g.Out, r)
	}
	writeSoftirqText(g.Out, r, ev, statsErr)
	return nil
}

// measureSoftirq waits for the duration (or Ctrl-C), printing interval
// lines and TTY progress, and returns the evidence of the whole window.
func measureSoftirq(ctx context.Context, o *softirqOptions, g *Globals, p *softirq.Probe, first softirqSample) (evidence.SoftirqEvidence, error) {
	deadline := time.NewTimer(o.Duration)
	defer deadline.Stop()
	tick := o.Interval
	progress := newProgress(g.Err, o.Duration)
	if tick == 0 && progress.enabled {
		tick = time.Second
	}
	var ticks <-chan time.Time
	if tick > 0 {
		t := time.NewTicker(tick)
		defer t.Stop()
		ticks = t.C
	}
	var intervals []evidence.SoftirqInterval
	prev := first
	textIntervals := o.Interval > 0 && o.format == report.Text
	if textIntervals {
		fmt.Fprintf(g.Out, "%-8s  %10s  %10s  %8s  %8s  %s\n", "TIME", "NET_RX/s", "NET_TX/s", "%NET_RX", "%NET_TX", "busiest CPU (%softirq)")
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop // Ctrl-C: report what was measured so far
		case <-deadline.C:
			break loop
		case now := <-ticks:
			cur, err := takeSoftirqSample(p, o.fs)
			if err != nil {
				return evidence.SoftirqEvidence{}, err
			}
			iv := recipes.SoftirqIntervalOf(softirqInput(prev, cur, o.cpus), now)
			if o.Interval > 0 {
				intervals = append(intervals, iv)
				if textIntervals {
					progress.clear()
					fmt.Fprintf(g.Out, "%-8s  %10s  %10s  %8s  %8s  cpu%d (%s)\n", now.Format("15:04:05"),
						report.Count(iv.NetRXPerS), report.Count(iv.NetTXPerS),
						report.Percent(iv.NetRXShare), report.Percent(iv.NetTXShare), iv.BusiestCPU, report.Percent(iv.BusiestShare))
				}
			}
			progress.update(now, iv.NetRXPerS)
			prev = cur
		}
	}
	progress.clear()
	last, err := takeSoftirqSample(p, o.fs)
	if err != nil {
		return evidence.SoftirqEvidence{}, err
	}
	ev := recipes.BuildSoftirq(softirqInput(first, last, o.cpus))
	ev.Intervals = intervals
	return ev, nil
}

func softirqOverhead(p *softirq.Probe, attached, window time.Duration, cpus int) *evidence.Overhead {
	ov := &evidence.Overhead{AttachMethod: string(p.Method()), AttachNs: int64(attached)}
	var total time.Duration
	for _, c := range p.Costs() {
		ov.Programs = append(ov.Programs, evidence.NewProgramCost(c.Program, c.RunCount, c.RunTime))
		total += c.RunTime
	}
	if window > 0 && cpus > 0 {
		ov.BPFTimeShare = float64(total) / (float64(window) * float64(cpus))
	}
	return ov
}

func writeSoftirqText(w io.Writer, r *report.Report, ev evidence.SoftirqEvidence, statsErr error) {
	secs := time.Duration(ev.DurationNs).Seconds()
	fmt.Fprintf(w, "perfscope softirq — %.2fs on %d CPUs, kernel %s; probes attached with %s in %s\n",
		secs, len(ev.CPUs), r.Meta.Kernel, r.Overhead.AttachMethod, report.Nanos(float64(r.Overhead.AttachNs)))

	report.Heading(w, "NET_RX and NET_TX per CPU (share = time in the softirq / wall time)")
	t := report.Table{Header: []string{"CPU", "NET_RX/s", "time", "share", "NET_RX", "NET_TX/s", "time", "share", "NET_TX", "all softirq", "/proc/stat soft"}}
	for _, c := range ev.CPUs {
		rx, tx := c.Vectors["NET_RX"], c.Vectors["NET_TX"]
		t.Add(fmt.Sprint(c.CPU),
			report.Count(float64(rx.Count)/secs), report.Nanos(float64(rx.TimeNs)), report.Percent(rx.Share), report.Bar(rx.Share, 12),
			report.Count(float64(tx.Count)/secs), report.Nanos(float64(tx.TimeNs)), report.Percent(tx.Share), report.Bar(tx.Share, 12),
			report.Percent(c.Share), report.Percent(c.ProcStatShare))
	}
	t.Write(w)

	report.Heading(w, "Softirqs per vector: probe vs /proc/softirqs over the same window")
	vt := report.Table{Header: []string{"vector", "probe", "/proc/softirqs", "diff", "time", "mean"}}
	for _, a := range ev.Totals {
		if a.Probe == 0 && a.ProcCount == 0 {
			continue
		}
		mean := "-"
		if a.Probe > 0 {
			mean = report.Nanos(float64(a.TimeNs) / float64(a.Probe))
		}
		vt.Add(a.Vector, fmt.Sprint(a.Probe), fmt.Sprint(a.ProcCount), fmt.Sprintf("%+.2f%%", a.Diff*100), report.Nanos(float64(a.TimeNs)), mean)
	}
	vt.Write(w)

	for _, h := range ev.Latency {
		report.Heading(w, fmt.Sprintf("%s raise → entry latency: %d runs, p50 %s, p99 %s", h.Vector, h.Count, report.Nanos(h.P50Ns), report.Nanos(h.P99Ns)))
		writeHistogram(w, h)
	}

	report.Heading(w, "perfscope's own cost")
	if statsErr != nil {
		fmt.Fprintf(w, "bpf_stats unavailable: %v\n", statsErr)
	}
	ot := report.Table{Header: []string{"program", "runs", "total", "per run"}}
	for _, p := range r.Overhead.Programs {
		ot.Add(p.Program, fmt.Sprint(p.RunCount), report.Nanos(float64(p.RunTimeNs)), report.Nanos(p.PerRunNs))
	}
	ot.Write(w)
	fmt.Fprintf(w, "BPF time: %s of all CPU time\n", report.Percent(r.Overhead.BPFTimeShare))
}

// writeHistogram prints non-empty buckets like bcc's log2 histograms.
func writeHistogram(w io.Writer, h evidence.LatencyHistogram) {
	if h.Count == 0 {
		fmt.Fprintln(w, "no events")
		return
	}
	first, last := -1, -1
	var max uint64
	for i, b := range h.Buckets {
		if b.Count > 0 {
			if first < 0 {
				first = i
			}
			last = i
			if b.Count > max {
				max = b.Count
			}
		}
	}
	for _, b := range h.Buckets[first : last+1] {
		fmt.Fprintf(w, "%10s → %-10s %10d |%s|\n", report.Nanos(float64(b.LowNs)), report.Nanos(float64(b.HighNs)), b.Count,
			report.Bar(float64(b.Count)/float64(max), 30))
	}
}

// progress draws "time left, events/s" on a terminal's stderr and nothing
// when stderr is a pipe or file.
type progress struct {
	w       io.Writer
	enabled bool
	end     time.Time
	drawn   bool
}

func newProgress(w io.Writer, d time.Duration) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, enabled: ok && isTerminal(f), end: time.Now().Add(d)}
}

func (p *progress) update(now time.Time, ratePerS float64) {
	if !p.enabled {
		return
	}
	left := p.end.Sub(now).Round(time.Second)
	fmt.Fprintf(p.w, "\r\033[K%v left, %s NET_RX/s", left, report.Count(ratePerS))
	p.drawn = true
}

func (p *progress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}
