package evidence

import (
	"fmt"
	"math"
	"time"
)

// Estimate says how a number, or a section of numbers, was obtained when
// not every event was counted: perfscope's overhead budget attached the
// hooks behind it in sampling windows only, and what the windows saw was
// scaled to the whole run. A section without one is exact: every event in
// the window was counted.
type Estimate struct {
	// Windows is the number of sampling windows; Coverage the share of
	// the run the hooks were attached.
	Windows  int     `json:"windows"`
	Coverage float64 `json:"coverage"`
	// SampledEvents is the events the hooks counted in the windows, and
	// Scale the factor from those to the whole run.
	SampledEvents uint64  `json:"sampled_events"`
	Scale         float64 `json:"scale"`
	// RelError bounds the relative error of the section's totals at 95 %
	// confidence, from how much the event rate varied from window to
	// window; nil when it cannot be told (fewer than two windows, nothing
	// seen). A row's own bound is wider: RowError.
	RelError *float64 `json:"rel_error"`
	// Reference, when set, is the exact counter the windows' counts were
	// scaled by (a ratio estimate: what the reference counted over the
	// run over what it counted inside the windows); empty: scaled by
	// time (the run's length over the windows').
	Reference string `json:"reference,omitempty"`
	// Hooks are the tracepoints behind the estimate.
	Hooks []string `json:"hooks,omitempty"`
	// DurationFor10PctNs is how long a run at the same traffic and budget
	// would have to be for RelError to come within ±10 % (the windows'
	// spread shrinks as one over the root of their number), rounded up to
	// 5 s; with RelError unknown (fewer than two windows), how long a run
	// has the windows for a bound at all. 0 when the bound is within
	// ±10 % already, and when no length would do (nothing was seen; the
	// possible shift of a share alone is wider: --exact then).
	DurationFor10PctNs int64 `json:"duration_for_10pct_ns,omitempty"`
}

// RowError is the 95 % relative error bound of one number of the section
// built from sampled events seen in the windows: the section's bound and
// the counting error of so few events (1.96/√sampled), added in
// quadrature. Nil when the section's bound is unknown or nothing was seen.
// A row that holds every sampled event (the only socket read) is the
// section's total: its bound is the section's.
func (e *Estimate) RowError(sampled uint64) *float64 {
	if e == nil || e.RelError == nil || sampled == 0 {
		return nil
	}
	if sampled >= e.SampledEvents {
		v := *e.RelError
		return &v
	}
	v := math.Sqrt(*e.RelError**e.RelError + 1.96*1.96/float64(sampled))
	return &v
}

// Bounds are the low and high ends of a value's 95 % interval under a
// relative bound (rel nil: unknown, the value itself and +Inf).
func Bounds(v float64, rel *float64) (low, high float64) {
	if rel == nil {
		return v, math.Inf(1)
	}
	return math.Max(0, v*(1-*rel)), v * (1 + *rel)
}

// String says how a number was obtained, for the text report and the
// evidence lines of findings that depend on it.
func (e *Estimate) String() string {
	if e == nil {
		return "exact"
	}
	s := fmt.Sprintf("estimated from %d windows covering %.1f %% of the run", e.Windows, 100*e.Coverage)
	if e.Reference != "" {
		s += " scaled by the " + e.Reference
	}
	if e.RelError != nil {
		s += fmt.Sprintf(", ±%.1f %% (95 %%)", 100**e.RelError)
	} else {
		s += ", error unknown"
	}
	switch d := e.DurationFor10PctNs; {
	case d > 0 && e.RelError == nil:
		s += fmt.Sprintf("; --duration %s would give it a bound", DurationText(d))
	case d > 0:
		s += fmt.Sprintf("; --duration %s would bound it to ±10 %%", DurationText(d))
	}
	return s
}

// DurationText is a run length as --duration takes it: whole seconds,
// or minutes and seconds from a minute on ("90s" reads "1m30s").
func DurationText(ns int64) string {
	return (time.Duration(ns) / time.Second * time.Second).String()
}

// CPUCost is what perfscope's BPF programs cost each CPU over the window,
// the tracepoints' entry included: always an estimate, from runs the
// programs count themselves (exact) times a per-run cost (measured by
// bpf_stats, or by the programs timing 1 in 64 of their runs) plus the
// measured entry cost. It is what the overhead budget bounds, and it is
// there under any capability set: bpf_stats need CAP_SYS_ADMIN, these
// counters do not.
type CPUCost struct {
	// EntryNs is the measured cost of entering and leaving one program
	// on a tracepoint (0 when it could not be measured: EntryUnmeasured).
	EntryNs         float64 `json:"entry_ns"`
	EntryUnmeasured string  `json:"entry_unmeasured,omitempty"`
	Runs            uint64  `json:"runs"`
	// PerCPU is each CPU's programs' time (runs × (per run + entry)).
	PerCPU []CPUCostRow `json:"per_cpu"`
	// MaxShare is the busiest CPU's share of its time, what the budget
	// bounds; Share is over every CPU's time.
	MaxShare float64 `json:"max_share"`
	MaxCPU   int     `json:"max_cpu"`
	Share    float64 `json:"share"`
}

// CPUCostRow is one CPU's share of perfscope's programs.
type CPUCostRow struct {
	CPU   int     `json:"cpu"`
	Runs  uint64  `json:"runs"`
	Ns    uint64  `json:"ns"`
	Share float64 `json:"share"`
}

// BudgetUse is how a run kept to its overhead budget.
type BudgetUse struct {
	// CPUShare is the budget: the most of any one CPU's time perfscope
	// was to take (kept when CPUCost.MaxShare + ProcessShare is at most
	// it).
	CPUShare float64 `json:"cpu_share"`
	// PeriodNs is the period a sampling window opens in (1 s by
	// default); MaxPeriodNs the longest period of the run: the default
	// stretches, up to 2 s, when windows would be too short or switching
	// the hooks too costly.
	PeriodNs    int64 `json:"period_ns"`
	MaxPeriodNs int64 `json:"max_period_ns,omitempty"`
	// SwitchNs is the CPU time perfscope's process spent attaching and
	// detaching sampled groups over the window (kernel text patching
	// that waits on every CPU).
	SwitchNs int64 `json:"switch_ns"`
	// ProcessShare is perfscope's process CPU while the budget governed
	// (from the window's first readings to its last period), spread over
	// every CPU: the budget takes it off what the programs may take.
	ProcessShare float64 `json:"process_share"`
	// TotalShare is what perfscope took of the busiest CPU, its process
	// included: the programs there (CPUCost.MaxShare) plus the process's
	// CPU time spread over every CPU (Overhead.ProcessCPUShare). The
	// budget governs the first part; the second is reported beside it.
	TotalShare float64 `json:"total_share"`
	// Groups says, for every group of hooks the budget governs, whether
	// it stayed attached (exact) or was sampled, and how.
	Groups []HookSampling `json:"groups"`
}

// HookSampling is how one group of hooks was attached over the window.
type HookSampling struct {
	Group string   `json:"group"`
	Class string   `json:"class"` // batch or per-packet
	Hooks []string `json:"hooks"`
	// Exact: attached for the whole window, every event counted.
	Exact    bool      `json:"exact"`
	Estimate *Estimate `json:"estimate,omitempty"`
}
