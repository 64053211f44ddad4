package recipes

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/measure"
)

// LoadFlags are the flags of an HTTP load perfscope drives while it
// measures a service (`perfscope jvm`, `perfscope go`).
type LoadFlags struct {
	LoadURL     string
	Method      string
	Body        string
	Headers     []string
	Concurrency int
}

// GoFlags are `perfscope go`'s flags that are the go-alloc recipe's
// parameters.
type GoFlags struct {
	PID      int
	Duration time.Duration
	Requests int64
	LoadFlags
	RequestsFrom, RequestsMetric string
	Count                        string
	HTTPPorts                    []uint
	NoPools, ExactPools          bool
	Top                          int
}

// goFlagNames name the go-alloc recipe's parameters that are not
// --name-with-dashes as the go command's flags.
var goFlagNames = map[string]string{"body_file": "--body @FILE", "pools": "--no-pools or --exact-pools", "http_port": "--http-port"}

// BindGo binds the go-alloc recipe to `perfscope go`'s flags and gives
// the options its window measures with. It checks first how the window's
// load and request sources go together, as jvm-alloc's binding does, and
// reads a --body @FILE; the recipe then checks the values again, in
// sentences naming the flags. Every refusal is one sentence, bad input.
func BindGo(f GoFlags) (*Plan, golang.Options, error) {
	opts := golang.Options{PID: f.PID, Duration: f.Duration, NoPools: f.NoPools, ExactPools: f.ExactPools, TopSites: f.Top}
	switch f.Count {
	case "auto":
		opts.Passive = jvm.PassiveAuto
	case "on":
		opts.Passive = jvm.PassiveRequired
	case "off":
		opts.Passive = jvm.PassiveOff
	default:
		return nil, opts, measure.BadInput("--count %q: want auto, on or off", f.Count)
	}
	for _, p := range f.HTTPPorts {
		if p == 0 || p > 65535 {
			return nil, opts, measure.BadInput("--http-port %d: a TCP port is 1 to 65535", p)
		}
		opts.HTTPPorts = append(opts.HTTPPorts, uint16(p))
	}
	if err := f.sources(&opts); err != nil {
		return nil, opts, err
	}
	return f.bind(opts)
}

// bind binds go-alloc to the flags and takes its options, with the body
// the flags' check read (the recipe reads a body file only when
// prepared).
func (f GoFlags) bind(checked golang.Options) (*Plan, golang.Options, error) {
	pools := "auto"
	switch {
	case f.NoPools:
		pools = "off"
	case f.ExactPools:
		pools = "exact"
	}
	set := map[string]string{"pid": strconv.Itoa(f.PID), "duration": f.Duration.String(), "requests": strconv.FormatInt(f.Requests, 10),
		"load": f.LoadURL, "method": strings.ToUpper(f.Method), "concurrency": strconv.Itoa(f.Concurrency),
		"count": f.Count, "pools": pools, "top": strconv.Itoa(f.Top), "header": KindList.JoinItems(f.Headers)}
	if checked.RequestsFrom != nil {
		set["requests_from"], set["requests_metric"] = checked.RequestsFrom.URL, checked.RequestsFrom.Metric
	}
	if checked.Load != nil && len(checked.Load.Body) > 0 && !strings.HasPrefix(f.Body, "@") {
		set["body"] = f.Body
	}
	set["http_port"] = portsParam(f.HTTPPorts)
	r, err := Find("go-alloc")
	if err != nil {
		return nil, checked, err
	}
	plan, err := r.BindFlags(set, goFlagNames)
	if err != nil {
		return nil, checked, err
	}
	opts := plan.GoOptions()
	if opts == nil {
		return nil, checked, fmt.Errorf("recipe go-alloc does not use the goalloc probe")
	}
	if opts.Load != nil && checked.Load != nil {
		opts.Load.Body = checked.Load.Body
	}
	return plan, *opts, nil
}

// sources checks how the window's load and request sources go together.
func (f GoFlags) sources(opts *golang.Options) error {
	if err := httpload.CheckHeaders(f.Headers); err != nil {
		return measure.MarkBadInput(err)
	}
	if f.LoadURL == "" {
		if f.Body != "" || len(f.Headers) > 0 || !strings.EqualFold(f.Method, "GET") {
			return measure.BadInput("--method, --body and --header shape the load: add --load URL")
		}
		opts.Requests = f.Requests
		if f.RequestsFrom == "" {
			if f.RequestsMetric != "" {
				return measure.BadInput("--requests-metric names a counter of --requests-from: add --requests-from URL")
			}
			return nil
		}
		if f.Requests > 0 {
			return measure.BadInput("--requests N and --requests-from both count the window's requests: give one")
		}
		from, metric := f.RequestsFrom, f.RequestsMetric
		if u, frag, ok := strings.Cut(from, "#"); ok {
			if metric != "" && frag != metric {
				return measure.BadInput("--requests-from %s names the counter %q and --requests-metric %q: give one", from, frag, metric)
			}
			from, metric = u, frag
		}
		probe := httpload.Spec{URL: from, Requests: 1, Concurrency: 1}
		if err := probe.Validate(); err != nil {
			return measure.BadInput("--requests-from: %v", err)
		}
		opts.RequestsFrom = &jvm.MetricsSource{URL: from, Metric: metric, Match: map[string]*regexp.Regexp{}, Exclude: map[string]*regexp.Regexp{}}
		return nil
	}
	if f.RequestsFrom != "" {
		return measure.BadInput("--requests-from counts requests perfscope does not drive: drop it with --load, which counts its own")
	}
	if f.Requests == 0 {
		return measure.BadInput("--load needs --requests N: the fixed request count is what bytes per request divide by")
	}
	spec := &httpload.Spec{URL: f.LoadURL, Method: strings.ToUpper(f.Method), Header: http.Header{}, Requests: int(f.Requests), Concurrency: f.Concurrency}
	if err := spec.SetFlags(f.Headers, f.Body); err != nil {
		return measure.MarkBadInput(err)
	}
	if err := spec.Validate(); err != nil {
		return measure.BadInput("--load: %v", err)
	}
	opts.Load = spec
	return nil
}
