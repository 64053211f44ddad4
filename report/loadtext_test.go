package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// The load's text and page carry every level and the knee with its cause.
func TestLoadTextAndPage(t *testing.T) {
	th := &evidence.LoadThreads{Threads: 3, OnCPUShare: 0.01, BlockedShare: 0.98,
		TopWait: &evidence.LoadWait{Reason: "lock", Site: "wait_for_lock", Threads: 0.96}}
	ev := evidence.Load{URL: "http://127.0.0.1:8080/", Method: "GET", PIDs: []int{42}, Comm: "srv", PIDFrom: "port", CPUs: 2,
		DurationPerLevelNs: int64(2 * time.Second),
		Levels: []evidence.LoadLevel{
			{Concurrency: 1, RPS: 93.6, P50Ns: 10.5e6, P99Ns: 12.9e6, ServiceCPU: 0.01, CPUBusy: 0.3, LoadGeneratorCPU: 0.02},
			{Concurrency: 2, RPS: 97.2, P50Ns: 20.4e6, P99Ns: 23.2e6, ServiceCPU: -1, CPUBusy: -1, LoadGeneratorCPU: -1, Threads: th},
		},
		Knee: &evidence.LoadKnee{Concurrency: 1, Flat: 2, RPS: 93.6, FlatRPS: 97.2, Gain: 0.04, P99Ns: 12.9e6, FlatP99Ns: 23.2e6, Reason: "lock",
			Site: "wait_for_lock", Why: "the added requests waited at a lock"}}
	r := New("load", "test", time.Now())
	r.Data = LoadData{Load: ev}
	var text bytes.Buffer
	if err := Render(&text, r, Text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GET http://127.0.0.1:8080/", "srv (pid 42, the owners of the URL's port)", "93.6", "12.90ms",
		"lock wait_for_lock (1.0 threads)", "stopped rising at concurrency 1", "cause: lock — the added requests waited at a lock"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var page bytes.Buffer
	if err := Render(&page, r, HTML); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Requests per second by concurrency", "p99 latency by concurrency", "knee: concurrency 1"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// The load's progress names the URL and the levels, then each level's rate,
// p99 and errors.
func TestLoadProgress(t *testing.T) {
	var b bytes.Buffer
	started, level := LoadProgress(&b, "http://127.0.0.1:8080/", 3, 2*time.Second)
	started()
	level(evidence.LoadLevel{Concurrency: 4, RPS: 812.4, P99Ns: 12.9e6, Errors: 2})
	want := "loading http://127.0.0.1:8080/ at 3 levels of 2s (Ctrl-C stops early)…\n  concurrency 4: 812 requests/s, p99 12.90ms, 2 errors\n"
	if b.String() != want {
		t.Errorf("progress %q, want %q", b.String(), want)
	}
}
