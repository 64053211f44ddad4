// Package udpdrop counts UDP receive drops in the kernel, per local port and
// per reason, with one BPF handler per dropped datagram: skb:kfree_skb
// counts every dropped skb by the kernel's own drop reason (named from the
// running kernel's BTF) and, since 6.12, names the receiving socket, hence
// its port; older kernels get the port from udp:udp_fail_queue_rcv_skb.
// Per-port counts are restricted to UDP sockets of one network namespace.
package udpdrop

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// The tracepoints this probe can attach to. udp_fail_queue_rcv_skb appeared
// in 5.x and kfree_skb's reason in 5.17, so both are optional: the probe
// reports what the kernel offers and Missing says what it lacks.
var (
	failQueueHook = Spec.Hook("udp_fail_queue_rcv_skb")
	kfreeSkbHook  = Spec.Hook("kfree_skb")
)

// HooksFor are the hooks attached on a kernel: kfree_skb alone when it
// names the receiving socket (6.12+, see the BPF file's header), else
// udp_fail_queue_rcv_skb for ports and kfree_skb for reasons.
func HooksFor(kfreeHasRxSk bool) []probes.Hook {
	if kfreeHasRxSk {
		return []probes.Hook{kfreeSkbHook}
	}
	return []probes.Hook{failQueueHook, kfreeSkbHook}
}

// Kind is the tracepoint that saw a drop.
type Kind uint32

const (
	// FailQueueRcv: udp:udp_fail_queue_rcv_skb; Reason is the errno
	// (ENOMEM: receive buffer full, counted as RcvbufErrors).
	FailQueueRcv = Kind(udpdropUdpdropKindUDPDROP_FAIL_QUEUE_RCV)
	// KfreeSkb: skb:kfree_skb; Reason is an skb_drop_reason value.
	KfreeSkb = Kind(udpdropUdpdropKindUDPDROP_KFREE_SKB)
)

// String is the tracepoint's name.
func (k Kind) String() string {
	switch k {
	case FailQueueRcv:
		return "udp_fail_queue_rcv_skb"
	case KfreeSkb:
		return "kfree_skb"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// The protocols of PortKey.Proto.
const (
	ProtoUDP = unix.IPPROTO_UDP
	ProtoTCP = unix.IPPROTO_TCP
)

// PortKey is one local port's drops of one protocol, kind and reason.
// Family 0 means the tracepoint did not say (classic udp_fail_queue_rcv_skb
// before 6.10). A TCP drop's Port is 0 when it could not be attributed to a
// local port (the BPF file's header says which those are).
type PortKey struct {
	Port   uint16
	Family uint16 // unix.AF_INET or unix.AF_INET6
	Kind   Kind
	Reason uint32
	Proto  uint32 // ProtoUDP or ProtoTCP
}

// Lost counts drops not counted because a map was full.
type Lost struct {
	Port, Reason uint64
}

// Snapshot holds cumulative counts since the probe attached, summed over
// CPUs.
type Snapshot struct {
	Taken time.Time
	Ports map[PortKey]uint64
	// Reasons counts every dropped skb (any protocol) by skb_drop_reason.
	Reasons map[uint32]uint64
	Lost    Lost
}

// Options configure a probe.
type Options struct {
	Method probes.AttachMethod
	// Port counts only this local port in Ports (0: every port).
	Port uint16
	// Netns is the inode of the network namespace whose sockets are
	// counted in Ports (probes.NetnsInode); 0 means this process's own.
	Netns uint32

	// preRxSk makes the probe behave as on kernels before 6.12 (ports
	// from udp_fail_queue_rcv_skb), so tests cover that path here.
	preRxSk bool
}

// Probe is a loaded and attached udpdrop probe.
type Probe struct {
	probes.Loaded
	reasons map[uint32]string
	port    uint16
}

var _ probes.Snapshotter[Snapshot] = (*Probe)(nil)

// Open loads the probe's BPF object and attaches it.
func Open(opts Options) (*Probe, error) {
	spec, err := loadUdpdrop()
	if err != nil {
		return nil, fmt.Errorf("load udpdrop BPF spec: %w", err)
	}
	kernel, err := probes.KernelTypes()
	if err != nil {
		return nil, probes.Classify("udpdrop: load kernel BTF", err)
	}
	reasons, err := DropReasonNames(kernel)
	if err != nil {
		return nil, fmt.Errorf("udpdrop: %w", err)
	}
	netns, err := probes.NetnsOrOwn(opts.Netns)
	if err != nil {
		return nil, fmt.Errorf("udpdrop: %w", err)
	}
	hasRxSk := kfreeSkbHasRxSk(kernel) && !opts.preRxSk
	if hasRxSk {
		probes.RemoveHookPrograms(spec, failQueueHook)
	}
	att, err := probes.LoadAndAttach(spec, HooksFor(hasRxSk), opts.Method, func(s *ebpf.CollectionSpec) error {
		return probes.SetVariables(s, map[string]any{"target_port": opts.Port, "target_netns": netns, "kfree_skb_has_rx_sk": hasRxSk})
	})
	if err != nil {
		return nil, fmt.Errorf("udpdrop probe: %w", err)
	}
	if n := att.Collection.Maps["target_port_drops"].MaxEntries(); n != 2*familySlots*reasonSlots {
		att.Close()
		return nil, fmt.Errorf("udpdrop: target_port_drops has %d slots, the decoder expects %d", n, 2*familySlots*reasonSlots)
	}
	return &Probe{Loaded: loaded(att), reasons: reasons, port: opts.Port}, nil
}

// Group is the probe's one hook group: on a socket that drops, kfree_skb
// fires for every dropped datagram.
const Group = "udpdrop"

func loaded(att *probes.Attached) probes.Loaded {
	slots := map[string]uint32{
		failQueueHook.String(): uint32(udpdropUdpdropHookUDPDROP_HOOK_FAIL_QUEUE_RCV),
		kfreeSkbHook.String():  uint32(udpdropUdpdropHookUDPDROP_HOOK_KFREE_SKB),
	}
	return probes.NewLoaded(att, slots, selfRuns, att.Group(Group, probes.PerPacket, []probes.Hook{failQueueHook, kfreeSkbHook}, nil))
}

func selfRuns(v udpdropSelfCost) probes.SelfRuns {
	return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
}

// kfreeSkbHasRxSk reports whether trace_kfree_skb passes the receiving
// socket (6.12+): btf_trace_kfree_skb(void *, skb, location, reason, rx_sk).
func kfreeSkbHasRxSk(kernel *btf.Spec) bool {
	var td *btf.Typedef
	if err := kernel.TypeByName("btf_trace_kfree_skb", &td); err != nil {
		return false
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return false
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	return ok && len(proto.Params) >= 5
}

// DropReasonNames reads enum skb_drop_reason from kernel BTF: value → name
// without the SKB_DROP_REASON_ prefix ("SOCKET_RCVBUFF", "NO_SOCKET").
func DropReasonNames(kernel *btf.Spec) (map[uint32]string, error) {
	var e *btf.Enum
	if err := kernel.TypeByName("skb_drop_reason", &e); err != nil {
		if errors.Is(err, btf.ErrNotFound) {
			return map[uint32]string{}, nil // kernel < 5.17: no reasons
		}
		return nil, fmt.Errorf("find enum skb_drop_reason in kernel BTF: %w", err)
	}
	names := make(map[uint32]string, len(e.Values))
	for _, v := range e.Values {
		names[uint32(v.Value)] = strings.TrimPrefix(v.Name, "SKB_DROP_REASON_")
	}
	return names, nil
}

// ReasonName names a drop reason of kind: the skb_drop_reason for KfreeSkb,
// the errno for FailQueueRcv ("ENOMEM").
func (p *Probe) ReasonName(kind Kind, reason uint32) string {
	return reasonName(p.reasons, kind, reason)
}

func reasonName(names map[uint32]string, kind Kind, reason uint32) string {
	switch kind {
	case KfreeSkb:
		if n, ok := names[reason]; ok {
			return n
		}
		return fmt.Sprintf("reason_%d", reason)
	case FailQueueRcv:
		if n := unix.ErrnoName(unix.Errno(reason)); n != "" {
			return n
		}
		return fmt.Sprintf("errno_%d", reason)
	}
	return ""
}

// Snapshot reads the cumulative counts.
func (p *Probe) Snapshot() (Snapshot, error) {
	s := Snapshot{Taken: time.Now(), Ports: map[PortKey]uint64{}, Reasons: map[uint32]uint64{}}
	maps := p.Maps()
	ports, err := probes.ReadPerCPUHash[udpdropPortDropKey, uint64](maps["port_drops"])
	if err != nil {
		return s, err
	}
	for k, perCPU := range ports {
		s.Ports[PortKey{Port: k.Port, Family: k.Family, Kind: Kind(k.Kind), Reason: k.Reason, Proto: k.Proto}] = sum(perCPU)
	}
	if p.port != 0 {
		target, err := probes.ReadPerCPUArray[uint64](maps["target_port_drops"])
		if err != nil {
			return s, err
		}
		for idx, perCPU := range target {
			if n := sum(perCPU); n > 0 {
				s.Ports[targetPortKey(p.port, idx)] += n
			}
		}
	}
	core, err := probes.ReadPerCPUArray[uint64](maps["reason_drops"])
	if err != nil {
		return s, err
	}
	for r, perCPU := range core {
		if n := sum(perCPU); n > 0 {
			s.Reasons[uint32(r)] = n
		}
	}
	subsys, err := probes.ReadPerCPUHash[uint32, uint64](maps["subsys_reason_drops"])
	if err != nil {
		return s, err
	}
	for r, perCPU := range subsys {
		s.Reasons[r] = sum(perCPU)
	}
	lost, err := probes.SumPerCPUCounters(maps["lost"], int(udpdropUdpdropLostUDPDROP_LOST_REASONS))
	if err != nil {
		return s, err
	}
	s.Lost = Lost{Port: lost[udpdropUdpdropLostUDPDROP_LOST_PORT], Reason: lost[udpdropUdpdropLostUDPDROP_LOST_REASON]}
	return s, nil
}

// Layout of the target_port_drops array (udpdrop.bpf.c, count_port).
const (
	reasonSlots = 512
	familySlots = 3
)

var slotFamilies = [familySlots]uint16{0, unix.AF_INET, unix.AF_INET6}

// targetPortKey decodes an index of the target port's array.
func targetPortKey(port uint16, idx int) PortKey {
	kind := FailQueueRcv
	if idx/(familySlots*reasonSlots) == 1 {
		kind = KfreeSkb
	}
	return PortKey{Port: port, Family: slotFamilies[idx/reasonSlots%familySlots], Kind: kind, Reason: uint32(idx % reasonSlots), Proto: unix.IPPROTO_UDP}
}

func sum(perCPU []uint64) (n uint64) {
	for _, v := range perCPU {
		n += v
	}
	return n
}

// Sub returns the counts accumulated between prev and s. Entries with no
// new drops are left out.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Taken: s.Taken, Ports: map[PortKey]uint64{}, Reasons: map[uint32]uint64{}}
	for k, n := range s.Ports {
		if n > prev.Ports[k] {
			d.Ports[k] = n - prev.Ports[k]
		}
	}
	for r, n := range s.Reasons {
		if n > prev.Reasons[r] {
			d.Reasons[r] = n - prev.Reasons[r]
		}
	}
	d.Lost = Lost{Port: s.Lost.Port - prev.Lost.Port, Reason: s.Lost.Reason - prev.Lost.Reason}
	return d
}

// PortTotal is the UDP drops of one port and kind over every reason and
// family.
func (s Snapshot) PortTotal(port uint16, kind Kind) uint64 {
	var n uint64
	for k, v := range s.Ports {
		if k.Port == port && k.Kind == kind && k.Proto == unix.IPPROTO_UDP {
			n += v
		}
	}
	return n
}

// TCPPortTotal is the TCP drops of one port (0: those not attributable to
// a port) by reason, over both families.
func (s Snapshot) TCPPortTotal(port uint16) map[uint32]uint64 {
	n := map[uint32]uint64{}
	for k, v := range s.Ports {
		if k.Port == port && k.Proto == unix.IPPROTO_TCP {
			n[k.Reason] += v
		}
	}
	return n
}
