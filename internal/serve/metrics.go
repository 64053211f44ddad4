// Package serve runs a recipe continuously — its probes attached once,
// window after window on one measure.Session — and exposes what each
// window measured, and what the rules concluded from it, as Prometheus
// metrics (`perfscope serve`).
package serve

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

// Window is what one measurement window yielded: each section is nil when
// the recipe does not measure it.
type Window struct {
	Begin, End time.Time
	Softirq    *evidence.SoftirqEvidence
	Queues     *evidence.QueueSection
	Locks      *evidence.LockSection
	Drops      *evidence.DropSection
	JVMPauses  *evidence.JVMPauses
	// TCP is the tcp part's evidence (accept queues, counters, events).
	TCP *evidence.TCPEvidence
	// Profile is the CPU profile's sampling per CPU, when the recipe
	// profiles.
	Profile  *WindowProfile
	Findings []diagnose.Finding
	Overhead *evidence.Overhead
	// Report is the window's whole report, as `perfscope recipe run`
	// would give it, for the /report page.
	Report *report.Report
}

// WindowProfile is a window's CPU profile as far as the metrics go: the
// event and, per CPU, the samples taken beside those expected.
type WindowProfile struct {
	evidence.ProfileSampling
	CPUs []evidence.ProfileCPU
}

// MaxSeries bounds the label sets of each labelled counter family: ports
// and lock classes come from the traffic, and a scan over every port must
// not grow perfscope's memory (or the TSDB's) without bound. Label sets
// past it are added to one series whose variable label is "other".
const MaxSeries = 512

// counterFamily accumulates a counter's per-window deltas per label set.
type counterFamily struct {
	desc   *prometheus.Desc
	values map[string]*series
}

type series struct {
	labels []string
	value  float64
}

func newFamily(name, help string, labels ...string) *counterFamily {
	return &counterFamily{desc: prometheus.NewDesc(name, help, labels, nil), values: map[string]*series{}}
}

// add adds v to the series of labels; past MaxSeries, to the overflow
// series, whose last label is "other".
func (f *counterFamily) add(v float64, labels ...string) {
	key := seriesKey(labels)
	s, ok := f.values[key]
	if !ok {
		if len(f.values) >= MaxSeries {
			over := append(append([]string(nil), labels[:len(labels)-1]...), "other")
			key = seriesKey(over)
			if s, ok = f.values[key]; !ok {
				s = &series{labels: over}
				f.values[key] = s
			}
		} else {
			s = &series{labels: append([]string(nil), labels...)}
			f.values[key] = s
		}
	}
	s.value += v
}

func seriesKey(labels []string) string {
	k := ""
	for _, l := range labels {
		k += l + "\xff"
	}
	return k
}

func (f *counterFamily) collect(ch chan<- prometheus.Metric) {
	for _, s := range f.values {
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, s.value, s.labels...)
	}
}

// Metrics is the Prometheus collector of a served recipe: counters are
// the sums of every window's deltas (so rate() over them is what the
// probes counted), gauges are the last window's.
type Metrics struct {
	mu     sync.Mutex
	recipe string

	softirqs, softirqSeconds     *counterFamily
	queuePackets, queueDrops     *counterFamily
	lockWait, lockContentions    *counterFamily
	bpfRuns, bpfSeconds          *counterFamily
	eventsLost, windows, failing *counterFamily
	// The families about a socket or a process carry its workload's
	// namespace, pod and container, bounded to the top N workloads per
	// window (bound.go).
	socketLockWait, socketLocks  *boundedFamily
	drops                        *boundedFamily
	gcs, gcSeconds               *boundedFamily
	safepoints, safepointSeconds *boundedFamily
	profileTaken, profileExpect  *counterFamily
	tcp                          *tcpMetrics

	findings []diagnose.Finding
	overhead *evidence.Overhead
	lastEnd  time.Time
	lastLen  time.Duration

	findingDesc, impactDesc, paramDesc     *prometheus.Desc
	shareDesc, lastEndDesc, windowDesc     *prometheus.Desc
	statsDesc, infoDesc, findingsCountDesc *prometheus.Desc
	processDesc, budgetDesc, totalDesc     *prometheus.Desc
	sectionDesc                            *prometheus.Desc
	sections                               map[string]string
	// The last window's profile: which CPUs it did not see, and with
	// which event.
	undersampledDesc, profileEventDesc *prometheus.Desc
	profile                            *WindowProfile
}

// workloadLabelNames are the labels of a socket's or a process's workload.
var workloadLabelNames = []string{"namespace", "pod", "container"}

// withWorkload is labels followed by the workload labels.
func withWorkload(labels ...string) []string { return append(labels, workloadLabelNames...) }

// workloadLabels are the values of the workload labels: the pod's
// namespace and name (its uid when no name was learned), the container's
// name (its id's first 12 digits when unnamed); all "" for a host process
// or an owner not found, which is never bounded.
func workloadLabels(w *evidence.Workload) []string {
	if w == nil {
		return []string{"", "", ""}
	}
	val := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	ns, pod, container := val(w.Namespace), val(w.Pod), val(w.Container)
	if pod == "" {
		pod = val(w.PodUID)
	}
	if container == "" {
		if container = val(w.ContainerID); len(container) > 12 {
			container = container[:12]
		}
	}
	return []string{ns, pod, container}
}

// NewMetrics returns the collector of recipe, with DefaultTopN workloads
// per labelled family.
func NewMetrics(recipe string) *Metrics { return newMetrics(recipe, DefaultTopN) }

// newMetrics returns the collector of recipe whose workload-labelled
// families keep topWorkloads workloads each per window (≤ 0: DefaultTopN).
func newMetrics(recipe string, topWorkloads int) *Metrics {
	const ns = "perfscope_"
	n := topWorkloads
	bounded := func(name, help string, labels ...string) *boundedFamily {
		return newBoundedFamily(name, help, n, withWorkload(labels...), workloadLabelNames)
	}
	return &Metrics{
		recipe:           recipe,
		softirqs:         newFamily(ns+"softirq_total", "Softirq runs per CPU and vector, counted by the softirq probe (/proc/softirqs' count when the probe was sampled).", "cpu", "vector"),
		softirqSeconds:   newFamily(ns+"softirq_seconds_total", "Time spent in softirqs per CPU and vector.", "cpu", "vector"),
		queuePackets:     newFamily(ns+"queue_packets_total", "Packets per NIC queue: the kernel's count (napi/netif tracepoints) for rx, transmissions for tx.", "direction", "queue"),
		queueDrops:       newFamily(ns+"queue_driver_drops_total", "Drops per queue in the driver's own statistics (ethtool -S).", "direction", "queue"),
		lockWait:         newFamily(ns+"lock_wait_seconds_total", "Kernel lock contention wait per lock class.", "class"),
		lockContentions:  newFamily(ns+"lock_contentions_total", "Kernel lock contentions per lock class.", "class"),
		socketLockWait:   bounded(ns+"socket_lock_wait_seconds_total", "Lock contention wait on the locks of sockets, per protocol, local port and the socket owner's namespace, pod and container (top N workloads, the rest \"other\").", "protocol", "port"),
		socketLocks:      bounded(ns+"socket_lock_contentions_total", "Lock contentions on the locks of sockets, per protocol, local port and the socket owner's namespace, pod and container (top N workloads, the rest \"other\").", "protocol", "port"),
		drops:            bounded(ns+"udp_drops_total", "UDP datagrams dropped, per reason, local port (0: not attributed to a port) and the port's owner's namespace, pod and container (top N workloads, the rest \"other\").", "reason", "port"),
		bpfRuns:          newFamily(ns+"bpf_program_runs_total", "Runs of perfscope's own BPF programs (bpf_stats; sampled windows are scaled).", "program"),
		bpfSeconds:       newFamily(ns+"bpf_program_run_seconds_total", "Run time of perfscope's own BPF programs (bpf_stats).", "program"),
		gcs:              bounded(ns+"jvm_gc_total", "Collections of the recipe's JVM per generation (hsperfdata), with its namespace, pod and container.", "pid", "generation"),
		gcSeconds:        bounded(ns+"jvm_gc_seconds_total", "Time the recipe's JVM spent in its young and old collectors (hsperfdata), with its namespace, pod and container.", "pid"),
		safepoints:       bounded(ns+"jvm_safepoints_total", "Safepoints of the recipe's JVM (hsperfdata; absent when the JVM does not publish them), with its namespace, pod and container.", "pid"),
		safepointSeconds: bounded(ns+"jvm_safepoint_seconds_total", "Time the recipe's JVM was stopped at safepoints (hsperfdata), with its namespace, pod and container.", "pid"),
		profileTaken:     newFamily(ns+"profile_samples_taken_total", "CPU profile samples the sampling event delivered per CPU (kept, left out or lost).", "cpu"),
		profileExpect:    newFamily(ns+"profile_samples_expected_total", "CPU profile samples each CPU should have delivered: the frequency times its online time (cpu-clock) or busy time (cycles).", "cpu"),
		eventsLost:       newFamily(ns+"events_lost_total", "Events perfscope's probes lost (full maps or ring buffers) or the kernel skipped their programs for (recursion misses).", "recipe"),
		windows:          newFamily(ns+"windows_total", "Measurement windows completed.", "recipe"),
		failing:          newFamily(ns+"window_errors_total", "Measurement windows that failed.", "recipe"),

		findingDesc:       prometheus.NewDesc(ns+"finding", "A finding of the last window (1 while the rules report it).", []string{"recipe", "id", "severity"}, nil),
		impactDesc:        prometheus.NewDesc(ns+"finding_impact", "The finding's impact: the share of the bottleneck it explains (0-1), its ranking key.", []string{"id"}, nil),
		paramDesc:         prometheus.NewDesc(ns+"finding_parameter", "The finding's computed numbers (recommendation parameters, e.g. so_rcvbuf_bytes).", []string{"id", "name"}, nil),
		findingsCountDesc: prometheus.NewDesc(ns+"findings", "Findings of the last window, per severity.", []string{"severity"}, nil),
		shareDesc:         prometheus.NewDesc(ns+"bpf_time_share", "perfscope's BPF run time over all CPUs' time in the last window (0-1).", nil, nil),
		processDesc:       prometheus.NewDesc(ns+"process_cpu_share", "perfscope's own process CPU time over all CPUs' time in the last window (0-1).", nil, nil),
		budgetDesc:        prometheus.NewDesc(ns+"overhead_budget_share", "The overhead budget: the most of any one CPU's time perfscope was to take, its BPF programs there plus its process spread over every CPU (0-1); absent with exact windows.", nil, nil),
		totalDesc:         prometheus.NewDesc(ns+"overhead_total_share", "What perfscope took of the busiest CPU in the last window, its process included: the BPF programs there plus the process's share of a CPU (0-1).", nil, nil),
		statsDesc:         prometheus.NewDesc(ns+"bpf_stats_available", "1 when bpf_stats measured the last window's BPF cost (needs CAP_SYS_ADMIN); 0 when they were unavailable or left off under the overhead budget (run times then from the programs' own timing).", nil, nil),
		lastEndDesc:       prometheus.NewDesc(ns+"last_window_end_timestamp_seconds", "When the last window ended (Unix time).", nil, nil),
		windowDesc:        prometheus.NewDesc(ns+"window_seconds", "Length of the last window.", nil, nil),
		infoDesc:          prometheus.NewDesc(ns+"recipe_info", "The recipe being served.", []string{"recipe"}, nil),
		sectionDesc:       prometheus.NewDesc(ns+"section_unavailable", "1 for a report section the last window could not measure (the reason is in perfscope's log).", []string{"section"}, nil),
		undersampledDesc:  prometheus.NewDesc(ns+"profile_cpu_undersampled", "1 for a CPU the last window's profile did not see: it took under half its expected samples (a virtual CPU's cpu-clock stops while it halts).", []string{"cpu"}, nil),
		profileEventDesc:  prometheus.NewDesc(ns+"profile_event_info", "The perf event the CPU profile samples with, and the PMU state that chose it.", []string{"event", "pmu"}, nil),
		sections:          map[string]string{},
		tcp:               newTCPMetrics(),
	}
}

func (m *Metrics) families() []*counterFamily {
	return append([]*counterFamily{m.softirqs, m.softirqSeconds, m.queuePackets, m.queueDrops, m.lockWait, m.lockContentions,
		m.profileTaken, m.profileExpect, m.bpfRuns, m.bpfSeconds, m.eventsLost, m.windows, m.failing}, m.tcp.families()...)
}

func (m *Metrics) boundedFamilies() []*boundedFamily {
	return []*boundedFamily{m.socketLockWait, m.socketLocks, m.drops, m.gcs, m.gcSeconds, m.safepoints, m.safepointSeconds}
}

// Add accumulates one window.
func (m *Metrics) Add(w Window) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.windows.add(1, m.recipe)
	m.lastEnd, m.lastLen = w.End, w.End.Sub(w.Begin)
	m.sections = map[string]string{}
	if s := w.Softirq; s != nil {
		for _, c := range s.CPUs {
			cpu := strconv.Itoa(c.CPU)
			for vec, v := range c.Vectors {
				m.softirqs.add(float64(v.Count), cpu, vec)
				m.softirqSeconds.add(float64(v.TimeNs)/1e9, cpu, vec)
			}
		}
	}
	if q := w.Queues; q != nil {
		m.section("queues", q.Unavailable)
		for dir, rows := range map[string][]evidence.QueueRow{"rx": q.RX, "tx": q.TX} {
			for _, r := range rows {
				queue := strconv.Itoa(r.Queue)
				switch {
				case r.KernelPackets != nil:
					m.queuePackets.add(float64(*r.KernelPackets), dir, queue)
				case r.DriverPackets != nil:
					m.queuePackets.add(float64(*r.DriverPackets), dir, queue)
				}
				if r.DriverDrops != nil {
					m.queueDrops.add(float64(*r.DriverDrops), dir, queue)
				}
			}
		}
	}
	if l := w.Locks; l != nil {
		m.section("locks", l.Unavailable)
		counts := map[string]uint64{}
		for _, s := range l.Sites {
			counts[s.Class] += s.Count
		}
		for class, ns := range l.ByClass {
			m.lockWait.add(float64(ns)/1e9, class)
			m.lockContentions.add(float64(counts[class]), class)
		}
		for _, s := range l.Sockets {
			labels := append([]string{s.Socket.Protocol, strconv.Itoa(s.Socket.Port)}, workloadLabels(s.Socket.Workload)...)
			m.socketLockWait.add(float64(s.TotalNs)/1e9, labels...)
			m.socketLocks.add(float64(s.Count), labels...)
		}
	}
	if d := w.Drops; d != nil {
		m.section("drops", d.Unavailable)
		attributed := map[string]uint64{}
		for _, p := range d.ByPort {
			m.drops.add(float64(p.Count), append([]string{p.Reason, strconv.Itoa(p.Port)}, workloadLabels(p.Workload)...)...)
			attributed[p.Reason] += p.Count
		}
		// Reasons the probe saw on no port of interest still count.
		for reason, n := range d.ByReason {
			if a := attributed["kfree_skb:"+reason] + attributed[reason]; n > a {
				m.drops.add(float64(n-a), "kfree_skb:"+reason, "0", "", "", "")
			}
		}
	}
	if j := w.JVMPauses; j != nil {
		pid, wl := strconv.Itoa(j.PID), workloadLabels(j.Workload)
		m.gcs.add(float64(j.YoungGCs), append([]string{pid, "young"}, wl...)...)
		m.gcs.add(float64(j.OldGCs), append([]string{pid, "old"}, wl...)...)
		m.gcSeconds.add(float64(j.GCTimeNs)/1e9, append([]string{pid}, wl...)...)
		if j.Safepoints != nil && j.SafepointTimeNs != nil {
			m.safepoints.add(float64(*j.Safepoints), append([]string{pid}, wl...)...)
			m.safepointSeconds.add(float64(*j.SafepointTimeNs)/1e9, append([]string{pid}, wl...)...)
		}
	}
	if t := w.TCP; t != nil {
		m.tcp.add(t, m.section)
	}
	m.profile = w.Profile
	if pr := w.Profile; pr != nil {
		for _, c := range pr.CPUs {
			cpu := strconv.Itoa(c.CPU)
			if c.TakenSamples != nil {
				m.profileTaken.add(float64(*c.TakenSamples), cpu)
			}
			if c.ExpectedSamples != nil {
				m.profileExpect.add(float64(*c.ExpectedSamples), cpu)
			}
		}
	}
	m.findings = append(m.findings[:0], w.Findings...)
	m.overhead = w.Overhead
	if o := w.Overhead; o != nil {
		for _, p := range o.Programs {
			m.bpfRuns.add(float64(p.RunCount), p.Program)
			m.bpfSeconds.add(float64(p.RunTimeNs)/1e9, p.Program)
		}
		m.eventsLost.add(float64(o.EventsLost), m.recipe)
	}
	for _, f := range m.boundedFamilies() {
		f.endWindow()
	}
}

func (m *Metrics) section(name, unavailable string) {
	if unavailable != "" {
		m.sections[name] = unavailable
	}
}

// Failed counts a window that failed.
func (m *Metrics) Failed() {
	m.mu.Lock()
	m.failing.add(1, m.recipe)
	m.mu.Unlock()
}

// LastWindowEnd is when the last window ended (zero before the first).
func (m *Metrics) LastWindowEnd() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastEnd
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range m.families() {
		ch <- f.desc
	}
	for _, f := range m.boundedFamilies() {
		ch <- f.desc
	}
	for _, d := range []*prometheus.Desc{m.findingDesc, m.impactDesc, m.paramDesc, m.findingsCountDesc, m.shareDesc,
		m.statsDesc, m.lastEndDesc, m.windowDesc, m.infoDesc, m.sectionDesc, m.processDesc, m.budgetDesc, m.totalDesc,
		m.undersampledDesc, m.profileEventDesc} {
		ch <- d
	}
	for _, d := range m.tcp.descs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.families() {
		f.collect(ch)
	}
	for _, f := range m.boundedFamilies() {
		f.collect(ch)
	}
	ch <- prometheus.MustNewConstMetric(m.infoDesc, prometheus.GaugeValue, 1, m.recipe)
	bySeverity := map[string]float64{diagnose.Info.String(): 0, diagnose.Warn.String(): 0, diagnose.Crit.String(): 0}
	seen := map[string]bool{}
	for _, f := range m.findings {
		if seen[f.ID] {
			continue // one series per id: the rules report an id once
		}
		seen[f.ID] = true
		bySeverity[f.Severity.String()]++
		ch <- prometheus.MustNewConstMetric(m.findingDesc, prometheus.GaugeValue, 1, m.recipe, f.ID, f.Severity.String())
		ch <- prometheus.MustNewConstMetric(m.impactDesc, prometheus.GaugeValue, f.Impact, f.ID)
		names := make([]string, 0, len(f.Recommendation.Parameters))
		for n := range f.Recommendation.Parameters {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			ch <- prometheus.MustNewConstMetric(m.paramDesc, prometheus.GaugeValue, float64(f.Recommendation.Parameters[n]), f.ID, n)
		}
	}
	for sev, n := range bySeverity {
		ch <- prometheus.MustNewConstMetric(m.findingsCountDesc, prometheus.GaugeValue, n, sev)
	}
	m.tcp.collect(ch)
	for name := range m.sections {
		ch <- prometheus.MustNewConstMetric(m.sectionDesc, prometheus.GaugeValue, 1, name)
	}
	if pr := m.profile; pr != nil {
		if pr.Event != "" {
			ch <- prometheus.MustNewConstMetric(m.profileEventDesc, prometheus.GaugeValue, 1, pr.Event, pr.PMU)
		}
		for _, c := range pr.CPUs {
			if c.ExpectedSamples == nil {
				continue // no verdict either way
			}
			v := 0.0
			if c.Undersampled {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(m.undersampledDesc, prometheus.GaugeValue, v, strconv.Itoa(c.CPU))
		}
	}
	if m.lastEnd.IsZero() {
		return
	}
	ch <- prometheus.MustNewConstMetric(m.lastEndDesc, prometheus.GaugeValue, float64(m.lastEnd.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(m.windowDesc, prometheus.GaugeValue, m.lastLen.Seconds())
	if o := m.overhead; o != nil {
		ch <- prometheus.MustNewConstMetric(m.shareDesc, prometheus.GaugeValue, o.BPFTimeShare)
		avail := 1.0
		if o.StatsUnavailable != "" || o.StatsOff != "" {
			avail = 0
		}
		ch <- prometheus.MustNewConstMetric(m.statsDesc, prometheus.GaugeValue, avail)
		ch <- prometheus.MustNewConstMetric(m.processDesc, prometheus.GaugeValue, o.ProcessCPUShare)
		if b := o.Budget; b != nil {
			ch <- prometheus.MustNewConstMetric(m.budgetDesc, prometheus.GaugeValue, b.CPUShare)
			ch <- prometheus.MustNewConstMetric(m.totalDesc, prometheus.GaugeValue, b.TotalShare)
		}
	}
}
