package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/jvm/asprof"
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
	var out bytes.Buffer
	r := New("jvm", "test", time.Now())
	writeJVMText(&out, r, NewJVMData(e, nil, nil), asprof.Options{Event: asprof.Alloc, AllocInterval: 512 << 10})
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
	writeJVMText(&out, New("jvm", "test", time.Now()), NewJVMData(e, nil, nil), asprof.Options{})
	text := out.String()
	if !strings.Contains(text, "requests: unknown — no request count") || !strings.Contains(text, "unknown: no request count") || !strings.Contains(text, "no prediction") {
		t.Errorf("%s", text)
	}
	if strings.Contains(text, "0 B per request") {
		t.Errorf("a zero per request:\n%s", text)
	}
	b, err := json.Marshal(NewJVMData(e, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"requests":null`, `"bytes_per_request":null`, `"bytes_per_request_unknown":"no request count`, `"model":null`, `"requests_per_second":null`, `"fixes":[`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

// The text of --stop says what was stopped and removed, or that there was
// nothing to stop, and names async-profilers that are not perfscope's.
func TestJVMStopText(t *testing.T) {
	for _, tc := range []struct {
		d    JVMStopData
		want []string
	}{
		{JVMStopData{PID: 42, Stopped: true, RanForNs: int64(83 * time.Second), OwnerPIDs: []int{777}, Removed: []string{"/tmp/.perfscope-asprof-0123456789ab"}},
			[]string{"pid 42: stopped the async-profiler session perfscope pid 777 left running (it had run for 1m23s); removed /tmp/.perfscope-asprof-0123456789ab."}},
		{JVMStopData{PID: 42, OwnerPIDs: []int{777}, Removed: []string{"/tmp/.perfscope-asprof-0123456789ab"}},
			[]string{"async-profiler was not running for perfscope pid 777; removed"}},
		{JVMStopData{PID: 42, ForeignLibraries: []string{"/opt/ap/libasyncProfiler.so"}},
			[]string{"nothing to stop", "/opt/ap/libasyncProfiler.so is not perfscope's", "asprof stop 42"}},
	} {
		var b bytes.Buffer
		tc.d.WriteText(&b, nil)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%q lacks %q", b.String(), w)
			}
		}
	}
}

// renderText renders data as a command's text through Render.
func renderText(t *testing.T, command string, data any) string {
	t.Helper()
	r := New(command, "test", time.Unix(0, 0))
	r.Meta.Host, r.Meta.Kernel, r.Meta.CPUs = "host", "6.18.0", 2
	r.Data = data
	var b bytes.Buffer
	if err := Render(&b, r, Text); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func goldenJVMData(e evidence.JVM) JVMData {
	d := NewJVMData(e, &httpload.Result{Completed: 15000, RPS: 500, P50Ns: 2e6, P99Ns: 9e6}, nil)
	d.ProfileOptions = asprof.Options{Event: asprof.Alloc, AllocInterval: 512 << 10}
	return d
}

// The JVM's texts, byte for byte (testdata/golden).
func TestJVMTextGolden(t *testing.T) {
	testutil.Golden(t, "jvm.txt", renderText(t, "jvm", goldenJVMData(productionEvidence())))
	unknown := productionEvidence()
	unknown.Requests, unknown.RequestRate, unknown.BytesPerRequest, unknown.BytesPerRequestEden, unknown.Endpoints, unknown.Threads = nil, nil, nil, nil, nil, nil
	unknown.RequestsUnknown = "no request count: the passive HTTP count saw no HTTP/1.x response"
	unknown.BytesPerRequestUnknown = unknown.RequestsUnknown
	testutil.Golden(t, "jvm-unknown.txt", renderText(t, "jvm", goldenJVMData(unknown)))
	testutil.Golden(t, "jvm-stop.txt", renderText(t, "jvm", JVMStopData{PID: 42, Stopped: true, RanForNs: 90e9, OwnerPIDs: []int{7}, Removed: []string{"/tmp/perfscope-asprof-7"}, ForeignLibraries: []string{"/opt/ap/libasyncProfiler.so"}}))
	testutil.Golden(t, "jvm-stop-nothing.txt", renderText(t, "jvm", JVMStopData{PID: 42}))

	lab := LabJVMData{ExtraBytesExpected: 256 << 10, ExtraBytesMeasured: 250 << 10, ExtraError: -0.023,
		Run: LabJVMRun{Requests: 3000, Concurrency: 4, KB: 256, TargetRPS: 500, Heap: "256m"}}
	for _, ep := range []string{"/alloc?kb=0", "/alloc?kb=256", "/log"} {
		d := goldenJVMData(productionEvidence())
		lab.Scenarios = append(lab.Scenarios, LabJVMScenario{Endpoint: ep, Load: *d.Load, Data: d, Findings: diagnose.Run(diagnose.JVMRules, d.JVM)})
	}
	testutil.Golden(t, "lab-jvm.txt", renderText(t, "lab jvm", lab))
}

// --stop's JSON lists are present when empty: [], never null.
func TestNewJVMStopDataEmptyLists(t *testing.T) {
	b, err := json.Marshal(NewJVMStopData(42, asprof.StopReport{Stopped: true, RanFor: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"pid":42,"stopped":true,"ran_for_ns":60000000000,"owner_pids":[],"removed":[],"foreign_libraries":[],"notes":[]}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}
