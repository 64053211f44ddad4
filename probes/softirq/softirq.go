// Package softirq measures softirqs per CPU and per vector in the kernel:
// how often each ran, for how long, and — for NET_RX and NET_TX — how long
// a raised softirq waited before it ran.
package softirq

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/perfscope/perfscope/probes"
)

// Vectors are the softirq vectors in kernel order (include/linux/interrupt.h),
// named as /proc/softirqs names them.
var Vectors = []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}

// Vector indexes.
const (
	NetTX = 2
	NetRX = 3
)

// LatencySlots is the number of log2 buckets of a latency histogram: slot i
// holds waits in [2^i, 2^(i+1)) ns.
const LatencySlots = 32

// Hooks are the tracepoints this probe attaches to :
// softirq_raise first, since Options.NoLatency leaves it out.
var Hooks = Spec.Hooks

// Options configure a probe.
type Options struct {
	// Method forces an attach method; MethodAuto picks the best available.
	Method probes.AttachMethod
	// NoLatency leaves softirq_raise unattached: counts and time per
	// vector stay, the raise→entry histograms stay empty. A third of the
	// probe's cost on a packet flood, where every datagram raises NET_RX.
	NoLatency bool
}

// Probe is a loaded and attached softirq probe.
type Probe struct {
	probes.Loaded
}

var _ probes.Snapshotter[Snapshot] = (*Probe)(nil)

// VecCounts is the number of runs and total run time of one vector.
type VecCounts struct {
	Count uint64
	Time  time.Duration
}

// Snapshot holds cumulative counters since the probe attached.
type Snapshot struct {
	Taken time.Time
	// PerCPU[cpu][vector].
	PerCPU [][]VecCounts
	// NetRXLatency and NetTXLatency are raise→entry histograms per CPU:
	// [cpu][slot] counts.
	NetRXLatency [][]uint64
	NetTXLatency [][]uint64
}

// Open loads the probe's BPF object and attaches it.
func Open(opts Options) (*Probe, error) {
	spec, err := loadSoftirq()
	if err != nil {
		return nil, fmt.Errorf("load softirq BPF spec: %w", err)
	}
	hooks := Hooks
	if opts.NoLatency {
		probes.RemoveHookPrograms(spec, Hooks[0])
		hooks = Hooks[1:]
		if err := probes.SetVariables(spec, map[string]any{softirqVarLatency: false}); err != nil {
			return nil, fmt.Errorf("softirq probe: %w", err)
		}
	}
	att, err := probes.LoadAndAttach(spec, hooks, opts.Method, nil)
	if err != nil {
		return nil, fmt.Errorf("softirq probe: %w", err)
	}
	return &Probe{Loaded: loaded(att)}, nil
}

// Group is the probe's one hook group: softirq runs are batch events (one
// per NAPI batch on a NIC; one per packet on loopback, where the budget
// may sample them).
const Group = "softirq"

func loaded(att *probes.Attached) probes.Loaded {
	maps := att.Collection.Maps
	slots := map[string]uint32{
		Hooks[0].String(): uint32(softirqSoftirqHookSOFTIRQ_HOOK_RAISE),
		Hooks[1].String(): uint32(softirqSoftirqHookSOFTIRQ_HOOK_ENTRY),
		Hooks[2].String(): uint32(softirqSoftirqHookSOFTIRQ_HOOK_EXIT),
	}
	// A raise or entry seen before a detached gap must not pair with an
	// entry or exit after it.
	g := att.Group(Group, probes.Batch, Hooks, func() error {
		return errors.Join(probes.ZeroPerCPUArray(maps["entry_ts"]), probes.ZeroPerCPUArray(maps["raise_ts"]))
	})
	if g != nil {
		g.Counts = func() (probes.GroupCounts, error) { return readTotals(maps["softirq_stats"]) }
	}
	return probes.NewLoaded(att, slots, selfRuns, g)
}

// readTotals is the group's counts: the softirq time the programs
// measured, in ns (what a sampled softirq section estimates: its times),
// and the softirqs they timed, every vector and CPU summed — the events
// /proc/softirqs counts, which the overhead budget scales the time by.
func readTotals(stats *ebpf.Map) (probes.GroupCounts, error) {
	var c probes.GroupCounts
	for vec := range Vectors {
		var perCPU []softirqSoftirqVecStat
		if err := stats.Lookup(uint32(vec), &perCPU); err != nil {
			return c, fmt.Errorf("read softirq_stats[%s]: %w", Vectors[vec], err)
		}
		for _, v := range perCPU {
			c.Events += v.TimeNs
			c.InReference += v.Count
		}
	}
	return c, nil
}

func selfRuns(v softirqSelfCost) probes.SelfRuns {
	return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
}

// Snapshot reads the cumulative counters of every CPU.
func (p *Probe) Snapshot() (Snapshot, error) {
	s := Snapshot{Taken: time.Now()}
	stats := p.Maps()["softirq_stats"]
	for vec := range Vectors {
		var perCPU []softirqSoftirqVecStat
		if err := stats.Lookup(uint32(vec), &perCPU); err != nil {
			return s, fmt.Errorf("read softirq_stats[%s]: %w", Vectors[vec], err)
		}
		if s.PerCPU == nil {
			s.PerCPU = make([][]VecCounts, len(perCPU))
			for cpu := range s.PerCPU {
				s.PerCPU[cpu] = make([]VecCounts, len(Vectors))
			}
		}
		for cpu, v := range perCPU {
			s.PerCPU[cpu][vec] = VecCounts{Count: v.Count, Time: time.Duration(v.TimeNs)}
		}
	}
	var err error
	if s.NetTXLatency, err = readHist(p.Maps()["net_latency"], 0); err != nil {
		return s, err
	}
	if s.NetRXLatency, err = readHist(p.Maps()["net_latency"], 1); err != nil {
		return s, err
	}
	return s, nil
}

func readHist(m *ebpf.Map, idx uint32) ([][]uint64, error) {
	var perCPU []softirqSoftirqLatencyHist
	if err := m.Lookup(idx, &perCPU); err != nil {
		return nil, fmt.Errorf("read net_latency[%d]: %w", idx, err)
	}
	out := make([][]uint64, len(perCPU))
	for cpu, h := range perCPU {
		out[cpu] = append([]uint64(nil), h.Slots[:]...)
	}
	return out, nil
}

// Sub returns the counters accumulated between prev and s.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Taken: s.Taken}
	d.PerCPU = make([][]VecCounts, len(s.PerCPU))
	for cpu := range s.PerCPU {
		d.PerCPU[cpu] = make([]VecCounts, len(s.PerCPU[cpu]))
		for vec, v := range s.PerCPU[cpu] {
			if cpu < len(prev.PerCPU) {
				p := prev.PerCPU[cpu][vec]
				v.Count -= p.Count
				v.Time -= p.Time
			}
			d.PerCPU[cpu][vec] = v
		}
	}
	d.NetRXLatency = subHist(s.NetRXLatency, prev.NetRXLatency)
	d.NetTXLatency = subHist(s.NetTXLatency, prev.NetTXLatency)
	return d
}

func subHist(cur, prev [][]uint64) [][]uint64 {
	out := make([][]uint64, len(cur))
	for cpu := range cur {
		out[cpu] = append([]uint64(nil), cur[cpu]...)
		if cpu < len(prev) {
			for i := range out[cpu] {
				out[cpu][i] -= prev[cpu][i]
			}
		}
	}
	return out
}
