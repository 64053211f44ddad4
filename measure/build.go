package measure

import (
	"fmt"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/attach"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/spec"
)

// PartUse is one part a run uses with its options' values, parsed to
// their domains (spec.Option: int64, bool, time.Duration, string,
// cpuset.Set, …); every option the spec declares is there.
type PartUse struct {
	Part *spec.Part
	Opts map[string]any
}

// Build is what every part's constructor may read of the run beside its
// own options: the window, the attach method, the workload, the
// interface and the hooks of the one running it.
type Build struct {
	Method probes.AttachMethod
	// Window is the run's length; Interval its timeline's (0: none).
	Window, Interval time.Duration
	// Continuous builds parts measured window after window on one
	// session (perfscope serve).
	Continuous bool
	// Select is the --cgroup, --container or --pod selection; nil: all.
	Select *cgroup.Selection
	// Iface is a network run's interface (ResolveInterface).
	Iface netdev.Interface
	// JVM is the JVM a profile names Java frames of (nil: none).
	JVM *attach.Target
	// OnSoftirqInterval is told each interval's softirq summary.
	OnSoftirqInterval func(evidence.SoftirqInterval)
	// NoProfile says why a network run has no profile, when it has none.
	NoProfile string
}

// timeline says whether the parts keep per-interval evidence.
func (b Build) timeline() bool { return b.Interval > 0 }

// builders are the parts' constructors by spec name. Each part registers
// its own beside its code (registerBuilder in an init), so a run is built
// by iterating over what the recipe uses: nothing above names a part.
var builders = map[string]func(b Build, u PartUse, ps *Parts){}

// registerBuilder makes build the constructor of the part named name;
// it sets the part's field of ps (of ps.Net for a network part, which
// NewParts creates first).
func registerBuilder(name string, build func(b Build, u PartUse, ps *Parts)) {
	if _, dup := builders[name]; dup {
		panic(fmt.Sprintf("measure: two constructors for part %s", name))
	}
	builders[name] = build
}

// NewParts builds the parts of one run from the parts it uses. Parts that
// own their window or read files afterwards (async-profiler, the GC logs,
// the Go runtime's sampling) have no constructor here: their runner adds
// them. A run that uses a part giving spec.InputNet is a network run: its
// softirq, lock and profile parts are the network run's own, beside the
// interface's counters, which it always reads.
func NewParts(b Build, uses []PartUse) *Parts {
	ps := &Parts{Interval: b.Interval}
	if measuresNet(uses) {
		ps.Net = &NetParts{NoProfile: b.NoProfile}
		ps.NetOptions = netOptions(b, uses)
	}
	for _, u := range uses {
		if build, ok := builders[u.Part.Name]; ok {
			build(b, u, ps)
		}
	}
	if n := ps.Net; n != nil {
		o := ps.NetOptions
		n.Softirq, n.Locks, n.Profile = ps.Softirq, ps.Locks, ps.Profile
		n.Counters = NewNetCounters(NetCounterOptions{Iface: o.Iface.Name, Ifindex: o.Iface.Index, Port: o.Port, PID: o.PID, Timeline: b.timeline()})
	}
	return ps
}

func measuresNet(uses []PartUse) bool {
	for _, u := range uses {
		if u.Part.Has(spec.InputNet) {
			return true
		}
	}
	return false
}

// netOptions are a network run's interface, port and process: the
// counters' own port and pid, else the first probe's that has one.
func netOptions(b Build, uses []PartUse) NetOptions {
	o := NetOptions{Iface: b.Iface, Method: b.Method, Select: b.Select}
	ordered := make([]PartUse, 0, len(uses))
	for _, u := range uses {
		if u.Part.Name == NetCountersSpec.Name {
			ordered = append([]PartUse{u}, ordered...)
		} else if u.Part.Has(spec.InputNet) {
			ordered = append(ordered, u)
		}
	}
	for _, u := range ordered {
		if v, ok := u.Opts["port"].(int64); ok && o.Port == 0 {
			o.Port = int(v)
		}
		if v, ok := u.Opts["pid"].(int64); ok && o.PID == 0 {
			o.PID = int(v)
		}
	}
	return o
}

// optInt is an int option's value as an int.
func optInt(u PartUse, name string) int { return int(u.Opts[name].(int64)) }
