package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/perfscope/perfscope/recipes"
)

// Options configure a served recipe.
type Options struct {
	// Recipe is a built-in's name or a recipe file; Params its
	// parameters (--set).
	Recipe   string
	Params   map[string]string
	Listen   string
	Interval time.Duration
	// Log receives one line per failed window and the server's errors.
	Log io.Writer
	// Started is the process start, from which the attach time counts.
	Started time.Time
	// OnListen is called with the bound address once the server accepts
	// connections (tests listen on port 0).
	OnListen func(addr string)
	// OnWindow is called after each window is added (tests, the soak).
	OnWindow func(Window)
}

// Server is a recipe measured window after window on one session, and the
// HTTP server exposing it.
type Server struct {
	opts    Options
	recipe  *Recipe
	session *recipes.Session
	src     recipes.Sources
	metrics *Metrics
	reg     *prometheus.Registry
}

// Open builds the recipe and attaches its probes once. The caller closes
// the server (Run does when it returns).
func Open(src recipes.Sources, o Options) (*Server, error) {
	r, err := LoadRecipe(src, o.Recipe, o.Params)
	if err != nil {
		return nil, err
	}
	s, err := recipes.Open(src, r.Parts()...)
	if err != nil {
		return nil, err
	}
	if err := r.m.Opened(); err != nil {
		s.Close()
		return nil, err
	}
	m := NewMetrics(r.Name())
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

// Close detaches every probe.
func (s *Server) Close() error { return s.session.Close() }

// Handler serves /metrics (OpenMetrics or the Prometheus text format, as
// the scraper asks), /healthz (the process serves) and /readyz (a window
// completed within the last three intervals).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
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
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "perfscope serve --recipe %s: /metrics, /healthz, /readyz\n", s.recipe.Name())
	})
	return mux
}

// Run serves until ctx is cancelled: it measures window after window and
// adds each to the metrics; on cancel the window in progress ends (its
// readings are still taken), the HTTP server drains its scrapes and the
// probes are detached.
func (s *Server) Run(ctx context.Context) error {
	defer s.Close()
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.opts.Listen, err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	if s.opts.OnListen != nil {
		s.opts.OnListen(ln.Addr().String())
	}
	err = s.measure(ctx, serveErr)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if e := hs.Shutdown(shutdown); e != nil && err == nil {
		err = fmt.Errorf("stop the HTTP server: %w", e)
	}
	wg.Wait()
	return err
}

func (s *Server) measure(ctx context.Context, serveErr <-chan error) error {
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
		run, err := s.session.Measure(ctx, s.recipe.Window(s.opts.Interval, started))
		if ctx.Err() != nil {
			// A window cut short by shutdown is not a full interval:
			// counters must not jump by a partial window's scale.
			return nil
		}
		if err != nil {
			s.metrics.Failed()
			if s.opts.Log != nil {
				fmt.Fprintf(s.opts.Log, "perfscope serve: window failed: %v\n", err)
			}
			continue
		}
		first = false
		win := s.recipe.Collect(ctx, s.src, run)
		s.metrics.Add(win)
		if s.opts.OnWindow != nil {
			s.opts.OnWindow(win)
		}
	}
}
