package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

func offCPUEvidence() evidence.OffCPU {
	return evidence.OffCPU{Target: "pid", PID: 42, Comm: "app", DurationNs: int64(2 * time.Second), CPUs: 2, Stacks: "kernel+user",
		MinBlockNs: 10000, StackEvery: 1, AttachMethod: "tp_btf",
		Totals: evidence.OffCPUTotals{Threads: 3, OnCPUNs: 1e9, RunnableNs: 5e8, BlockedNs: 4.5e9, BlockedByState: map[string]int64{"sleeping": 4.5e9}, KeptNs: 4e9},
		ByReason: []evidence.OffCPUReason{{Reason: "lock", Ns: 3e9, Waits: 30, Share: 0.75, TopSite: "wait_for_lock"},
			{Reason: "sleep", Ns: 1e9, Waits: 10, Share: 0.25, TopSite: "sleep_on_timer"}},
		Waits: []evidence.OffCPUWait{{PID: 42, TID: 43, Comm: "worker-1", State: "sleeping", Reason: "lock", Site: "wait_for_lock", Count: 30, TotalNs: 3e9,
			Stack: []string{"worker-1", "wait_for_lock", "futex_wait_[k]"}, Waker: &evidence.OffCPUWaker{PID: 42, TID: 44, Comm: "worker-2", Kind: "thread", Site: "release_lock"}}},
		Pools: []evidence.ThreadPool{{PID: 42, Process: "app", Name: "worker-*", Threads: 2, OnCPUShare: 0.2, RunnableShare: 0.1, BlockedShare: 0.7,
			TopSite: "wait_for_lock", TopSiteReason: "lock", TopSiteShare: 0.8}},
		RunQueue: evidence.RunQueue{All: evidence.NewLatencyHist([]uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 3}, 5*1500+3*3000),
			PerCPU: []evidence.CPURunQueue{{CPU: 0, All: evidence.NewLatencyHist([]uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 3}, 5*1500+3*3000)}}},
		Warnings: []string{"the sched tracepoints were attached 50 % of the window"},
	}
}

// The off-CPU text and page carry the same numbers: the reasons, the
// longest wait with its waker, the pool, the run queue and the warnings.
func TestOffCPUTextAndPage(t *testing.T) {
	r := New("offcpu", "test", time.Now())
	r.Data = offCPUEvidence()
	var text, page bytes.Buffer
	if err := Render(&text, r, Text); err != nil {
		t.Fatal(err)
	}
	if err := Render(&page, r, HTML); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"app (pid 42)", "wait_for_lock", "75.0%", "woken by thread worker-2/44 (pid 42) at release_lock", "worker-*",
		"attached 50 % of the window", "Run-queue latency"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{"Off-CPU time by reason", "wait_for_lock", "thread worker-2/44 at release_lock", "worker-*", "attached 50 % of the window"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// In a recipe's report beside another section.
	r.Data = RecipeData{OffCPU: &[]evidence.OffCPU{offCPUEvidence()}[0]}
	text.Reset()
	if err := Render(&text, r, Text); err != nil || !strings.Contains(text.String(), "perfscope offcpu — app (pid 42)") {
		t.Errorf("recipe text (%v):\n%s", err, text.String())
	}
}
