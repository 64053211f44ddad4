package measure

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
)

// selfCounted are the probes whose programs count their own runs.
func selfCounted(all []probes.Probe) []probes.SelfCounted {
	var out []probes.SelfCounted
	for _, p := range all {
		if c, ok := p.(probes.SelfCounted); ok {
			out = append(out, c)
		}
	}
	return out
}

func readSelf(cs []probes.SelfCounted) []probes.SelfCosts {
	out := make([]probes.SelfCosts, len(cs))
	for i, c := range cs {
		out[i], _ = c.SelfCosts() // unreadable: no runs, the report's rows stay as bpf_stats had them
	}
	return out
}

// hookRuns is one hook's runs over the window and its cost per run.
type hookRuns struct {
	perCPU []probes.SelfRuns
	runs   uint64
	perRun time.Duration
}

// selfDelta is each hook's runs between two readings and its measured
// time per run: from the window's timed runs, else from every timed run
// since load (a hook that ran rarely in the window).
func selfDelta(before, after []probes.SelfCosts) map[string]hookRuns {
	out := map[string]hookRuns{}
	for i, c := range after {
		var prev probes.SelfCosts
		if i < len(before) {
			prev = before[i]
		}
		for hook, perCPU := range c.Sub(prev) {
			t := probes.Total(perCPU)
			per := t.PerRun()
			if t.TimedRuns == 0 {
				per = probes.Total(c[hook]).PerRun()
			}
			h := out[hook]
			for cpu, v := range perCPU {
				for len(h.perCPU) <= cpu {
					h.perCPU = append(h.perCPU, probes.SelfRuns{})
				}
				h.perCPU[cpu] = h.perCPU[cpu].Add(v)
			}
			h.runs += t.Runs
			h.perRun = per
			out[hook] = h
		}
	}
	return out
}

// cpuCostOf is the programs' cost per CPU over the window: runs × (per
// run + entry).
func cpuCostOf(runs map[string]hookRuns, entry time.Duration, entryErr error, window time.Duration, onlineCPUs int) *evidence.CPUCost {
	c := &evidence.CPUCost{EntryNs: float64(entry)}
	if entryErr != nil {
		c.EntryUnmeasured = entryErr.Error()
	}
	var byCPU []evidence.CPUCostRow
	var all float64
	for _, h := range runs {
		for cpu, v := range h.perCPU {
			for len(byCPU) <= cpu {
				byCPU = append(byCPU, evidence.CPUCostRow{CPU: len(byCPU)})
			}
			ns := float64(v.Runs) * float64(h.perRun+entry)
			byCPU[cpu].Runs += v.Runs
			byCPU[cpu].Ns += uint64(math.Round(ns))
			c.Runs += v.Runs
			all += ns
		}
	}
	if window <= 0 {
		return c
	}
	for _, r := range byCPU {
		if r.Runs == 0 {
			continue
		}
		r.Share = float64(r.Ns) / float64(window)
		if r.Share > c.MaxShare {
			c.MaxShare, c.MaxCPU = r.Share, r.CPU
		}
		c.PerCPU = append(c.PerCPU, r)
	}
	if onlineCPUs > 0 {
		c.Share = all / (float64(window) * float64(onlineCPUs))
	}
	return c
}

// ownRuns replaces each program's run count with what the program
// counted itself — exact, where bpf_stats were sampled and scaled, or
// missing — and its time with runs × per-run cost: bpf_stats' where they
// timed the program in this window, else the program's own timing.
func ownRuns(ov *evidence.Overhead, runs map[string]hookRuns) {
	listed := map[string]bool{}
	for i := range ov.Programs {
		p := &ov.Programs[i]
		listed[p.Program] = true
		h, ok := runs[p.Program]
		if !ok {
			continue
		}
		per, from := time.Duration(math.Round(p.PerRunNs)), "bpf_stats"
		if p.RunCount == 0 || per <= 0 {
			per, from = h.perRun, "self-timed"
		}
		*p = evidence.NewProgramCost(p.Program, h.runs, time.Duration(h.runs)*per)
		p.PerRunFrom = from
	}
	for _, hook := range slices.Sorted(maps.Keys(runs)) {
		if h := runs[hook]; !listed[hook] {
			p := evidence.NewProgramCost(hook, h.runs, time.Duration(h.runs)*h.perRun)
			p.PerRunFrom = "self-timed"
			ov.Programs = append(ov.Programs, p)
		}
	}
}

// StampRun records in ov the whole process's cost from exec to now:
// its CPU time so far and the time since started, when the process began.
// Commands call it as they hand the report to the renderer, so it covers
// everything but the formatting of the report itself.
func StampRun(ov *evidence.Overhead, started time.Time) {
	if ov == nil {
		return
	}
	ov.RunCPUNs = int64(budget.ProcessCPU())
	if started.IsZero() {
		return
	}
	ov.RunNs = int64(time.Since(started))
	if ov.RunNs > 0 {
		ov.RunCPUShare = float64(ov.RunCPUNs) / float64(ov.RunNs)
	}
}
