package probes

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/cilium/ebpf"
)

// Class says how often a group of hooks fires, which decides how an
// overhead budget treats it (recipes' governor).
type Class int

const (
	// Batch hooks fire once per batch of packets (a softirq run, a NAPI
	// poll) or only when something goes wrong (a contended lock): kept
	// attached, and their counts exact, while they fit the budget.
	Batch Class = iota
	// PerPacket hooks fire for every packet: attached in sampling windows
	// when attaching them throughout would exceed the budget.
	PerPacket
	// Rare hooks fire only when something goes wrong on a connection (a
	// retransmit, a reset): attached throughout and never sampled, even
	// when the budget samples batch groups, because their counts are
	// reported per connection as exact and a sampled window could miss
	// every one of a handful. Their cost is a fixed cost to the budget.
	Rare
)

func (c Class) String() string {
	switch c {
	case PerPacket:
		return "per-packet"
	case Rare:
		return "rare"
	}
	return "batch"
}

// HookGroup is hooks of one probe that are detached and attached again
// together, without reloading the object: the programs and their maps
// stay loaded, so counters keep counting from where they were. A program
// that is merely told to do nothing still pays the tracepoint's entry on
// every event; only a detached one costs nothing.
type HookGroup struct {
	// Name is "probe/what" ("netqueue/packets"), what a part asks its
	// coverage by.
	Name  string
	Class Class
	// Hooks are the attached hooks of the group, in attach order.
	Hooks []string
	// Switch attaches and detaches them.
	Switch Switch
	// Counts, when set, reads what the group's programs counted so far,
	// cumulative over CPUs; nil: an estimate built on the group scales its
	// programs' runs.
	Counts func() (GroupCounts, error)
}

// GroupCounts is what a hook group's programs counted, as opposed to how
// often they ran: a tracepoint fires for every socket read or packet on
// the machine, and the programs count only those that pass their filters.
type GroupCounts struct {
	// Events are the events the numbers built on the group are made of
	// (the datagrams read from the sockets a probe counts).
	Events uint64
	// InReference are the events of the exact kernel counter an overhead
	// budget scales the group by (UDP reads: Udp/Udp6 InDatagrams) that
	// the programs saw themselves: the windows' share of the reference,
	// with no error from where each window began and ended (0: not
	// counted).
	InReference uint64
}

// Switch attaches and detaches a hook group; each returns when the group
// started or stopped counting, to the precision sampling windows need.
// Attaching an attached group or detaching a detached one does nothing.
type Switch interface {
	Attach() (time.Time, error)
	Detach() (time.Time, error)
	IsAttached() bool
}

// Attach attaches the group's hooks (see Switch).
func (g *HookGroup) Attach() (time.Time, error) { return g.Switch.Attach() }

// Detach detaches the group's hooks (see Switch).
func (g *HookGroup) Detach() (time.Time, error) { return g.Switch.Detach() }

// IsAttached reports whether the group's hooks are attached.
func (g *HookGroup) IsAttached() bool { return g.Switch.IsAttached() }

// linkSwitch switches hooks of an Attached object by closing their links
// and creating them again from the loaded programs.
type linkSwitch struct {
	a     *Attached
	hooks []string
	// reset clears state that a detached gap would leave stale (an
	// entry's start time whose exit was never seen), before attaching.
	reset func() error
	name  string
}

// Switchable is a probe whose hooks come in groups the overhead budget
// may detach between sampling windows.
type Switchable interface {
	Probe
	HookGroups() []*HookGroup
}

// Group makes a hook group of the hooks of a that are attached; nil when
// none is (an optional hook the kernel lacks). reset, when not nil, runs
// before the group is attached again.
func (a *Attached) Group(name string, class Class, hooks []Hook, reset func() error) *HookGroup {
	sw := &linkSwitch{a: a, reset: reset, name: name}
	for _, h := range hooks {
		if _, ok := a.Programs[h.String()]; ok {
			sw.hooks = append(sw.hooks, h.String())
		}
	}
	if len(sw.hooks) == 0 {
		return nil
	}
	return &HookGroup{Name: name, Class: class, Hooks: sw.hooks, Switch: sw}
}

// Groups drops the nil groups of a probe's list.
func Groups(gs ...*HookGroup) []*HookGroup {
	var out []*HookGroup
	for _, g := range gs {
		if g != nil {
			out = append(out, g)
		}
	}
	return out
}

func (s *linkSwitch) IsAttached() bool {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	return s.a.links[s.hooks[0]] != nil
}

// Detach detaches the hooks, in order, and returns the middle of the time
// it took.
func (s *linkSwitch) Detach() (time.Time, error) {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	t0 := time.Now()
	var errs []error
	for _, h := range s.hooks {
		if l := s.a.links[h]; l != nil {
			errs = append(errs, l.Close())
			delete(s.a.links, h)
		}
	}
	return mid(t0, time.Now()), errors.Join(errs...)
}

// Attach clears the group's in-flight state and attaches its hooks again,
// in order (a wait's begin before its end), returning the middle of the
// time it took. On error the hooks attached so far are detached again.
func (s *linkSwitch) Attach() (time.Time, error) {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	if s.a.Collection == nil {
		return time.Time{}, errors.New("attach " + s.name + ": the probe is closed")
	}
	if s.reset != nil && s.a.links[s.hooks[0]] == nil {
		if err := s.reset(); err != nil {
			return time.Time{}, fmt.Errorf("attach %s: clear in-flight state: %w", s.name, err)
		}
	}
	t0 := time.Now()
	for _, h := range s.hooks {
		if s.a.links[h] != nil {
			continue
		}
		l, err := attachHook(s.a.Method, s.a.hooks[h], s.a.Programs[h], "")
		if err != nil {
			for _, h := range s.hooks {
				if l := s.a.links[h]; l != nil {
					l.Close()
					delete(s.a.links, h)
				}
			}
			return time.Time{}, err
		}
		s.a.links[h] = l
	}
	return mid(t0, time.Now()), nil
}

func mid(a, b time.Time) time.Time { return a.Add(b.Sub(a) / 2) }

// ZeroPerCPUArray sets every slot of a per-CPU array to zero on every CPU.
func ZeroPerCPUArray(m *ebpf.Map) error {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	// One zero value per CPU, of the map's value size.
	zeros := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(int(m.ValueSize()), reflect.TypeOf(byte(0)))), cpus, cpus).Interface()
	for k := uint32(0); k < m.MaxEntries(); k++ {
		if err := m.Update(k, zeros, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("zero %s[%d]: %w", m, k, err)
		}
	}
	return nil
}

// ClearHash deletes every entry of a hash map whose keys are K.
func ClearHash[K any](m *ebpf.Map) error {
	var keys []K
	var prev *K
	for {
		var next K
		var err error
		if prev == nil {
			err = m.NextKey(nil, &next)
		} else {
			err = m.NextKey(prev, &next)
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", m, err)
		}
		keys = append(keys, next)
		prev = &keys[len(keys)-1]
		if len(keys) > int(m.MaxEntries()) {
			break // the map changed under us; what is listed is enough
		}
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete from %s: %w", m, err)
		}
	}
	return nil
}
