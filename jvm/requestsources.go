package jvm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/perfscope/perfscope/probes"
)

// counters are the request sources of one window.
type counters struct {
	metrics    RequestCounter
	passive    RequestCounter
	passiveWhy string // why there is no passive count
	mapping    HandlerMapping
	// passiveSelf is the passive count's programs' own run counters when
	// its window began (nil when they could not be read).
	passiveSelf  probes.SelfCosts
	metricsCount *RequestCounts
	passiveCount *RequestCounts
}

func (c *counters) close() {
	if c.passive != nil {
		c.passive.Close()
	}
}

// ErrBadSource marks a request source the user named that cannot be used
// (an unreachable metrics URL, a metric it does not publish).
var ErrBadSource = errors.New("request source unusable")

func (o *Options) openCounters(ctx context.Context, res *Result) (*counters, error) {
	c := &counters{}
	if o.Load != nil {
		return c, nil
	}
	if o.RequestsFrom != nil {
		m := NewMetricsCounter(*o.RequestsFrom)
		// A first reading proves the source before anything runs in
		// the JVM; the window's own reading comes later.
		if err := m.Begin(ctx); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSource, err)
		}
		c.metrics = m
	}
	mappings := o.MappingsURL
	if mappings == "" && o.RequestsFrom != nil {
		mappings = actuatorSibling(o.RequestsFrom.URL, "mappings")
	}
	if mappings != "" {
		client := &http.Client{Timeout: 10 * time.Second}
		if o.RequestsFrom != nil && o.RequestsFrom.Client != nil {
			client = o.RequestsFrom.Client
		}
		m, err := SpringMappings(ctx, client, mappings)
		if err != nil {
			if o.MappingsURL != "" {
				return nil, fmt.Errorf("%w: --mappings: %v", ErrBadSource, err)
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("no handler → endpoint mapping from %s (%v): per-endpoint bytes are per handler only", mappings, err))
		} else {
			c.mapping = m
		}
	}
	switch {
	case o.Passive == PassiveOff:
		c.passiveWhy = "the passive count is off (--count off)"
		return c, nil
	case o.Passive == PassiveAuto && (o.RequestsFrom != nil || o.Requests > 0):
		// Another source counts; the passive count would only check it,
		// and it costs every process on the machine about 0.1 µs per
		// syscall while it runs (BENCHMARKS.md): --count on asks for it.
		c.passiveWhy = "the passive count was not needed (--count on adds it as a cross-check)"
		return c, nil
	}
	open := o.OpenPassive
	if open == nil {
		open = func(pid int, ports []uint16) (RequestCounter, error) {
			return OpenPassiveCounter(o.FS.Root, pid, ports, false)
		}
	}
	p, err := open(o.PID, o.HTTPPorts)
	if err != nil {
		if o.Passive == PassiveRequired {
			return nil, fmt.Errorf("passive request count: %w", err)
		}
		c.passiveWhy = "the passive HTTP count could not run: " + err.Error()
		return c, nil
	}
	c.passive = p
	return c, nil
}

// actuatorSibling turns .../actuator/prometheus into .../actuator/NAME;
// "" when the URL is not an Actuator endpoint.
func actuatorSibling(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	dir, last, ok := strings.Cut(strings.TrimSuffix(u.Path, "/"), "/actuator/")
	if !ok || strings.Contains(last, "/") {
		return ""
	}
	u.Path = dir + "/actuator/" + name
	u.RawQuery = ""
	return u.String()
}

// requestCounts picks the window's request count: perfscope's load, then
// the user's count, then the metrics source, then the passive count. It
// returns nil with the reason when none is known.
func (o *Options) requestCounts(window time.Duration, res *Result, cs *counters) (*RequestCounts, string) {
	switch {
	case res.Load != nil:
		l := res.Load
		c := &RequestCounts{Total: l.Completed, Source: "load", StatusClasses: l.StatusClasses}
		c.Note = fmt.Sprintf("%d requests sent by perfscope, %d answered (%d outside 2xx), %d without an answer", l.Completed+l.Failures, l.Completed, l.Non2xx, l.Failures)
		if u, err := url.Parse(o.Load.URL); err == nil {
			c.Endpoints = []EndpointCount{{Method: o.Load.Method, Endpoint: u.Path, Requests: l.Completed}}
		}
		return c, ""
	case o.Requests > 0:
		c := &RequestCounts{Total: o.Requests, Source: "user", Note: "--requests, as given"}
		if window < o.Duration*99/100 {
			// The user counted requests over --duration; only part of
			// it was measured. Spread evenly, the measured part saw
			// this share.
			scaled := int64(math.Round(float64(o.Requests) * window.Seconds() / o.Duration.Seconds()))
			c.Total = scaled
			c.Note = fmt.Sprintf("--requests %d was for %v but only %.1fs were measured: scaled to %d, assuming an even rate", o.Requests, o.Duration, window.Seconds(), scaled)
			c.Uncertainty = 0.1
			res.Warnings = append(res.Warnings, c.Note)
		}
		return c, ""
	case cs.metricsCount != nil:
		return cs.metricsCount, ""
	case cs.passiveCount != nil && cs.passiveCount.Total > 0:
		return cs.passiveCount, ""
	}
	why := "no request count: no --load, --requests or --requests-from"
	switch {
	case cs.passiveCount != nil:
		why += "; the passive HTTP count saw no HTTP/1.x or h2c response from the JVM (" + cs.passiveCount.Note + "); TLS (HTTP/2 over TLS included) is not visible to it: pass --requests-from URL"
	case cs.passiveWhy != "":
		why += "; " + cs.passiveWhy
	}
	return nil, why
}
