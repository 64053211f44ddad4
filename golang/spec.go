package golang

import (
	"github.com/perfscope/perfscope/probes/httpcount"
	"github.com/perfscope/perfscope/spec"
)

// Spec is the goalloc part: Measure on one running Go program (uprobes on
// its runtime's allocation samples, GC cycles and sync.Pools, and the
// passive request count). It measures alone, over its own window.
var Spec = spec.Part{Name: "goalloc", Probe: true, Recipe: true, Section: spec.SectionGo,
	Doc: "a running Go program's allocation (its runtime's own samples, weighted as pprof does), GC cycles and sync.Pools, through uprobes: bytes per request",
	Options: spec.Options([]spec.Option{
		{Name: "pid", Domain: spec.Domain{Kind: spec.KindPID, Min: spec.Bound(1)}, Required: true, Doc: "the Go program"},
	}, spec.LoadOptions, []spec.Option{
		{Name: "requests_from", Domain: spec.Domain{Kind: spec.KindURL}, Doc: "count requests from this Prometheus/OpenMetrics endpoint, summed over the window (URL#metric names the counter)"},
		{Name: "requests_metric", Domain: spec.Domain{Kind: spec.KindString}, Doc: "the request counter of requests_from (empty: the known ones in order)"},
		{Name: "count", Domain: spec.Domain{Kind: spec.KindEnum, Values: spec.PassiveModes}, Default: "auto", Doc: "passive HTTP/1.x and h2c request count from the program's socket writes (eBPF): auto (when nothing else counts), on (fail without it) or off"},
		{Name: "http_ports", Domain: spec.Domain{Kind: spec.KindPorts}, Doc: "listening TCP ports the passive count watches (empty: all of the program's)"},
		{Name: "pools", Domain: spec.Domain{Kind: spec.KindEnum, Values: []string{"auto", "exact", "off"}}, Default: "auto", Doc: "sync.Pool hooks: auto (attached for part of the window when they cost the program over 0.5 % of its CPU; counts then estimated, with bounds), exact (attached the whole window) or off"},
		{Name: "top", Domain: spec.Domain{Kind: spec.KindInt, Min: spec.Bound(1), Max: spec.Bound(1000)}, Default: int64(DefaultTopSites), Doc: "allocation sites to keep"},
	}),
	Uses: []*spec.Part{&httpcount.Spec},
	// uprobes on the Go program's runtime (perf events of the uprobe
	// PMU), its binary and memory read through /proc/PID (exe, maps, root,
	// mem: MemProfileRate), the passive request count on the syscall
	// tracepoints (tp_btf), its workload, and the outputs.
	Needs: spec.WithAttribution(spec.NeedBPF, spec.NeedPerfmon, spec.NeedBTF, spec.NeedPtrace, spec.NeedHostPID,
		spec.NeedResults("the allocation flame graph and folded stacks")),
	Once:  true,
	Gives: []spec.Input{spec.InputGo, spec.InputStacks},
}
