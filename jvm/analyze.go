package jvm

import (
	"regexp"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/asprof"
)

// loggingFrameworks maps frame prefixes (dotted) to the framework they
// belong to. A stack is charged to the innermost framework it runs
// through: an slf4j call that lands in logback costs what logback does.
var loggingFrameworks = []struct{ prefix, name string }{
	{"ch.qos.logback.", "logback"},
	{"org.apache.logging.log4j.", "log4j"},
	{"org.apache.log4j.", "log4j"},
	{"org.slf4j.", "slf4j"},
	{"java.util.logging.", "java.util.logging"},
	{"sun.util.logging.", "java.util.logging"},
	{"org.jboss.logging.", "jboss-logging"},
	{"org.apache.commons.logging.", "commons-logging"},
}

// DisplayFrame turns async-profiler's JVM-internal names
// ("java/util/ArrayList.grow") into the dotted form Java users read.
func DisplayFrame(f string) string {
	if strings.Contains(f, "/") && !strings.Contains(f, " ") && !strings.HasPrefix(f, "/") {
		return strings.ReplaceAll(f, "/", ".")
	}
	return f
}

func loggingFramework(frames []string) string {
	for i := len(frames) - 1; i >= 0; i-- {
		f := DisplayFrame(frames[i])
		for _, lf := range loggingFrameworks {
			if strings.HasPrefix(f, lf.prefix) {
				return lf.name
			}
		}
	}
	return ""
}

// allocatedType strips the allocation frame's annotation: async-profiler
// ends alloc stacks with the allocated class, marked _[i] (in a new TLAB)
// or _[k] (outside TLABs).
func allocatedType(frame string) (string, bool) {
	for _, suffix := range []string{"_[i]", "_[k]"} {
		if t, ok := strings.CutSuffix(frame, suffix); ok {
			return t, true
		}
	}
	return "", false
}

// threadFrame parses the frame async-profiler's `threads` option puts at
// the root of every stack: "[name tid=1234]" or "[tid=1234]".
var threadFrame = regexp.MustCompile(`^\[(?:(.*) )?tid=(\d+)\]$`)

// WithoutThread drops the thread frame `threads` profiling puts at the
// root of a stack, so flame graphs merge the same code path across the
// threads of a pool.
func WithoutThread(frames []string) []string {
	if len(frames) > 0 && threadFrame.MatchString(frames[0]) {
		return frames[1:]
	}
	return frames
}

// RequestPools are the thread names of the request-serving pools perfscope
// recognises: Tomcat (NIO, NIO2, APR, with or without TLS), Netty/Reactor
// Netty, Jetty's QueuedThreadPool, Undertow/XNIO, Helidon/virtual-thread
// carriers aside. --request-threads adds to them.
var RequestPools = regexp.MustCompile(`^(https?-(nio2?|apr|jsse-nio2?|openssl-nio2?)-|http-epoll-|http-kqueue-|reactor-http-|qtp\d+|XNIO-|undertow-|vert\.x-eventloop-|grizzly-http-|HttpServer-)`)

// dispatchers are the frames of frameworks dispatching a request to its
// handler (dotted, prefix match): the outermost application frame under
// one of them is the handler.
var dispatchers = []string{
	"org.springframework.web.servlet.DispatcherServlet.doDispatch",
	"org.springframework.web.reactive.DispatcherHandler.",
	"jakarta.servlet.http.HttpServlet.service",
	"javax.servlet.http.HttpServlet.service",
	"org.glassfish.jersey.server.model.internal.AbstractJavaResourceMethodDispatcher.",
	"org.jboss.resteasy.core.MethodInjectorImpl.invoke",
	"io.netty.channel.AbstractChannelHandlerContext.invokeChannelRead",
	"reactor.netty.http.server.HttpServerOperations.onInboundNext",
	"io.undertow.server.Connectors.executeRootHandler",
	"com.sun.net.httpserver.Filter$Chain.doFilter",
	"io.vertx.core.http.impl.Http1xServerRequestHandler.",
}

// frameworkPrefixes are packages that are never the application's own
// handler: the JDK, servers, frameworks and the libraries they call.
var frameworkPrefixes = []string{
	"java.", "javax.", "jakarta.", "jdk.", "sun.", "com.sun.", "org.springframework.", "org.apache.",
	"io.micrometer.", "com.fasterxml.", "ch.qos.logback.", "org.slf4j.", "io.netty.", "reactor.",
	"org.eclipse.jetty.", "io.undertow.", "org.xnio.", "org.glassfish.", "org.jboss.", "io.vertx.",
	"kotlin.", "kotlinx.", "scala.", "io.quarkus.", "io.smallrye.", "org.hibernate.", "com.zaxxer.",
	"io.opentelemetry.", "io.prometheus.", "net.bytebuddy.", "org.aspectj.", "com.google.",
	"io.dropwizard.", "com.codahale.", "org.yaml.", "com.oracle.", "io.helidon.", "one.profiler.",
}

// glue marks generated frames between a dispatcher and the handler:
// lambdas, Spring and CGLIB proxies, reflection accessors.
var glue = []string{"$$Lambda", "$$SpringCGLIB$$", "$$EnhancerBy", "$$FastClassBy", "$Proxy", "GeneratedMethodAccessor", "$$Generated"}

func isDispatcher(f string) bool {
	for _, d := range dispatchers {
		if strings.HasPrefix(f, d) {
			return true
		}
	}
	return false
}

// isApplication says whether a (dotted) Java frame belongs to the
// application: a qualified method outside the framework packages that is
// not generated glue. Native and JVM-internal frames are not.
func isApplication(f string) bool {
	if !strings.Contains(f, ".") || strings.ContainsAny(f, " :[(") {
		return false
	}
	for _, p := range frameworkPrefixes {
		if strings.HasPrefix(f, p) {
			return false
		}
	}
	for _, g := range glue {
		if strings.Contains(f, g) {
			return false
		}
	}
	return true
}

// Attribution configures how a profile is split by thread and handler.
type Attribution struct {
	// RequestThreads adds thread names (a pattern) to RequestPools.
	RequestThreads *regexp.Regexp
	// HandlerFrames, when set, names handlers directly: the outermost
	// frame matching it is the stack's handler, dispatcher or not.
	HandlerFrames *regexp.Regexp
}

// handlerOf is the stack's request handler ("" when it runs under no
// dispatcher, or only through framework code) and whether it ran under a
// dispatcher at all.
func (a Attribution) handlerOf(frames []string) (handler string, dispatched bool) {
	if a.HandlerFrames != nil {
		for _, f := range frames {
			if d := DisplayFrame(f); a.HandlerFrames.MatchString(d) {
				return d, true
			}
		}
		return "", false
	}
	for i, f := range frames {
		if !isDispatcher(DisplayFrame(f)) {
			continue
		}
		for _, g := range frames[i+1:] {
			if d := DisplayFrame(g); isApplication(d) {
				return d, true
			}
		}
		return "", true
	}
	return "", false
}

// foldNumbers turns a thread name into its pool's name.
var digits = regexp.MustCompile(`\d+`)

func poolOf(thread string) string { return digits.ReplaceAllString(thread, "#") }

// Breakdown is a profile split by site, logging framework, thread and
// request handler.
type Breakdown struct {
	Sites   []evidence.AllocSite
	Logging evidence.LoggingCost
	// Threads is nil when the profile has no thread frames.
	Threads *evidence.ThreadSplit
	// Handlers by name; FrameworkBytes is dispatched work outside every
	// handler on request threads.
	Handlers       map[string]*HandlerWeight
	FrameworkBytes int64
	// FrameworkVariance is FrameworkBytes' sampling variance.
	FrameworkVariance float64
	Total             int64
	// Samples is the profile's sample count when known (0: the
	// profile carries no variances).
	Samples int64
	fixes   map[fixKey]*fixWeight
}

type fixKey struct{ kind, where string }

type fixWeight struct {
	bytes int64
	types map[string]int64
}

// fixOf is where a stack's allocation would be cut: its logging
// framework; else the innermost application frame below the request
// dispatcher (a servlet filter above the dispatcher is not where a
// serialiser's bytes are cut); else, for framework-only stacks, the
// innermost frame outside the JDK, which names the library at work
// (Jackson, Tomcat, Spring).
func fixOf(v stackView, k siteKey) fixKey {
	if k.logging != "" {
		return fixKey{"logging", k.logging}
	}
	from := 0
	for i, f := range v.frames {
		if isDispatcher(DisplayFrame(f)) {
			from = i + 1
			break
		}
	}
	for i := len(v.frames) - 1; i >= from; i-- {
		if d := DisplayFrame(v.frames[i]); isApplication(d) {
			// Code that hands the request on (a servlet filter calling
			// the chain) is not where the next filter's bytes are cut.
			if !crossesServer(v.frames[i+1:]) {
				return fixKey{"code", d}
			}
			break
		}
	}
	for i := len(v.frames) - 1; i >= 0; i-- {
		if d := DisplayFrame(v.frames[i]); strings.Contains(d, ".") && !isJDK(d) {
			return fixKey{"framework", d}
		}
	}
	return fixKey{"framework", k.frame}
}

// serverPrefixes are servers' and web frameworks' packages: a path from
// application code into one of them is the framework at work, not a
// library call the application made.
var serverPrefixes = []string{
	"org.apache.catalina.", "org.apache.coyote.", "org.apache.tomcat.", "org.springframework.web.", "org.springframework.http.",
	"io.micrometer.", "io.netty.", "reactor.", "org.eclipse.jetty.", "io.undertow.", "org.glassfish.jersey.",
	"org.jboss.resteasy.", "io.vertx.", "jakarta.servlet.", "javax.servlet.", "sun.net.httpserver.", "com.sun.net.httpserver.",
}

func crossesServer(frames []string) bool {
	for _, f := range frames {
		d := DisplayFrame(f)
		for _, p := range serverPrefixes {
			if strings.HasPrefix(d, p) {
				return true
			}
		}
	}
	return false
}

func isJDK(f string) bool {
	for _, p := range []string{"java.", "javax.", "jdk.", "sun.", "com.sun."} {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}

// HandlerWeight is what ran under one handler.
type HandlerWeight struct {
	Bytes, LoggingBytes int64
	// Variance is the sampling variance of Bytes (bytes²).
	Variance float64
	sites    map[siteKey]int64
}

type siteKey struct{ frame, typ, logging string }

// stackView is one stack with its thread frame and allocated type split
// off.
type stackView struct {
	thread, tid string
	frames      []string
	typ         string
	weight      int64
	variance    float64
}

func view(s asprof.Stack) stackView {
	v := stackView{frames: s.Frames, weight: s.Weight, variance: s.Variance}
	if len(v.frames) > 0 {
		if m := threadFrame.FindStringSubmatch(v.frames[0]); m != nil {
			v.thread, v.tid = m[1], m[2]
			if v.thread == "" {
				v.thread = "tid " + m[2]
			}
			v.frames = v.frames[1:]
		}
	}
	if len(v.frames) > 0 {
		if t, ok := allocatedType(v.frames[len(v.frames)-1]); ok {
			v.typ = DisplayFrame(t)
			v.frames = v.frames[:len(v.frames)-1]
		}
	}
	return v
}

func (v stackView) site() siteKey {
	if fw := loggingFramework(v.frames); fw != "" {
		return siteKey{frame: "logging: " + fw, logging: fw}
	}
	k := siteKey{typ: v.typ}
	if len(v.frames) > 0 {
		k.frame = DisplayFrame(v.frames[len(v.frames)-1])
	} else {
		k.frame = "(no Java frames)"
	}
	return k
}

// Analyze splits a profile. Stacks through a logging framework are
// grouped into one site per framework, so the table says what logging
// costs instead of scattering it over formatter internals.
func Analyze(p *asprof.Profile, a Attribution) Breakdown {
	b := Breakdown{Total: p.Total, Samples: p.Samples, Handlers: map[string]*HandlerWeight{}, fixes: map[fixKey]*fixWeight{}}
	b.Logging = evidence.LoggingCost{ByFramework: map[string]int64{}}
	views := make([]stackView, len(p.Stacks))
	type threadInfo struct {
		pool       string
		dispatched bool
		bytes      int64
		variance   float64
	}
	threads := map[string]*threadInfo{}
	hasThreads := false
	bySite := map[siteKey]int64{}
	for i, s := range p.Stacks {
		v := view(s)
		views[i] = v
		k := v.site()
		bySite[k] += v.weight
		if k.logging != "" {
			b.Logging.Bytes += v.weight
			b.Logging.ByFramework[k.logging] += v.weight
		}
		fk := fixOf(v, k)
		fw := b.fixes[fk]
		if fw == nil {
			fw = &fixWeight{types: map[string]int64{}}
			b.fixes[fk] = fw
		}
		fw.bytes += v.weight
		if v.typ != "" {
			fw.types[v.typ] += v.weight
		}
		handler, dispatched := a.handlerOf(v.frames)
		if v.thread != "" {
			hasThreads = true
			key := v.thread + "\x00" + v.tid
			ti := threads[key]
			if ti == nil {
				ti = &threadInfo{pool: poolOf(v.thread)}
				threads[key] = ti
			}
			ti.bytes += v.weight
			ti.variance += v.variance
			ti.dispatched = ti.dispatched || dispatched
		}
		switch {
		case handler != "":
			h := b.Handlers[handler]
			if h == nil {
				h = &HandlerWeight{sites: map[siteKey]int64{}}
				b.Handlers[handler] = h
			}
			h.Bytes += v.weight
			h.Variance += v.variance
			if k.logging != "" {
				h.LoggingBytes += v.weight
			}
			h.sites[k] += v.weight
		case dispatched:
			b.FrameworkBytes += v.weight
			b.FrameworkVariance += v.variance
		}
	}
	b.Sites = rankSites(bySite, p.Total)
	if p.Total > 0 {
		b.Logging.Share = float64(b.Logging.Bytes) / float64(p.Total)
	}
	if !hasThreads {
		return b
	}
	split := &evidence.ThreadSplit{}
	pools := map[string]*evidence.ThreadPoolAlloc{}
	poolVariance := map[string]float64{}
	for key, ti := range threads {
		name, _, _ := strings.Cut(key, "\x00")
		why := ""
		switch {
		case RequestPools.MatchString(name):
			why = "a request-serving pool perfscope knows"
		case a.RequestThreads != nil && a.RequestThreads.MatchString(name):
			why = "--request-threads"
		case ti.dispatched:
			why = "its stacks run through a request dispatcher"
		}
		pa := pools[ti.pool]
		if pa == nil {
			pa = &evidence.ThreadPoolAlloc{Pool: ti.pool}
			pools[ti.pool] = pa
		}
		pa.Threads++
		pa.Bytes += ti.bytes
		poolVariance[ti.pool] += ti.variance
		if why != "" {
			pa.Request, pa.Why = true, why
		}
	}
	for _, pa := range pools {
		g := &split.Background
		if pa.Request {
			g = &split.Request
		}
		g.Bytes += pa.Bytes
		g.Variance += poolVariance[pa.Pool]
		g.Threads += pa.Threads
		if p.Total > 0 {
			pa.Share = float64(pa.Bytes) / float64(p.Total)
		}
		split.Pools = append(split.Pools, *pa)
	}
	sort.Slice(split.Pools, func(i, j int) bool {
		if split.Pools[i].Bytes != split.Pools[j].Bytes {
			return split.Pools[i].Bytes > split.Pools[j].Bytes
		}
		return split.Pools[i].Pool < split.Pools[j].Pool
	})
	if p.Total > 0 {
		split.Request.Share = float64(split.Request.Bytes) / float64(p.Total)
		split.Background.Share = float64(split.Background.Bytes) / float64(p.Total)
	}
	b.Threads = split
	return b
}

func rankSites(by map[siteKey]int64, total int64) []evidence.AllocSite {
	sites := make([]evidence.AllocSite, 0, len(by))
	for k, w := range by {
		site := evidence.AllocSite{Frame: k.frame, Type: k.typ, Bytes: w, Logging: k.logging}
		if total > 0 {
			site.Share = float64(w) / float64(total)
		}
		sites = append(sites, site)
	}
	sort.Slice(sites, func(i, j int) bool {
		if sites[i].Bytes != sites[j].Bytes {
			return sites[i].Bytes > sites[j].Bytes
		}
		return sites[i].Frame+sites[i].Type < sites[j].Frame+sites[j].Type
	})
	return sites
}

// Sites ranks allocating frames by weight with per-request figures when
// requests is known (> 0), keeping the top ones (0: all).
func Sites(p *asprof.Profile, requests int64, top int) ([]evidence.AllocSite, evidence.LoggingCost) {
	b := Analyze(p, Attribution{})
	return b.PerRequest(requests, top)
}

// PerRequest returns the sites (top n, 0: all) and logging cost with
// their per-request figures when requests > 0.
func (b Breakdown) PerRequest(requests int64, top int) ([]evidence.AllocSite, evidence.LoggingCost) {
	sites := append([]evidence.AllocSite(nil), b.Sites...)
	if top > 0 && len(sites) > top {
		sites = sites[:top]
	}
	logging := b.Logging
	if requests > 0 {
		for i := range sites {
			sites[i].BytesPerRequest = float64(sites[i].Bytes) / float64(requests)
		}
		logging.BytesPerRequest = float64(logging.Bytes) / float64(requests)
	}
	return sites, logging
}

// Fixes ranks the places to cut allocation by weight (top n, 0: all),
// with what each saves per request when requests > 0.
func (b Breakdown) Fixes(requests int64, n int) []evidence.AllocFix {
	out := []evidence.AllocFix{}
	for k, w := range b.fixes {
		f := evidence.AllocFix{Kind: k.kind, Where: k.where, Bytes: w.bytes}
		if b.Total > 0 {
			f.Share = float64(w.bytes) / float64(b.Total)
		}
		if requests > 0 {
			f.BytesPerRequest = evidence.Float(float64(w.bytes) / float64(requests))
		}
		type tw struct {
			t string
			w int64
		}
		var ts []tw
		for t, x := range w.types {
			ts = append(ts, tw{t, x})
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].w > ts[j].w || ts[i].w == ts[j].w && ts[i].t < ts[j].t })
		for i := 0; i < len(ts) && i < 3; i++ {
			f.Types = append(f.Types, ts[i].t)
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Where < out[j].Where
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// handlerSites ranks one handler's sites.
func (h *HandlerWeight) topSites(total int64, n int) []evidence.AllocSite {
	s := rankSites(h.sites, total)
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// shortHandler is the class's simple name and the method
// ("OrdersController.get"), how endpoint mappings name handlers too.
func shortHandler(h string) string {
	i := strings.LastIndexByte(h, '.')
	if i < 0 {
		return h
	}
	cls, method := h[:i], h[i+1:]
	if j := strings.LastIndexByte(cls, '.'); j >= 0 {
		cls = cls[j+1:]
	}
	return cls + "." + method
}
