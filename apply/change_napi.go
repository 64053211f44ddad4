package apply

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"

	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/diagnose"
)

// --- one NAPI instance's settings: netdev netlink napi-set ----------------------

// NAPIs reads and sets NAPI instances through the netdev netlink family.
type NAPIs interface {
	// Instance is NAPI instance id as napi-get reports it now; ok is
	// false when no instance has that id in this network namespace.
	Instance(id uint32) (inst NAPIState, ok bool, err error)
	// Set writes the named settings of instance id (napi-set).
	Set(id uint32, settings map[string]uint64) error
}

// NAPIState is one NAPI instance: the device it belongs to, the RX queues
// it serves, and its settings (nil where the kernel does not report
// them: before 6.13).
type NAPIState struct {
	Iface    string
	RXQueues []int
	// QueuesKnown: some queue of the device reports its NAPI instance
	// (many virtual drivers report none, and then RXQueues says nothing).
	QueuesKnown bool
	Settings    map[string]*uint64
}

// errNoNAPISet: the kernel reports no per-instance settings.
var errNoNAPISet = errors.New("this kernel does not report that per-NAPI setting (netdev netlink napi-set needs Linux 6.13, threaded 6.17); set the device-wide /sys/class/net/IF/napi_defer_hard_irqs, gro_flush_timeout or threaded instead")

type napiHandler struct{ noGuard }

func (napiHandler) read(s *System, c diagnose.Change) (state, error) {
	n, err := need(s.NAPI, "netdev netlink")
	if err != nil {
		return state{}, err
	}
	inst, ok, err := n.Instance(c.NAPIID)
	if err != nil {
		return state{}, fmt.Errorf("napi-get of NAPI instance %d: %w", c.NAPIID, err)
	}
	if !ok {
		return state{gone: true, goneWhy: fmt.Sprintf("NAPI instance %d of %s no longer exists (NAPI ids change when a device is reconfigured): run perfscope again to read the current ones", c.NAPIID, quoteWord(c.Iface))}, nil
	}
	if inst.Iface != c.Iface {
		return state{gone: true, goneWhy: fmt.Sprintf("NAPI instance %d now belongs to %s, not %s (NAPI ids change when a device is reconfigured): run perfscope again to read the current ones", c.NAPIID, quoteWord(inst.Iface), quoteWord(c.Iface))}, nil
	}
	if c.Queue != nil && inst.QueuesKnown && !slices.Contains(inst.RXQueues, *c.Queue) {
		return state{gone: true, goneWhy: fmt.Sprintf("NAPI instance %d of %s now serves RX queues %v, not rx-%d (the device was reconfigured): run perfscope again to read the current ones", c.NAPIID, quoteWord(c.Iface), inst.RXQueues, *c.Queue)}, nil
	}
	named, err := diagnose.ParseNAPIParams(c.New)
	if err != nil {
		return state{}, err
	}
	cur := map[string]uint64{}
	for k := range named {
		v := inst.Settings[k]
		if v == nil {
			return state{}, fmt.Errorf("NAPI instance %d reports no %s: %w", c.NAPIID, k, errNoNAPISet)
		}
		cur[k] = *v
	}
	return state{value: diagnose.FormatNAPIParams(cur)}, nil
}

func (napiHandler) write(s *System, c diagnose.Change, value string, _ *Saved) error {
	p, err := diagnose.ParseNAPIParams(value)
	if err != nil {
		return err
	}
	if err := s.NAPI.Set(c.NAPIID, p); err != nil {
		if errors.Is(err, netlinkq.ErrUnavailable) {
			return fmt.Errorf("%w: %w", errNoNAPISet, err)
		}
		return err
	}
	return nil
}

func (napiHandler) same(_ diagnose.Change, value string, _ *Saved, st state) bool {
	want, err := diagnose.ParseNAPIParams(value)
	return err == nil && diagnose.FormatNAPIParams(want) == st.value
}

// netlinkNAPIs is the kernel's netdev family in the caller's network
// namespace.
type netlinkNAPIs struct{}

func (netlinkNAPIs) Instance(id uint32) (NAPIState, bool, error) {
	all, err := netlinkq.NAPIs(0)
	if errors.Is(err, netlinkq.ErrUnavailable) {
		return NAPIState{}, false, fmt.Errorf("%w: %w", errNoNAPISet, err)
	}
	if err != nil {
		return NAPIState{}, false, err
	}
	i := slices.IndexFunc(all, func(n netlinkq.NAPI) bool { return n.ID == id })
	if i < 0 {
		return NAPIState{}, false, nil
	}
	n := all[i]
	dev, err := net.InterfaceByIndex(n.Ifindex)
	if err != nil {
		return NAPIState{}, false, fmt.Errorf("interface %d of NAPI instance %d: %w", n.Ifindex, id, err)
	}
	st := NAPIState{Iface: dev.Name, Settings: map[string]*uint64{}}
	queues, err := netlinkq.Queues(n.Ifindex)
	if err != nil {
		return NAPIState{}, false, fmt.Errorf("queues of %s: %w", dev.Name, err)
	}
	for _, q := range queues {
		st.QueuesKnown = st.QueuesKnown || q.NAPIID != 0
		if q.Type == netlinkq.RX && q.NAPIID == id {
			st.RXQueues = append(st.RXQueues, q.ID)
		}
	}
	if n.DeferHardIRQs != nil {
		v := uint64(*n.DeferHardIRQs)
		st.Settings["defer-hard-irqs"] = &v
	}
	st.Settings["gro-flush-timeout"] = n.GROFlushTimeoutNs
	st.Settings["irq-suspend-timeout"] = n.IRQSuspendTimeoutNs
	if i := slices.Index(diagnose.NAPIThreadedNames, n.Threaded); i >= 0 {
		v := uint64(i)
		st.Settings["threaded"] = &v
	}
	return st, true, nil
}

func (netlinkNAPIs) Set(id uint32, p map[string]uint64) error {
	var s netlinkq.NAPISettings
	if v, ok := p["defer-hard-irqs"]; ok {
		d := uint32(v)
		s.DeferHardIRQs = &d
	}
	if v, ok := p["gro-flush-timeout"]; ok {
		s.GROFlushTimeoutNs = &v
	}
	if v, ok := p["irq-suspend-timeout"]; ok {
		s.IRQSuspendTimeoutNs = &v
	}
	if v, ok := p["threaded"]; ok {
		t := uint32(v)
		s.Threaded = &t
	}
	if err := netlinkq.SetNAPI(id, s); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("NAPI instance %d no longer exists: %w", id, err)
		}
		return err
	}
	return nil
}
