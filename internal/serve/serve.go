package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	toolkit "github.com/prometheus/exporter-toolkit/web"

	"github.com/perfscope/perfscope/measure"
)

// Options configure a served recipe.
type Options struct {
	// Recipe is a built-in's name or a recipe file; Params its
	// parameters (--set).
	Recipe string
	Params map[string]string
	Listen string
	// Web, when set, is the --web.config.file serve answers with: TLS
	// and basic auth by the exporter toolkit.
	Web      *WebConfig
	Interval time.Duration
	// TopWorkloads is how many workloads (namespace, pod, container)
	// keep their own series in each workload-labelled family per window;
	// the rest are "other" (≤ 0: DefaultTopN).
	TopWorkloads int
	// Log receives failed windows and the HTTP server's errors, each
	// distinct one once (then counted).
	Log io.Writer
	// Started is the process start, from which the attach time counts.
	Started time.Time
	// OnListen is called with the bound address once the server accepts
	// connections (tests listen on port 0).
	OnListen func(addr string)
	// OnWindow is called after each window is added (tests, the soak).
	OnWindow func(Window)
	// Version is perfscope's, for the /report page's header.
	Version string
}

// Server is a recipe measured window after window on one session, and the
// HTTP server exposing it.
type Server struct {
	opts    Options
	recipe  *Recipe
	session *measure.Session
	src     measure.Sources
	metrics *Metrics
	reg     *prometheus.Registry
	// budget is set by Run before it calls OnListen.
	budget FDBudget
	// page is the latest window's report, served at /report.
	page latestPage
}

// Open builds the recipe and attaches its probes once. The caller closes
// the server (Run does when it returns).
func Open(src measure.Sources, o Options) (*Server, error) {
	r, err := LoadRecipe(src, o.Recipe, o.Params)
	if err != nil {
		return nil, err
	}
	s, err := measure.Open(src, r.Parts()...)
	if err != nil {
		return nil, err
	}
	if err := r.m.Opened(); err != nil {
		s.Close()
		return nil, err
	}
	m := newMetrics(r.Name(), o.TopWorkloads)
	return &Server{opts: o, recipe: r, session: s, src: src, metrics: m, reg: newRegistry(m)}, nil
}

// newRegistry holds the recipe's metrics and perfscope's own overhead
// beyond its BPF programs: its CPU time and memory (process collector)
// and its Go runtime. The runtime's memstats are left out: their gauge
// go_memstats_alloc_bytes and counter go_memstats_alloc_bytes_total are
// one family name in OpenMetrics, which its parsers refuse; the heap is in
// go_memory_classes_* instead.
func newRegistry(m *Metrics) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "perfscope"}),
		collectors.NewGoCollector(collectors.WithGoCollectorMemStatsMetricsDisabled(),
			collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsGC, collectors.MetricsMemory, collectors.MetricsScheduler)))
	return reg
}

// RecipeName is the served recipe's name (a file's recipe names itself).
func (s *Server) RecipeName() string { return s.recipe.Name() }

// Listening is the line that says the server listens at addr: the
// recipe, the window, the metrics' URL (https with TLS), and the
// connections it holds at once (and basic auth). Call it from OnListen.
func (s *Server) Listening(addr string) string {
	scheme, auth := "http", ""
	if s.opts.Web != nil && s.opts.Web.TLS {
		scheme = "https"
	}
	if s.opts.Web != nil && s.opts.Web.BasicAuth {
		auth = ", basic auth"
	}
	return fmt.Sprintf("perfscope serve: recipe %s, a window every %v, metrics at %s://%s/metrics (at most %d connections at once%s)",
		s.RecipeName(), s.opts.Interval, scheme, addr, s.budget.MaxConnections, auth)
}

// FDBudget is how Run divided the open-file limit (set before OnListen).
func (s *Server) FDBudget() FDBudget { return s.budget }

// Close detaches every probe.
func (s *Server) Close() error { return s.session.Close() }

// Handler serves /metrics (OpenMetrics or the Prometheus text format, as
// the scraper asks), /report (the latest window's HTML page), /healthz
// (the process serves) and /readyz (a window completed within the last
// three intervals). Each answers GET and HEAD
// only: any other method is 405 with an Allow header.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	// At most a few gathers at once: each builds the whole exposition,
	// and a request flood must not multiply that.
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{EnableOpenMetrics: true,
		ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: maxScrapesInFlight}))
	mux.HandleFunc("GET /report", s.serveReport)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		last := s.metrics.LastWindowEnd()
		switch {
		case last.IsZero():
			http.Error(w, "no window completed yet", http.StatusServiceUnavailable)
		case time.Since(last) > 3*s.opts.Interval+10*time.Second:
			http.Error(w, fmt.Sprintf("last window ended %s ago", time.Since(last).Round(time.Second)), http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "ok\n")
		}
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "perfscope serve --recipe %s: /metrics, /report, /healthz, /readyz\n", s.recipe.Name())
	})
	return mux
}

// HTTP timeouts, per connection. A scraper sends its request at once and
// reads an exposition of a few hundred KiB; a client that does not is
// closed rather than left holding a descriptor.
const (
	// readHeaderTimeout bounds a new connection's wait for its request.
	readHeaderTimeout = 5 * time.Second
	// readTimeout bounds reading a whole request (a GET has no body).
	readTimeout = 10 * time.Second
	// writeTimeout bounds a scrape, from its request read to its last
	// byte written.
	writeTimeout = 30 * time.Second
	// idleTimeout keeps a scraper's connection between scrapes: longer
	// than Prometheus' default 1 min interval, so it is reused rather
	// than reopened (idle connections are the first closed at the limit).
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes is far more than a scraper's request.
	maxHeaderBytes = 16 << 10
	// maxScrapesInFlight: more get 503 at once.
	maxScrapesInFlight = 8
)

// Run serves until ctx is cancelled: it measures window after window and
// adds each to the metrics; on cancel the window in progress ends (its
// readings are still taken), the HTTP server drains its scrapes and the
// probes are detached. The server holds at most FDBudget.MaxConnections
// connections, computed from the open-file limit once the probes are
// open, so that the measuring loop always has descriptors.
func (s *Server) Run(ctx context.Context) error {
	defer s.Close()
	budget, err := budgetFDs()
	if err != nil {
		return err
	}
	if err := budget.check(); err != nil {
		return &badInput{err.Error()}
	}
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		// The address is the user's --listen: taken or not this host's.
		return measure.MarkBadInput(fmt.Errorf("listen on %s: %w", s.opts.Listen, err))
	}
	s.budget = budget
	table := newConnTable(budget.MaxConnections)
	s.reg.MustRegister(newConnCollector(table))
	errLog := io.Discard
	if s.opts.Log != nil {
		errLog = &httpErrors{w: s.opts.Log}
	}
	hs := &http.Server{Handler: table.protect(s.Handler()),
		ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ConnState: table.connState, ConnContext: connContext,
		ErrorLog: log.New(errLog, "", 0)}
	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := serveHTTP(hs, &limitedListener{Listener: ln, table: table}, s.opts.Web, errLog); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	if s.opts.OnListen != nil {
		s.opts.OnListen(ln.Addr().String())
	}
	err = s.measure(ctx, serveErr, s.window, sleep)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if e := hs.Shutdown(shutdown); e != nil && err == nil {
		err = fmt.Errorf("stop the HTTP server: %w", e)
	}
	wg.Wait()
	return err
}

// serveHTTP serves hs on ln, through the exporter toolkit with web's
// TLS and basic auth when web is set.
func serveHTTP(hs *http.Server, ln net.Listener, web *WebConfig, errLog io.Writer) error {
	if web == nil {
		return hs.Serve(ln)
	}
	path := web.Path
	return toolkit.Serve(ln, hs, &toolkit.FlagConfig{WebConfigFile: &path}, slog.New(toolkitLog{errLog}))
}

// window measures one window and turns it into metrics' input; started is
// the process start for the first window (its attach time), else zero.
func (s *Server) window(ctx context.Context, started time.Time) (Window, error) {
	if s.src.Workloads != nil {
		s.src.Workloads.Reset()
	}
	run, err := s.session.Measure(ctx, s.recipe.Window(s.opts.Interval, started))
	if err != nil || ctx.Err() != nil {
		return Window{}, err
	}
	return s.recipe.Collect(ctx, s.src, run), nil
}

// measure runs windows until ctx ends or the HTTP server fails. A failed
// window is retried after a delay that doubles with each failure in a row
// (up to retryMax), and said once per distinct error (windowFailures).
func (s *Server) measure(ctx context.Context, serveErr <-chan error,
	window func(context.Context, time.Time) (Window, error), wait func(context.Context, time.Duration) bool) error {
	fails := newWindowFailures(s.opts.Log)
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-serveErr:
			return fmt.Errorf("serve HTTP: %w", err)
		default:
		}
		var started time.Time
		if first {
			started = s.opts.Started
		}
		win, err := window(ctx, started)
		if ctx.Err() != nil {
			// A window cut short by shutdown is not a full interval:
			// counters must not jump by a partial window's scale.
			return nil
		}
		if err != nil {
			s.metrics.Failed()
			if !wait(ctx, fails.failed(err)) {
				return nil
			}
			continue
		}
		fails.completed()
		first = false
		s.metrics.Add(win)
		if win.Report != nil {
			win.Report.Meta.Version = s.opts.Version
			s.page.set(win.Report)
		}
		if s.opts.OnWindow != nil {
			s.opts.OnWindow(win)
		}
	}
}
