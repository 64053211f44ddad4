// Package evidence holds the typed results of a run — what probes measured
// and collectors read — in the form rules consume and renderers print. It
// sits in the middle of the one-way pipeline: recipes build evidence from
// probes and collectors, diagnose reads it, report carries it. It imports
// neither side (no probe, no collector: where a collector's type belongs in
// evidence, evidence holds a mirror of it, see counters.go), and holds
// types and the pure readings every consumer shares (NetRXCPUs, the
// socket wakeup shares), never code that reads the system.
package evidence

import "time"

// ProgramCost is what one of perfscope's BPF programs cost during a run,
// from the kernel's bpf_stats.
type ProgramCost struct {
	Program   string `json:"program"`
	RunCount  uint64 `json:"run_count"`
	RunTimeNs uint64 `json:"run_time_ns"`
	// PerRunNs is RunTimeNs / RunCount.
	PerRunNs float64 `json:"per_run_ns"`
	// PerRunFrom says how PerRunNs was measured when the runs come from
	// the programs' own counters: "bpf_stats", or "self-timed" (the
	// program timed 1 in 64 of its runs; bpf_stats unavailable or idle
	// while it ran). Empty: bpf_stats alone.
	PerRunFrom string `json:"per_run_from,omitempty"`
	// Missed counts the events the program did not see during the run
	// because the kernel skipped it (bpf_prog_info recursion_misses): a
	// tracepoint program while another tracing program ran on the same
	// CPU. Its counts are short by that many events.
	Missed uint64 `json:"missed,omitempty"`
}

// NewProgramCost fills PerRunNs.
func NewProgramCost(program string, runs uint64, runTime time.Duration) ProgramCost {
	c := ProgramCost{Program: program, RunCount: runs, RunTimeNs: uint64(runTime)}
	if runs > 0 {
		c.PerRunNs = float64(runTime) / float64(runs)
	}
	return c
}

// Overhead is perfscope's own measured cost during a run.
type Overhead struct {
	AttachMethod string `json:"attach_method,omitempty"`
	// AttachNs is the time from process start to probes attached.
	AttachNs int64         `json:"attach_ns,omitempty"`
	Programs []ProgramCost `json:"programs,omitempty"`
	// EventsLost counts ring-buffer events or samples the kernel could not
	// deliver, and events programs missed (Programs' Missed); it must be
	// zero for a report to be complete.
	EventsLost uint64 `json:"events_lost"`
	// BPFTimeShare is total BPF run time over (duration × CPUs).
	BPFTimeShare float64 `json:"bpf_time_share"`
	// StatsSample, when set, says bpf_stats ran for part of the run only
	// and Programs' runs and times were scaled to the whole run.
	StatsSample *StatsSample `json:"bpf_stats_sample,omitempty"`
	// StatsUnavailable says why bpf_stats could not be turned on; the
	// programs' runs then come from their own counters and their times
	// from their own timing (PerRunFrom "self-timed"): an estimate.
	StatsUnavailable string `json:"bpf_stats_unavailable,omitempty"`
	// StatsOff says why bpf_stats were left off though they could have
	// been turned on: under the overhead budget the programs' own counters
	// and timing measure them (PerRunFrom "self-timed").
	StatsOff string `json:"bpf_stats_off,omitempty"`
	// CPUCost is the programs' cost per CPU, entry included: what the
	// overhead budget bounds.
	CPUCost *CPUCost `json:"cpu_cost,omitempty"`
	// Budget is the overhead budget the run kept to; nil with --exact
	// (every hook attached throughout, every event counted).
	Budget *BudgetUse `json:"budget,omitempty"`
	// ProcessCPUNs is the CPU time of perfscope's own process over the
	// window (user and system: reading maps, the budget's attaching and
	// detaching), ProcessCPUShare that over every CPU's time.
	ProcessCPUNs    int64   `json:"process_cpu_ns"`
	ProcessCPUShare float64 `json:"process_cpu_share"`
	// RunCPUNs is the CPU time (user and system, every thread:
	// getrusage(RUSAGE_SELF)) of perfscope's whole process from exec until
	// the report was handed to the renderer: what the window's figures
	// above leave out — the Go runtime's start-up, loading and attaching
	// the probes, calibrating, naming the stacks, building the report —
	// included; formatting the report itself is the one part left out.
	// RunNs is the wall time from exec to the same moment, RunCPUShare
	// their ratio (the share of one CPU the run took on average), and
	// AttachCPUNs the part of RunCPUNs until the probes were attached.
	// Zero (absent) until the command stamps them, as a continuous run's
	// windows are never stamped.
	RunCPUNs    int64   `json:"run_cpu_ns,omitempty"`
	RunNs       int64   `json:"run_ns,omitempty"`
	RunCPUShare float64 `json:"run_cpu_share,omitempty"`
	AttachCPUNs int64   `json:"attach_cpu_ns,omitempty"`
}

// StatsSample is how bpf_stats were sampled: on for OnNs of TotalNs; runs
// and times counted inside those windows only, multiplied by Scale.
// Shared says another process had bpf_stats on between the windows (its
// windows are not counted).
type StatsSample struct {
	OnNs    int64   `json:"on_ns"`
	TotalNs int64   `json:"total_ns"`
	Scale   float64 `json:"scale"`
	Shared  bool    `json:"shared,omitempty"`
}
