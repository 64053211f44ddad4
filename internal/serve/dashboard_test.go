package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
)

// targetLabels are what Prometheus adds to every series it scrapes from
// perfscope (node by the relabelling docs/kubernetes.md gives).
var targetLabels = []string{"node", "instance", "job"}

// workloadLabelled are the metrics that gain the namespace, pod and
// container labels of the process or socket they count, bounded to the
// top N workloads per window (boundedFamily). Until they carry them, the
// dashboard's queries on them group by labels that are empty, which
// PromQL allows.
var workloadLabelled = []string{"perfscope_udp_drops_total", "perfscope_socket_lock_wait_seconds_total",
	"perfscope_socket_lock_contentions_total", "perfscope_jvm_gc_total", "perfscope_jvm_gc_seconds_total",
	"perfscope_jvm_safepoints_total", "perfscope_jvm_safepoint_seconds_total"}

var workloadLabels = []string{"namespace", "pod", "container"}

// exposedMetrics are the metric names serve exposes, with their labels:
// a window with every section, gathered from serve's registry.
func exposedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	m := NewMetrics("udp-rx")
	w := window(0, rcvbuf)
	taken, expected := uint64(90), uint64(99)
	w.Profile = &WindowProfile{ProfileSampling: evidence.ProfileSampling{Event: "cpu-clock", PMU: "absent"},
		CPUs: []evidence.ProfileCPU{{CPU: 0, TakenSamples: &taken, ExpectedSamples: &expected}}}
	w.Queues.TX = []evidence.QueueRow{{Queue: 0, KernelPackets: u64(5), DriverDrops: u64(1)}}
	w.Locks.Unavailable = "lock:contention_begin: not in this kernel" // perfscope_section_unavailable
	m.Add(w)
	m.Failed()
	reg := newRegistry(m)
	reg.MustRegister(newConnCollector(newConnTable(8)))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range fams {
		labels := map[string]bool{}
		for _, s := range f.Metric {
			for _, l := range s.Label {
				labels[l.GetName()] = true
			}
		}
		names := []string{}
		for l := range labels {
			names = append(names, l)
		}
		sort.Strings(names)
		out[f.GetName()] = names
	}
	return out
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	legendLabel  = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	labelValues  = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset"}
)

// promQuery is what a PromQL expression reads: the metrics it selects,
// the labels each selector matches on, and the labels it groups or joins
// by. Parsed loosely (serve's metric names and labels are plain
// identifiers), which the queries of one dashboard do not outgrow.
type promQuery struct {
	metrics  []string
	matchers map[string][]string // metric → labels matched
	grouping []string
}

func parsePromQL(expr string) promQuery {
	q := promQuery{matchers: map[string][]string{}}
	s := promString.ReplaceAllString(expr, `""`)
	s = promSelector.ReplaceAllStringFunc(s, func(sel string) string {
		m := promSelector.FindStringSubmatch(sel)
		for _, l := range promMatcher.FindAllStringSubmatch(m[2], -1) {
			q.matchers[m[1]] = append(q.matchers[m[1]], l[1])
		}
		q.metrics = append(q.metrics, m[1])
		return " "
	})
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllStringFunc(s, func(g string) string {
		for _, l := range strings.Split(promGrouping.FindStringSubmatch(g)[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				q.grouping = append(q.grouping, l)
			}
		}
		return " "
	})
	for _, m := range promIdent.FindAllStringSubmatch(s, -1) {
		if m[1] != "" || slices.Contains(promKeywords, m[0]) {
			continue // a function or an aggregation, or an operator
		}
		q.metrics = append(q.metrics, m[0])
	}
	return q
}

type grafanaPanel struct {
	ID      int            `json:"id"`
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// The Grafana dashboard (deploy/grafana/perfscope.json) queries only
// metrics serve exposes, by labels they have (or Prometheus adds, or the
// workload labels of the metrics that will carry them).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "deploy", "grafana", "perfscope.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string         `json:"uid"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("perfscope.json: %v", err)
	}
	exposed := exposedMetrics(t)
	labelOK := func(metric, label string) bool {
		return slices.Contains(exposed[metric], label) || slices.Contains(targetLabels, label) ||
			(slices.Contains(workloadLabelled, metric) && slices.Contains(workloadLabels, label))
	}
	check := func(where, expr string) []string {
		q := parsePromQL(expr)
		if len(q.metrics) == 0 {
			t.Errorf("%s: %q selects no metric", where, expr)
		}
		var labels []string
		for _, m := range q.metrics {
			if _, ok := exposed[m]; !ok {
				t.Errorf("%s: %s is not a metric serve exposes (query %q)", where, m, expr)
				continue
			}
			labels = append(labels, exposed[m]...)
			for _, l := range q.matchers[m] {
				if !labelOK(m, l) {
					t.Errorf("%s: %s has no label %s (query %q)", where, m, l, expr)
				}
			}
		}
		for _, l := range q.grouping {
			ok := false
			for _, m := range q.metrics {
				ok = ok || labelOK(m, l)
			}
			if !ok {
				t.Errorf("%s: no metric of %q has the label %s it groups by", where, expr, l)
			}
		}
		return append(labels, q.grouping...)
	}
	ids := map[int]bool{}
	var walk func([]grafanaPanel)
	queries := 0
	walk = func(panels []grafanaPanel) {
		for _, p := range panels {
			if ids[p.ID] {
				t.Errorf("panel id %d twice", p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 {
				t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("panel %q: datasource %+v, %d targets", p.Title, p.Datasource, len(p.Targets))
			}
			for _, tg := range p.Targets {
				queries++
				labels := check("panel "+p.Title, tg.Expr)
				for _, l := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
					if !slices.Contains(labels, l[1]) && !slices.Contains(targetLabels, l[1]) && !slices.Contains(workloadLabels, l[1]) {
						t.Errorf("panel %q: legend {{%s}} is no label of %q", p.Title, l[1], tg.Expr)
					}
				}
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		if _, ok := exposed[m[1]]; !ok || !labelOK(m[1], m[2]) {
			t.Errorf("variable %s: %s{%s} is not exposed", v.Name, m[1], m[2])
		}
	}
	if dash.UID == "" || queries < 20 {
		t.Errorf("uid %q, %d queries", dash.UID, queries)
	}
	// The panels: softirq per CPU, drops per port and pod, lock
	// wait by class and pod, findings with their impact, perfscope's cost.
	for _, must := range []string{"perfscope_softirq_seconds_total", "perfscope_udp_drops_total", "perfscope_lock_wait_seconds_total",
		"perfscope_socket_lock_wait_seconds_total", "perfscope_finding_impact", "perfscope_overhead_total_share"} {
		if !strings.Contains(string(b), must) {
			t.Errorf("the dashboard does not show %s", must)
		}
	}
}

// The loose parser reads what the dashboard's queries are made of.
func TestParsePromQL(t *testing.T) {
	q := parsePromQL(`max by (node, id) (perfscope_finding_impact{node=~"$node"} * on (instance, id) group_left (severity) perfscope_finding{node=~"a{b}"}) / 2^30`)
	if !slices.Equal(q.metrics, []string{"perfscope_finding_impact", "perfscope_finding"}) ||
		!slices.Equal(q.grouping, []string{"node", "id", "instance", "id", "severity"}) || !slices.Equal(q.matchers["perfscope_finding"], []string{"node"}) {
		t.Errorf("%+v", q)
	}
	q = parsePromQL(`sum(rate(go_gc_duration_seconds_count[$__rate_interval])) and up`)
	if !slices.Equal(q.metrics, []string{"go_gc_duration_seconds_count", "up"}) {
		t.Errorf("%+v", q)
	}
}
