package measure

import (
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/spec"
)

// AsyncProfilerSpec is the async-profiler collector: a JVM's allocation
// (or cpu, lock, wall) profile over its own window, and bytes per request.
var AsyncProfilerSpec = spec.Part{Name: "async-profiler", Recipe: true, Section: spec.SectionJVM,
	Doc: "allocation (or cpu, lock, wall) profile of a running JVM through async-profiler, with hsperfdata's Eden and GC counters: bytes per request",
	Options: spec.Options([]spec.Option{
		{Name: "pid", Domain: spec.Domain{Kind: spec.KindPID, Min: spec.Bound(1)}, Required: true, Doc: "the JVM"},
		{Name: "event", Domain: spec.Domain{Kind: spec.KindEnum, Values: asprofEvents}, Default: string(asprof.Alloc), Doc: "what async-profiler samples"},
		{Name: "alloc_interval", Domain: spec.Domain{Kind: spec.KindSize, Min: spec.Bound(0)}, Default: int64(0), Doc: "sample one allocation per this many bytes; 0 chooses it from the allocation rate before the window (about 2500 samples: ±4 %; async-profiler's 512k under load)"},
	}, spec.LoadOptions, []spec.Option{
		{Name: "requests_from", Domain: spec.Domain{Kind: spec.KindURL}, Doc: "count requests from this Prometheus/OpenMetrics endpoint (Spring Boot Actuator, Micrometer, Dropwizard, OpenTelemetry), summed over the window"},
		{Name: "requests_metric", Domain: spec.Domain{Kind: spec.KindString}, Doc: "the request counter of requests_from (empty: the known ones in order)"},
		{Name: "requests_match", Domain: spec.Domain{Kind: spec.KindList}, Doc: "keep requests_from series whose LABEL=REGEX, or drop them with LABEL!=REGEX (default drops uri=/actuator.*)"},
		{Name: "mappings", Domain: spec.Domain{Kind: spec.KindURL}, Doc: "Spring Boot Actuator's /actuator/mappings, to join handlers to endpoints (empty: beside an Actuator requests_from)"},
		{Name: "count", Domain: spec.Domain{Kind: spec.KindEnum, Values: spec.PassiveModes}, Default: "auto", Doc: "passive HTTP/1.x and h2c request count from the JVM's socket writes (eBPF): auto (when nothing else counts), on (also as a cross-check; fail without it) or off"},
		{Name: "http_ports", Domain: spec.Domain{Kind: spec.KindPorts}, Doc: "listening TCP ports the passive count watches (empty: all of the JVM's)"},
		{Name: "request_threads", Domain: spec.Domain{Kind: spec.KindString}, Doc: "thread names (regex) that serve requests, beside the known pools"},
		{Name: "handler_frames", Domain: spec.Domain{Kind: spec.KindString}, Doc: "frames (regex on dotted names) that are request handlers, instead of the outermost application frame under a known dispatcher"},
		{Name: "target_rps", Domain: spec.Domain{Kind: spec.KindFloat, Min: spec.Bound(0)}, Doc: "request rate to predict young GCs at (0: the measured rate)"},
		{Name: "target_gc_interval", Domain: spec.Domain{Kind: spec.KindDuration, Min: spec.Bound(float64(time.Millisecond))}, Default: diagnose.DefaultTargetGCInterval, Doc: "young-GC interval to size Eden for"},
		{Name: "top", Domain: spec.Domain{Kind: spec.KindInt, Min: spec.Bound(0), Max: spec.Bound(1000)}, Default: int64(10), Doc: "allocation sites to list"},
		{Name: "library", Domain: spec.Domain{Kind: spec.KindFile}, Doc: "libasyncProfiler.so or an async-profiler directory (empty: $PERFSCOPE_ASYNC_PROFILER, asprof on PATH, else Maven)"},
	}),
	Needs: []spec.Need{spec.NeedHostPID,
		{Kind: spec.Capability, Name: "CAP_SYS_PTRACE", Required: true,
			Why:     "reach the JVM's /tmp through /proc/PID/root to stage the library and speak the attach protocol",
			Without: "the JVM cannot be attached: the part cannot run"},
		spec.ForOtherUsers("CAP_KILL", "send the attach trigger (SIGQUIT) to a JVM running as another user"),
		spec.ForOtherUsers("CAP_SETUID", "connect as the JVM's user (JDK 8 accepts only its own uid)"),
		spec.ForOtherUsers("CAP_SETGID", "connect as the JVM's group"),
		{Kind: spec.Capability, Name: "CAP_CHOWN",
			Why:     "hand the staging directory in the JVM's /tmp to the JVM's user, who writes the profile there",
			Without: "JVMs of other users than root cannot write their profile"},
		spec.ForOtherUsers("CAP_DAC_OVERRIDE", "copy the library into, and clean up, the staging directory owned by the JVM's user")},
	Once:  true,
	Gives: []spec.Input{spec.InputJVM, spec.InputStacks},
}

var asprofEvents = []string{string(asprof.Alloc), string(asprof.CPU), string(asprof.Lock), string(asprof.Wall)}
