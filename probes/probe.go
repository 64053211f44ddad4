package probes

import "github.com/cilium/ebpf"

// Probe is the contract every probe package's probe implements, whatever
// it attaches to (tracepoints, perf events): how it is attached, what its
// programs cost, which optional hooks are missing, and Close. The recipes'
// measurement window opens probes, reads them through their own typed
// Snapshot (Snapshotter) and uses this contract for everything else: the
// overhead section, "unavailable: <why>" notes, and cleanup.
type Probe interface {
	// Method is how the programs are attached ("tp_btf", "raw_tp",
	// "tracepoint", "perf_event/perf_link").
	Method() AttachMethod
	// Costs is each program's bpf_stats run count and time since it was
	// loaded (zero unless statistics are on).
	Costs() []ProgramCost
	// Missing lists optional hooks ("napi:napi_poll") that are not
	// attached, with why; empty when every hook is.
	Missing() map[string]error
	// Close detaches and frees everything the probe created. Safe to call
	// more than once.
	Close() error
}

// Snapshotter is a Probe whose counters are read as a snapshot of type S:
// cumulative since the probe attached, so two snapshots give a window.
type Snapshotter[S any] interface {
	Probe
	Snapshot() (S, error)
}

// Loaded is what probes attached to tracepoints share: the attached
// object and the Probe methods. Probe packages embed it.
type Loaded struct {
	Attached *Attached
	// SelfCost reads the programs' own run counters (SelfCostReader);
	// nil when the object keeps none.
	SelfCost func() (SelfCosts, error)
	// Groups are the hook groups an overhead budget may detach between
	// sampling windows.
	Groups []*HookGroup
}

var (
	_ Probe       = (*Loaded)(nil)
	_ Switchable  = (*Loaded)(nil)
	_ SelfCounted = (*Loaded)(nil)
)

// NewLoaded is the Loaded of an attached object that keeps its programs'
// own run counters in self_costs (selfcost.h): slots maps each hook to
// its slot (hooks that did not attach are dropped), V is the object's
// generated self_cost struct and conv copies it field by field. groups are
// the hook groups an overhead budget may detach (nil ones are dropped).
func NewLoaded[V any](att *Attached, slots map[string]uint32, conv func(V) SelfRuns, groups ...*HookGroup) Loaded {
	return Loaded{
		Attached: att,
		SelfCost: SelfCostReader(att.Collection.Maps["self_costs"], att.AttachedSlots(slots), conv),
		Groups:   Groups(groups...),
	}
}

// SelfCosts reads the programs' own run counters per hook and CPU.
func (l *Loaded) SelfCosts() (SelfCosts, error) {
	if l.SelfCost == nil {
		return nil, ErrNoSelfCost
	}
	return l.SelfCost()
}

// HookGroups are the probe's hook groups.
func (l *Loaded) HookGroups() []*HookGroup { return l.Groups }

// Method is the attach method in use.
func (l *Loaded) Method() AttachMethod { return l.Attached.Method }

// Missing lists the optional hooks ("napi:napi_poll") that did not attach,
// with why, so a report can say "unavailable: <why>" for that section.
func (l *Loaded) Missing() map[string]error { return l.Attached.Missing }

// Costs is each program's bpf_stats run count and time (zero unless
// EnableStats is active).
func (l *Loaded) Costs() []ProgramCost { return Costs(l.Attached.Programs) }

// Close detaches and frees everything the probe created. Safe to call
// more than once, and on a nil probe.
func (l *Loaded) Close() error {
	if l == nil {
		return nil
	}
	return l.Attached.Close()
}

// Maps are the loaded maps by name.
func (l *Loaded) Maps() map[string]*ebpf.Map { return l.Attached.Collection.Maps }
