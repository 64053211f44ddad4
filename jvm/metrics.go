package jvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// MetricsSource counts requests from a metrics endpoint the service
// already exposes (Prometheus text or OpenMetrics: Spring Boot Actuator,
// Micrometer, Dropwizard, OpenTelemetry's Prometheus exporter): the
// request counter is read at the window's start and end and the
// difference summed over the matching series. It sees every protocol the
// framework counts, TLS and HTTP/2 included.
type MetricsSource struct {
	URL string
	// Metric is the request counter's family name; empty tries
	// KnownRequestMetrics in order.
	Metric string
	// Match keeps series whose label matches (all must); Exclude drops
	// series whose label matches (any). Without a filter on the endpoint
	// label, the Actuator's own endpoints are excluded: the scrapes
	// perfscope makes are requests too.
	Match, Exclude map[string]*regexp.Regexp
	Client         *http.Client
}

// KnownRequestMetrics are the request counters of common JVM stacks, as
// metric families (the _count of a summary or histogram, or a counter).
var KnownRequestMetrics = []string{
	"http_server_requests_seconds",                              // Micrometer (Spring Boot, Quarkus, Micronaut)
	"http_server_request_duration_seconds",                      // OpenTelemetry semantic conventions
	"http_server_requests",                                      // Micrometer counters, generic
	"io_dropwizard_jetty_MutableServletContextHandler_requests", // Dropwizard
	"jetty_requests",                                            // Prometheus Jetty collector
}

// Label names of the endpoint, status and method in those families.
var (
	endpointLabels = []string{"uri", "http_route", "route", "path", "handler", "endpoint"}
	statusLabels   = []string{"status", "http_response_status_code", "code", "status_code"}
	methodLabels   = []string{"method", "http_request_method"}
)

// series is one labelled request count.
type series struct {
	labels map[string]string
	count  float64
}

// scrape is the request counter's series at one moment.
type scrape struct {
	family string
	series map[string]series // by canonical label string
	at     time.Time
	took   time.Duration
}

var errNoRequestMetric = errors.New("no request counter")

func (m MetricsSource) client() *http.Client {
	if m.Client != nil {
		return m.Client
	}
	return &http.Client{Timeout: 10 * time.Second}
}

func (m MetricsSource) scrape(ctx context.Context) (scrape, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		return scrape{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4,application/openmetrics-text;version=1.0.0;q=0.5")
	resp, err := m.client().Do(req)
	if err != nil {
		return scrape{}, fmt.Errorf("scrape %s: %w", m.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("scrape %s: HTTP %d", m.URL, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return scrape{}, fmt.Errorf("scrape %s: %w", m.URL, err)
	}
	families, err := decode(m.onlyRequestFamilies(body), expfmt.ResponseFormat(resp.Header))
	if err != nil {
		return scrape{}, fmt.Errorf("scrape %s: %w", m.URL, err)
	}
	s, err := m.pick(families)
	s.at, s.took = start, time.Since(start)
	return s, err
}

// onlyRequestFamilies keeps the lines of the families that may hold the
// request counter (and OpenMetrics' # EOF): the rest of an exposition is
// none of perfscope's business, and a family type the parser does not know
// (OpenMetrics "info", which Micrometer publishes) must not make the
// request count unreadable.
func (m MetricsSource) onlyRequestFamilies(body []byte) io.Reader {
	wanted := KnownRequestMetrics
	if m.Metric != "" {
		wanted = familyNames(m.Metric)
	}
	belongs := func(name string) bool {
		for _, w := range wanted {
			base := strings.TrimSuffix(strings.TrimSuffix(w, "_count"), "_total")
			if name == base || strings.HasPrefix(name, base+"_") {
				return true
			}
		}
		return false
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(body), "\n") {
		t := strings.TrimSpace(line)
		name := t
		if rest, ok := strings.CutPrefix(t, "#"); ok {
			f := strings.Fields(rest)
			if len(f) == 1 && f[0] == "EOF" {
				out.WriteString(line)
				continue
			}
			if len(f) < 2 {
				continue
			}
			name = f[1]
		} else if i := strings.IndexAny(t, "{ "); i >= 0 {
			name = t[:i]
		}
		if name != "" && belongs(name) {
			out.WriteString(line)
		}
	}
	return strings.NewReader(out.String())
}

func decode(r io.Reader, format expfmt.Format) (map[string]*dto.MetricFamily, error) {
	if format.FormatType() == expfmt.TypeUnknown {
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	}
	dec := expfmt.NewDecoder(io.LimitReader(r, 64<<20), format)
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		out[mf.GetName()] = &mf
	}
}

// familyNames are the names a family may be published under: OpenMetrics
// strips a counter's _total, the text format keeps it, and a user may name
// a summary by its _count series.
func familyNames(name string) []string {
	base := strings.TrimSuffix(strings.TrimSuffix(name, "_count"), "_total")
	return []string{name, base, base + "_total"}
}

func (m MetricsSource) pick(families map[string]*dto.MetricFamily) (scrape, error) {
	wanted := KnownRequestMetrics
	if m.Metric != "" {
		wanted = []string{m.Metric}
	}
	for _, w := range wanted {
		for _, name := range familyNames(w) {
			mf, ok := families[name]
			if !ok {
				continue
			}
			s := scrape{family: name, series: map[string]series{}}
			for _, metric := range mf.GetMetric() {
				count, ok := sampleCount(mf.GetType(), metric)
				if !ok {
					continue
				}
				labels := map[string]string{}
				for _, lp := range metric.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				if !m.keep(labels) {
					continue
				}
				s.series[canonical(labels)] = series{labels: labels, count: count}
			}
			return s, nil
		}
	}
	if m.Metric != "" {
		return scrape{}, fmt.Errorf("%w: %s has no metric %s", errNoRequestMetric, m.URL, m.Metric)
	}
	return scrape{}, fmt.Errorf("%w: %s publishes none of %s (name yours with --requests-metric)", errNoRequestMetric, m.URL, strings.Join(KnownRequestMetrics, ", "))
}

func sampleCount(t dto.MetricType, m *dto.Metric) (float64, bool) {
	switch t {
	case dto.MetricType_SUMMARY:
		return float64(m.GetSummary().GetSampleCount()), m.Summary != nil
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount()), m.Histogram != nil
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), m.Counter != nil
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue(), m.Untyped != nil
	}
	return 0, false
}

func firstLabel(labels map[string]string, names []string) string {
	for _, n := range names {
		if v, ok := labels[n]; ok {
			return v
		}
	}
	return ""
}

func (m MetricsSource) keep(labels map[string]string) bool {
	for name, re := range m.Match {
		if !re.MatchString(labels[name]) {
			return false
		}
	}
	for name, re := range m.Exclude {
		if re.MatchString(labels[name]) {
			return false
		}
	}
	if !m.filtersEndpoint() && strings.HasPrefix(firstLabel(labels, endpointLabels), "/actuator") {
		return false
	}
	return true
}

func (m MetricsSource) filtersEndpoint() bool {
	for _, n := range endpointLabels {
		if m.Match[n] != nil || m.Exclude[n] != nil {
			return true
		}
	}
	return false
}

func canonical(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, labels[k])
	}
	return b.String()
}

// delta is the requests between two scrapes: per series, after − before;
// a series that appeared counts whole (Micrometer creates a series on its
// first request); a series that went down was reset (the service
// restarted its registry) and counts from zero.
func delta(before, after scrape) (RequestCounts, int) {
	c := RequestCounts{StatusClasses: map[string]int64{}}
	byEndpoint := map[[2]string]int64{}
	resets := 0
	for key, a := range after.series {
		n := a.count
		if b, ok := before.series[key]; ok {
			if a.count >= b.count {
				n = a.count - b.count
			} else {
				resets++
			}
		}
		r := int64(n + 0.5)
		if r == 0 {
			continue
		}
		c.Total += r
		if status := firstLabel(a.labels, statusLabels); len(status) == 3 && status[0] >= '1' && status[0] <= '5' {
			c.StatusClasses[status[:1]+"xx"] += r
		}
		if ep := firstLabel(a.labels, endpointLabels); ep != "" {
			byEndpoint[[2]string{firstLabel(a.labels, methodLabels), ep}] += r
		}
	}
	for k, n := range byEndpoint {
		c.Endpoints = append(c.Endpoints, EndpointCount{Method: k[0], Endpoint: k[1], Requests: n})
	}
	sortEndpointCounts(c.Endpoints)
	if len(c.StatusClasses) == 0 {
		c.StatusClasses = nil
	}
	return c, resets
}
