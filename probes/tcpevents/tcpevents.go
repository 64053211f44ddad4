// Package tcpevents counts TCP retransmits and resets in the kernel, per
// connection, from the tcp tracepoints: tcp_retransmit_skb (with the kind
// of retransmit read from the socket: RTO, fast retransmit, tail loss
// probe, SYN), tcp_retransmit_synack, tcp_send_reset (with the kernel's
// reset reason since 6.10) and tcp_receive_reset. Only sockets of one
// network namespace, and of one local port when set, are counted.
package tcpevents

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// Hooks are the tracepoints this probe attaches to .
var Hooks = Spec.Hooks

// Event is what happened on a connection.
type Event uint32

const (
	Retransmit       = Event(tcpeventsTcpeventsEventTCPEV_RETRANSMIT)
	RetransmitSynAck = Event(tcpeventsTcpeventsEventTCPEV_RETRANSMIT_SYNACK)
	ResetSent        = Event(tcpeventsTcpeventsEventTCPEV_RESET_SENT)
	ResetReceived    = Event(tcpeventsTcpeventsEventTCPEV_RESET_RECEIVED)
	numEvents        = int(tcpeventsTcpeventsEventTCPEV_EVENTS)
)

// String names the event as the JSON and reports do.
func (e Event) String() string {
	switch e {
	case Retransmit:
		return "retransmit"
	case RetransmitSynAck:
		return "synack_retransmit"
	case ResetSent:
		return "reset_sent"
	case ResetReceived:
		return "reset_received"
	}
	return fmt.Sprintf("event(%d)", uint32(e))
}

// RetransmitKind is why a segment was retransmitted.
type RetransmitKind uint32

const (
	// KindOther: none of the below (the socket was in Open, Disorder or
	// CWR and no loss probe was due).
	KindOther = RetransmitKind(tcpeventsTcpeventsRtxKindTCPEV_RTX_OTHER)
	// KindRTO: the socket was in Loss: the retransmission timer expired,
	// or this is recovery after it.
	KindRTO = RetransmitKind(tcpeventsTcpeventsRtxKindTCPEV_RTX_RTO)
	// KindFast: the socket was in Recovery: fast retransmit after
	// duplicate ACKs, SACK or RACK.
	KindFast = RetransmitKind(tcpeventsTcpeventsRtxKindTCPEV_RTX_FAST)
	// KindTLP: the tail loss probe timer fired (RFC 8985).
	KindTLP = RetransmitKind(tcpeventsTcpeventsRtxKindTCPEV_RTX_TLP)
	// KindSYN: a SYN retransmitted (the socket was in SYN_SENT).
	KindSYN  = RetransmitKind(tcpeventsTcpeventsRtxKindTCPEV_RTX_SYN)
	numKinds = int(tcpeventsTcpeventsRtxKindTCPEV_RTX_KINDS)
)

// String names the kind.
func (k RetransmitKind) String() string {
	switch k {
	case KindOther:
		return "other"
	case KindRTO:
		return "rto"
	case KindFast:
		return "fast"
	case KindTLP:
		return "tlp"
	case KindSYN:
		return "syn"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// Key is one connection's events of one kind.
type Key struct {
	Local, Remote netip.AddrPort
	Event         Event
	// State is the socket's TCP state when it happened (tcpdiag.State
	// numbers; 12 is NEW_SYN_RECV, a request socket), 0 when a reset
	// answered a segment no socket owned.
	State uint8
	// Detail is the RetransmitKind of a Retransmit, the sk_rst_reason of
	// a ResetSent (0, NOT_SPECIFIED, before 6.10), 0 otherwise.
	Detail uint32
	// Err is what the transmit of a Retransmit returned (a negative
	// errno; 0 sent). The kernel reports failures since 6.10.
	Err int32
}

// Count is events and the segments they carried.
type Count struct {
	Events uint64 `json:"events"`
	Segs   uint64 `json:"segs"`
}

func (c Count) sub(prev Count) Count {
	return Count{Events: c.Events - prev.Events, Segs: c.Segs - prev.Segs}
}

// Snapshot holds cumulative counts since the probe attached, summed over
// CPUs.
type Snapshot struct {
	Taken time.Time
	// Conns are the counts per connection, event and kind.
	Conns map[Key]Count
	// Totals are per event, never lost; Kinds the retransmits per kind.
	Totals [numEvents]Count
	Kinds  [numKinds]Count
	// LostConns counts events not in Conns because its map was full (they
	// are in Totals).
	LostConns uint64
	// Feeds are, per TCP socket inode, the CPUs whose softirq queued data
	// on it (sock:sk_data_ready, 6.7+; nil without it), the least
	// recently fed evicted when the map is full; LostFeeds counts
	// deliveries not counted because no entry could be made.
	Feeds     map[uint64]Feed
	LostFeeds uint64
}

// Options configure a probe.
type Options struct {
	Method probes.AttachMethod
	// Port counts only this local port (0: every port).
	Port uint16
	// Netns is the inode of the network namespace whose sockets are
	// counted (probes.NetnsInode); 0 means this process's own.
	Netns uint32
}

// Probe is a loaded and attached tcpevents probe.
type Probe struct {
	probes.Loaded
	resetReasons map[uint32]string
}

var _ probes.Snapshotter[Snapshot] = (*Probe)(nil)

// Group is the probe's one hook group. Its hooks fire on losses and
// aborts, not per packet: class Rare, attached throughout even when the
// budget samples the batch groups, so its counts are exact.
const Group = "tcpevents"

// Open loads the probe's BPF object and attaches it.
func Open(opts Options) (*Probe, error) {
	spec, err := loadTcpevents()
	if err != nil {
		return nil, fmt.Errorf("load tcpevents BPF spec: %w", err)
	}
	kernel, err := probes.KernelTypes()
	if err != nil {
		return nil, probes.Classify("tcpevents: load kernel BTF", err)
	}
	reasons, err := ResetReasonNames(kernel)
	if err != nil {
		return nil, fmt.Errorf("tcpevents: %w", err)
	}
	netns, err := probes.NetnsOrOwn(opts.Netns)
	if err != nil {
		return nil, fmt.Errorf("tcpevents: %w", err)
	}
	vars := map[string]any{
		"target_port": opts.Port, "target_netns": netns,
		"retransmit_has_err":    tracepointArgs(kernel, "tcp_retransmit_skb") >= 3,
		"send_reset_has_reason": tracepointArgs(kernel, "tcp_send_reset") >= 3,
		"thread_size":           probes.KernelThreadSize(),
	}
	att, err := probes.LoadAndAttach(spec, Hooks, opts.Method, func(s *ebpf.CollectionSpec) error {
		return probes.SetVariables(s, vars)
	})
	if err != nil {
		return nil, fmt.Errorf("tcpevents probe: %w", err)
	}
	slots := map[string]uint32{
		hook("tcp_retransmit_skb"):    uint32(tcpeventsTcpeventsHookTCPEV_HOOK_RETRANSMIT_SKB),
		hook("tcp_retransmit_synack"): uint32(tcpeventsTcpeventsHookTCPEV_HOOK_RETRANSMIT_SYNACK),
		hook("tcp_send_reset"):        uint32(tcpeventsTcpeventsHookTCPEV_HOOK_SEND_RESET),
		hook("tcp_receive_reset"):     uint32(tcpeventsTcpeventsHookTCPEV_HOOK_RECEIVE_RESET),
		hook("sk_data_ready"):         uint32(tcpeventsTcpeventsHookTCPEV_HOOK_DATA_READY),
		hook("sock_recv_length"):      uint32(tcpeventsTcpeventsHookTCPEV_HOOK_RECV_LENGTH),
	}
	var events, feed []probes.Hook
	for _, h := range Hooks {
		if h.Name == "sk_data_ready" || h.Name == "sock_recv_length" {
			feed = append(feed, h)
		} else {
			events = append(events, h)
		}
	}
	loaded := probes.NewLoaded(att, slots, selfRuns, att.Group(Group, probes.Rare, events, nil),
		att.Group(FeedGroup, probes.PerPacket, feed, nil))
	return &Probe{Loaded: loaded, resetReasons: reasons}, nil
}

func hook(name string) string { return Spec.Hook(name).String() }

func selfRuns(v tcpeventsSelfCost) probes.SelfRuns {
	return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
}

// tracepointArgs is the number of arguments the kernel passes to the
// tracepoint (from btf_trace_<name>, without the leading context), 0 when
// BTF does not describe it.
func tracepointArgs(kernel *btf.Spec, name string) int {
	var td *btf.Typedef
	if err := kernel.TypeByName("btf_trace_"+name, &td); err != nil {
		return 0
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return 0
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok {
		return 0
	}
	return len(proto.Params) - 1
}

// ResetReasonNames reads enum sk_rst_reason from kernel BTF: value → name
// without the SK_RST_REASON_ prefix ("NO_SOCKET", "TCP_ABORT_ON_CLOSE").
// Empty before 6.10, which has no reasons.
func ResetReasonNames(kernel *btf.Spec) (map[uint32]string, error) {
	var e *btf.Enum
	if err := kernel.TypeByName("sk_rst_reason", &e); err != nil {
		if errors.Is(err, btf.ErrNotFound) {
			return map[uint32]string{}, nil
		}
		return nil, fmt.Errorf("find enum sk_rst_reason in kernel BTF: %w", err)
	}
	names := make(map[uint32]string, len(e.Values))
	for _, v := range e.Values {
		names[uint32(v.Value)] = strings.TrimPrefix(v.Name, "SK_RST_REASON_")
	}
	return names, nil
}

// ResetReason names a ResetSent key's Detail.
func (p *Probe) ResetReason(detail uint32) string {
	return reasonName(p.resetReasons, detail)
}

func reasonName(names map[uint32]string, detail uint32) string {
	if n, ok := names[detail]; ok {
		return n
	}
	return fmt.Sprintf("reason_%d", detail)
}

// Snapshot reads the cumulative counts.
func (p *Probe) Snapshot() (Snapshot, error) {
	s := Snapshot{Taken: time.Now(), Conns: map[Key]Count{}}
	maps := p.Maps()
	var k tcpeventsTcpEventKey
	var c tcpeventsTcpEventCount
	it := maps["conn_events"].Iterate()
	for it.Next(&k, &c) {
		s.Conns[keyOf(k)] = Count{Events: c.Events, Segs: c.Segs}
	}
	if err := it.Err(); err != nil {
		return s, fmt.Errorf("read conn_events: %w", err)
	}
	totals, err := probes.ReadPerCPUArray[tcpeventsTcpEventCount](maps["totals"])
	if err != nil {
		return s, err
	}
	for i := range min(len(totals), numEvents) {
		s.Totals[i] = sum(totals[i])
	}
	kinds, err := probes.ReadPerCPUArray[tcpeventsTcpEventCount](maps["rtx_kinds"])
	if err != nil {
		return s, err
	}
	for i := range min(len(kinds), numKinds) {
		s.Kinds[i] = sum(kinds[i])
	}
	lost, err := probes.SumPerCPUCounters(maps["lost"], int(tcpeventsTcpeventsLostTCPEV_LOSTS))
	if err != nil {
		return s, err
	}
	s.LostConns = lost[tcpeventsTcpeventsLostTCPEV_LOST_CONN]
	s.LostFeeds = lost[tcpeventsTcpeventsLostTCPEV_LOST_FEED]
	if _, missing := p.Missing()[hook("sk_data_ready")]; !missing {
		if s.Feeds, err = readFeeds(maps["feeds"]); err != nil {
			return s, err
		}
	}
	return s, nil
}

func keyOf(k tcpeventsTcpEventKey) Key {
	var local, remote netip.Addr
	switch k.Family {
	case unix.AF_INET:
		local, remote = netip.AddrFrom4([4]byte(k.Saddr[:4])), netip.AddrFrom4([4]byte(k.Daddr[:4]))
	case unix.AF_INET6:
		local, remote = netip.AddrFrom16(k.Saddr).Unmap(), netip.AddrFrom16(k.Daddr).Unmap()
	}
	return Key{Local: netip.AddrPortFrom(local, k.Sport), Remote: netip.AddrPortFrom(remote, k.Dport),
		Event: Event(k.Event), State: uint8(k.State), Detail: k.Detail, Err: k.Err}
}

func sum(perCPU []tcpeventsTcpEventCount) Count {
	var c Count
	for _, v := range perCPU {
		c.Events += v.Events
		c.Segs += v.Segs
	}
	return c
}

// Sub returns the counts accumulated between prev and s. Connections with
// no new events are left out.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Taken: s.Taken, Conns: map[Key]Count{}, LostConns: s.LostConns - prev.LostConns,
		LostFeeds: s.LostFeeds - prev.LostFeeds}
	if s.Feeds != nil {
		d.Feeds = subFeeds(s.Feeds, prev.Feeds)
	}
	for k, c := range s.Conns {
		if c.Events > prev.Conns[k].Events {
			d.Conns[k] = c.sub(prev.Conns[k])
		}
	}
	for i := range s.Totals {
		d.Totals[i] = s.Totals[i].sub(prev.Totals[i])
	}
	for i := range s.Kinds {
		d.Kinds[i] = s.Kinds[i].sub(prev.Kinds[i])
	}
	return d
}

// Total is the events of e.
func (s Snapshot) Total(e Event) Count { return s.Totals[e] }

// Kind is the retransmits of kind k.
func (s Snapshot) Kind(k RetransmitKind) Count { return s.Kinds[k] }
