package jvm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/httpcount"
)

// RequestCounts is what a request source counted over the window.
type RequestCounts struct {
	Total int64
	// Source: "load", "user", "metrics", "passive-http".
	Source string
	// Uncertainty is relative (±).
	Uncertainty float64
	Note        string
	// StatusClasses counts responses by class ("2xx") when known.
	StatusClasses map[string]int64
	// Endpoints are per-endpoint counts when the source has them.
	Endpoints []EndpointCount
}

// EndpointCount is one endpoint's requests: a URI template from a metrics
// source, or a folded path ("/orders/#") from request lines.
type EndpointCount struct {
	Method   string
	Endpoint string
	Requests int64
}

func sortEndpointCounts(e []EndpointCount) {
	sort.Slice(e, func(i, j int) bool {
		if e[i].Requests != e[j].Requests {
			return e[i].Requests > e[j].Requests
		}
		return e[i].Endpoint+e[i].Method < e[j].Endpoint+e[j].Method
	})
}

// RequestCounter counts requests over a window without driving them:
// Begin at the window's start, End at its end, Close always.
type RequestCounter interface {
	Begin(ctx context.Context) error
	End(ctx context.Context) (RequestCounts, error)
	Close()
}

// metricsCounter reads a MetricsSource at both ends of the window.
type metricsCounter struct {
	src    MetricsSource
	before scrape
}

// NewMetricsCounter counts requests from a metrics endpoint.
func NewMetricsCounter(src MetricsSource) RequestCounter { return &metricsCounter{src: src} }

func (m *metricsCounter) Begin(ctx context.Context) error {
	var err error
	m.before, err = m.src.scrape(ctx)
	return err
}

func (m *metricsCounter) End(ctx context.Context) (RequestCounts, error) {
	after, err := m.src.scrape(ctx)
	if err != nil {
		return RequestCounts{}, err
	}
	c, resets := delta(m.before, after)
	c.Source = "metrics"
	c.Note = fmt.Sprintf("%s summed over %d series of %s", after.family, len(after.series), m.src.URL)
	if resets > 0 {
		c.Note += fmt.Sprintf("; %d series were reset during the window and count from zero", resets)
	}
	// Requests completing while a scrape was in flight may fall on
	// either side of the window's edge.
	if c.Total > 0 {
		window := after.at.Sub(m.before.at).Seconds()
		rate := float64(c.Total) / math.Max(window, 1e-3)
		c.Uncertainty = (rate*(m.before.took+after.took).Seconds() + 1) / float64(c.Total)
	}
	return c, nil
}

func (m *metricsCounter) Close() {}

// passiveCounter counts the JVM's HTTP/1.x responses with the httpcount
// probe.
type passiveCounter struct {
	probe         *httpcount.Probe
	ports         []uint16
	first         httpcount.Snapshot
	responsesOnly bool
}

// OpenPassiveCounter loads the httpcount probe for pid's listening TCP
// ports (or only those in ports, when given). With responsesOnly the
// request lines are not read (no per-endpoint split): on the socket path
// the probe then runs on sends only, about half its runs.
func OpenPassiveCounter(root string, pid int, ports []uint16, responsesOnly bool) (RequestCounter, error) {
	listening, err := ListeningPorts(root, pid)
	if err != nil {
		return nil, err
	}
	if len(ports) > 0 {
		var keep []uint16
		for _, p := range ports {
			for _, l := range listening {
				if l == p {
					keep = append(keep, p)
				}
			}
		}
		if len(keep) == 0 {
			return nil, fmt.Errorf("pid %d does not listen on TCP port %v (it listens on %v)", pid, ports, listening)
		}
		listening = keep
	}
	if len(listening) == 0 {
		return nil, fmt.Errorf("pid %d listens on no TCP port", pid)
	}
	if len(listening) > httpcount.MaxPorts {
		listening = listening[:httpcount.MaxPorts]
	}
	p, err := httpcount.Open(httpcount.Options{TGID: pid, Ports: listening, ResponsesOnly: responsesOnly})
	if err != nil {
		return nil, err
	}
	return &passiveCounter{probe: p, ports: listening, responsesOnly: responsesOnly}, nil
}

func (p *passiveCounter) Begin(context.Context) error {
	var err error
	p.first, err = p.probe.Snapshot()
	return err
}

func (p *passiveCounter) End(context.Context) (RequestCounts, error) {
	last, err := p.probe.Snapshot()
	if err != nil {
		return RequestCounts{}, err
	}
	c := passiveCounts(last.Sub(p.first), p.ports, p.responsesOnly)
	if p.probe.Fallback != "" {
		c.Note += "; " + p.probe.Fallback
	}
	return c, nil
}

func (p *passiveCounter) Close() { p.probe.Close() }

// SelfCosts are the count's programs' own run counters per hook and CPU
// (selfcost.h): what its hooks cost, counted by themselves, without
// bpf_stats.
func (p *passiveCounter) SelfCosts() (probes.SelfCosts, error) { return p.probe.SelfCosts() }

// Missed is the events the kernel skipped each of the count's programs
// for (their recursion misses, from the programs' info, which the kernel
// counts whether or not bpf_stats are on).
func (p *passiveCounter) Missed() map[string]uint64 {
	out := map[string]uint64{}
	for _, c := range p.probe.Costs() {
		if c.Missed > 0 {
			out[c.Program] = c.Missed
		}
	}
	return out
}

// PassiveSelf is a passive count's programs' own run counters now, the
// start for PassiveCosts; nil when it keeps none or they cannot be read
// (PassiveCosts then says so).
func PassiveSelf(rc RequestCounter) probes.SelfCosts {
	sc, ok := rc.(probes.SelfCounted)
	if !ok {
		return nil
	}
	first, _ := sc.SelfCosts()
	return first
}

// PassiveCosts is what a passive request count's programs cost since
// first (PassiveSelf at the window's start): each hook's runs and mean
// time as the programs counted and timed them, with the events the kernel
// skipped them for, each said in a warning. It needs no bpf_stats, which
// would cost every BPF program on the machine a clock read per run. A
// count whose counters cannot be read is said in a warning, not left out
// of the table silently; a count that keeps none (nil rc, a metrics
// source) gives nothing.
func PassiveCosts(rc RequestCounter, first probes.SelfCosts, warnings *[]string) []evidence.ProgramCost {
	sc, ok := rc.(probes.SelfCounted)
	if !ok {
		return nil
	}
	last, err := sc.SelfCosts()
	if err == nil && first == nil {
		err = errors.New("no reading at the window's start")
	}
	var out []evidence.ProgramCost
	if err != nil {
		*warnings = append(*warnings, "the passive request count's own cost is not in the table: its programs' counters could not be read: "+err.Error())
	} else {
		out = SelfProgramCosts(last, first)
	}
	m, ok := rc.(interface{ Missed() map[string]uint64 })
	if !ok {
		return out
	}
	missed := m.Missed()
	progs := make([]string, 0, len(missed))
	for prog := range missed {
		progs = append(progs, prog)
	}
	sort.Strings(progs)
	for _, prog := range progs {
		*warnings = append(*warnings, fmt.Sprintf("the passive HTTP count is short by %d events: the kernel skipped %s while another tracing program ran on that CPU", missed[prog], prog))
		for i := range out {
			if out[i].Program == prog {
				out[i].Missed += missed[prog]
			}
		}
	}
	return out
}

// SelfProgramCosts is each hook's runs and mean time between two readings
// of programs that count and time themselves (probes/include/selfcost.h).
func SelfProgramCosts(last, first probes.SelfCosts) []evidence.ProgramCost {
	var out []evidence.ProgramCost
	for hook, perCPU := range last.Sub(first) {
		t := probes.Total(perCPU)
		c := evidence.ProgramCost{Program: hook, RunCount: t.Runs, PerRunFrom: "self-timed"}
		if t.TimedRuns > 0 {
			c.PerRunNs = float64(t.TimedNs) / float64(t.TimedRuns)
			c.RunTimeNs = uint64(c.PerRunNs * float64(t.Runs))
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Program < out[j].Program })
	return out
}

// passiveCounts turns the probe's delta into request counts.
func passiveCounts(d httpcount.Snapshot, ports []uint16, responsesOnly bool) RequestCounts {
	c := RequestCounts{Source: "passive-http", StatusClasses: map[string]int64{}}
	var interim int64
	for k, n := range d.Responses {
		switch {
		case k.Status >= 100 && k.Status < 200:
			interim += int64(n)
			continue
		case k.Status >= 200 && k.Status < 600:
			c.StatusClasses[strconv.Itoa(int(k.Status/100))+"xx"] += int64(n)
		default:
			c.StatusClasses["unparsed"] += int64(n)
		}
		c.Total += int64(n)
	}
	var lines int64
	byEndpoint := map[[2]string]int64{}
	for k, n := range d.Requests {
		path := k.Path
		if k.Truncated {
			path += "…"
		}
		byEndpoint[[2]string{k.Method, path}] += int64(n)
		lines += int64(n)
	}
	for k, n := range byEndpoint {
		c.Endpoints = append(c.Endpoints, EndpointCount{Method: k[0], Endpoint: k[1], Requests: n})
	}
	sortEndpointCounts(c.Endpoints)
	var h2 int64
	for _, n := range d.H2Responses {
		h2 += int64(n)
	}
	if h2 > 0 {
		// HTTP/2's status is HPACK-encoded: the streams are counted, not
		// their status.
		c.StatusClasses["http2"] += h2
		c.Total += h2
	}
	lost := d.Lost.Inflight
	c.Note = fmt.Sprintf("HTTP/1.x response starts and HTTP/2 (h2c) streams ended, written on TCP port %s, counted in the kernel", joinPorts(ports))
	if h2 > 0 {
		c.Note += fmt.Sprintf("; %d of them HTTP/2 (status and endpoint not read)", h2)
	}
	if d.Lost.H2Unparsed > 0 {
		// The responses such a write ended are unknown: counted in the
		// uncertainty as one each, a lower bound.
		lost += d.Lost.H2Unparsed
		c.Note += fmt.Sprintf("; %d writes on HTTP/2 connections not fully parsed (the responses they ended are not counted)", d.Lost.H2Unparsed)
	}
	if d.Lost.Unrecognized > 0 {
		// Not in the uncertainty: whether they carried responses is
		// unknown (a long response's later writes, or another protocol).
		c.Note += fmt.Sprintf("; %d writes on connections of unknown protocol (opened before the window and first seen mid-response, or not HTTP): responses on them until one started a write are not counted", d.Lost.Unrecognized)
	}
	if interim > 0 {
		c.Note += fmt.Sprintf("; %d interim 1xx responses not counted as requests", interim)
	}
	if c.Total > 0 {
		c.Uncertainty = (float64(lost) + 1) / float64(c.Total)
		if lines < c.Total-h2 && !responsesOnly {
			c.Note += fmt.Sprintf("; %d request lines seen for the per-endpoint split (pipelined or split reads are not parsed)", lines)
		}
	}
	if lost > 0 {
		c.Note += fmt.Sprintf("; %d responses not counted (probe maps full)", lost)
	}
	return c
}

func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}

// ListeningPorts are the TCP ports pid's own sockets listen on, from
// /proc/PID/net/tcp{,6} (the tables of its network namespace) joined with
// its open socket inodes.
func ListeningPorts(root string, pid int) ([]uint16, error) {
	inodes, err := sockets.NewFS(root).SocketInodes(pid)
	if err != nil {
		return nil, fmt.Errorf("sockets of pid %d: %w", pid, err)
	}
	seen := map[uint16]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(root, fmt.Sprintf("/proc/%d/net/%s", pid, table)))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		ports, err := parseListening(f, inodes)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/net/%s: %w", pid, table, err)
		}
		for _, p := range ports {
			seen[p] = true
		}
	}
	out := make([]uint16, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

const tcpListen = "0A"

// parseListening reads a /proc/net/tcp table: the local ports of LISTEN
// sockets whose inode is in inodes.
func parseListening(r io.Reader, inodes map[uint64]bool) ([]uint16, error) {
	sc := bufio.NewScanner(r)
	var out []uint16
	for n := 0; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 0 {
			continue // header
		}
		if len(f) < 10 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 10", n+1, len(f))
		}
		if f[3] != tcpListen {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: inode %q", n+1, f[9])
		}
		if !inodes[ino] {
			continue
		}
		_, portHex, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("line %d: local address %q", n+1, f[1])
		}
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("line %d: port %q", n+1, portHex)
		}
		out = append(out, uint16(port))
	}
	return out, sc.Err()
}

// HandlerMapping maps request handlers to endpoints.
type HandlerMapping map[string]EndpointCount

// SpringMappings reads Spring Boot Actuator's /actuator/mappings: each
// controller method with its URI patterns and HTTP methods, keyed by
// "SimpleClass.method" (how Breakdown names handlers, shortened).
func SpringMappings(ctx context.Context, client *http.Client, url string) (HandlerMapping, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return parseSpringMappings(io.LimitReader(resp.Body, 32<<20))
}

func parseSpringMappings(r io.Reader) (HandlerMapping, error) {
	var doc struct {
		Contexts map[string]struct {
			Mappings struct {
				DispatcherServlets map[string][]struct {
					Details *struct {
						HandlerMethod *struct {
							ClassName string `json:"className"`
							Name      string `json:"name"`
						} `json:"handlerMethod"`
						RequestMappingConditions *struct {
							Methods  []string `json:"methods"`
							Patterns []string `json:"patterns"`
						} `json:"requestMappingConditions"`
					} `json:"details"`
				} `json:"dispatcherServlets"`
			} `json:"mappings"`
		} `json:"contexts"`
	}
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("Actuator mappings: %w", err)
	}
	m := HandlerMapping{}
	for _, c := range doc.Contexts {
		for _, servlet := range c.Mappings.DispatcherServlets {
			for _, d := range servlet {
				if d.Details == nil || d.Details.HandlerMethod == nil || d.Details.RequestMappingConditions == nil || len(d.Details.RequestMappingConditions.Patterns) == 0 {
					continue
				}
				hm := d.Details.HandlerMethod
				cls := hm.ClassName
				if i := strings.LastIndexByte(cls, '.'); i >= 0 {
					cls = cls[i+1:]
				}
				cls = strings.ReplaceAll(cls, "$", ".")
				if j := strings.LastIndexByte(cls, '.'); j >= 0 {
					cls = cls[j+1:]
				}
				ep := EndpointCount{Endpoint: d.Details.RequestMappingConditions.Patterns[0]}
				if len(d.Details.RequestMappingConditions.Methods) == 1 {
					ep.Method = d.Details.RequestMappingConditions.Methods[0]
				}
				m[cls+"."+hm.Name] = ep
			}
		}
	}
	return m, nil
}

// templateMatcher turns a URI template ("/api/orders/{id}") into a pattern
// matching both its concrete paths and their folded form ("/api/orders/#").
func templateMatcher(template string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i, seg := range strings.Split(template, "/") {
		if i > 0 {
			b.WriteString("/")
		}
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") || seg == "*" {
			b.WriteString("[^/]+")
			continue
		}
		if seg == "**" {
			b.WriteString(".*")
			continue
		}
		b.WriteString(regexp.QuoteMeta(seg))
	}
	b.WriteString("/?$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return regexp.MustCompile("^$.")
	}
	return re
}
