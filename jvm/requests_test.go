package jvm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/httpcount"
)

// fixtureServer serves a recorded /actuator/prometheus, then the same with
// counts advanced by delta.
func metricsServer(t *testing.T, file string, contentType string, edit func(scrape int, body string) string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		fmt.Fprint(w, edit(int(n.Add(1)), string(body)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// advance adds to the counts of the recorded Spring Boot service: the
// second and later scrapes see 1500 more /api/orders/{id}, 1000 more
// /api/orders-logged/{id}, 20 more HTTP 400s and 3 more scrapes.
func advance(scrape int, body string) string {
	if scrape < 2 {
		return body
	}
	for old, repl := range map[string]string{
		`status="200",uri="/api/orders/{id}"} 14001`:        `status="200",uri="/api/orders/{id}"} 15501`,
		`status="200",uri="/api/orders-logged/{id}"} 14001`: `status="200",uri="/api/orders-logged/{id}"} 15001`,
		`status="400",uri="/api/orders/{id}"} 1`:            `status="400",uri="/api/orders/{id}"} 21`,
		`uri="/actuator/prometheus"} 1`:                     `uri="/actuator/prometheus"} 4`,
		`uri="/actuator/prometheus"} 2`:                     `uri="/actuator/prometheus"} 5`,
	} {
		body = strings.Replace(body, old, repl, 1)
	}
	return body
}

func TestMetricsCounterSumsSpringBootSeries(t *testing.T) {
	for _, tc := range []struct{ file, contentType string }{
		{"springboot-3.5-prometheus.txt", "text/plain;version=0.0.4;charset=utf-8"},
		{"springboot-3.5-openmetrics.txt", "application/openmetrics-text;version=1.0.0;charset=utf-8"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			srv := metricsServer(t, tc.file, tc.contentType, advance)
			m := NewMetricsCounter(MetricsSource{URL: srv.URL})
			ctx := context.Background()
			if err := m.Begin(ctx); err != nil {
				t.Fatal(err)
			}
			c, err := m.End(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The scrapes of /actuator/prometheus are not the service's
			// requests.
			if c.Total != 2520 || c.StatusClasses["2xx"] != 2500 || c.StatusClasses["4xx"] != 20 {
				t.Errorf("total %d classes %v, want 2520 (2500 2xx, 20 4xx)", c.Total, c.StatusClasses)
			}
			want := map[string]int64{"/api/orders/{id}": 1520, "/api/orders-logged/{id}": 1000}
			for _, e := range c.Endpoints {
				if want[e.Endpoint] != e.Requests || e.Method != "GET" {
					t.Errorf("endpoint %+v", e)
				}
			}
			if len(c.Endpoints) != 2 || !strings.Contains(c.Note, "http_server_requests_seconds") || c.Source != "metrics" {
				t.Errorf("endpoints %+v note %q", c.Endpoints, c.Note)
			}
		})
	}
}

func TestMetricsSourceFiltersAndErrors(t *testing.T) {
	srv := metricsServer(t, "springboot-3.5-prometheus.txt", "text/plain;version=0.0.4", advance)
	ctx := context.Background()
	m := NewMetricsCounter(MetricsSource{URL: srv.URL, Match: map[string]*regexp.Regexp{"uri": regexp.MustCompile(`^/api/orders-logged/.*$`)}})
	m.Begin(ctx)
	if c, err := m.End(ctx); err != nil || c.Total != 1000 {
		t.Errorf("filtered: %d %v, want 1000", c.Total, err)
	}
	if err := NewMetricsCounter(MetricsSource{URL: srv.URL, Metric: "no_such_metric"}).Begin(ctx); err == nil || !strings.Contains(err.Error(), "no_such_metric") {
		t.Errorf("missing metric: %v", err)
	}
	// A _count series name finds its summary.
	m = NewMetricsCounter(MetricsSource{URL: srv.URL, Metric: "http_server_requests_seconds_count"})
	if err := m.Begin(ctx); err != nil {
		t.Errorf("named by its _count: %v", err)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if err := NewMetricsCounter(MetricsSource{URL: down.URL}).Begin(ctx); err == nil {
		t.Error("unreachable source accepted")
	}
}

// A counter that went down was reset: it counts from zero, and the note
// says so.
func TestMetricsDeltaCounterReset(t *testing.T) {
	before := scrape{series: map[string]series{"a": {labels: map[string]string{"uri": "/x", "status": "200"}, count: 500}}}
	after := scrape{series: map[string]series{"a": {labels: map[string]string{"uri": "/x", "status": "200"}, count: 30}, "b": {labels: map[string]string{"uri": "/y", "status": "503"}, count: 7}}}
	c, resets := delta(before, after)
	if c.Total != 37 || resets != 1 || c.StatusClasses["5xx"] != 7 {
		t.Errorf("total %d resets %d classes %v", c.Total, resets, c.StatusClasses)
	}
}

func TestSpringMappings(t *testing.T) {
	f, err := os.Open("testdata/springboot-3.5-mappings.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := parseSpringMappings(f)
	if err != nil {
		t.Fatal(err)
	}
	for h, want := range map[string]EndpointCount{
		"OrdersController.get":       {Method: "GET", Endpoint: "/api/orders/{id}"},
		"OrdersController.getLogged": {Method: "GET", Endpoint: "/api/orders-logged/{id}"},
		"OrdersController.create":    {Method: "POST", Endpoint: "/api/orders"},
	} {
		if m[h] != want {
			t.Errorf("%s → %+v, want %+v", h, m[h], want)
		}
	}
}

func TestActuatorSiblingAndTemplates(t *testing.T) {
	if got := actuatorSibling("http://127.0.0.1:8081/manage/actuator/prometheus?x=1", "mappings"); got != "http://127.0.0.1:8081/manage/actuator/mappings" {
		t.Errorf("sibling %q", got)
	}
	if got := actuatorSibling("http://127.0.0.1:9404/metrics", "mappings"); got != "" {
		t.Errorf("not an Actuator URL: %q", got)
	}
	re := templateMatcher("/api/orders/{id}/items/{item}")
	for path, want := range map[string]bool{"/api/orders/#/items/#": true, "/api/orders/17/items/abc": true, "/api/orders/#": false, "/api/orders/#/items/#/x": false} {
		if re.MatchString(path) != want {
			t.Errorf("%s: %v", path, !want)
		}
	}
}

func TestParseListening(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4243 1 0000000000000000 20 4 30 10 -1
`
	ports, err := parseListening(strings.NewReader(table), map[uint64]bool{4242: true, 4243: true})
	if err != nil || len(ports) != 1 || ports[0] != 8080 {
		t.Errorf("ports %v %v, want [8080] (not another process's 8081, not an established socket)", ports, err)
	}
	if _, err := parseListening(strings.NewReader("hdr\n0: short\n"), nil); err == nil {
		t.Error("malformed line accepted")
	}
}

func TestPassiveCounts(t *testing.T) {
	d := httpcount.Snapshot{
		Responses: map[httpcount.Response]uint64{{Port: 8080, Status: 200}: 900, {Port: 8080, Status: 400}: 100, {Port: 8080, Status: 100}: 5},
		Requests:  map[httpcount.Request]uint64{{Port: 8080, Method: "GET", Path: "/api/orders/#"}: 990},
		Lost:      httpcount.Lost{Inflight: 9},
	}
	c := passiveCounts(d, []uint16{8080}, false)
	if c.Total != 1000 || c.StatusClasses["2xx"] != 900 || c.StatusClasses["4xx"] != 100 || c.Uncertainty != 0.01 {
		t.Errorf("%+v", c)
	}
	if !strings.Contains(c.Note, "5 interim 1xx") || !strings.Contains(c.Note, "9 responses not counted") ||
		!strings.Contains(c.Note, "990 request lines seen") || len(c.Endpoints) != 1 {
		t.Errorf("note %q, endpoints %+v", c.Note, c.Endpoints)
	}
	// Counting responses only (perfscope go), no request line was read:
	// the note does not count them as missed.
	d.Requests = nil
	if c := passiveCounts(d, []uint16{8080}, true); c.Total != 1000 || strings.Contains(c.Note, "request lines") || len(c.Endpoints) != 0 {
		t.Errorf("responses only: %+v", c)
	}
}

// HTTP/2 streams the server ended are requests too, counted without a
// status; writes whose frames were not all walked widen the uncertainty
// and are said.
func TestPassiveCountsHTTP2(t *testing.T) {
	d := httpcount.Snapshot{
		Responses:   map[httpcount.Response]uint64{{Port: 50051, Status: 200}: 10},
		H2Responses: map[uint16]uint64{50051: 990},
		Lost:        httpcount.Lost{H2Unparsed: 4},
	}
	c := passiveCounts(d, []uint16{50051}, false)
	if c.Total != 1000 || c.StatusClasses["http2"] != 990 || c.StatusClasses["2xx"] != 10 || c.Uncertainty != 0.005 {
		t.Errorf("%+v", c)
	}
	if !strings.Contains(c.Note, "990 of them HTTP/2") || !strings.Contains(c.Note, "4 writes on HTTP/2 connections not fully parsed") {
		t.Errorf("note %q", c.Note)
	}
}

// A user count for a window cut short is scaled to what was measured,
// and said so; the load counts each answered request once.
func TestRequestCountsScaleAndLoad(t *testing.T) {
	o := &Options{Requests: 15000, Duration: 30 * time.Second}
	res := &Result{}
	c, _ := o.requestCounts(6*time.Second, res, &counters{})
	if c.Total != 3000 || !strings.Contains(c.Note, "scaled to 3000") || len(res.Warnings) != 1 {
		t.Errorf("scaled %+v warnings %v", c, res.Warnings)
	}
	o = &Options{Load: &httpload.Spec{URL: "http://127.0.0.1:1/api/orders/abc", Method: "GET"}}
	res = &Result{Load: &httpload.Result{Completed: 20000, Non2xx: 20000, StatusClasses: map[string]int64{"4xx": 20000}}}
	c, _ = o.requestCounts(time.Second, res, &counters{})
	if c.Total != 20000 || c.StatusClasses["4xx"] != 20000 {
		t.Errorf("load %+v", c)
	}
	// Nothing counted: unknown, with the reason.
	c, why := (&Options{}).requestCounts(time.Second, &Result{}, &counters{passiveCount: &RequestCounts{Note: "port 8443"}})
	if c != nil || !strings.Contains(why, "TLS") {
		t.Errorf("%+v %q", c, why)
	}
}

// countWithMisses is a passive count whose programs count their own runs
// and whose send hook the kernel skipped for some events.
type countWithMisses struct{ readings []probes.SelfCosts }

func (f *countWithMisses) Begin(context.Context) error                { return nil }
func (f *countWithMisses) End(context.Context) (RequestCounts, error) { return RequestCounts{}, nil }
func (f *countWithMisses) Close()                                     {}
func (f *countWithMisses) SelfCosts() (probes.SelfCosts, error) {
	r := f.readings[0]
	f.readings = f.readings[1:]
	return r, nil
}
func (f *countWithMisses) Missed() map[string]uint64 {
	return map[string]uint64{"sock:sock_send_length": 7}
}

// The events the kernel skipped the count's programs for are in the
// program's row and in a warning: the count is short by them.
func TestPassiveCostsSayWhatWasMissed(t *testing.T) {
	hook := "sock:sock_send_length"
	f := &countWithMisses{readings: []probes.SelfCosts{
		{hook: {{Runs: 10, TimedRuns: 1, TimedNs: 300}}},
		{hook: {{Runs: 110, TimedRuns: 2, TimedNs: 800}}},
	}}
	first := PassiveSelf(f)
	var warnings []string
	got := PassiveCosts(f, first, &warnings)
	if len(got) != 1 || got[0].RunCount != 100 || got[0].PerRunNs != 500 || got[0].Missed != 7 {
		t.Errorf("costs %+v: want 100 runs at 500 ns, 7 missed", got)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "short by 7 events") {
		t.Errorf("warnings %q: want one saying the count is short by 7", warnings)
	}
	if got := PassiveCosts(nil, nil, &warnings); got != nil || len(warnings) != 1 {
		t.Errorf("no passive count: costs %+v, warnings %q", got, warnings)
	}
}
