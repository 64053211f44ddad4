// Package compare is `perfscope udp --compare before.json after.json`
// and `perfscope tcp --compare`: it reads two saved udp (or tcp) reports
// and says what changed between them — packets per second reaching the
// socket, how NET_RX softirq work spread over the CPUs, lock contention,
// drops, for TCP the accept and SYN queues per listener, retransmits,
// resets, pruning and memory pressure, and which findings appeared or
// went away — so that a user can verify that a fix did what it promised.
// Rates are per second of each run's own window, so runs of different
// lengths compare.
package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

// ActiveNetRXShare is the share of a CPU's time in NET_RX above which the
// CPU counts as doing receive work in the spread metrics.
const ActiveNetRXShare = 0.05

// ErrNotUDPReport is returned for JSON that is not a `perfscope udp -o
// json` or `perfscope tcp -o json` report.
var ErrNotUDPReport = errors.New("not a perfscope udp or tcp JSON report")

// Run is one saved `perfscope udp -o json` or `perfscope tcp -o json`
// report (Command says which).
type Run struct {
	Schema   string               `json:"schema"`
	Command  string               `json:"command"`
	Meta     report.Meta          `json:"meta"`
	Data     evidence.NetEvidence `json:"data"`
	Findings []diagnose.Finding   `json:"findings"`
}

// MaxReportBytes caps a saved report: a udp report is tens of kilobytes,
// so anything near this is not one, and /dev/zero must not eat memory.
const MaxReportBytes = 64 << 20

// Decode reads a udp report and checks it is one. The input must hold
// exactly one JSON document: trailing bytes or a second report mean the
// file is not what the user thinks it is, and comparing its first half
// would be a confident answer over the wrong data.
func Decode(r io.Reader) (Run, error) {
	var run Run
	dec := json.NewDecoder(r)
	if err := dec.Decode(&run); err != nil {
		return Run{}, fmt.Errorf("%w: %v", ErrNotUDPReport, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("unexpected %v", tok)
		}
		if errors.Is(err, safeio.ErrTooLarge) {
			return Run{}, err
		}
		return Run{}, fmt.Errorf("%w: more after the report's end (%v)", ErrNotUDPReport, err)
	}
	// v1 → v2 renamed fields of other commands only (one of lab udp's),
	// so a udp report saved by v1 still compares.
	if (run.Schema != report.Schema && run.Schema != "perfscope/v1") || (run.Command != "udp" && run.Command != "tcp") {
		return Run{}, fmt.Errorf("%w: schema %q, command %q (want %q, \"udp\" or \"tcp\")", ErrNotUDPReport, run.Schema, run.Command, report.Schema)
	}
	return run, nil
}

// Load reads a udp report from path (a FIFO or /dev/stdin too; stops when
// ctx ends, at most MaxReportBytes).
func Load(ctx context.Context, path string) (Run, error) {
	in, err := safeio.OpenInput(ctx, path, nil)
	if err != nil {
		return Run{}, err
	}
	defer in.Close()
	run, err := Decode(safeio.LimitReader(in, MaxReportBytes, path))
	if err != nil {
		if ctx.Err() != nil {
			return Run{}, ctx.Err()
		}
		return Run{}, fmt.Errorf("%s: %w", path, err)
	}
	return run, nil
}

// RunInfo identifies a compared run.
type RunInfo struct {
	Host       string    `json:"host"`
	Started    time.Time `json:"started"`
	DurationNs int64     `json:"duration_ns"`
	Interface  string    `json:"interface"`
	// PacketSource says where packets/s came from: "sockets" (per-socket
	// received counts), "snmp" (Udp InDatagrams), "tcp_in_segs" (a tcp
	// run: Tcp InSegs), "queues" (RX queue rates) or "" (none).
	PacketSource string `json:"packet_source"`
}

// Metric is one number before and after. Nil means the run did not measure
// it. Change is after/before − 1 (nil when either is missing or before is
// 0); Better says whether the direction of change is an improvement.
type Metric struct {
	Key    string   `json:"key"`
	Label  string   `json:"label"`
	Unit   string   `json:"unit"`
	Before *float64 `json:"before"`
	After  *float64 `json:"after"`
	Change *float64 `json:"change"`
	// Direction is which way is good: "higher", "lower" or "" when a change
	// is neither (more packets also mean more NET_RX time on average).
	Direction string `json:"direction,omitempty"`
	Better    *bool  `json:"better"`
	// BeforeEstimate and AfterEstimate say how each number was obtained:
	// nil exact, else estimated under the run's overhead budget (windows,
	// coverage and 95 % bound). WithinError: the change is inside the two
	// bounds together, so Better stays nil — an estimated run compared
	// with an exact one shows a change only where there is one.
	BeforeEstimate *evidence.Estimate `json:"before_estimate,omitempty"`
	AfterEstimate  *evidence.Estimate `json:"after_estimate,omitempty"`
	WithinError    bool               `json:"within_error,omitempty"`
}

// CPUShare is one CPU's NET_RX share of its time before and after.
type CPUShare struct {
	CPU    int      `json:"cpu"`
	Before *float64 `json:"before"`
	After  *float64 `json:"after"`
}

// FindingRef names a finding gained, lost or kept.
type FindingRef struct {
	ID       string            `json:"id"`
	Severity diagnose.Severity `json:"severity"`
	Title    string            `json:"title"`
}

// Comparison is what changed between two runs.
type Comparison struct {
	Before  RunInfo      `json:"before"`
	After   RunInfo      `json:"after"`
	Metrics []Metric     `json:"metrics"`
	NetRX   []CPUShare   `json:"net_rx_share_by_cpu"`
	Gained  []FindingRef `json:"findings_gained"`
	Lost    []FindingRef `json:"findings_lost"`
	Kept    []FindingRef `json:"findings_kept"`
	// TCP is the listeners and settings of two tcp runs (their counters
	// and events are metrics "tcp.…"); absent when comparing udp runs.
	TCP *TCPComparison `json:"tcp,omitempty"`
}

const (
	higher = "higher"
	lower  = "lower"
)

// Compare computes what changed from before to after.
func Compare(before, after Run) Comparison {
	bs, as := summarize(before), summarize(after)
	c := Comparison{Before: bs.info, After: as.info}
	add := func(key, label, unit, direction string, b, a *float64) {
		m := Metric{Key: key, Label: label, Unit: unit, Before: b, After: a, Direction: direction,
			BeforeEstimate: bs.estimateOf(key), AfterEstimate: as.estimateOf(key)}
		if b != nil && a != nil {
			if *b != 0 {
				ch := *a / *b - 1
				m.Change = &ch
			}
			m.WithinError = withinError(*b, *a, m.BeforeEstimate, m.AfterEstimate)
			if *a != *b && direction != "" && !m.WithinError {
				better := (*a > *b) == (direction == higher)
				m.Better = &better
			}
		}
		c.Metrics = append(c.Metrics, m)
	}
	// Two tcp runs compare their TCP layer; a udp run, or a tcp run
	// compared with a udp one, compares what udp runs have.
	isTCP := bs.tcp != nil && as.tcp != nil
	packets := "packets/s received"
	if isTCP {
		packets = "segments/s received (Tcp InSegs)"
	}
	add("packets_per_s", packets, "packets/s", higher, bs.packetsPerS, as.packetsPerS)
	for _, port := range unionKeys(bs.portRecv, as.portRecv) {
		add("packets_per_s.port."+strconv.Itoa(port), fmt.Sprintf("packets/s received, port %d", port), "packets/s", higher, lookup(bs.portRecv, port), lookup(as.portRecv, port))
	}
	add("net_rx.max_share", "NET_RX share, busiest CPU", "fraction", lower, bs.maxShare, as.maxShare)
	add("net_rx.mean_share", "NET_RX share, mean over CPUs", "fraction", "", bs.meanShare, as.meanShare)
	add("net_rx.max_over_mean", "NET_RX max/mean (1 = even)", "ratio", lower, bs.maxOverMean, as.maxOverMean)
	add("net_rx.active_cpus", fmt.Sprintf("CPUs with > %.0f%% NET_RX", ActiveNetRXShare*100), "cpus", higher, bs.activeCPUs, as.activeCPUs)
	add("net_rx.ns_per_packet", "NET_RX time per packet received", "ns", lower, bs.netRXPerPacket, as.netRXPerPacket)
	add("lock_wait_ns_per_s", "lock wait, all classes", "ns/s", lower, bs.lockTotal, as.lockTotal)
	for _, class := range unionKeys(bs.lockByClass, as.lockByClass) {
		add("lock_wait_ns_per_s.class."+class, "lock wait, "+class, "ns/s", lower, lookup(bs.lockByClass, class), lookup(as.lockByClass, class))
	}
	add("tx.shared_queues", "TX queues used by several CPUs", "queues", lower, bs.sharedTXQueues, as.sharedTXQueues)
	if !isTCP {
		// A tcp run has no drops per UDP port and its Udp counters are
		// not its traffic's.
		add("drops_per_s", "drops/s, all ports", "packets/s", lower, bs.dropsTotal, as.dropsTotal)
		for _, port := range unionKeys(bs.portDrops, as.portDrops) {
			add("drops_per_s.port."+strconv.Itoa(port), fmt.Sprintf("drops/s, port %d", port), "packets/s", lower, lookup(bs.portDrops, port), lookup(as.portDrops, port))
		}
		add("snmp.rcvbuf_errors_per_s", "Udp RcvbufErrors/s", "packets/s", lower, bs.rcvbufErrors, as.rcvbufErrors)
	}
	for _, group := range unionKeys(bs.groupShare, as.groupShare) {
		if bs.groupShare[group] == 0 && as.groupShare[group] == 0 {
			continue // a group neither run spent CPU in is noise
		}
		add("profile.share."+group, "CPU share in "+group+" (NET_RX CPUs)", "fraction", lower, lookup(bs.groupShare, group), lookup(as.groupShare, group))
	}
	if isTCP {
		c.addTCP(bs.tcp, as.tcp, add)
	}
	for _, cpu := range unionKeys(bs.cpuShare, as.cpuShare) {
		c.NetRX = append(c.NetRX, CPUShare{CPU: cpu, Before: lookup(bs.cpuShare, cpu), After: lookup(as.cpuShare, cpu)})
	}
	c.Gained, c.Lost, c.Kept = diffFindings(before.Findings, after.Findings)
	return c
}

// estimateOf is how the run obtained the metric key: the estimate of the
// section it comes from, nil when exact. The profile's shares are samples
// in every run, exact or not, and compare as they always have.
func (s runSummary) estimateOf(key string) *evidence.Estimate {
	for _, p := range []struct{ prefix, section string }{
		{"packets_per_s", "packets"}, {"net_rx.ns_per_packet", "net_rx_per_packet"}, {"net_rx.", "softirq"},
		{"lock_wait", "locks"}, {"tx.", "tx"}, {"drops_per_s", "drops"},
	} {
		if strings.HasPrefix(key, p.prefix) {
			return s.estimates[p.section]
		}
	}
	return nil
}

// withinError says whether before and after differ by no more than their
// 95 % bounds allow (false when both are exact or a bound is unknown: an
// unknown bound decides nothing).
func withinError(before, after float64, eb, ea *evidence.Estimate) bool {
	if eb == nil && ea == nil {
		return false
	}
	rel := func(e *evidence.Estimate) (float64, bool) {
		if e == nil {
			return 0, true
		}
		if e.RelError == nil {
			return 0, false
		}
		return *e.RelError, true
	}
	rb, okb := rel(eb)
	ra, oka := rel(ea)
	if !okb || !oka {
		return false
	}
	return math.Abs(after-before) <= math.Hypot(rb*before, ra*after)
}

// runSummary is one run's numbers, per second of its window.
type runSummary struct {
	// estimates are the run's estimated sections, by what they feed.
	estimates   map[string]*evidence.Estimate
	info        RunInfo
	packetsPerS *float64
	portRecv    map[int]float64
	cpuShare    map[int]float64
	maxShare    *float64
	meanShare   *float64
	maxOverMean *float64
	activeCPUs  *float64
	lockTotal   *float64
	lockByClass map[string]float64
	dropsTotal  *float64
	portDrops   map[int]float64
	// rcvbufErrors is SNMP Udp(+Udp6) RcvbufErrors per second.
	rcvbufErrors *float64
	// netRXPerPacket is NET_RX time over all CPUs per packet received.
	netRXPerPacket *float64
	// groupShare is each Makita function group's share of the samples
	// on the NET_RX CPUs.
	groupShare map[string]float64
	// sharedTXQueues counts TX queues that several CPUs transmitted on
	// (what XPS removes); nil when the TX section is unavailable.
	sharedTXQueues *float64
	// tcp is a tcp run's TCP layer; nil in a udp run.
	tcp *tcpRun
}

func ptr(v float64) *float64 { return &v }

func summarize(r Run) runSummary {
	e := r.Data
	dur := e.DurationNs
	if dur <= 0 {
		dur = r.Meta.DurationNs
	}
	secs := float64(dur) / 1e9
	s := runSummary{info: RunInfo{Host: r.Meta.Host, Started: r.Meta.Started, DurationNs: dur, Interface: e.Interface.Name}}
	perS := func(n uint64) float64 { return float64(n) / secs }
	if secs <= 0 {
		// Without a window there are no rates; only findings compare.
		return s
	}
	if e.TX.Unavailable == "" {
		users := map[int]int{}
		for _, c := range e.TX.PerCPU {
			for q, n := range c.Queues {
				if n > 0 {
					users[q]++
				}
			}
		}
		shared := 0
		for _, n := range users {
			if n > 1 {
				shared++
			}
		}
		s.sharedTXQueues = ptr(float64(shared))
	}
	// Packets at the socket: what the sockets themselves counted is the
	// closest to "what the application got"; SNMP counts every UDP socket
	// of the namespace; queue rates include packets for other sockets.
	s.portRecv = map[int]float64{}
	for _, sk := range e.Sockets.Sockets {
		if sk.ReceivedPkt != nil {
			s.portRecv[sk.Port] += perS(*sk.ReceivedPkt)
		}
	}
	if r.Command == "tcp" && e.TCP != nil {
		s.tcp = summarizeTCP(e.TCP, secs)
	}
	if s.tcp != nil {
		// A tcp run's traffic is segments: Udp InDatagrams would count
		// another protocol's.
		if n, ok := s.tcp.counters["in_segs"]; ok {
			s.packetsPerS, s.info.PacketSource = ptr(n), "tcp_in_segs"
		} else if n, ok := queueRate(e.Queues); ok {
			s.packetsPerS, s.info.PacketSource = ptr(n), "queues"
		}
	} else if len(s.portRecv) > 0 {
		var sum float64
		for _, v := range s.portRecv {
			sum += v
		}
		s.packetsPerS, s.info.PacketSource = ptr(sum), "sockets"
	} else if n, ok := e.Drops.InDatagrams(); ok {
		s.packetsPerS, s.info.PacketSource = ptr(perS(n)), "snmp"
	} else if n, ok := queueRate(e.Queues); ok {
		s.packetsPerS, s.info.PacketSource = ptr(n), "queues"
	}
	s.estimates = map[string]*evidence.Estimate{"softirq": e.Softirq.Estimate, "locks": e.Locks.Estimate,
		"tx": e.TX.Estimate, "drops": e.Drops.Estimate}
	switch s.info.PacketSource {
	case "sockets":
		s.estimates["packets"] = e.Sockets.Estimate
	case "queues":
		s.estimates["packets"] = e.Queues.Estimate
	}
	s.estimates["net_rx_per_packet"] = combined(s.estimates["softirq"], s.estimates["packets"])
	s.spread(e.Softirq)
	if s.packetsPerS != nil && *s.packetsPerS > 0 && len(e.Softirq.CPUs) > 0 {
		var ns uint64
		for _, c := range e.Softirq.CPUs {
			ns += c.Vectors["NET_RX"].TimeNs
		}
		s.netRXPerPacket = ptr(float64(ns) / (*s.packetsPerS * secs))
	}
	if e.Profile.Unavailable == "" && e.Profile.Samples > 0 {
		s.groupShare = map[string]float64{}
		for _, g := range e.Profile.Groups {
			s.groupShare[g.Group] = g.Share
		}
	}
	if e.Locks.Unavailable == "" {
		s.lockTotal = ptr(perS(e.Locks.TotalNs))
		s.lockByClass = map[string]float64{}
		for class, ns := range e.Locks.ByClass {
			s.lockByClass[class] = perS(ns)
		}
	}
	if e.Drops.Unavailable == "" {
		var total uint64
		s.portDrops = map[int]float64{}
		for _, d := range e.Drops.ByPort {
			s.portDrops[d.Port] += perS(d.Count)
			total += d.Count
		}
		s.dropsTotal = ptr(perS(total))
	}
	if n, ok := e.Drops.RcvbufErrors(); ok {
		s.rcvbufErrors = ptr(perS(n))
	}
	return s
}

// queueRate is the packets per second of the RX queues together (false
// without queue rows).
func queueRate(q evidence.QueueSection) (float64, bool) {
	var sum float64
	for _, r := range q.RX {
		sum += r.PerS
	}
	return sum, len(q.RX) > 0
}

func (s *runSummary) spread(si evidence.SoftirqEvidence) {
	if len(si.CPUs) == 0 {
		return
	}
	s.cpuShare = map[int]float64{}
	var maxShare, sum float64
	active := 0
	for _, c := range si.CPUs {
		sh := c.NetRXShare()
		s.cpuShare[c.CPU] = sh
		sum += sh
		maxShare = math.Max(maxShare, sh)
		if sh > ActiveNetRXShare {
			active++
		}
	}
	mean := sum / float64(len(si.CPUs))
	s.maxShare, s.meanShare, s.activeCPUs = ptr(maxShare), ptr(mean), ptr(float64(active))
	if mean > 0 {
		s.maxOverMean = ptr(maxShare / mean)
	}
}

func lookup[K comparable](m map[K]float64, k K) *float64 {
	if m == nil {
		return nil
	}
	v, ok := m[k]
	if !ok {
		// The run measured the section, so a missing key is zero
		// (no drops on that port, no contention of that class).
		return ptr(0)
	}
	return &v
}

func unionKeys[K int | string](a, b map[K]float64) []K {
	var keys []K
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func diffFindings(before, after []diagnose.Finding) (gained, lost, kept []FindingRef) {
	ref := func(f diagnose.Finding) FindingRef { return FindingRef{ID: f.ID, Severity: f.Severity, Title: f.Title} }
	inBefore, inAfter := map[string]bool{}, map[string]bool{}
	for _, f := range before {
		inBefore[f.ID] = true
	}
	for _, f := range after {
		inAfter[f.ID] = true
		if inBefore[f.ID] {
			kept = append(kept, ref(f))
		} else {
			gained = append(gained, ref(f))
		}
	}
	for _, f := range before {
		if !inAfter[f.ID] {
			lost = append(lost, ref(f))
		}
	}
	for _, l := range [][]FindingRef{gained, lost, kept} {
		sort.SliceStable(l, func(i, j int) bool { return l[i].ID < l[j].ID })
	}
	return gained, lost, kept
}

// combined is the estimate of a ratio of two numbers obtained as a and b:
// their bounds in quadrature (nil when both are exact).
func combined(a, b *evidence.Estimate) *evidence.Estimate {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	c := *a
	c.Hooks = append(append([]string{}, a.Hooks...), b.Hooks...)
	c.Coverage = math.Min(a.Coverage, b.Coverage)
	c.Windows = min(a.Windows, b.Windows)
	c.RelError = nil
	if a.RelError != nil && b.RelError != nil {
		r := math.Hypot(*a.RelError, *b.RelError)
		c.RelError = &r
	}
	return &c
}
