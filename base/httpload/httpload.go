// Package httpload drives a fixed number of HTTP requests (or requests for
// a fixed time) at a service and reports like ab: requests per second, latency percentiles and failures.
// perfscope uses it so that "bytes allocated per request" has an exact
// request count (the Spring Boot allocation study did it by hand with JMeter), and the benchmark
// uses its fixed-rate mode to judge perfscope's own overhead (the APM-agent overhead study).
package httpload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
)

// Spec is one load run.
type Spec struct {
	URL    string
	Method string
	Body   []byte
	Header http.Header
	// Requests bounds the run's requests; Duration, when set, bounds its
	// time: no request starts after it (the ones in flight finish). A
	// run needs at least one bound; with both, the first reached ends it.
	Requests    int
	Duration    time.Duration
	Concurrency int
	// Rate sends requests on a fixed schedule, request i at start +
	// i/Rate, across all workers (0: as fast as the service answers).
	// A request that falls behind its slot (all workers busy, or the
	// client was not scheduled) goes out as soon as a worker is free, so
	// the rate is kept on average and never silently lowered.
	Rate float64
	// Timeout bounds one request.
	Timeout time.Duration
}

// Validate checks a spec before anything is sent.
func (s *Spec) Validate() error {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("load URL %q is not an http(s) URL", s.URL)
	}
	if s.Requests < 0 || s.Requests == 0 && s.Duration <= 0 {
		return errors.New("the load needs --requests N > 0")
	}
	if s.Duration < 0 {
		return fmt.Errorf("load duration %v is negative", s.Duration)
	}
	if s.Concurrency <= 0 || s.Concurrency > 10000 {
		return fmt.Errorf("--concurrency %d is outside 1..10000", s.Concurrency)
	}
	if s.Method == "" {
		s.Method = http.MethodGet
	}
	if s.Timeout <= 0 {
		s.Timeout = 30 * time.Second
	}
	return nil
}

// ParseHeader parses "Name: value" (as curl's -H).
func ParseHeader(h http.Header, kv string) error {
	k, v, ok := strings.Cut(kv, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("header %q is not Name:value", kv)
	}
	h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	return nil
}

// Result is what a run measured.
type Result struct {
	Requests int64 `json:"requests"`
	// Completed counts requests answered with any status (non-2xx
	// included: they were served); Failures the ones that got no answer.
	Completed int64 `json:"completed"`
	Failures  int64 `json:"failures"`
	// Non2xx is the part of Completed answered outside 2xx; StatusClasses
	// splits Completed by class ("2xx", "4xx", ...).
	Non2xx        int64            `json:"non_2xx"`
	StatusClasses map[string]int64 `json:"status_classes"`
	Seconds       float64          `json:"seconds"`
	RPS           float64          `json:"requests_per_second"`
	P50Ns         int64            `json:"p50_ns"`
	P90Ns         int64            `json:"p90_ns"`
	P99Ns         int64            `json:"p99_ns"`
	MaxNs         int64            `json:"max_ns"`
	MeanNs        int64            `json:"mean_ns"`
	// ScheduleLagP99Ns and ScheduleLagMaxNs (with Rate only) say how
	// late requests left against their slot: a backlog in the client
	// when they exceed the timer granularity (about 1 ms in Go).
	ScheduleLagP99Ns int64 `json:"schedule_lag_p99_ns,omitempty"`
	ScheduleLagMaxNs int64 `json:"schedule_lag_max_ns,omitempty"`
	// FirstError is the first failure's message, for the report.
	FirstError string `json:"first_error,omitempty"`
}

// Run sends spec.Requests requests with spec.Concurrency workers and
// returns when all are answered, failed, or ctx is cancelled (then the
// result covers what was sent).
func Run(ctx context.Context, spec Spec) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	tr := &http.Transport{
		MaxIdleConns:        spec.Concurrency,
		MaxIdleConnsPerHost: spec.Concurrency,
		MaxConnsPerHost:     spec.Concurrency,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: spec.Timeout}

	l := newLoadRun(spec, client)
	var wg sync.WaitGroup
	panics := make([]error, spec.Concurrency) // one slot per worker, no lock
	for w := 0; w < spec.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer gosafe.Recover(&panics[w])
			l.worker(ctx, w)
		}()
	}
	wg.Wait()
	if err := errors.Join(panics...); err != nil {
		return Result{}, err
	}
	return l.result(time.Since(l.start)), ctx.Err()
}

// loadRun is what a run's workers share: the next request number, the
// schedule and the tallies they count into.
type loadRun struct {
	spec            Spec
	client          *http.Client
	next            atomic.Int64
	limit           int64
	start, deadline time.Time
	// Each worker keeps its own latencies (and lags): a time-bounded run
	// does not know its count in advance.
	latencies        [][]int64
	lags             [][]int64
	failures, non2xx atomic.Int64
	classes          [6]atomic.Int64 // 0: outside 100-599
	firstErr         sync.Once
	firstMsg         string
}

func newLoadRun(spec Spec, client *http.Client) *loadRun {
	l := &loadRun{spec: spec, client: client}
	l.limit = int64(spec.Requests)
	if l.limit == 0 {
		l.limit = math.MaxInt64 // bounded by Duration (Validate)
	}
	l.latencies = make([][]int64, spec.Concurrency)
	if spec.Rate > 0 {
		l.lags = make([][]int64, spec.Concurrency)
	}
	l.start = time.Now()
	if spec.Duration > 0 {
		l.deadline = l.start.Add(spec.Duration)
	}
	return l
}

// slot is when request i is due. A ticker cannot do this: Go's timers
// fire about 1 ms late on an idle runtime and a ticker drops the ticks
// it missed, which held a 2000/s schedule to ~1000/s.
func (l *loadRun) slot(i int64) time.Time {
	return l.start.Add(time.Duration(float64(i) * float64(time.Second) / l.spec.Rate))
}

// worker w takes request numbers until the count, the deadline or ctx
// ends the run; with a rate, it waits for each request's slot.
func (l *loadRun) worker(ctx context.Context, w int) {
	var timer *time.Timer
	for {
		i := l.next.Add(1) - 1
		if i >= l.limit || ctx.Err() != nil || !l.deadline.IsZero() && !time.Now().Before(l.deadline) {
			return
		}
		if l.lags != nil {
			due := l.slot(i)
			if wait := time.Until(due); wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
					defer timer.Stop()
				} else {
					timer.Reset(wait)
				}
				select {
				case <-timer.C:
				case <-ctx.Done():
					return
				}
			}
			if !l.deadline.IsZero() && !due.Before(l.deadline) {
				return
			}
			l.lags[w] = append(l.lags[w], int64(time.Since(due)))
		}
		l.send(ctx, w)
	}
}

// send makes one request from worker w and counts its latency, its
// status class and, for a failure or a non-2xx answer, the first message.
func (l *loadRun) send(ctx context.Context, w int) {
	t0 := time.Now()
	status, err := do(ctx, l.client, l.spec)
	l.latencies[w] = append(l.latencies[w], int64(time.Since(t0)))
	if err == nil {
		class := status / 100
		if class < 1 || class > 5 {
			class = 0
		}
		l.classes[class].Add(1)
	}
	switch {
	case err != nil:
		l.failures.Add(1)
		l.firstErr.Do(func() { l.firstMsg = err.Error() })
	case status < 200 || status > 299:
		l.non2xx.Add(1)
		l.firstErr.Do(func() { l.firstMsg = fmt.Sprintf("HTTP %d", status) })
	}
}

// result is the workers' tallies over the run's elapsed time.
func (l *loadRun) result(elapsed time.Duration) Result {
	lat := slices.Concat(l.latencies...)
	sent := int64(len(lat))
	r := Result{Requests: int64(l.spec.Requests), Failures: l.failures.Load(), Non2xx: l.non2xx.Load(), Seconds: elapsed.Seconds(), FirstError: l.firstMsg}
	if l.spec.Requests == 0 {
		r.Requests = sent
	}
	r.Completed = sent - r.Failures
	r.StatusClasses = map[string]int64{}
	for c := range l.classes {
		if n := l.classes[c].Load(); n > 0 {
			name := "other"
			if c > 0 {
				name = fmt.Sprintf("%dxx", c)
			}
			r.StatusClasses[name] = n
		}
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		var sum int64
		for _, ns := range lat {
			sum += ns
		}
		r.MeanNs = sum / int64(n)
		r.P50Ns, r.P90Ns, r.P99Ns, r.MaxNs = percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), lat[n-1]
	}
	if lag := slices.Concat(l.lags...); len(lag) > 0 {
		slices.Sort(lag)
		r.ScheduleLagP99Ns, r.ScheduleLagMaxNs = percentile(lag, 0.99), lag[len(lag)-1]
	}
	if elapsed > 0 {
		r.RPS = float64(r.Completed) / elapsed.Seconds()
	}
	return r
}

// percentile uses the nearest-rank method on sorted values, as ab does.
func percentile(sorted []int64, q float64) int64 {
	i := int(float64(len(sorted))*q+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func do(ctx context.Context, c *http.Client, spec Spec) (int, error) {
	var body io.Reader
	if spec.Body != nil {
		body = bytes.NewReader(spec.Body)
	}
	req, err := http.NewRequestWithContext(ctx, spec.Method, spec.URL, body)
	if err != nil {
		return 0, err
	}
	for k, v := range spec.Header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	// Draining lets the connection be reused, as a real client would.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}
