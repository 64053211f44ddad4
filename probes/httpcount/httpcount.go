// Package httpcount counts, in the kernel, the HTTP/1.x responses one
// process wrote on the accepted connections of its listening ports, by
// status code, the HTTP/2 responses it ended over h2c (gRPC included), and
// the HTTP/1 request lines it read, by method and path — a passive request
// count for a service taking real traffic, without an agent in the process
// or packet capture. See bpf/httpcount.bpf.c for what is and is not
// visible (TLS is not).
package httpcount

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// Hooks are the tracepoints this probe may attach to: the socket path's
// pair, else the syscall path's.
var Hooks = Spec.Hooks

// The two ways the probe counts. The socket path runs one program per
// socket send or receive (sock:sock_send_length/sock_recv_length, Linux
// 6.3); the syscall path runs two per syscall of every task and makes
// every syscall on the machine take the kernel's slow tracing path while
// attached, several times the cost on a busy service (BENCHMARKS.md, "go:
// requests/s lost under a fixed-rate load").
var (
	sockHooks    = required(Hooks[0], Hooks[1])
	syscallHooks = required(Hooks[2], Hooks[3])
)

// required copies hooks with Optional off: on the path chosen, each one
// must attach.
func required(hooks ...probes.Hook) []probes.Hook {
	out := make([]probes.Hook, len(hooks))
	for i, h := range hooks {
		h.Optional = false
		out[i] = h
	}
	return out
}

// Path is how the probe counts.
type Path string

// The paths.
const (
	// PathAuto is the socket path where the kernel has it, else the
	// syscall path.
	PathAuto    Path = ""
	PathSocket  Path = "sock"
	PathSyscall Path = "syscalls"
)

// Options configure a probe.
type Options struct {
	Method probes.AttachMethod
	// TGID is the process whose requests are counted (host pid).
	TGID int
	// Ports are the local TCP ports whose accepted connections are
	// counted (the process's listening ports); at most MaxPorts.
	Ports []uint16
	// ResponsesOnly skips request lines (no per-endpoint counts, and no
	// work on the process's reads).
	ResponsesOnly bool
	// Path forces one way of counting (tests); PathAuto picks.
	Path Path
}

// MaxPorts is the size of the probe's port table.
const MaxPorts = 64

// Probe is a loaded and attached httpcount probe.
type Probe struct {
	probes.Loaded
	// Path is how this probe counts.
	Path Path
	// Fallback says why the socket path did not load when the probe chose
	// the syscall path itself ("" otherwise): every syscall on the machine
	// pays while it is attached.
	Fallback string
	// ports are the counted ports in slot order, and statuses the status
	// codes counted per slot: the response counters are arrays indexed by
	// slot and status.
	ports    []uint16
	statuses int
}

var _ probes.Snapshotter[Snapshot] = (*Probe)(nil)

// Response is one (port, status) pair of counted response starts. Status
// is 0 when the status line's code did not parse.
type Response struct {
	Port   uint16
	Status uint16
}

// Request is one (port, method, path) key of counted request lines. Path
// has digit runs folded into '#' and no query string; Truncated marks a
// path longer than the probe keeps.
type Request struct {
	Port      uint16
	Method    string
	Path      string
	Truncated bool
}

// Lost counts what the probe could not count.
type Lost struct {
	// Requests: their map was full (responses are counted in arrays,
	// which cannot be).
	Requests uint64
	// Inflight: a syscall could not be remembered from entry to exit.
	Inflight uint64
	// Reads: a request buffer could not be read (paged out).
	Reads uint64
	// H2Unparsed: writes on HTTP/2 connections whose frames were not all
	// walked (more frames than a write's bound, a frame header that did
	// not parse, frames past a vectored write's first buffer, a
	// connection's state lost): responses they ended were not counted.
	H2Unparsed uint64
	// Unrecognized: writes on connections whose protocol the probe did
	// not know yet (opened before it and first seen mid-response, or not
	// HTTP at all): responses they carried are not counted, and are not
	// known to exist.
	Unrecognized uint64
}

// Snapshot holds cumulative counts since the probe attached.
type Snapshot struct {
	Taken     time.Time
	Responses map[Response]uint64
	Requests  map[Request]uint64
	// H2Responses counts HTTP/2 (h2c, gRPC) responses by local port: the
	// streams the server ended (END_STREAM on a client's stream). Their
	// status is not read (it is HPACK-encoded).
	H2Responses map[uint16]uint64
	Lost        Lost
}

// Open loads the probe's BPF object and attaches it.
func Open(opts Options) (*Probe, error) {
	if opts.TGID <= 0 {
		return nil, fmt.Errorf("httpcount: no process to count requests of")
	}
	if len(opts.Ports) == 0 {
		return nil, fmt.Errorf("httpcount: pid %d listens on no TCP port", opts.TGID)
	}
	if len(opts.Ports) > MaxPorts {
		return nil, fmt.Errorf("httpcount: %d listening ports, at most %d are counted", len(opts.Ports), MaxPorts)
	}
	method := opts.Method
	if runtime.GOARCH != "amd64" {
		// The tp_btf and raw_tp programs read x86-64 pt_regs; the
		// classic tracepoint's record carries the arguments on every
		// architecture.
		if method != probes.MethodAuto && method != probes.MethodTracepoint {
			return nil, fmt.Errorf("httpcount: attach method %s reads x86-64 registers: %w", method, probes.ErrNotSupported)
		}
		method = probes.MethodTracepoint
	}
	var p *Probe
	var err error
	switch {
	case opts.Path == PathSocket && runtime.GOARCH != "amd64":
		return nil, fmt.Errorf("httpcount: the socket path reads x86-64 registers: %w", probes.ErrNotSupported)
	case opts.Path != PathAuto:
		p, err = open(opts, method, opts.Path)
	case runtime.GOARCH != "amd64":
		p, err = open(opts, method, PathSyscall)
	default:
		// The socket tracepoints are missing before Linux 6.3: count
		// from the syscalls there.
		p, err = open(opts, method, PathSocket)
		if err != nil && errors.Is(err, probes.ErrNotSupported) {
			why, _, _ := strings.Cut(err.Error(), "\n")
			p, err = open(opts, method, PathSyscall)
			if err == nil {
				p.Fallback = fmt.Sprintf("counted on the syscall tracepoints, which slow every syscall on the machine while attached: the socket tracepoints (Linux 6.3) did not load (%s)", why)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	var set httpcountPortSet
	for i, port := range opts.Ports {
		set.Slot[port] = uint8(i + 1)
	}
	if err := p.Maps()["ports"].Put(uint32(0), &set); err != nil {
		p.Close()
		return nil, fmt.Errorf("httpcount: set ports %v: %w", opts.Ports, err)
	}
	return p, nil
}

// open loads the probe's programs of one path and attaches them.
func open(opts Options, method probes.AttachMethod, path Path) (*Probe, error) {
	spec, err := loadHttpcount()
	if err != nil {
		return nil, fmt.Errorf("load httpcount BPF spec: %w", err)
	}
	hooks, other := sockHooks, syscallHooks
	if path == PathSyscall {
		hooks, other = syscallHooks, sockHooks
	}
	probes.RemoveHookPrograms(spec, other...)
	if path == PathSocket && opts.ResponsesOnly {
		// No request lines: the receive hook has nothing to do.
		probes.RemoveHookPrograms(spec, hooks[1])
		hooks = hooks[:1]
	}
	// The object sizes the response counters for one port.
	statuses := int(spec.Maps["responses"].MaxEntries)
	att, err := probes.LoadAndAttach(spec, hooks, method, func(s *ebpf.CollectionSpec) error {
		s.Maps["responses"].MaxEntries = uint32(statuses * len(opts.Ports))
		s.Maps["h2_responses"].MaxEntries = uint32(len(opts.Ports))
		dropUnused(s, "sock_states", "h2conns", "carries", "inflight")
		return probes.SetVariables(s, map[string]any{
			"target_tgid":    uint32(opts.TGID),
			"count_requests": !opts.ResponsesOnly,
			"nr_read":        int64(unix.SYS_READ),
			"nr_readv":       int64(unix.SYS_READV),
			"nr_recvfrom":    int64(unix.SYS_RECVFROM),
			"nr_recvmsg":     int64(unix.SYS_RECVMSG),
			"nr_write":       int64(unix.SYS_WRITE),
			"nr_writev":      int64(unix.SYS_WRITEV),
			"nr_sendto":      int64(unix.SYS_SENDTO),
			"nr_sendmsg":     int64(unix.SYS_SENDMSG),
		})
	})
	if err != nil {
		return nil, fmt.Errorf("httpcount probe (%s): %w", path, err)
	}
	// The passive count stays exact (no hook groups): it is what the
	// jvm command divides allocation by.
	slots := map[string]uint32{
		Hooks[0].String(): uint32(httpcountHttpcountHookHTTPCOUNT_HOOK_SOCK_SEND),
		Hooks[1].String(): uint32(httpcountHttpcountHookHTTPCOUNT_HOOK_SOCK_RECV),
		Hooks[2].String(): uint32(httpcountHttpcountHookHTTPCOUNT_HOOK_SYS_ENTER),
		Hooks[3].String(): uint32(httpcountHttpcountHookHTTPCOUNT_HOOK_SYS_EXIT),
	}
	return &Probe{Path: path, ports: opts.Ports, statuses: statuses, Loaded: probes.NewLoaded(att, slots, func(v httpcountSelfCost) probes.SelfRuns {
		return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
	})}, nil
}

// dropUnused removes the maps of names that no program left in s uses.
// The per-socket state is in the socket's storage for the tp_btf socket
// programs and in hashes for the others, and only the syscall path keeps
// calls between entry and exit (bpf/httpcount.bpf.c): a load creates only
// its own, so a kernel without socket storage (before 5.2) still loads
// the syscall path, and the socket path does not preallocate hashes it
// never touches.
func dropUnused(s *ebpf.CollectionSpec, names ...string) {
	used := map[string]bool{}
	for _, p := range s.Programs {
		for _, ins := range p.Instructions {
			if ref := ins.Reference(); ref != "" {
				used[ref] = true
			}
		}
	}
	for _, name := range names {
		if !used[name] {
			delete(s.Maps, name)
		}
	}
}

// methods names enum http_method.
var methods = map[httpcountHttpMethod]string{
	httpcountHttpMethodHTTP_GET:     "GET",
	httpcountHttpMethodHTTP_POST:    "POST",
	httpcountHttpMethodHTTP_PUT:     "PUT",
	httpcountHttpMethodHTTP_DELETE:  "DELETE",
	httpcountHttpMethodHTTP_PATCH:   "PATCH",
	httpcountHttpMethodHTTP_HEAD:    "HEAD",
	httpcountHttpMethodHTTP_OPTIONS: "OPTIONS",
}

func methodName(m httpcountHttpMethod) string {
	if s, ok := methods[m]; ok {
		return s
	}
	return "OTHER"
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// foldDigits folds the probe's runs of '#' (one per digit) into one, so
// /orders/17 and /orders/4242 are one endpoint.
func foldDigits(path string) string {
	if !strings.Contains(path, "##") {
		return path
	}
	var sb strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '#' && i > 0 && path[i-1] == '#' {
			continue
		}
		sb.WriteByte(path[i])
	}
	return sb.String()
}

// Snapshot reads the cumulative counts.
func (p *Probe) Snapshot() (Snapshot, error) {
	s := Snapshot{Taken: time.Now(), Responses: map[Response]uint64{}, Requests: map[Request]uint64{}, H2Responses: map[uint16]uint64{}}
	maps := p.Maps()
	resp, err := probes.ReadPerCPUArray[uint64](maps["responses"])
	if err != nil {
		return s, err
	}
	for i, perCPU := range resp {
		k := Response{Port: p.ports[i/p.statuses], Status: uint16(i % p.statuses)}
		for _, n := range perCPU {
			if n > 0 {
				s.Responses[k] += n
			}
		}
	}
	req, err := probes.ReadPerCPUHash[httpcountRequestKey, uint64](maps["requests"])
	if err != nil {
		return s, err
	}
	for k, perCPU := range req {
		key := Request{Port: k.Port, Method: methodName(k.Method), Path: foldDigits(cString(k.Target[:])), Truncated: k.Truncated != 0}
		for _, n := range perCPU {
			s.Requests[key] += n
		}
	}
	h2, err := probes.ReadPerCPUArray[uint64](maps["h2_responses"])
	if err != nil {
		return s, err
	}
	for slot, perCPU := range h2 {
		for _, n := range perCPU {
			if n > 0 {
				s.H2Responses[p.ports[slot]] += n
			}
		}
	}
	lost, err := probes.SumPerCPUCounters(maps["lost"], int(httpcountHttpcountLostHTTPCOUNT_LOST_REASONS))
	if err != nil {
		return s, err
	}
	s.Lost = Lost{
		Requests:     lost[httpcountHttpcountLostHTTPCOUNT_LOST_REQUEST],
		Inflight:     lost[httpcountHttpcountLostHTTPCOUNT_LOST_INFLIGHT],
		Reads:        lost[httpcountHttpcountLostHTTPCOUNT_LOST_READ],
		H2Unparsed:   lost[httpcountHttpcountLostHTTPCOUNT_LOST_H2UNPARSED],
		Unrecognized: lost[httpcountHttpcountLostHTTPCOUNT_LOST_UNRECOGNIZED],
	}
	return s, nil
}

// Sub returns the counts between prev and s.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Taken: s.Taken, Responses: map[Response]uint64{}, Requests: map[Request]uint64{}, H2Responses: map[uint16]uint64{}}
	for k, n := range s.H2Responses {
		if n > prev.H2Responses[k] {
			d.H2Responses[k] = n - prev.H2Responses[k]
		}
	}
	for k, n := range s.Responses {
		if n > prev.Responses[k] {
			d.Responses[k] = n - prev.Responses[k]
		}
	}
	for k, n := range s.Requests {
		if n > prev.Requests[k] {
			d.Requests[k] = n - prev.Requests[k]
		}
	}
	d.Lost = Lost{
		Requests:     s.Lost.Requests - prev.Lost.Requests,
		Inflight:     s.Lost.Inflight - prev.Lost.Inflight,
		Reads:        s.Lost.Reads - prev.Lost.Reads,
		H2Unparsed:   s.Lost.H2Unparsed - prev.Lost.H2Unparsed,
		Unrecognized: s.Lost.Unrecognized - prev.Lost.Unrecognized,
	}
	return d
}

// Final returns the responses that end a request: every HTTP/1 status but
// the interim 1xx (100 Continue precedes the real response on the same
// request), and every HTTP/2 stream the server ended.
func (s Snapshot) Final() uint64 {
	var n uint64
	for _, c := range s.H2Responses {
		n += c
	}
	for k, c := range s.Responses {
		if k.Status < 100 || k.Status >= 200 {
			n += c
		}
	}
	return n
}
