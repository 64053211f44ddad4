package probes_test

import (
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
)

// On the project's machines (MACHINE.md) tracepoints, raw_tp, tp_btf and
// perf_event work; kprobes are compiled out and fentry is refused. The test
// asserts what the kernel says, so it documents and guards doctor's output.
func TestProgramTypesOnThisKernel(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	got := map[string]probes.ProgramTypeCheck{}
	for _, c := range probes.CheckProgramTypes() {
		got[c.Type] = c
		t.Logf("%-10s ok=%v stage=%s err=%v", c.Type, c.OK(), c.Stage, c.Err)
	}
	for _, typ := range []string{"tracepoint", "raw_tp", "tp_btf", "perf_event"} {
		if !got[typ].OK() {
			t.Errorf("%s should work here: %v", typ, got[typ].Err)
		}
	}
	if len(got) != 6 {
		t.Errorf("checked %d types, want 6", len(got))
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}

// AttachEmpty attaches one program per tracepoint, detaches all of them on
// Close, and names the tracepoint it cannot attach to.
func TestAttachEmpty(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	e, err := probes.AttachEmpty([]string{"softirq_entry", "softirq_exit"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(testutil.BPFProgramIDs(t)) - len(beforeProgs); n != 2 {
		t.Errorf("%d programs attached, want 2", n)
	}
	if err := e.Close(); err != nil {
		t.Error(err)
	}
	if _, err := probes.AttachEmpty([]string{"softirq_entry", "no_such_tracepoint"}); err == nil || !strings.Contains(err.Error(), "no_such_tracepoint") {
		t.Errorf("attaching to a missing tracepoint: %v, want an error naming it", err)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}

// The tracepoint entry cost is measured, positive and plausible (tens to
// hundreds of nanoseconds; it is ~60 ns on the project's VM).
func TestMeasureEntryCost(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	before, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	// A machine too busy to see the cost makes the measurement fail in
	// plain words (not a 0 that would under-count every event), and the
	// next caller measures again: CI once saw 140 µs against 144 µs for
	// 200 calls under a parallel test load. Up to five tries, a second
	// apart; each failure must be that documented one.
	var c time.Duration
	var err error
	for try := 0; try < 5; try++ {
		if c, err = probes.MeasureEntryCost(); err == nil {
			break
		}
		if !strings.Contains(err.Error(), "too busy to see it") {
			t.Fatal(err)
		}
		t.Logf("try %d: %v", try+1, err)
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("entry cost %v", c)
	if c <= 0 || c > 5*time.Microsecond {
		t.Errorf("entry cost %v, want between 0 and 5 µs", c)
	}
	if again, _ := probes.MeasureEntryCost(); again != c {
		t.Errorf("measured twice: %v then %v", c, again)
	}
	testutil.AssertNoNewBPF(t, before, beforeMaps)
}
