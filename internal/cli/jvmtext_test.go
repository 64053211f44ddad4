package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/report"
)

func productionEvidence() evidence.JVM {
	return evidence.JVM{
		PID: 4242, Collector: "GarbageFirst", WindowNs: int64(30 * time.Second), ProfileEvent: "alloc",
		Requests: evidence.Int(15000), RequestsSource: "passive-http", RequestRate: evidence.Float(500), RequestsUncertainty: 0.001,
		StatusClasses:   map[string]int64{"2xx": 14990, "4xx": 10},
		BytesPerRequest: evidence.Float(17 << 10), BytesPerRequestEden: evidence.Float(17.5 * 1024),
		AllocBytesProfiler: 15000 * 17 << 10, AllocRateProfiler: 500 * 17 << 10,
		YoungGCs: 3, YoungGCsPerMinute: 6, EdenCapacity: 130 << 20, EdenAtCollection: 123 << 20, EdenAtCollectionSource: "hsperfdata-cycle",
		TargetRPS: 2000, TargetGCIntervalNs: int64(10 * time.Second), RegionSize: 1 << 20,
		Threads: &evidence.ThreadSplit{
			Request:    evidence.ThreadGroupAlloc{Bytes: 9, Share: 0.9, Threads: 10, BytesPerRequest: evidence.Float(15.3 * 1024)},
			Background: evidence.ThreadGroupAlloc{Bytes: 1, Share: 0.1, Threads: 2, BytesPerRequest: evidence.Float(1.7 * 1024)},
			Pools:      []evidence.ThreadPoolAlloc{{Pool: "http-nio-#-exec-#", Request: true, Share: 0.9}, {Pool: "scheduling-#", Share: 0.1}},
		},
		Endpoints: []evidence.EndpointAlloc{{Endpoint: "/api/orders-logged/{id}", Method: "GET", Handler: "com.example.OrdersController.getLogged", Requests: evidence.Int(7500),
			BytesPerRequest: evidence.Float(18 << 10), HandlerBytesPerRequest: evidence.Float(5 << 10), LoggingBytesPerRequest: evidence.Float(2 << 10)}},
		Sites: []evidence.AllocSite{{Frame: "logging: logback", Bytes: 1, Share: 0.12, BytesPerRequest: 2 << 10, Logging: "logback"}},
		Fixes: []evidence.AllocFix{{Kind: "logging", Where: "logback", Share: 0.12, BytesPerRequest: evidence.Float(2 << 10)}},
	}
}

// The report opens with the answer: the request count and its source,
// bytes per request by thread and endpoint, GCs now and at the target,
// the top sites and the ranked fixes, then what it cost.
func TestJVMTextOpensWithTheAnswer(t *testing.T) {
	e := productionEvidence()
	res := &jvm.Result{Evidence: e}
	var out bytes.Buffer
	r := report.New("jvm", "test", time.Now())
	writeJVMText(&out, r, newJVMData(res), asprof.Options{Event: asprof.Alloc, AllocInterval: 512 << 10})
	text := out.String()
	order := []string{"requests: 15000 = 500.0/s, counted by the passive HTTP count", "Bytes per request", "whole process (what the GC sees)", "request threads (what code changes)",
		"GET /api/orders-logged/{id}", "+2.0 KiB", "Young GCs", "now: 6.0 per minute", "at 2000 requests/s (--target-rps)", "Top allocating sites", "Fixes, ranked by bytes saved per request",
		"parameterised messages", "What the measurement cost", "Allocation and GC", "Findings"}
	at := 0
	for _, s := range order {
		i := strings.Index(text[at:], s)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", s, text)
		}
		at += i
	}
}

// Unknown is said with its reason, never printed as a zero.
func TestJVMTextUnknownIsNotZero(t *testing.T) {
	e := productionEvidence()
	e.Requests, e.RequestRate, e.BytesPerRequest, e.BytesPerRequestEden, e.Endpoints, e.Threads = nil, nil, nil, nil, nil, nil
	e.RequestsUnknown = "no request count: the passive HTTP count saw no HTTP/1.x response"
	e.BytesPerRequestUnknown = e.RequestsUnknown
	e.TargetRPS = 0
	var out bytes.Buffer
	writeJVMText(&out, report.New("jvm", "test", time.Now()), newJVMData(&jvm.Result{Evidence: e}), asprof.Options{})
	text := out.String()
	if !strings.Contains(text, "requests: unknown — no request count") || !strings.Contains(text, "unknown: no request count") || !strings.Contains(text, "no prediction") {
		t.Errorf("%s", text)
	}
	if strings.Contains(text, "0 B per request") {
		t.Errorf("a zero per request:\n%s", text)
	}
	b, err := json.Marshal(newJVMData(&jvm.Result{Evidence: e}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"requests":null`, `"bytes_per_request":null`, `"bytes_per_request_unknown":"no request count`, `"model":null`, `"requests_per_second":null`, `"fixes":[`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}
