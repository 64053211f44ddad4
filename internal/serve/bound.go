package serve

import (
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounding the workloads a labelled counter names: a node runs up to a few
// hundred pods, and every pod × port × reason series is one more in the
// TSDB. A boundedFamily keeps, per window, the N workloads (label sets of
// its bounded labels, e.g. namespace/pod/container) with the largest
// values under their own labels and adds everything else to one series
// whose bounded labels are all "other" — so every value the probes counted
// goes to exactly one series, and the sum of the series' rates is the
// probes' rate.
const (
	// DefaultTopN is how many workloads keep their own series per window.
	DefaultTopN = 20
	// holdWindows is how long a workload that left the top N keeps its
	// series (flat) before it is dropped from the exposition: a pod near
	// rank N does not flap in and out of Prometheus. At most N such idle
	// series are kept.
	holdWindows = 10
	// OtherLabel is the bounded labels' value of the series that holds
	// the rest.
	OtherLabel = "other"
)

// boundedFamily is a counter family whose bounded labels are limited to
// the top N workloads per window. Its series are counters: each only ever
// grows, whichever series a workload's values went to.
type boundedFamily struct {
	desc *prometheus.Desc
	n    int
	// bounded are the positions of the bounded labels among the labels.
	bounded []int
	// series are the exposed series by their full label key.
	series map[string]*boundedSeries
	// lastTop is the window in which each workload was last in the top N.
	lastTop map[string]int
	// pending is the current window's values by full label key.
	pending map[string]*series
	window  int
}

type boundedSeries struct {
	labels   []string
	workload string // key of the bounded labels' values
	value    float64
}

// newBoundedFamily bounds the labels named in bounded (a subset of
// labels) to the top n workloads per window (n ≤ 0: DefaultTopN).
func newBoundedFamily(name, help string, n int, labels, bounded []string) *boundedFamily {
	if n <= 0 {
		n = DefaultTopN
	}
	f := &boundedFamily{desc: prometheus.NewDesc(name, help, labels, nil), n: n,
		series: map[string]*boundedSeries{}, lastTop: map[string]int{}, pending: map[string]*series{}}
	for _, b := range bounded {
		i := slices.Index(labels, b)
		if i < 0 {
			panic("bounded label " + b + " is not a label of " + name)
		}
		f.bounded = append(f.bounded, i)
	}
	return f
}

// add adds v to the window's value of labels.
func (f *boundedFamily) add(v float64, labels ...string) {
	if v == 0 {
		return
	}
	key := seriesKey(labels)
	s, ok := f.pending[key]
	if !ok {
		s = &series{labels: append([]string(nil), labels...)}
		f.pending[key] = s
	}
	s.value += v
}

// workloadKey is the bounded labels' values of labels; "" when they are
// all empty (a host process, in no container): never bounded.
func (f *boundedFamily) workloadKey(labels []string) string {
	empty := true
	var b strings.Builder
	for _, i := range f.bounded {
		b.WriteString(labels[i])
		b.WriteByte(0xff)
		empty = empty && labels[i] == ""
	}
	if empty {
		return ""
	}
	return b.String()
}

// endWindow ranks the window's workloads by their value (summed over the
// other labels), adds the top N's values to their own series and the
// rest to the "other" series, and drops series whose workload left the
// top N more than holdWindows ago (and the longest idle beyond N).
func (f *boundedFamily) endWindow() {
	f.window++
	totals := map[string]float64{}
	for _, s := range f.pending {
		if w := f.workloadKey(s.labels); w != "" {
			totals[w] += s.value
		}
	}
	ranked := make([]string, 0, len(totals))
	for w := range totals {
		ranked = append(ranked, w)
	}
	sort.Slice(ranked, func(i, j int) bool {
		if totals[ranked[i]] != totals[ranked[j]] {
			return totals[ranked[i]] > totals[ranked[j]]
		}
		return ranked[i] < ranked[j]
	})
	top := map[string]bool{}
	for _, w := range ranked[:min(f.n, len(ranked))] {
		top[w] = true
		f.lastTop[w] = f.window
	}
	for _, s := range f.pending {
		labels, w := s.labels, f.workloadKey(s.labels)
		if w != "" && !top[w] {
			labels = append([]string(nil), labels...)
			for _, i := range f.bounded {
				labels[i] = OtherLabel
			}
			w = OtherLabel
		}
		key := seriesKey(labels)
		e, ok := f.series[key]
		if !ok {
			e = &boundedSeries{labels: labels, workload: w}
			f.series[key] = e
		}
		e.value += s.value
	}
	clear(f.pending)
	f.expire()
}

// expire drops the series of workloads out of the top N for more than
// holdWindows, and of the longest idle past N idle workloads.
func (f *boundedFamily) expire() {
	var idle []string
	for w, last := range f.lastTop {
		switch {
		case f.window-last > holdWindows:
			delete(f.lastTop, w)
		case last < f.window:
			idle = append(idle, w)
		}
	}
	if len(idle) > f.n {
		sort.Slice(idle, func(i, j int) bool {
			if f.lastTop[idle[i]] != f.lastTop[idle[j]] {
				return f.lastTop[idle[i]] < f.lastTop[idle[j]]
			}
			return idle[i] < idle[j]
		})
		for _, w := range idle[:len(idle)-f.n] {
			delete(f.lastTop, w)
		}
	}
	for key, s := range f.series {
		if s.workload != "" && s.workload != OtherLabel {
			if _, kept := f.lastTop[s.workload]; !kept {
				delete(f.series, key)
			}
		}
	}
}

func (f *boundedFamily) collect(ch chan<- prometheus.Metric) {
	for _, s := range f.series {
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, s.value, s.labels...)
	}
}
