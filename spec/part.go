// Package spec is the vocabulary of one spec per part: each probe and
// each part a recipe can name declares, in one place, its name, options
// (with their domains), the tracepoints it attaches, what it needs of a
// container, the budget's reference for its sampled hook groups, the
// report section its evidence lands in and which rules its evidence
// feeds. The catalog (measure.Catalog) lists the specs; the recipe
// language, doctor, the container needs, the budget and the rules'
// inputs iterate over it instead of naming parts.
package spec

import "fmt"

// Option is one setting of a part in a recipe.
type Option struct {
	Name string
	Domain
	// Default is the value when the recipe leaves the option out (nil:
	// the kind's zero value).
	Default any
	// Required options have no default: the recipe must give them.
	Required bool
	Doc      string
}

// DefaultText is the default as a recipe would write it ("" for none).
func (o Option) DefaultText() string {
	if o.Default == nil {
		return ""
	}
	return o.Format(o.Default)
}

// Hook is one tracepoint a probe attaches to.
type Hook struct {
	Group string // tracefs group, e.g. "irq"
	Name  string // tracepoint name, e.g. "softirq_entry"
	// Optional hooks may be missing on older kernels: the rest of the probe
	// still runs and Attached.Missing says which hooks could not attach.
	Optional bool
	// UsedFor is what perfscope uses it for (doctor lists it).
	UsedFor string
}

// String is the "group:name" form perf and bpftrace use.
func (h Hook) String() string { return h.Group + ":" + h.Name }

// Input is a kind of evidence rules judge: a rule says which it needs, a
// part which it gives.
type Input string

// The inputs rules judge.
const (
	InputNet      Input = "net"      // a network run: queues, drops, sockets, counters
	InputTCP      Input = "tcp"      // TCP listeners, connections and events
	InputSoftirq  Input = "softirq"  // softirq time per CPU
	InputLocks    Input = "locks"    // kernel lock contention
	InputJVM      Input = "jvm"      // a JVM's allocation profile
	InputGo       Input = "go"       // a Go program's allocation
	InputGC       Input = "gc"       // GC logs
	InputOffCPU   Input = "offcpu"   // threads off CPU
	InputStacks   Input = "stacks"   // stacks a flame graph can draw
	InputPauses   Input = "pauses"   // a JVM's pauses over time (hsperfdata)
	InputPortDrop Input = "portdrop" // one port's drops over time
)

// Reference is the exact kernel counter a sampled hook group's events
// follow (the overhead budget scales what its windows counted by it).
type Reference string

// The references a session offers the budget.
const (
	// RefPackets: the packets through the namespace's interfaces (every
	// per-packet group unless it names another).
	RefPackets Reference = ""
	// RefUDPReads: the UDP datagrams the namespace's sockets read.
	RefUDPReads Reference = "udp-reads"
	// RefSoftirqs: the softirqs the kernel ran, when the group counts its
	// own runs.
	RefSoftirqs Reference = "softirqs"
	// RefFollows: the packets, and the group follows them from window to
	// window (NAPI polls beside the packets counted exactly).
	RefFollows Reference = "follows"
)

// Part is one probe, or one part a recipe can name.
type Part struct {
	// Name is what recipes, doctor and the container needs call it.
	Name string
	// Probe: a BPF probe (probes/); else a collector (collectors/, jvm/).
	Probe bool
	// Recipe: a recipe can name it (a probe another part loads — the
	// passive request count — is not).
	Recipe bool
	Doc    string
	// Options are its settings in a recipe.
	Options []Option
	// Section is the report section its evidence lands in.
	Section string
	// Hooks are the tracepoints it attaches, in attach order.
	Hooks []Hook
	// Needs are what it asks of a container.
	Needs []Need
	// Uses are other probes it loads (their hooks and needs are its own
	// too).
	Uses []*Part
	// Once: it measures once — it owns its window, or names what it saw
	// after its probe is closed — and cannot be measured window after
	// window (perfscope serve).
	Once bool
	// Gives are the rules' inputs its evidence feeds.
	Gives []Input
	// References map its sampled hook groups (probes.HookGroup names) to
	// the counter each follows; a group not named follows the packets.
	References map[string]Reference
	// Open is a probe's constructor: it loads and attaches the probe with
	// opts, the probe's own options type (Loader makes it from the
	// probe's Open). The measuring runtime opens probes through it, by
	// the part's name (tests hand a recording in its place); nil for a
	// part that is not a probe, or a probe its runtime opens itself.
	Open func(opts any) (any, error)
}

// Loader makes a Part.Open from a probe's typed constructor: opts must be
// the probe's options type, and a failed open returns a nil interface
// (never a nil pointer in one).
func Loader[O any, P any](open func(O) (*P, error)) func(opts any) (any, error) {
	return func(opts any) (any, error) {
		o, ok := opts.(O)
		if !ok {
			var want O
			return nil, fmt.Errorf("open with options %T, want %T", opts, want)
		}
		p, err := open(o)
		if err != nil || p == nil {
			return nil, err
		}
		return p, nil
	}
}

// Has says whether the part gives in.
func (p *Part) Has(in Input) bool {
	for _, g := range p.Gives {
		if g == in {
			return true
		}
	}
	return false
}

// AllHooks are the part's hooks and those of the probes it uses.
func (p *Part) AllHooks() []Hook {
	out := append([]Hook{}, p.Hooks...)
	for _, u := range p.Uses {
		out = append(out, u.AllHooks()...)
	}
	return out
}

// AllNeeds are the part's needs and those of the probes it uses that it
// does not declare itself.
func (p *Part) AllNeeds() []Need {
	out := append([]Need{}, p.Needs...)
	for _, u := range p.Uses {
		for _, n := range u.AllNeeds() {
			if !hasNeed(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

func hasNeed(needs []Need, n Need) bool {
	for _, m := range needs {
		if m.Kind == n.Kind && m.Name == n.Name {
			return true
		}
	}
	return false
}

// Hook returns the part's hook by tracepoint name; it panics when the
// spec lacks it (a probe asks for its own hooks at init, so every test
// that imports the package catches a misspelt name).
func (p *Part) Hook(name string) Hook {
	for _, h := range p.Hooks {
		if h.Name == name {
			return h
		}
	}
	panic("spec: tracepoint " + name + " is not among the hooks of " + p.Name)
}

// The report sections parts fill.
const (
	SectionNet       = "net"
	SectionSoftirq   = "softirq"
	SectionLocks     = "locks"
	SectionProfile   = "profile"
	SectionJVMPauses = "jvm_pauses"
	SectionJVM       = "jvm"
	SectionGC        = "gc"
	SectionOffCPU    = "offcpu"
	SectionGo        = "go"
)

// StackKinds are the stacks option's values: which stacks a probe records.
var StackKinds = []string{"kernel+user", "kernel", "user"}

// Values shared by the request-counting parts' options.
var (
	// HTTPMethods are a load's methods.
	HTTPMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
	// PassiveModes are the passive request count's modes.
	PassiveModes = []string{"auto", "on", "off"}
)
