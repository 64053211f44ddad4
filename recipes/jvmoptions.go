package recipes

import (
	"context"
	"errors"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/measure"
)

// maxBodyBytes bounds a load's request body read from a file.
const maxBodyBytes = 16 << 20

// bindJVM turns the async-profiler collector's options into jvm.Options,
// checking how they go together: the window's load or request sources,
// the profile, the attribution. Every refusal is bad input naming the
// parameter (or the command's flag) that set the option. A body file is
// read by Prepare (readJVMBody).
func (p *Plan) bindJVM(u boundUse) error {
	opt := func(name string) any { return u.opts[name] }
	name := func(option string) string { return p.useOptionName(u, option) }
	o := jvm.Options{
		PID:      int(opt("pid").(int64)),
		Duration: p.window.Duration,
		Requests: opt("requests").(int64),
		Locator:  asprof.Locator{Explicit: opt("library").(string)},
		// Threads: every stack starts at its thread, for the split between
		// request-serving threads and the rest.
		Profile:          asprof.Options{Event: asprof.Event(opt("event").(string)), AllocInterval: opt("alloc_interval").(int64), Threads: true},
		TopSites:         int(opt("top").(int64)),
		TargetRPS:        opt("target_rps").(float64),
		TargetGCInterval: opt("target_gc_interval").(time.Duration),
		MappingsURL:      opt("mappings").(string),
	}
	switch opt("count").(string) {
	case "on":
		o.Passive = jvm.PassiveRequired
	case "off":
		o.Passive = jvm.PassiveOff
	}
	for _, port := range opt("http_ports").([]int64) {
		o.HTTPPorts = append(o.HTTPPorts, uint16(port))
	}
	for option, dst := range map[string]**regexp.Regexp{"request_threads": &o.Attribution.RequestThreads, "handler_frames": &o.Attribution.HandlerFrames} {
		if src := opt(option).(string); src != "" {
			re, err := regexp.Compile(src)
			if err != nil {
				return measure.BadInput("%s %q: %v", name(option), src, err)
			}
			*dst = re
		}
	}
	load := opt("load").(string)
	from := opt("requests_from").(string)
	headers := opt("header").([]string)
	body, bodyFile := opt("body").(string), opt("body_file").(string)
	if load == "" {
		if body != "" || bodyFile != "" || len(headers) > 0 || opt("method").(string) != "GET" {
			return measure.BadInput("%s, %s and %s shape the load: add %s URL", name("method"), name("body"), name("header"), name("load"))
		}
		if from == "" {
			if opt("requests_metric").(string) != "" || len(opt("requests_match").([]string)) > 0 {
				return measure.BadInput("%s and %s select series of %s: add %s URL", name("requests_metric"), name("requests_match"), name("requests_from"), name("requests_from"))
			}
		} else if err := p.metricsSource(u, &o, from); err != nil {
			return err
		}
		p.jvmOptions = &o
		return nil
	}
	spec, err := p.loadSpec(u, o.Requests)
	if err != nil {
		return err
	}
	o.Load, o.Requests = spec, 0
	p.jvmOptions = &o
	return nil
}

// metricsSource reads the requests_from options: the endpoint, its
// counter, and the series filters (LABEL=REGEX keeps, LABEL!=REGEX drops;
// each REGEX matches a whole label value).
func (p *Plan) metricsSource(u boundUse, o *jvm.Options, from string) error {
	src := &jvm.MetricsSource{URL: from, Metric: u.opts["requests_metric"].(string), Match: map[string]*regexp.Regexp{}, Exclude: map[string]*regexp.Regexp{}}
	for _, m := range u.opts["requests_match"].([]string) {
		label, re, neg := "", "", false
		if l, r, ok := strings.Cut(m, "!="); ok {
			label, re, neg = l, r, true
		} else if l, r, ok := strings.Cut(m, "="); ok {
			label, re = l, r
		}
		if label == "" {
			return measure.BadInput("%s %q: want LABEL=REGEX or LABEL!=REGEX", p.useOptionName(u, "requests_match"), m)
		}
		compiled, err := regexp.Compile("^(?:" + re + ")$")
		if err != nil {
			return measure.BadInput("%s %q: %v", p.useOptionName(u, "requests_match"), m, err)
		}
		if neg {
			src.Exclude[label] = compiled
		} else {
			src.Match[label] = compiled
		}
	}
	o.RequestsFrom = src
	return nil
}

// readJVMBody reads the load's body file, if the recipe names one.
func (p *Plan) readJVMBody(u boundUse) error {
	file := u.opts["body_file"].(string)
	if file == "" || p.jvmOptions == nil || p.jvmOptions.Load == nil {
		return nil
	}
	b, err := readBody(file)
	if err != nil {
		return measure.BadInput("%s %s: %v", p.useOptionName(u, "body_file"), file, err)
	}
	p.jvmOptions.Load.Body = b
	return nil
}

// readBody reads a request body file: a regular file (a FIFO would block
// before the window), at most maxBodyBytes.
func readBody(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, pathReason(err)
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := safeio.ReadFile(context.Background(), path, maxBodyBytes)
	if err != nil {
		return nil, pathReason(err)
	}
	return b, nil
}

// loadSpec is the HTTP load a runtime collector's options describe (load,
// method, header, body or body_file, concurrency), requests long: the
// async-profiler and goalloc collectors drive the same load, checked the
// same way.
func (p *Plan) loadSpec(u boundUse, requests int64) (*httpload.Spec, error) {
	opt := func(name string) any { return u.opts[name] }
	name := func(option string) string { return p.useOptionName(u, option) }
	body, bodyFile := opt("body").(string), opt("body_file").(string)
	if opt("requests_from").(string) != "" {
		return nil, measure.BadInput("%s counts requests perfscope does not drive: drop it with %s, which counts its own", name("requests_from"), name("load"))
	}
	if requests == 0 {
		return nil, measure.BadInput("%s needs %s N: the fixed request count is what bytes per request divide by", name("load"), name("requests"))
	}
	spec := &httpload.Spec{URL: opt("load").(string), Method: opt("method").(string), Header: http.Header{}, Requests: int(requests), Concurrency: int(opt("concurrency").(int64))}
	for _, h := range opt("header").([]string) {
		if err := httpload.ParseHeader(spec.Header, h); err != nil {
			return nil, measure.BadInput("%s: %v", name("header"), err)
		}
	}
	switch {
	case body != "" && bodyFile != "":
		return nil, measure.BadInput("give %s or %s, not both", name("body"), name("body_file"))
	case body != "":
		spec.Body = []byte(body)
	}
	if err := spec.Validate(); err != nil {
		return nil, measure.BadInput("%s: %v", name("load"), err)
	}
	return spec, nil
}
