package diagnose

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// Thresholds of the JVM rules. The Spring Boot allocation study calls ~34 KB per Spring Boot
// request already heavy; a young collection more often than every 10 s is
// where its arithmetic starts to matter.
const (
	AllocPerRequestWarn     = 100 << 10
	LoggingShareWarn        = 0.10
	GCTimeShareWarn         = 0.05
	GCTimeShareCrit         = 0.15
	DefaultTargetGCInterval = 10 * time.Second
	// premature promotion: a young GC promotes more than half the
	// survivor space, and promotion is a visible part of allocation.
	promotedSurvivorRatio = 0.5
	promotedAllocShare    = 0.05
)

// JVMThresholds are the JVM rules' thresholds a recipe may override; their
// defaults are the constants above. The young-GC interval goal is the
// async-profiler collector's target_gc_interval, not a threshold.
var JVMThresholds = struct {
	AllocPerRequest, LoggingShare, GCTimeWarn, GCTimeCrit, PromotedSurvivor, PromotedAlloc Threshold
}{
	AllocPerRequest: Threshold{Name: "alloc_per_request_bytes", Default: AllocPerRequestWarn, Min: 0, Max: 1e12,
		Doc: "bytes allocated per request that make a finding"},
	LoggingShare: Threshold{Name: "logging_share", Default: LoggingShareWarn, Min: 0, Max: 1,
		Doc: "logging's share of everything allocated that makes a finding"},
	GCTimeWarn: Threshold{Name: "gc_time_warn_share", Default: GCTimeShareWarn, Min: 0, Max: 1,
		Doc: "the window's share in GC pauses that makes a warning"},
	GCTimeCrit: Threshold{Name: "gc_time_crit_share", Default: GCTimeShareCrit, Min: 0, Max: 1,
		Doc: "the share that makes it critical"},
	PromotedSurvivor: Threshold{Name: "promoted_survivor_ratio", Default: promotedSurvivorRatio, Min: 0, Max: 100,
		Doc: "promotion per young GC over the survivor space that counts as premature"},
	PromotedAlloc: Threshold{Name: "promoted_alloc_share", Default: promotedAllocShare, Min: 0, Max: 1,
		Doc: "promotion's share of allocation that counts as premature"},
}

// JVMRules are the rules of `perfscope jvm`.
var JVMRules = []Rule[evidence.JVM]{
	{ID: "jvm.young-gc-frequency", Check: checkYoungGCFrequency},
	{ID: "jvm.alloc-per-request", Tunables: []Threshold{JVMThresholds.AllocPerRequest}, CheckTuned: checkAllocPerRequest},
	{ID: "jvm.logging-allocation", Tunables: []Threshold{JVMThresholds.LoggingShare}, CheckTuned: checkLoggingAllocation},
	{ID: "jvm.gc-time-share", Tunables: []Threshold{JVMThresholds.GCTimeWarn, JVMThresholds.GCTimeCrit}, CheckTuned: checkGCTimeShare},
	{ID: "jvm.premature-promotion", Tunables: []Threshold{JVMThresholds.PromotedSurvivor, JVMThresholds.PromotedAlloc}, CheckTuned: checkPrematurePromotion},
}

func kib(b float64) string { return fmt.Sprintf("%.1f KB", b/1024) }
func mib(b float64) string { return fmt.Sprintf("%.0f MB", b/(1<<20)) }

// planningRPS is --target-rps, else the request rate observed in the
// window — never a rate perfscope's own load reached by saturating the
// service, which is a capacity, not the traffic the GC will see.
func planningRPS(e evidence.JVM) (float64, string) {
	if e.TargetRPS > 0 {
		return e.TargetRPS, "target"
	}
	if e.RequestRate != nil && !e.RateIsSaturation {
		return *e.RequestRate, "observed"
	}
	return 0, ""
}

// EdenForPrediction is the Eden the young-GC model divides by: its
// occupancy when young GCs start (G1 collects before the capacity is
// reached), else the capacity.
func EdenForPrediction(e evidence.JVM) float64 {
	if e.EdenAtCollection > 0 {
		return float64(e.EdenAtCollection)
	}
	return float64(e.EdenCapacity)
}

func checkYoungGCFrequency(e evidence.JVM) *Finding {
	rps, which := planningRPS(e)
	perReq, known := e.PerRequest()
	eden := EdenForPrediction(e)
	if !known || perReq <= 0 || rps <= 0 || eden <= 0 {
		return nil
	}
	interval := time.Duration(e.TargetGCIntervalNs)
	if interval <= 0 {
		interval = DefaultTargetGCInterval
	}
	rate := AllocRate(perReq, rps)
	perMin := YoungGCsPerMinute(rate, eden)
	allowed := time.Minute.Seconds() / interval.Seconds()
	if perMin <= allowed {
		return nil
	}
	need := EdenForInterval(rate, interval)
	if e.RegionSize > 0 {
		need = RoundUpToRegion(need, float64(e.RegionSize))
	}
	sev := Warn
	if perMin > 4*allowed {
		sev = Crit
	}
	f := &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("%.0f young GCs per minute predicted at %.0f requests/s (one every %.1fs)", perMin, rps, 60/perMin),
		Evidence: []string{
			fmt.Sprintf("%s per request (whole process: what the GC sees) × %.0f requests/s (%s) = %s/s allocated", kib(perReq), rps, which, mib(rate)),
			fmt.Sprintf("young GCs start at %s of Eden (%s; capacity %s): it fills every %.1fs, target is one young GC per %v or less often", mib(eden), edenSource(e), mib(float64(e.EdenCapacity)), eden/rate, interval),
			fmt.Sprintf("an Eden of %s gives one young GC per %v", mib(need), interval),
		},
		Impact: 1 - allowed/perMin,
	}
	r := Recommendation{
		Kind:      KindAdvice,
		Why:       "Young collections happen when Eden fills, so their frequency is allocation rate over Eden size (the allocation → young-GC model); either allocate less per request or give Eden room for the target interval.",
		Expected:  fmt.Sprintf("about %.1f young GCs per minute at %.0f requests/s", YoungGCsPerMinute(rate, need), rps),
		Reference: "Allocation per request (a Spring Boot measurement): 0.5 MB/request × 500 rps = 15 GB/min, several young GCs a minute even with a 5 GB Eden",
	}
	if strings.Contains(e.Collector, "GarbageFirst") || e.RegionSize > 0 {
		regions := 0.0
		if e.RegionSize > 0 {
			regions = need / float64(e.RegionSize)
		}
		r.Apply = []string{fmt.Sprintf("restart the JVM with a heap whose young part can reach %s, e.g. -Xmx%dm (G1 grows young up to G1MaxNewSizePercent=60%% of the heap)", mib(need), int(math.Ceil(need/0.6/(1<<20))))}
		r.Caveats = []string{
			"G1 sizes Eden adaptively to meet -XX:MaxGCPauseMillis (default 200 ms); a bigger Eden means longer young pauses, and -Xmn pins the young size and switches that adaptation off.",
			fmt.Sprintf("G1 sizes Eden in whole regions (%s each here): %.0f regions.", mib(float64(e.RegionSize)), regions),
		}
	} else {
		r.Apply = []string{fmt.Sprintf("restart the JVM with -Xmn%dm (young generation: Eden plus two survivor spaces)", int(math.Ceil(need*1.25/(1<<20))))}
		r.Caveats = []string{"a bigger young generation takes heap from the old generation; check old occupancy after full GCs first"}
	}
	r.Revert = []string{"restart the JVM with its previous heap flags"}
	f.Recommendation = r
	return f
}

func edenSource(e evidence.JVM) string {
	switch e.EdenAtCollectionSource {
	case "hsperfdata-cycle":
		return "allocation per GC cycle the JVM published"
	case "hsperfdata-occupancy":
		return "occupancy before the window's young GCs"
	}
	return "no young GC in the window: the capacity"
}

func topSites(e evidence.JVM, n int, logging bool) []string {
	var out []string
	for _, s := range e.Sites {
		if (s.Logging != "") != logging {
			continue
		}
		name := s.Frame
		if s.Type != "" {
			name += " (" + s.Type + ")"
		}
		out = append(out, fmt.Sprintf("%s: %s per request, %.0f%%", name, kib(s.BytesPerRequest), s.Share*100))
		if len(out) == n {
			break
		}
	}
	return out
}

func checkAllocPerRequest(e evidence.JVM, t Thresholds) *Finding {
	perReq, known := e.PerRequest()
	if !known || perReq < t.Get(JVMThresholds.AllocPerRequest) {
		return nil
	}
	n, _ := e.RequestCount()
	ev := []string{fmt.Sprintf("%s allocated per request over %d requests counted by %s (threshold %s)", kib(perReq), n, e.RequestsSource, kib(t.Get(JVMThresholds.AllocPerRequest)))}
	ev = append(ev, topSites(e, 3, false)...)
	return &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%s allocated per request", kib(perReq)),
		Evidence: ev,
		Impact:   math.Min(1, perReq/(4*t.Get(JVMThresholds.AllocPerRequest))),
		Recommendation: Recommendation{
			Kind:      KindCode,
			Why:       "Every byte allocated per request brings the next young GC closer; the sites above are where the bytes come from.",
			Code:      []CodeSketch{{Lang: "java", Code: "// reuse buffers instead of allocating per request\nprivate static final ThreadLocal<byte[]> BUF = ThreadLocal.withInitial(() -> new byte[64 * 1024]);\nbyte[] buf = BUF.get();"}},
			Expected:  "young GC frequency falls in proportion to the bytes removed per request",
			Reference: "Allocation per request (a Spring Boot measurement): a Spring Boot request allocates ~34 KB even with a 50-byte body",
		},
	}
}

func checkLoggingAllocation(e evidence.JVM, t Thresholds) *Finding {
	if e.Logging.Bytes <= 0 || e.Logging.Share < t.Get(JVMThresholds.LoggingShare) {
		return nil
	}
	perReq := ""
	if e.Logging.BytesPerRequest > 0 {
		perReq = fmt.Sprintf("logging costs %s per request, ", kib(e.Logging.BytesPerRequest))
	}
	var fws []string
	for fw, b := range e.Logging.ByFramework {
		fws = append(fws, fmt.Sprintf("%s %s", fw, mib(float64(b))))
	}
	ev := []string{fmt.Sprintf("%s%.0f%% of everything allocated in the window", perReq, e.Logging.Share*100), "by framework: " + strings.Join(sorted(fws), ", ")}
	for _, ep := range e.Endpoints {
		if ep.LoggingBytesPerRequest != nil && *ep.LoggingBytesPerRequest >= 64 && ep.Endpoint != "" {
			ev = append(ev, fmt.Sprintf("+%s per request from logging on %s %s", kib(*ep.LoggingBytesPerRequest), ep.Method, ep.Endpoint))
		}
	}
	return &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("logging allocates %.0f%% of the heap traffic", e.Logging.Share*100),
		Evidence: ev,
		Impact:   e.Logging.Share,
		Recommendation: Recommendation{
			Kind: KindCode,
			Why:  "Formatting a log line builds strings, arrays and varargs per call; the Spring Boot allocation study measured +20 KB per request for one log line. An async appender only moves that work to another thread: the bytes are still allocated and still fill Eden.",
			Code: []CodeSketch{{Lang: "java", Code: "// parameterised: nothing is formatted when the level is off, and no string is concatenated eagerly\n" +
				"log.info(\"order {} for {}\", id, customer);          // not \"order \" + id + ...\n" +
				"// guard what is expensive to compute, not only to format\n" +
				"if (log.isDebugEnabled()) { log.debug(\"payload {}\", toJson(order)); }\n" +
				"// demote per-request lines to DEBUG, or sample them\n" +
				"// log4j2: garbage-free mode (-Dlog4j2.enableThreadlocals=true, layouts with no %ex/%l); logback: avoid %caller/%line, which walk the stack per line"}},
			Expected:  fmt.Sprintf("allocation per request drops by up to the logging share (%.0f%%) when the line is removed or demoted; parameterised and guarded calls save the formatting of lines that are off", e.Logging.Share*100),
			Reference: "Allocation per request (a Spring Boot measurement): +20 KB per request with one log.warn line",
			Caveats:   []string{"logback's AsyncAppender and log4j2's async loggers reduce latency, not allocation: the event and its formatting still allocate, on another thread"},
		},
	}
}

func checkGCTimeShare(e evidence.JVM, t Thresholds) *Finding {
	if e.GCTimeShare < t.Get(JVMThresholds.GCTimeWarn) {
		return nil
	}
	sev := Warn
	if e.GCTimeShare >= t.Get(JVMThresholds.GCTimeCrit) {
		sev = Crit
	}
	return &Finding{
		Severity: sev,
		Title:    fmt.Sprintf("the JVM spent %.1f%% of the window in GC pauses", e.GCTimeShare*100),
		Evidence: []string{
			fmt.Sprintf("%d young GCs (mean pause %.1f ms) and %d full/old GCs over %.1fs", e.YoungGCs, e.MeanYoungPauseNs/1e6, e.OldGCs, float64(e.WindowNs)/1e9),
			fmt.Sprintf("last cause: %s", e.LastGCCause),
		},
		Impact: math.Min(1, e.GCTimeShare),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "Time in GC pauses is time no request is served; it grows with allocation rate and with live data copied per collection.",
			Apply:    []string{"reduce allocation per request (see the allocation findings), then size Eden for the target GC interval"},
			Expected: "pause share falls with young GC frequency",
		},
	}
}

func checkPrematurePromotion(e evidence.JVM, t Thresholds) *Finding {
	if e.PromotedPerYoungGC <= 0 || e.SurvivorCapacity <= 0 || e.AllocBytesEden <= 0 {
		return nil
	}
	if e.PromotedPerYoungGC < t.Get(JVMThresholds.PromotedSurvivor)*float64(e.SurvivorCapacity) || float64(e.Promoted) < t.Get(JVMThresholds.PromotedAlloc)*float64(e.AllocBytesEden) {
		return nil
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("young GCs promote %s each into the old generation", mib(e.PromotedPerYoungGC)),
		Evidence: []string{
			fmt.Sprintf("old generation grew %s across %d young GCs without a full GC", mib(float64(e.Promoted)), e.YoungGCs),
			fmt.Sprintf("survivor spaces hold %s; %.0f%% of allocation reached the old generation", mib(float64(e.SurvivorCapacity)), 100*float64(e.Promoted)/float64(e.AllocBytesEden)),
		},
		Impact: math.Min(1, float64(e.Promoted)/float64(e.AllocBytesEden)),
		Recommendation: Recommendation{
			Kind:     KindAdvice,
			Why:      "Request-scoped objects that overflow the survivor spaces are promoted and die in the old generation, which only a mixed or full collection reclaims.",
			Apply:    []string{"restart the JVM with larger survivor spaces (-XX:SurvivorRatio=6, or a larger young generation) and check -XX:MaxTenuringThreshold"},
			Revert:   []string{"restart the JVM with its previous flags"},
			Expected: "old-generation growth between young GCs falls to the truly long-lived objects",
		},
	}
	if e.RegionSize > 0 {
		f.Recommendation.Caveats = []string{"in G1, humongous objects (at least half a region) are allocated directly in the old generation and count here too"}
	}
	return f
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}
