package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// The budget line judges programs and process together, and the period
// is called stretched only when it was: a period read a little late is
// not.
func TestOverheadBudgetLines(t *testing.T) {
	ov := &evidence.Overhead{
		CPUCost: &evidence.CPUCost{MaxShare: 0.013},
		Budget: &evidence.BudgetUse{CPUShare: 0.02, ProcessShare: 0.005, TotalShare: 0.024,
			PeriodNs: int64(time.Second), MaxPeriodNs: int64(time.Second + time.Millisecond), SwitchNs: 3e6},
	}
	var b bytes.Buffer
	writeOverhead(&b, ov)
	out := b.String()
	if !strings.Contains(out, "— kept (1.8%: programs 1.3%") || strings.Contains(out, "stretched") ||
		!strings.Contains(out, "windows every 1.00s; attaching and detaching them took the process 3.00ms") {
		t.Errorf("unstretched, kept:\n%s", out)
	}
	ov.Budget.ProcessShare, ov.Budget.MaxPeriodNs = 0.008, int64(2*time.Second)
	b.Reset()
	writeOverhead(&b, ov)
	if out := b.String(); !strings.Contains(out, "— exceeded (2.1%") || !strings.Contains(out, "stretched up to 2.00s") {
		t.Errorf("stretched, exceeded:\n%s", out)
	}
}

// The whole run's line: CPU from exec to the report, its share of one
// CPU, and what the window's figures leave out; absent until stamped.
func TestOverheadRunCostLine(t *testing.T) {
	ov := &evidence.Overhead{ProcessCPUNs: 40e6, ProcessCPUShare: 0.005}
	var b bytes.Buffer
	writeOverhead(&b, ov)
	if strings.Contains(b.String(), "whole run") {
		t.Errorf("unstamped overhead printed a whole-run line:\n%s", b.String())
	}
	ov.RunCPUNs, ov.RunNs, ov.RunCPUShare, ov.AttachCPUNs = 210e6, 4.2e9, 0.05, 120e6
	b.Reset()
	writeOverhead(&b, ov)
	want := "the whole run, exec to this report: 210.00ms of CPU time in 4.20s (5.0% of one CPU): start-up and attaching 120.00ms, the window 40.00ms, the rest (calibrating, naming stacks, the report) 50.00ms; formatting the report is not counted\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("whole-run line:\n%s\nwant it to end with:\n%s", b.String(), want)
	}
}

// Runs the kernel skipped are named with their program: the counts they
// feed are short by that many.
func TestOverheadSaysWhatProgramsMissed(t *testing.T) {
	ov := &evidence.Overhead{EventsLost: 2, Programs: []evidence.ProgramCost{
		{Program: "tcp:tcp_retransmit_skb", RunCount: 27, Missed: 2}, {Program: "sock:sock_recv_length", RunCount: 900}}}
	var b bytes.Buffer
	writeOverhead(&b, ov)
	if out := b.String(); !strings.Contains(out, "missed: tcp:tcp_retransmit_skb 2 — events the kernel did not run the program for") ||
		strings.Contains(out, "sock_recv_length 0") || !strings.Contains(out, "events lost: 2") {
		t.Errorf("missed runs:\n%s", out)
	}
	ov.Programs[0].Missed = 0
	b.Reset()
	writeOverhead(&b, ov)
	if strings.Contains(b.String(), "missed:") {
		t.Errorf("no program missed a run, yet:\n%s", b.String())
	}
}
