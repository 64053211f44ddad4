package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/report"
)

// SoftirqProbe is what the softirq part needs of its probe (a recording
// in tests).
type SoftirqProbe = probes.Snapshotter[softirq.Snapshot]

// SoftirqOptions configure the softirq part.
type SoftirqOptions struct {
	Method probes.AttachMethod
	// CPUs restricts the evidence to these CPUs (empty: every CPU).
	CPUs cpuset.Set
	// NoLatency leaves softirq_raise unattached: no raise→entry histograms,
	// one BPF run less per NET_RX raise (the udp runner needs none).
	NoLatency bool
	// Timeline keeps a summary of every tick of the window
	// (evidence.SoftirqEvidence.Intervals).
	Timeline bool
	// OnInterval, when set, is told each tick's summary as it is taken
	// (interval lines, progress), timeline or not.
	OnInterval func(evidence.SoftirqInterval)
}

// Softirq is the softirq part: the softirq probe's count and time per CPU
// and vector (and NET_RX/NET_TX raise→entry latency), read together with
// /proc/softirqs and /proc/stat so the report can show they agree.
type Softirq struct {
	opts      SoftirqOptions
	proc      procfs.FS
	probe     SoftirqProbe
	first     softirqReading
	prev      softirqReading
	last      softirqReading
	intervals []evidence.SoftirqInterval
	cov       *budget.Coverage
	// netRX is each interval's NET_RX share per CPU, for a timeline that
	// follows the CPUs feeding one socket.
	netRX []map[int]float64
}

// SetCoverage implements Sampled.
func (p *Softirq) SetCoverage(c *budget.Coverage) { p.cov = c }

// NewSoftirq returns the softirq part.
func NewSoftirq(opts SoftirqOptions) *Softirq { return &Softirq{opts: opts} }

// softirqReading is one reading of the probe and of /proc together.
type softirqReading struct {
	probe softirq.Snapshot
	proc  procfs.Softirqs
	stat  procfs.Stat
}

// Open implements Part.
func (p *Softirq) Open(src Sources) error {
	p.proc = src.Root
	probe, err := OpenProbe[SoftirqProbe](src.Probes, &softirq.Spec, softirq.Options{Method: p.opts.Method, NoLatency: p.opts.NoLatency})
	if err != nil {
		return err
	}
	p.probe = probe
	return nil
}

// Probes implements Part.
func (p *Softirq) Probes() []probes.Probe { return probesOf(p.probe) }

// Begin implements Part.
func (p *Softirq) Begin(context.Context) error {
	r, err := p.read()
	p.first, p.prev, p.intervals, p.netRX = r, r, nil, nil
	return err
}

// Tick implements Ticker: one interval's summary.
func (p *Softirq) Tick(_ context.Context, now time.Time) error {
	cur, err := p.read()
	if err != nil {
		return err
	}
	p.interval(cur, now)
	return nil
}

// Tail implements Tailer: the window's last interval, from its last
// reading.
func (p *Softirq) Tail(now time.Time) {
	p.interval(p.last, now)
}

func (p *Softirq) interval(cur softirqReading, now time.Time) {
	k := p.cov.ScaleBetween(softirq.Group, p.prev.probe.Taken, cur.probe.Taken)
	in := p.input(p.prev, cur, k)
	iv := SoftirqIntervalOf(in, now)
	p.prev = cur
	if p.opts.Timeline {
		p.intervals = append(p.intervals, iv)
		p.netRX = append(p.netRX, netRXByCPU(in))
	}
	if p.opts.OnInterval != nil {
		p.opts.OnInterval(iv)
	}
}

// End implements Part.
func (p *Softirq) End(context.Context) error {
	var err error
	p.last, err = p.read()
	return err
}

// IntervalNetRX is each interval's NET_RX share of each CPU's time, in
// the order of Evidence().Intervals.
func (p *Softirq) IntervalNetRX() []map[int]float64 { return p.netRX }

// netRXByCPU is NET_RX time over the interval, per CPU.
func netRXByCPU(in SoftirqInput) map[int]float64 {
	out := map[int]float64{}
	idx := -1
	for i, v := range in.Vectors {
		if v == "NET_RX" {
			idx = i
		}
	}
	if idx < 0 || in.Duration <= 0 {
		return out
	}
	for cpu, vecs := range in.Probe {
		if idx < len(vecs) {
			out[cpu] = float64(vecs[idx].TimeNs) / float64(in.Duration)
		}
	}
	return out
}

// Began is when the window's first probe reading was taken.
func (p *Softirq) Began() time.Time { return p.first.probe.Taken }

// Evidence is the window's softirq evidence.
func (p *Softirq) Evidence() evidence.SoftirqEvidence {
	k, e := p.cov.Scale(softirq.Group), p.cov.Estimate(softirq.Group)
	if e != nil && e.Reference != "" {
		// Scaled by the kernel's softirqs the estimate is of the time (its
		// scale is the time's); the probe's counts, kept to check it,
		// scale by the kernel's count over the probe's.
		k = countScale(p.first, p.last, k)
	}
	ev := BuildSoftirq(p.input(p.first, p.last, k))
	ev.Intervals = p.intervals
	ev.Estimate = e
	return ev
}

// countScale is /proc/softirqs' count between two readings over the
// probe's, every vector and CPU; otherwise when the probe counted none.
func countScale(a, b softirqReading, otherwise float64) float64 {
	var probe, kernel uint64
	for _, vecs := range b.probe.Sub(a.probe).PerCPU {
		for _, v := range vecs {
			probe += v.Count
		}
	}
	for _, vals := range b.proc.Sub(a.proc).Counts {
		for _, n := range vals {
			kernel += n
		}
	}
	if probe == 0 {
		return otherwise
	}
	return float64(kernel) / float64(probe)
}

func (p *Softirq) read() (softirqReading, error) {
	var r softirqReading
	var err error
	// Probe first, /proc right after: the two windows then differ only by
	// the few microseconds between the reads.
	if r.probe, err = p.probe.Snapshot(); err != nil {
		return r, err
	}
	if r.proc, err = p.proc.Softirqs(); err != nil {
		return r, fmt.Errorf("read /proc/softirqs: %w", err)
	}
	if r.stat, err = p.proc.Stat(); err != nil {
		return r, fmt.Errorf("read /proc/stat: %w", err)
	}
	return r, nil
}

// input is the window between two readings. Under a budget (k, the scale
// from the sampling windows to the whole span, is not 1) the counts are
// /proc/softirqs' exact ones for each CPU and vector and the times the
// windows' time per run times them (a ratio estimate: the count's
// sampling error does not enter the time). The probe's own counts scaled
// by k are kept to check the estimate: on a saturating flood they read
// low, because the attached hooks slow the softirqs inside the windows.
func (p *Softirq) input(a, b softirqReading, k float64) SoftirqInput {
	d := b.probe.Sub(a.probe)
	in := SoftirqInput{
		Duration: b.probe.Taken.Sub(a.probe.Taken),
		Vectors:  softirq.Vectors,
		Proc:     b.proc.Sub(a.proc),
		Stat:     b.stat.Sub(a.stat),
		CPUs:     p.opts.CPUs,
	}
	for cpu, vecs := range d.PerCPU {
		row := make([]SoftirqCounts, len(vecs))
		for i, v := range vecs {
			row[i] = SoftirqCounts{Count: budget.Scaled(v.Count, k), TimeNs: budget.Scaled(uint64(v.Time), k)}
			if k == 1 || i >= len(softirq.Vectors) {
				continue
			}
			// A vector the windows never saw run keeps its exact count; its
			// time, with no run timed, stays 0.
			if exact, ok := in.Proc.ByCPU(softirq.Vectors[i], cpu); ok && exact > 0 {
				est := row[i].Count
				row[i].Count, row[i].Estimate = exact, &est
				if v.Count > 0 {
					row[i].TimeNs = budget.Scaled(uint64(v.Time), float64(exact)/float64(v.Count))
				}
			}
		}
		in.Probe = append(in.Probe, row)
	}
	in.NetRXLatency, in.NetTXLatency = budget.ScaledRows(d.NetRXLatency, k), budget.ScaledRows(d.NetTXLatency, k)
	return in
}

// SoftirqResult is one softirq run.
type SoftirqResult struct {
	Evidence evidence.SoftirqEvidence
	Run      Run
}

// RunSoftirq measures softirqs per CPU over one window.
func RunSoftirq(ctx context.Context, src Sources, opts SoftirqOptions, w Window) (SoftirqResult, error) {
	part := NewSoftirq(opts)
	run, err := Measure(ctx, src, w, part)
	if err != nil {
		return SoftirqResult{}, err
	}
	return SoftirqResult{Evidence: part.Evidence(), Run: run}, nil
}

// Report is the run's report envelope (softirq has no rules).
func (r SoftirqResult) Report(version string) *report.Report {
	return envelope("softirq", version, r.Run, r.Evidence.DurationNs, r.Evidence)
}

// probesOf lists the probes that are open (nil interfaces are not).
func probesOf(ps ...probes.Probe) []probes.Probe {
	var out []probes.Probe
	for _, p := range ps {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// CheckCPUs reads a --cpus list (as 0-3,8) and checks that each of its
// CPUs is online, from /proc/softirqs. A bad list or an offline CPU is
// bad input naming the flag.
func CheckCPUs(proc procfs.FS, list string) (cpuset.Set, error) {
	cpus, err := cpuset.ParseList(list)
	if err != nil {
		return cpus, BadInput("--cpus %q: %v", list, err)
	}
	online, err := proc.Softirqs()
	if err != nil {
		return cpus, fmt.Errorf("read /proc/softirqs: %w", err)
	}
	for _, c := range cpus.CPUs() {
		if _, ok := online.ByCPU("NET_RX", c); !ok {
			return cpus, BadInput("--cpus: CPU %d is not online (online: %s)", c, cpuset.Of(online.CPUs...).List())
		}
	}
	return cpus, nil
}

func init() {
	registerBuilder(softirq.Spec.Name, func(b Build, u PartUse, ps *Parts) {
		ps.Softirq = NewSoftirq(SoftirqOptions{Method: b.Method, CPUs: u.Opts["cpus"].(cpuset.Set),
			NoLatency: !u.Opts["latency"].(bool), Timeline: b.timeline(), OnInterval: b.OnSoftirqInterval})
	})
}
