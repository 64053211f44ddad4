package recipes

import (
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/offcpu"
)

// Option is one setting of a probe or collector in a recipe.
type Option struct {
	Name string
	Domain
	// Default is the value when the recipe leaves the option out (nil:
	// the kind's zero value).
	Default any
	// Required options have no default: the recipe must give them.
	Required bool
	Doc      string
}

// DefaultText is the default as a recipe would write it ("" for none).
func (o Option) DefaultText() string {
	if o.Default == nil {
		return ""
	}
	return o.format(o.Default)
}

// Component is a probe or collector a recipe can name: the catalog below
// is everything a recipe can load. Nothing else runs.
type Component struct {
	Name string
	// Probe: a BPF probe (probes/), else a collector (collectors/, jvm/).
	Probe   bool
	Doc     string
	Options []Option
	// Section is the report section the component's evidence lands in.
	Section string
}

func (c Component) option(name string) (Option, bool) {
	for _, o := range c.Options {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// The report sections a recipe's components fill.
const (
	SectionNet       = "net"
	SectionSoftirq   = "softirq"
	SectionLocks     = "locks"
	SectionProfile   = "profile"
	SectionJVMPauses = "jvm_pauses"
	SectionJVM       = "jvm"
	SectionGC        = "gc"
	SectionOffCPU    = "offcpu"
)

var (
	attachMethods = []string{"", "tp_btf", "raw_tp", "tracepoint"}
	stackKinds    = []string{"kernel+user", "kernel", "user"}
	rootFrames    = []string{"comm", "none", "process", "thread", "cpu", "container"}
	asprofEvents  = []string{string(asprof.Alloc), string(asprof.CPU), string(asprof.Lock), string(asprof.Wall)}
	httpMethods   = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
	passiveModes  = []string{"auto", "on", "off"}
)

// Probes are the BPF probes a recipe can load, by the names probes.Catalog
// gives them (cpuprofile is a perf_event program and has no tracepoint).
var Probes = []Component{
	{Name: "softirq", Probe: true, Section: SectionSoftirq,
		Doc: "softirq count and time per CPU and vector, raise→entry latency of NET_RX/NET_TX (irq:softirq_*)",
		Options: []Option{
			{Name: "cpus", Domain: Domain{Kind: KindCPUs}, Doc: "only these CPUs in the tables (empty: every CPU)"},
			{Name: "latency", Domain: Domain{Kind: KindBool}, Default: true, Doc: "attach irq:softirq_raise for raise→entry latency histograms (one BPF run more per raise)"},
		}},
	{Name: "netqueue", Probe: true, Section: SectionNet,
		Doc: "packets per RX/TX queue and CPU, NAPI polls, qdisc activity of one interface (net:*, napi:napi_poll, qdisc:*)",
		Options: []Option{
			{Name: "interface", Domain: Domain{Kind: KindInterface}, Required: true, Doc: "the interface whose queues are counted"},
		}},
	{Name: "lockstat", Probe: true, Section: SectionLocks,
		Doc: "kernel lock contention per call site, lock class and socket, system-wide (lock:contention_*)",
		Options: []Option{
			{Name: "stacks_every", Domain: Domain{Kind: KindInt, Min: bound(1), Max: bound(lockstat.MaxStackEvery)}, Default: int64(lockstat.DefaultStackEvery),
				Doc: "take the waiter's stack for 1 in N contentions (per-lock and per-socket waits stay exact)"},
			{Name: "tcp", Domain: Domain{Kind: KindBool}, Default: true, Doc: "list TCP sockets among the contended sockets (a network run lists UDP only)"},
		}},
	{Name: "udpdrop", Probe: true, Section: SectionNet,
		Doc: "dropped packets per local UDP port and drop reason (udp:udp_fail_queue_rcv_skb, skb:kfree_skb)",
		Options: []Option{
			{Name: "port", Domain: Domain{Kind: KindPort}, Doc: "count drops of this local port (0: every port)"},
		}},
	{Name: "udpsock", Probe: true, Section: SectionNet,
		Doc: "datagrams read per UDP socket and which CPUs' softirqs woke it (sock:sock_recv_length, sock:sk_data_ready)",
		Options: []Option{
			{Name: "port", Domain: Domain{Kind: KindPort}, Doc: "the sockets bound to this local port"},
			{Name: "pid", Domain: Domain{Kind: KindPID}, Doc: "the sockets of this process"},
		}},
	{Name: "tcp", Probe: true, Section: SectionNet,
		Doc: "TCP per listener and connection: accept queues sampled through sock_diag, the busiest connections' tcp_info and owners, Tcp/TcpExt counters, sockstat and sysctls over the window, retransmits by kind and resets by reason per connection (tcp:tcp_retransmit_skb, tcp:tcp_retransmit_synack, tcp:tcp_send_reset, tcp:tcp_receive_reset)",
		Options: []Option{
			{Name: "port", Domain: Domain{Kind: KindPort}, Doc: "the listeners, connections and events of this local port (0: every port)"},
			{Name: "pid", Domain: Domain{Kind: KindPID}, Doc: "the listeners and connections this process holds (0: every process)"},
			{Name: "top", Domain: Domain{Kind: KindInt, Min: bound(1), Max: bound(10000)}, Default: int64(measure.DefaultTCPTop), Doc: "connections and per-connection event rows listed"},
			{Name: "sample_interval", Domain: Domain{Kind: KindDuration, Min: bound(float64(10 * time.Millisecond)), Max: bound(float64(10 * time.Second))}, Default: measure.DefaultTCPSampleEvery, Doc: "how often the listeners' accept queues are sampled"},
		}},
	{Name: "offcpu", Probe: true, Section: SectionOffCPU,
		Doc: "off-CPU time by kernel and user stack, state, reason and waker, run-queue latency, thread pools' on-CPU/runnable/blocked time (sched:sched_switch, sched:sched_waking, sched:sched_wakeup*)",
		Options: []Option{
			{Name: "pid", Domain: Domain{Kind: KindPID}, Doc: "watch only this process (0: every process)"},
			{Name: "min_block", Domain: Domain{Kind: KindDuration, Min: bound(0), Max: bound(float64(time.Second))}, Default: offcpu.DefaultMinBlock,
				Doc: "the shortest wait kept by stack; shorter ones count in the thread and pool totals only (0: every wait)"},
			{Name: "stacks", Domain: Domain{Kind: KindEnum, Values: stackKinds}, Default: "kernel+user", Doc: "which stacks to record"},
			{Name: "stack_every", Domain: Domain{Kind: KindInt, Min: bound(1), Max: bound(offcpu.MaxStackEvery)}, Default: int64(1),
				Doc: "take stacks at 1 in N switch-outs (every wait is still timed in the totals and histograms)"},
			{Name: "waker_stacks", Domain: Domain{Kind: KindBool}, Default: true, Doc: "take the waker's stacks (who woke each wait is kept either way)"},
			{Name: "top", Domain: Domain{Kind: KindInt, Min: bound(1), Max: bound(10000)}, Default: int64(20), Doc: "waits listed by stack"},
		}},
	{Name: "cpuprofile", Probe: true, Section: SectionProfile,
		Doc: "on-CPU stacks, kernel and user, from a perf event on every CPU (cycles where the PMU offers it, else cpu-clock)",
		Options: []Option{
			{Name: "pid", Domain: Domain{Kind: KindPID}, Doc: "sample only this process (0: every process)"},
			{Name: "frequency", Domain: Domain{Kind: KindInt, Min: bound(1), Max: bound(10000)}, Default: int64(cpuprofile.DefaultFrequency), Doc: "samples per second per CPU"},
			{Name: "event", Domain: Domain{Kind: KindEnum, Values: cpuprofile.EventNames}, Default: cpuprofile.EventAuto.String(),
				Doc: "the perf event that samples: cycles (counts work: needs a PMU), cpu-clock (a timer: works without one, but stops on a halted virtual CPU), or auto (cycles where it opens, as perf record)"},
			{Name: "stacks", Domain: Domain{Kind: KindEnum, Values: stackKinds}, Default: "kernel+user", Doc: "which stacks to record"},
			{Name: "root", Domain: Domain{Kind: KindEnum, Values: rootFrames}, Default: "comm", Doc: "the synthetic frame under each stack"},
			{Name: "include_idle", Domain: Domain{Kind: KindBool}, Default: false, Doc: "keep samples of idle CPUs"},
			{Name: "stack_entries", Domain: Domain{Kind: KindInt, Min: bound(1024), Max: bound(1 << 20)}, Default: int64(cpuprofile.DefaultStackEntries), Doc: "stack map entries, one per distinct stack (~1 KiB each)"},
			{Name: "jit_map", Domain: Domain{Kind: KindBool}, Default: false, Doc: "name JIT-compiled frames from the process's perf map (a HotSpot JVM is asked to write it; needs pid)"},
		}},
	goallocComponent,
}

// Collectors are the readers of /proc, /sys, hsperfdata, GC logs and
// async-profiler a recipe can use. They attach nothing to the kernel.
var Collectors = []Component{
	{Name: "netcounters", Section: SectionNet,
		Doc: "driver per-queue counters, /proc/interrupts, /proc/net/udp (socket queues and drops), SNMP, softnet_stat; the interface's configuration",
		Options: []Option{
			{Name: "interface", Domain: Domain{Kind: KindInterface}, Doc: "the interface whose driver counters, IRQs and configuration are read (empty: none)"},
			{Name: "port", Domain: Domain{Kind: KindPort}, Doc: "list the sockets of this local port"},
			{Name: "pid", Domain: Domain{Kind: KindPID}, Doc: "list the sockets and threads of this process"},
		}},
	{Name: "hsperfdata", Section: SectionJVMPauses,
		Doc: "a HotSpot JVM's GC and safepoint counts and times, read from its hsperfdata (nothing attached)",
		Options: []Option{
			{Name: "pid", Domain: Domain{Kind: KindPID, Min: bound(1)}, Required: true, Doc: "the JVM"},
		}},
	{Name: "async-profiler", Section: SectionJVM,
		Doc: "allocation (or cpu, lock, wall) profile of a running JVM through async-profiler, with hsperfdata's Eden and GC counters: bytes per request",
		Options: []Option{
			{Name: "pid", Domain: Domain{Kind: KindPID, Min: bound(1)}, Required: true, Doc: "the JVM"},
			{Name: "event", Domain: Domain{Kind: KindEnum, Values: asprofEvents}, Default: string(asprof.Alloc), Doc: "what async-profiler samples"},
			{Name: "alloc_interval", Domain: Domain{Kind: KindSize, Min: bound(0)}, Default: int64(0), Doc: "sample one allocation per this many bytes; 0 chooses it from the allocation rate before the window (about 2500 samples: ±4 %; async-profiler's 512k under load)"},
			{Name: "requests", Domain: Domain{Kind: KindInt, Min: bound(0)}, Doc: "requests served in the window (sent by you, or by perfscope with load)"},
			{Name: "load", Domain: Domain{Kind: KindURL}, Doc: "drive `requests` HTTP requests at this URL and measure while they run"},
			{Name: "method", Domain: Domain{Kind: KindEnum, Values: httpMethods}, Default: "GET", Doc: "HTTP method of the load"},
			{Name: "body", Domain: Domain{Kind: KindString}, Doc: "request body of the load"},
			{Name: "body_file", Domain: Domain{Kind: KindFile}, Doc: "read the load's request body from this file"},
			{Name: "header", Domain: Domain{Kind: KindList}, Doc: "request headers of the load, Name:value each"},
			{Name: "concurrency", Domain: Domain{Kind: KindInt, Min: bound(1), Max: bound(1024)}, Default: int64(4), Doc: "concurrent connections of the load"},
			{Name: "requests_from", Domain: Domain{Kind: KindURL}, Doc: "count requests from this Prometheus/OpenMetrics endpoint (Spring Boot Actuator, Micrometer, Dropwizard, OpenTelemetry), summed over the window"},
			{Name: "requests_metric", Domain: Domain{Kind: KindString}, Doc: "the request counter of requests_from (empty: the known ones in order)"},
			{Name: "requests_match", Domain: Domain{Kind: KindList}, Doc: "keep requests_from series whose LABEL=REGEX, or drop them with LABEL!=REGEX (default drops uri=/actuator.*)"},
			{Name: "mappings", Domain: Domain{Kind: KindURL}, Doc: "Spring Boot Actuator's /actuator/mappings, to join handlers to endpoints (empty: beside an Actuator requests_from)"},
			{Name: "count", Domain: Domain{Kind: KindEnum, Values: passiveModes}, Default: "auto", Doc: "passive HTTP/1.x request count from the JVM's socket writes (eBPF): auto (when nothing else counts), on (also as a cross-check; fail without it) or off"},
			{Name: "http_ports", Domain: Domain{Kind: KindPorts}, Doc: "listening TCP ports the passive count watches (empty: all of the JVM's)"},
			{Name: "request_threads", Domain: Domain{Kind: KindString}, Doc: "thread names (regex) that serve requests, beside the known pools"},
			{Name: "handler_frames", Domain: Domain{Kind: KindString}, Doc: "frames (regex on dotted names) that are request handlers, instead of the outermost application frame under a known dispatcher"},
			{Name: "target_rps", Domain: Domain{Kind: KindFloat, Min: bound(0)}, Doc: "request rate to predict young GCs at (0: the measured rate)"},
			{Name: "target_gc_interval", Domain: Domain{Kind: KindDuration, Min: bound(float64(time.Millisecond))}, Default: diagnose.DefaultTargetGCInterval, Doc: "young-GC interval to size Eden for"},
			{Name: "top", Domain: Domain{Kind: KindInt, Min: bound(0), Max: bound(1000)}, Default: int64(10), Doc: "allocation sites to list"},
			{Name: "library", Domain: Domain{Kind: KindFile}, Doc: "libasyncProfiler.so or an async-profiler directory (empty: $PERFSCOPE_ASYNC_PROFILER, asprof on PATH, else Maven)"},
		}},
	{Name: "gclog", Section: SectionGC,
		Doc: "HotSpot GC log analysis (JDK 8 and unified logging): pauses, allocation and promotion rates, full-GC causes",
		Options: []Option{
			{Name: "files", Domain: Domain{Kind: KindFiles}, Required: true, Doc: "one JVM's GC log files, oldest first (rotated siblings are read too)"},
			{Name: "pause_goal", Domain: Domain{Kind: KindDuration, Min: bound(float64(time.Microsecond))}, Default: diagnose.DefaultPauseGoal, Doc: "pauses longer than this are findings"},
			{Name: "young_interval", Domain: Domain{Kind: KindDuration, Min: bound(float64(time.Millisecond))}, Default: diagnose.DefaultTargetGCInterval, Doc: "young GCs more frequent than this are findings"},
			{Name: "rps", Domain: Domain{Kind: KindFloat, Min: bound(0)}, Doc: "requests per second served during the log (bytes-per-request model)"},
			{Name: "requests", Domain: Domain{Kind: KindFloat, Min: bound(0)}, Doc: "requests served during the log (instead of rps)"},
			{Name: "target_rps", Domain: Domain{Kind: KindFloat, Min: bound(0)}, Doc: "request rate to predict young GCs at"},
		}},
}

// component finds a catalog entry by name in one list.
func component(list []Component, name string) (Component, bool) {
	for _, c := range list {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

func componentNames(list []Component) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.Name
	}
	return out
}
