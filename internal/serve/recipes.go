package serve

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/recipes"
)

// Recipe is what serve needs of a recipe: its parts, opened once, and
// after every window the window's sections and findings.
//
// The built-ins below compose the recipes floor's parts directly, keyed by
// the declarative recipes' names; the YAML recipe loader's
// Plan.NewMeasurement (Parts, Window, Result) has this shape and replaces
// this table when it lands.
type Recipe interface {
	Parts() []recipes.Part
	// Stats is how bpf_stats measure perfscope's own cost.
	Stats() recipes.Stats
	// Collect turns the window just measured into metrics' input.
	Collect(src recipes.Sources, run recipes.Run) Window
}

// Params are the recipe's parameters (`--set KEY=VALUE`).
type Params map[string]string

func (p Params) int(key string, def int) (int, error) {
	v, ok := p[key]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--set %s=%s: want a non-negative integer", key, v)
	}
	return n, nil
}

func (p Params) bool(key string, def bool) (bool, error) {
	v, ok := p[key]
	if !ok || v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("--set %s=%s: want true or false", key, v)
	}
	return b, nil
}

// builtin makes a recipe from its parameters; keys lists the parameters
// it takes.
type builtin struct {
	keys []string
	make func(src recipes.Sources, p Params) (Recipe, error)
}

// Builtins are the recipes serve runs continuously. A CPU profile and the
// JVM recipes own their window (async-profiler, a stack map) and stay
// one-shot: `perfscope recipe run`.
var Builtins = map[string]builtin{
	"udp-rx":          {keys: []string{"iface", "port", "pid", "lock_stacks", "attach_method", "profile", "freq"}, make: netRecipe(true)},
	"udp-tx":          {keys: []string{"iface", "port", "pid", "lock_stacks", "attach_method"}, make: netRecipe(false)},
	"softirq-balance": {keys: []string{"attach_method"}, make: softirqRecipe},
	"lock-contention": {keys: []string{"stacks_every", "tcp", "attach_method"}, make: lockRecipe},
}

// Names are the recipes serve runs, sorted.
func Names() []string {
	var out []string
	for n := range Builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrBadRecipe is bad input: an unknown recipe or parameter.
type ErrBadRecipe struct{ Msg string }

func (e ErrBadRecipe) Error() string { return e.Msg }

// NewRecipe builds the named recipe with its parameters checked.
func NewRecipe(src recipes.Sources, name string, p Params) (Recipe, error) {
	b, ok := Builtins[name]
	if !ok {
		return nil, ErrBadRecipe{fmt.Sprintf("perfscope serve runs %s continuously, not %q (profiles and JVM recipes are one-shot: perfscope recipe run)", strings.Join(Names(), ", "), name)}
	}
	for k := range p {
		found := false
		for _, want := range b.keys {
			found = found || k == want
		}
		if !found {
			return nil, ErrBadRecipe{fmt.Sprintf("recipe %s has no parameter %q (it takes %s)", name, k, strings.Join(b.keys, ", "))}
		}
	}
	return b.make(src, p)
}

func attachMethod(p Params) (probes.AttachMethod, error) {
	m, err := probes.ParseMethod(p["attach_method"])
	if err != nil {
		return "", ErrBadRecipe{fmt.Sprintf("--set attach_method=%s: %v", p["attach_method"], err)}
	}
	return m, nil
}

type netServe struct {
	parts *recipes.NetParts
	tx    bool
}

// netRecipe is udp-rx (the receive path, with an optional CPU profile)
// or udp-tx (the same parts without the profile; the XPS and lock rules
// read the transmit side).
func netRecipe(rx bool) func(recipes.Sources, Params) (Recipe, error) {
	return func(src recipes.Sources, p Params) (Recipe, error) {
		if p["iface"] == "" {
			return nil, ErrBadRecipe{"--set iface=NAME is required: the interface to measure"}
		}
		iface, err := recipes.ResolveInterface(src, p["iface"])
		if err != nil {
			return nil, err
		}
		o := recipes.NetOptions{Iface: iface}
		if o.Port, err = p.int("port", 0); err != nil {
			return nil, ErrBadRecipe{err.Error()}
		}
		if o.PID, err = p.int("pid", 0); err != nil {
			return nil, ErrBadRecipe{err.Error()}
		}
		if o.LockStacks, err = p.int("lock_stacks", 8); err != nil {
			return nil, ErrBadRecipe{err.Error()}
		}
		// A profile every window is the costliest part: off unless asked.
		if o.Profile, err = p.bool("profile", false); err != nil || (!rx && o.Profile) {
			return nil, ErrBadRecipe{fmt.Sprintf("--set profile=%s: want true or false (udp-rx only)", p["profile"])}
		}
		if o.Frequency, err = p.int("freq", 49); err != nil {
			return nil, ErrBadRecipe{err.Error()}
		}
		if o.Method, err = attachMethod(p); err != nil {
			return nil, err
		}
		return &netServe{parts: recipes.NewNetParts(o), tx: !rx}, nil
	}
}

func (n *netServe) Parts() []recipes.Part { return n.parts.Parts() }

// Stats: per-packet probes, so bpf_stats are sampled, as `perfscope udp`.
func (n *netServe) Stats() recipes.Stats { return recipes.StatsSampled }

func (n *netServe) Collect(src recipes.Sources, run recipes.Run) Window {
	res := n.parts.Result(src, run)
	ev := res.Evidence
	rep := res.Report("")
	return Window{Begin: run.Begin, End: run.End, Softirq: &ev.Softirq, Queues: &ev.Queues, Locks: &ev.Locks,
		Drops: &ev.Drops, Findings: rep.Findings, Overhead: run.Overhead}
}

type softirqServe struct{ part *recipes.Softirq }

func softirqRecipe(_ recipes.Sources, p Params) (Recipe, error) {
	m, err := attachMethod(p)
	if err != nil {
		return nil, err
	}
	return &softirqServe{part: recipes.NewSoftirq(recipes.SoftirqOptions{Method: m, NoLatency: true})}, nil
}

func (s *softirqServe) Parts() []recipes.Part { return []recipes.Part{s.part} }
func (s *softirqServe) Stats() recipes.Stats  { return recipes.StatsContinuous }

// softirqRules judge softirq balance on its own: the receive path's rule
// that reads only the softirq section.
var softirqRules = rulesByID(diagnose.NetRules, "net.softirq-concentrated")

func (s *softirqServe) Collect(_ recipes.Sources, run recipes.Run) Window {
	ev := s.part.Evidence()
	f := diagnose.Run(softirqRules, diagnose.NetInput{Evidence: evidence.NetEvidence{Softirq: ev, DurationNs: ev.DurationNs}})
	return Window{Begin: run.Begin, End: run.End, Softirq: &ev, Findings: f, Overhead: run.Overhead}
}

type lockServe struct{ part *recipes.Locks }

func lockRecipe(_ recipes.Sources, p Params) (Recipe, error) {
	m, err := attachMethod(p)
	if err != nil {
		return nil, err
	}
	every, err := p.int("stacks_every", 8)
	if err != nil || every < 1 {
		return nil, ErrBadRecipe{fmt.Sprintf("--set stacks_every=%s: want an integer ≥ 1", p["stacks_every"])}
	}
	tcp, err := p.bool("tcp", true)
	if err != nil {
		return nil, ErrBadRecipe{err.Error()}
	}
	return &lockServe{part: recipes.NewLocks(recipes.LockOptions{Method: m, StackEvery: every, TCP: tcp})}, nil
}

func (l *lockServe) Parts() []recipes.Part { return []recipes.Part{l.part} }
func (l *lockServe) Stats() recipes.Stats  { return recipes.StatsSampled }

func (l *lockServe) Collect(_ recipes.Sources, run recipes.Run) Window {
	ev := l.part.Evidence()
	return Window{Begin: run.Begin, End: run.End, Locks: &ev, Overhead: run.Overhead}
}

// OpenErr is the error of a part whose probe must open for the recipe to
// make sense (the lock probe of lock-contention).
func OpenErr(r Recipe) error {
	if l, ok := r.(*lockServe); ok {
		return l.part.OpenErr()
	}
	return nil
}

func rulesByID[E any](rules []diagnose.Rule[E], ids ...string) []diagnose.Rule[E] {
	var out []diagnose.Rule[E]
	for _, r := range rules {
		for _, id := range ids {
			if r.ID == id {
				out = append(out, r)
			}
		}
	}
	return out
}
