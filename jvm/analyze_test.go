package jvm

import (
	"math"
	"regexp"
	"testing"

	"github.com/perfscope/perfscope/jvm/asprof"
)

func TestSitesGroupLogging(t *testing.T) {
	p := &asprof.Profile{Event: asprof.Alloc, Total: 1000, Stacks: []asprof.Stack{
		{Frames: []string{"Thread.run", "App.handle", "App.alloc", "byte[]_[i]"}, Weight: 600},
		{Frames: []string{"Thread.run", "App.handle", "org/slf4j/Logger.info", "ch/qos/logback/classic/Logger.info", "java/lang/StringBuilder.toString", "java.lang.String_[k]"}, Weight: 250},
		{Frames: []string{"Thread.run", "App.log", "java/util/logging/Logger.log", "char[]_[i]"}, Weight: 150},
	}}
	sites, logging := Sites(p, 10, 0)
	if logging.Bytes != 400 || logging.ByFramework["logback"] != 250 || logging.ByFramework["java.util.logging"] != 150 || logging.BytesPerRequest != 40 {
		t.Fatalf("logging %+v", logging)
	}
	if len(sites) != 3 || sites[0].Frame != "App.alloc" || sites[0].Type != "byte[]" || sites[0].BytesPerRequest != 60 {
		t.Fatalf("sites %+v", sites)
	}
	if sites[1].Frame != "logging: logback" || sites[1].Logging != "logback" {
		t.Errorf("slf4j over logback is charged to logback: %+v", sites[1])
	}
	if top, _ := Sites(p, 0, 1); len(top) != 1 || top[0].BytesPerRequest != 0 {
		t.Errorf("top 1 without requests: %+v", top)
	}
}

// springProfile is shaped like async-profiler's collapsed output with
// `threads` on a Spring Boot service: Tomcat request threads running a
// servlet filter of the application, the DispatcherServlet, a controller
// (behind a CGLIB proxy) that logs, Jackson after it; a scheduler thread;
// and a Tomcat poller.
func springProfile() *asprof.Profile {
	tomcat := []string{"[http-nio-8080-exec-3 tid=101]", "java/lang/Thread.run", "org/apache/tomcat/util/threads/TaskThread$WrappingRunnable.run",
		"org/apache/catalina/core/ApplicationFilterChain.doFilter", "com/example/TimingFilter.doFilter", "org/apache/catalina/core/ApplicationFilterChain.doFilter",
		"jakarta/servlet/http/HttpServlet.service", "org/springframework/web/servlet/FrameworkServlet.service", "org/springframework/web/servlet/DispatcherServlet.doDispatch"}
	invoke := []string{"org/springframework/web/method/support/InvocableHandlerMethod.doInvoke", "jdk/internal/reflect/DirectMethodHandleAccessor.invoke"}
	with := func(base []string, rest ...string) []string { return append(append([]string{}, base...), rest...) }
	p := &asprof.Profile{Event: asprof.Alloc, Stacks: []asprof.Stack{
		{Frames: with(tomcat, append(invoke, "com/example/OrdersController$$SpringCGLIB$$0.get", "com/example/OrdersController.get", "com/example/OrdersController.order", "java/util/ArrayList.grow", "java.lang.Object[]_[i]")...), Weight: 3000},
		{Frames: with(tomcat, append(invoke, "com/example/OrdersController.getLogged", "com/example/OrdersController.order", "java.lang.String_[i]")...), Weight: 3000},
		{Frames: with(tomcat, append(invoke, "com/example/OrdersController.getLogged", "org/slf4j/Logger.info", "ch/qos/logback/classic/Logger.info", "byte[]_[i]")...), Weight: 2000},
		{Frames: with(tomcat, "org/springframework/http/converter/json/AbstractJackson2HttpMessageConverter.writeInternal", "com/fasterxml/jackson/core/util/BufferRecycler.balloc", "byte[]_[i]"), Weight: 10000},
		{Frames: []string{"[http-nio-8080-exec-3 tid=101]", "java/lang/Thread.run", "com/example/TimingFilter.doFilter", "java.lang.Long_[i]"}, Weight: 500},
		{Frames: []string{"[http-nio-8080-exec-3 tid=101]", "java/lang/Thread.run", "com/example/TimingFilter.doFilter", "org/apache/catalina/core/ApplicationFilterChain.doFilter",
			"org/springframework/web/filter/ServerHttpObservationFilter.doFilterInternal", "io/micrometer/common/KeyValues.of", "java.lang.Object[]_[i]"}, Weight: 700},
		{Frames: []string{"[scheduling-1 tid=55]", "java/lang/Thread.run", "com/example/CacheRefresher.refresh", "byte[]_[i]"}, Weight: 1000},
		{Frames: []string{"[http-nio-8080-Poller tid=99]", "java/lang/Thread.run", "sun/nio/ch/EPollSelectorImpl.doSelect", "java.util.HashMap$Node_[i]"}, Weight: 500},
	}}
	for _, s := range p.Stacks {
		p.Total += s.Weight
	}
	return p
}

func TestAnalyzeSplitsThreadsAndHandlers(t *testing.T) {
	b := Analyze(springProfile(), Attribution{})
	if b.Threads == nil {
		t.Fatal("no thread split")
	}
	if b.Threads.Request.Bytes != 19700 || b.Threads.Background.Bytes != 1000 || b.Threads.Request.Threads != 2 {
		t.Errorf("split %+v", b.Threads)
	}
	if p := b.Threads.Pools[0]; p.Pool != "http-nio-#-exec-#" || !p.Request {
		t.Errorf("first pool %+v", p)
	}
	get, logged := b.Handlers["com.example.OrdersController.get"], b.Handlers["com.example.OrdersController.getLogged"]
	if get == nil || get.Bytes != 3000 || logged == nil || logged.Bytes != 5000 || logged.LoggingBytes != 2000 {
		t.Fatalf("handlers %+v", b.Handlers)
	}
	if b.FrameworkBytes != 10000 {
		t.Errorf("framework bytes %d, want the Jackson stack's 10000", b.FrameworkBytes)
	}
	fixes := b.Fixes(100, 0)
	if fixes[0].Kind != "framework" || fixes[0].Where != "com.fasterxml.jackson.core.util.BufferRecycler.balloc" {
		t.Errorf("first fix %+v: Jackson's bytes belong to Jackson, not to the filter above the dispatcher", fixes[0])
	}
	found := false
	for _, f := range fixes {
		if f.Kind == "code" && f.Where == "com.example.OrdersController.order" && f.Bytes == 6000 && *f.BytesPerRequest == 60 {
			found = true
		}
		if f.Where == "com.example.TimingFilter.doFilter" && f.Bytes != 500 {
			t.Errorf("the filter is charged %d bytes, want its own 500 (not the next filter's)", f.Bytes)
		}
		if f.Where == "io.micrometer.common.KeyValues.of" && (f.Kind != "framework" || f.Bytes != 700) {
			t.Errorf("the observation filter's bytes: %+v", f)
		}
	}
	if !found {
		t.Errorf("fixes %+v lack OrdersController.order", fixes)
	}

	// A pattern names handlers directly, and one for thread names adds a
	// pool.
	re := Attribution{HandlerFrames: regexp.MustCompile(`Refresher\.refresh$`), RequestThreads: regexp.MustCompile(`^scheduling-`)}
	b = Analyze(springProfile(), re)
	if h := b.Handlers["com.example.CacheRefresher.refresh"]; h == nil || h.Bytes != 1000 || len(b.Handlers) != 1 {
		t.Errorf("handlers by pattern %+v", b.Handlers)
	}
	if b.Threads.Background.Bytes != 0 {
		t.Errorf("--request-threads: background %+v", b.Threads.Background)
	}
}

func TestJoinEndpoints(t *testing.T) {
	b := Analyze(springProfile(), Attribution{})
	mapping := HandlerMapping{"OrdersController.get": {Method: "GET", Endpoint: "/api/orders/{id}"}, "OrdersController.getLogged": {Method: "GET", Endpoint: "/api/orders-logged/{id}"}}
	// Folded paths of the passive count match the templates.
	counts := []EndpointCount{{Method: "GET", Endpoint: "/api/orders/#", Requests: 60}, {Method: "GET", Endpoint: "/api/orders-logged/#", Requests: 40}, {Method: "GET", Endpoint: "/health", Requests: 5}}
	eps := joinEndpoints(b, mapping, counts, 100, false)
	by := map[string]int{}
	for i, e := range eps {
		by[e.Endpoint] = i
	}
	logged := eps[by["/api/orders-logged/{id}"]]
	if logged.Requests == nil || *logged.Requests != 40 || *logged.HandlerBytesPerRequest != 125 || *logged.LoggingBytesPerRequest != 50 {
		t.Fatalf("logged endpoint %+v", logged)
	}
	// Framework work (10000 bytes over 100 requests) is added to each.
	if *logged.BytesPerRequest != 225 {
		t.Errorf("per request %v, want 125 + 100", *logged.BytesPerRequest)
	}
	if h := eps[by["/health"]]; h.Handler != "" || h.Requests == nil || *h.Requests != 5 {
		t.Errorf("endpoint without a profiled handler %+v", h)
	}
	// A mapped endpoint whose handler took no sample still gets a row
	// with its framework cost.
	mapping["OrdersController.create"] = EndpointCount{Method: "POST", Endpoint: "/api/orders"}
	counts = append(counts, EndpointCount{Method: "POST", Endpoint: "/api/orders", Requests: 10})
	found := false
	for _, e := range joinEndpoints(b, mapping, counts, 100, false) {
		if e.Endpoint == "/api/orders" {
			found = e.Handler == "OrdersController.create" && *e.Requests == 10 && *e.HandlerBytesPerRequest == 0 && *e.BytesPerRequest == 100
		}
	}
	if !found {
		t.Error("mapped endpoint without samples has no row with its framework cost")
	}
	// Without a mapping, handlers stand alone and per-request figures
	// are unknown rather than invented.
	for _, e := range joinEndpoints(b, nil, counts, 100, false) {
		if e.Handler != "" && (e.Requests != nil || e.BytesPerRequest != nil) {
			t.Errorf("unmapped handler got a count: %+v", e)
		}
	}
}

func TestWithoutThread(t *testing.T) {
	if got := WithoutThread([]string{"[http-nio-8080-exec-1 tid=7]", "a", "b"}); len(got) != 2 || got[0] != "a" {
		t.Errorf("%q", got)
	}
	if got := WithoutThread([]string{"a"}); len(got) != 1 {
		t.Errorf("%q", got)
	}
}

func TestParseFlags(t *testing.T) {
	r, m := parseFlags("-XX:G1HeapRegionSize=1048576 -XX:MaxHeapSize=134217728 -XX:+UseG1GC")
	if r != 1<<20 || m != 128<<20 {
		t.Errorf("region %d max heap %d", r, m)
	}
}

// Sampling variances follow the bytes: into threads, handlers, the
// framework share and each endpoint's error (±2σ).
func TestSamplingErrorFollowsBytes(t *testing.T) {
	p := springProfile()
	p.Samples = int64(len(p.Stacks))
	for i := range p.Stacks {
		p.Stacks[i].Variance = float64(p.Stacks[i].Weight) * 100
	}
	b := Analyze(p, Attribution{})
	if b.Threads.Request.Variance != 19700*100 || b.Threads.Background.Variance != 1000*100 {
		t.Errorf("thread variances %v %v", b.Threads.Request.Variance, b.Threads.Background.Variance)
	}
	if b.FrameworkVariance != 10000*100 || b.Handlers["com.example.OrdersController.getLogged"].Variance != 5000*100 {
		t.Errorf("framework variance %v, handlers %+v", b.FrameworkVariance, b.Handlers)
	}
	mapping := HandlerMapping{"OrdersController.getLogged": {Method: "GET", Endpoint: "/api/orders-logged/{id}"}}
	eps := joinEndpoints(b, mapping, []EndpointCount{{Method: "GET", Endpoint: "/api/orders-logged/#", Requests: 40}}, 100, false)
	for _, e := range eps {
		if e.Endpoint != "/api/orders-logged/{id}" {
			continue
		}
		want := 2 * math.Sqrt(5000*100/(40.0*40)+10000*100/(100.0*100))
		if e.BytesPerRequestError == nil || math.Abs(*e.BytesPerRequestError-want) > 1e-9 {
			t.Errorf("endpoint error %v, want %v", e.BytesPerRequestError, want)
		}
		return
	}
	t.Errorf("no logged endpoint in %+v", eps)
}
