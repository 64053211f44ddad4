// Package netqueue measures one device's network traffic per queue and per
// CPU from the kernel's side: NAPI polls and work per NAPI instance, packets
// and bytes per RX queue (net:netif_receive_skb) and per TX queue
// (net:net_dev_start_xmit), and qdisc enqueues/dequeues per TX queue. All
// counts are per CPU, so the caller gets the queue × CPU matrix directly.
// The device is named by its network namespace and ifindex, because an
// ifindex alone is ambiguous across namespaces (lo is 1 in every one).
package netqueue

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cilium/ebpf"

	"github.com/perfscope/perfscope/probes"
)

// ErrNoNAPI is why napi:napi_poll is not attached with Options.NoNAPI.
var ErrNoNAPI = errors.New("not attached: the device has no NAPI instance of its own (the netdev netlink family lists none)")

// Unrecorded is the RX queue of packets whose driver did not record one
// (skb_rx_queue_recorded() false: loopback, most virtual devices).
const Unrecorded = -1

// Hooks are the tracepoints this probe attaches to. napi:napi_poll and the
// qdisc tracepoints are younger or configurable, so they are optional: the
// probe still counts per-queue packets without them.
var Hooks = Spec.Hooks

// Options configure a probe.
type Options struct {
	// Method forces an attach method; MethodAuto picks the best available.
	Method probes.AttachMethod
	// Ifindex is the device to count (required). The per-CPU backlog NAPI
	// (ifindex 0) is always counted: it has no device.
	Ifindex int
	// Netns is the inode of the network namespace the device lives in
	// (probes.NetnsInode); 0 means this process's own.
	Netns uint32
	// NoNAPI says the device has no NAPI instance of its own (the netdev
	// netlink family lists none: lo, veth without GRO or XDP). napi_poll
	// is then not attached: on loopback it fires once per packet, for the
	// per-CPU backlog only, and Missing says why it is absent.
	NoNAPI bool
}

// Probe is a loaded and attached netqueue probe.
type Probe struct {
	probes.Loaded
	ifindex int
	noNAPI  bool
}

var _ probes.Snapshotter[Snapshot] = (*Probe)(nil)

// NoNAPI reports that napi:napi_poll was left out (Options.NoNAPI).
func (p *Probe) NoNAPI() bool { return p.noNAPI }

// NAPIKey names one NAPI instance. ID is 0 for the per-CPU backlog
// (process_backlog), which serves loopback, RPS and devices without NAPI;
// its Ifindex is 0.
type NAPIKey struct {
	ID      uint32
	Ifindex int
}

// NAPIStats counts NAPI polls on one CPU.
type NAPIStats struct {
	Polls uint64
	// Work is the number of packets the polls processed.
	Work uint64
	// BudgetExhausted counts polls that used their whole budget: packets
	// were still pending and the softirq had to come back for them.
	BudgetExhausted uint64
}

// QueueKey is one queue of one device. Queue is Unrecorded when the kernel
// did not record it.
type QueueKey struct {
	Ifindex int
	Queue   int
}

// Traffic is packets and bytes (skb->len) on one CPU.
type Traffic struct {
	Packets uint64
	Bytes   uint64
}

// QdiscStats counts qdisc activity for one TX queue on one CPU.
type QdiscStats struct {
	Enqueues uint64
	// Dequeues counts dequeue calls that returned packets; DequeuedPackets
	// the packets they returned (a bulk dequeue returns several).
	Dequeues        uint64
	DequeuedPackets uint64
}

// NAPIQueueKey is a NAPI instance seen delivering packets whose
// skb->queue_mapping was RawQueue (unchanged: a recorded RX queue N is N+1,
// 0 is "not recorded").
type NAPIQueueKey struct {
	NAPIID   uint32
	Ifindex  int
	RawQueue int
}

// Lost counts events not counted: RX, TX and Qdisc because the queue index
// was beyond the probe's per-queue arrays, NAPI and NAPIQueue because the
// NAPI hash was full.
type Lost struct {
	NAPI, RX, TX, Qdisc, NAPIQueue uint64
}

// Total is all lost events.
func (l Lost) Total() uint64 { return l.NAPI + l.RX + l.TX + l.Qdisc + l.NAPIQueue }

// Snapshot holds cumulative counters since the probe attached. Every slice
// value is indexed by CPU number.
type Snapshot struct {
	Taken time.Time
	NAPI  map[NAPIKey][]NAPIStats
	// RXRaw is RX traffic keyed by the raw skb->queue_mapping; RXQueues
	// turns it into queue numbers with the driver's convention.
	RXRaw map[QueueKey][]Traffic
	TX    map[QueueKey][]Traffic
	Qdisc map[QueueKey][]QdiscStats
	// NAPIQueues counts packets per (NAPI instance, raw queue_mapping),
	// summed over CPUs; see NAPIQueueMap.
	NAPIQueues map[NAPIQueueKey]uint64
	Lost       Lost
}

// Open loads the probe's BPF object and attaches it.
func Open(opts Options) (*Probe, error) {
	if opts.Ifindex <= 0 {
		return nil, fmt.Errorf("netqueue: ifindex %d is not a device", opts.Ifindex)
	}
	netns, err := probes.NetnsOrOwn(opts.Netns)
	if err != nil {
		return nil, fmt.Errorf("netqueue: %w", err)
	}
	spec, err := loadNetqueue()
	if err != nil {
		return nil, fmt.Errorf("load netqueue BPF spec: %w", err)
	}
	hooks := Hooks
	if opts.NoNAPI {
		hooks = Hooks[1:]
		probes.RemoveHookPrograms(spec, Hooks[0])
	}
	att, err := probes.LoadAndAttach(spec, hooks, opts.Method, func(s *ebpf.CollectionSpec) error {
		cpus, err := ebpf.PossibleCPU()
		if err != nil {
			return fmt.Errorf("count possible CPUs: %w", err)
		}
		return probes.SetVariables(s, map[string]any{"target_ifindex": int32(opts.Ifindex), "target_netns": netns, "possible_cpus": uint32(cpus)})
	})
	if err != nil {
		return nil, fmt.Errorf("netqueue probe: %w", err)
	}
	if opts.NoNAPI {
		att.Missing[Hooks[0].String()] = ErrNoNAPI
	}
	return &Probe{Loaded: loaded(att), ifindex: opts.Ifindex, noNAPI: opts.NoNAPI}, nil
}

// The probe's hook groups: NAPI polls are batch events (one per poll of up
// to 64 packets); receive, transmit and qdisc fire for every packet.
const (
	GroupNAPI    = "netqueue/napi"
	GroupPackets = "netqueue/packets"
)

func loaded(att *probes.Attached) probes.Loaded {
	slots := map[string]uint32{
		Hooks[0].String(): uint32(netqueueNetqueueHookNETQUEUE_HOOK_NAPI_POLL),
		Hooks[1].String(): uint32(netqueueNetqueueHookNETQUEUE_HOOK_RECEIVE),
		Hooks[2].String(): uint32(netqueueNetqueueHookNETQUEUE_HOOK_XMIT),
		Hooks[3].String(): uint32(netqueueNetqueueHookNETQUEUE_HOOK_QDISC_ENQUEUE),
		Hooks[4].String(): uint32(netqueueNetqueueHookNETQUEUE_HOOK_QDISC_DEQUEUE),
	}
	return probes.NewLoaded(att, slots, selfRuns,
		att.Group(GroupNAPI, probes.Batch, Hooks[:1], nil),
		att.Group(GroupPackets, probes.PerPacket, Hooks[1:], nil))
}

func selfRuns(v netqueueSelfCost) probes.SelfRuns {
	return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
}

// Snapshot reads the cumulative counters of every CPU.
func (p *Probe) Snapshot() (Snapshot, error) {
	s := Snapshot{Taken: time.Now(), NAPIQueues: map[NAPIQueueKey]uint64{}}
	maps := p.Maps()
	napi, err := probes.ReadPerCPUHash[netqueueNapiKey, netqueueNapiStat](maps["napi_stats"])
	if err != nil {
		return s, err
	}
	napiStats := func(v netqueueNapiStat) NAPIStats {
		return NAPIStats{Polls: v.Polls, Work: v.Work, BudgetExhausted: v.BudgetExhausted}
	}
	s.NAPI = convert(napi, func(k netqueueNapiKey) NAPIKey { return NAPIKey{ID: k.NapiId, Ifindex: int(k.Ifindex)} }, napiStats)
	backlog, err := queueArray(maps["backlog_stats"], 0, napiStats)
	if err != nil {
		return s, err
	}
	if perCPU, ok := backlog[QueueKey{}]; ok {
		s.NAPI[NAPIKey{}] = perCPU
	}
	traffic := func(v netqueueTrafficStat) Traffic { return Traffic{Packets: v.Packets, Bytes: v.Bytes} }
	for name, dst := range map[string]*map[QueueKey][]Traffic{"rx_stats": &s.RXRaw, "tx_stats": &s.TX} {
		if *dst, err = queueArray(maps[name], p.ifindex, traffic); err != nil {
			return s, err
		}
	}
	s.Qdisc, err = queueArray(maps["qdisc_stats"], p.ifindex, func(v netqueueQdiscStat) QdiscStats {
		return QdiscStats{Enqueues: v.Enqueues, Dequeues: v.Dequeues, DequeuedPackets: v.DequeuedPackets}
	})
	if err != nil {
		return s, err
	}
	nq, err := probes.ReadPerCPUHash[netqueueNapiQueueKey, uint64](maps["napi_queues"])
	if err != nil {
		return s, err
	}
	for k, perCPU := range nq {
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		s.NAPIQueues[NAPIQueueKey{NAPIID: k.NapiId, Ifindex: int(k.Ifindex), RawQueue: int(k.RawQueue)}] = n
	}
	lost, err := probes.SumPerCPUCounters(maps["lost"], int(netqueueNetqueueLostNETQUEUE_LOST_REASONS))
	if err != nil {
		return s, err
	}
	s.Lost = Lost{
		NAPI:      lost[netqueueNetqueueLostNETQUEUE_LOST_NAPI],
		RX:        lost[netqueueNetqueueLostNETQUEUE_LOST_RX],
		TX:        lost[netqueueNetqueueLostNETQUEUE_LOST_TX],
		Qdisc:     lost[netqueueNetqueueLostNETQUEUE_LOST_QDISC],
		NAPIQueue: lost[netqueueNetqueueLostNETQUEUE_LOST_NAPI_QUEUE],
	}
	return s, nil
}

// queueArray reads a per-queue per-CPU array into per-queue values of the
// device, leaving out queues no CPU counted anything on.
func queueArray[V comparable, OV any](m *ebpf.Map, ifindex int, val func(V) OV) (map[QueueKey][]OV, error) {
	slots, err := probes.ReadPerCPUArray[V](m)
	if err != nil {
		return nil, err
	}
	out := map[QueueKey][]OV{}
	var zero V
	for q, perCPU := range slots {
		used := false
		for _, v := range perCPU {
			used = used || v != zero
		}
		if !used {
			continue
		}
		o := make([]OV, len(perCPU))
		for cpu, v := range perCPU {
			o[cpu] = val(v)
		}
		out[QueueKey{Ifindex: ifindex, Queue: q}] = o
	}
	return out, nil
}

// QueueConvention is how a driver leaves skb->queue_mapping on received
// packets.
type QueueConvention int

const (
	// RecordedPlusOne: the driver calls skb_record_rx_queue(), storing
	// queue + 1; 0 means not recorded (NIC drivers, virtio_net; loopback
	// records nothing).
	RecordedPlusOne QueueConvention = iota
	// PeerTXQueue: veth records nothing but leaves the peer's TX queue in
	// queue_mapping, and delivers TX queue N to its RX queue N.
	PeerTXQueue
)

// ConventionFor is the convention of a driver (as `ethtool -i` names it).
func ConventionFor(driver string) QueueConvention {
	if driver == "veth" {
		return PeerTXQueue
	}
	return RecordedPlusOne
}

// Queue turns a raw queue_mapping into an RX queue number or Unrecorded.
func (c QueueConvention) Queue(raw int) int {
	if c == PeerTXQueue {
		return raw
	}
	if raw == 0 {
		return Unrecorded
	}
	return raw - 1
}

// RXQueues is the RX traffic of one device per queue (Unrecorded for
// packets without a queue) and CPU.
func (s Snapshot) RXQueues(ifindex int, conv QueueConvention) map[int][]Traffic {
	out := map[int][]Traffic{}
	for k, perCPU := range s.RXRaw {
		if k.Ifindex != ifindex {
			continue
		}
		q := conv.Queue(k.Queue)
		if prev, ok := out[q]; ok {
			for cpu := range perCPU {
				if cpu < len(prev) {
					prev[cpu].Packets += perCPU[cpu].Packets
					prev[cpu].Bytes += perCPU[cpu].Bytes
				}
			}
			continue
		}
		out[q] = append([]Traffic(nil), perCPU...)
	}
	return out
}

func convert[K, OK comparable, V, OV any](in map[K][]V, key func(K) OK, val func(V) OV) map[OK][]OV {
	out := make(map[OK][]OV, len(in))
	for k, vs := range in {
		o := make([]OV, len(vs))
		for i, v := range vs {
			o[i] = val(v)
		}
		out[key(k)] = o
	}
	return out
}

// Sub returns the counters accumulated between prev and s.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Taken: s.Taken, NAPIQueues: map[NAPIQueueKey]uint64{}}
	d.NAPI = probes.SubPerCPU(s.NAPI, prev.NAPI, func(a, b NAPIStats) NAPIStats {
		return NAPIStats{Polls: a.Polls - b.Polls, Work: a.Work - b.Work, BudgetExhausted: a.BudgetExhausted - b.BudgetExhausted}
	})
	subTraffic := func(a, b Traffic) Traffic { return Traffic{Packets: a.Packets - b.Packets, Bytes: a.Bytes - b.Bytes} }
	d.RXRaw = probes.SubPerCPU(s.RXRaw, prev.RXRaw, subTraffic)
	d.TX = probes.SubPerCPU(s.TX, prev.TX, subTraffic)
	d.Qdisc = probes.SubPerCPU(s.Qdisc, prev.Qdisc, func(a, b QdiscStats) QdiscStats {
		return QdiscStats{Enqueues: a.Enqueues - b.Enqueues, Dequeues: a.Dequeues - b.Dequeues, DequeuedPackets: a.DequeuedPackets - b.DequeuedPackets}
	})
	for k, v := range s.NAPIQueues {
		d.NAPIQueues[k] = v - prev.NAPIQueues[k]
	}
	d.Lost = Lost{
		NAPI: s.Lost.NAPI - prev.Lost.NAPI, RX: s.Lost.RX - prev.Lost.RX, TX: s.Lost.TX - prev.Lost.TX,
		Qdisc: s.Lost.Qdisc - prev.Lost.Qdisc, NAPIQueue: s.Lost.NAPIQueue - prev.Lost.NAPIQueue,
	}
	return d
}

// Sum adds up per-CPU values.
func Sum[V any](perCPU []V, add func(a, b V) V) V {
	var total V
	for _, v := range perCPU {
		total = add(total, v)
	}
	return total
}

// NAPITotal is one NAPI instance's counters summed over CPUs.
func NAPITotal(perCPU []NAPIStats) NAPIStats {
	return Sum(perCPU, func(a, b NAPIStats) NAPIStats {
		return NAPIStats{Polls: a.Polls + b.Polls, Work: a.Work + b.Work, BudgetExhausted: a.BudgetExhausted + b.BudgetExhausted}
	})
}

// TrafficTotal is one queue's traffic summed over CPUs.
func TrafficTotal(perCPU []Traffic) Traffic {
	return Sum(perCPU, func(a, b Traffic) Traffic { return Traffic{Packets: a.Packets + b.Packets, Bytes: a.Bytes + b.Bytes} })
}

// ErrNoNAPIQueueEvidence means no packet carried a NAPI id during the
// window, so the RX traffic cannot map NAPI instances to queues.
var ErrNoNAPIQueueEvidence = errors.New("no packet of the device carried a NAPI id in this window")

// NAPIQueueGuess maps one NAPI instance to the RX queue whose packets it
// delivered most, from the in-kernel NAPIQueues counts.
type NAPIQueueGuess struct {
	NAPIID uint32
	// Queue is the RX queue under the driver's convention (Unrecorded
	// when the driver recorded none: then only the NAPI id names it).
	Queue int
	// Share is the fraction of the NAPI instance's packets that carried
	// that queue (1.0 for a clean one-to-one mapping).
	Share float64
}

// NAPIQueueMap is the fallback NAPI id → RX queue mapping for a device,
// for kernels or drivers whose netdev netlink family lists no queue→NAPI
// mapping. It is measured, not guessed from CPU placement: GRO stamps each
// skb with the NAPI id that received it (skb->napi_id), and the probe counts
// (napi id, queue_mapping) pairs at netif_receive_skb. Only ids that also
// appear as polling NAPI instances count (the same skb field holds the
// sender CPU on other paths).
func (s Snapshot) NAPIQueueMap(ifindex int, conv QueueConvention) ([]NAPIQueueGuess, error) {
	polled := map[uint32]bool{}
	for k := range s.NAPI {
		if k.Ifindex == ifindex && k.ID != 0 {
			polled[k.ID] = true
		}
	}
	byNAPI := map[uint32]map[int]uint64{}
	for k, n := range s.NAPIQueues {
		if k.Ifindex != ifindex || !polled[k.NAPIID] || n == 0 {
			continue
		}
		if byNAPI[k.NAPIID] == nil {
			byNAPI[k.NAPIID] = map[int]uint64{}
		}
		byNAPI[k.NAPIID][k.RawQueue] += n
	}
	if len(byNAPI) == 0 {
		return nil, ErrNoNAPIQueueEvidence
	}
	var out []NAPIQueueGuess
	for id, queues := range byNAPI {
		var total, best uint64
		bestRaw := 0
		for raw, n := range queues {
			total += n
			if n > best || (n == best && raw < bestRaw) {
				best, bestRaw = n, raw
			}
		}
		out = append(out, NAPIQueueGuess{NAPIID: id, Queue: conv.Queue(bestRaw), Share: float64(best) / float64(total)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NAPIID < out[j].NAPIID })
	return out, nil
}

// How a NAPI → RX queue mapping was obtained.
const (
	// MappedByNetlink: the driver reports it (netdev netlink
	// NETDEV_CMD_QUEUE_GET, Linux 6.8+).
	MappedByNetlink = "netlink"
	// MappedBySkbNAPIID: measured in this window from the NAPI id GRO
	// stamps on each packet (see NAPIQueueMap).
	MappedBySkbNAPIID = "skb-napi-id"
)

// ResolveNAPIQueues returns the NAPI id → RX queue mapping of a device and
// how it was obtained: the driver's own (netlink, from
// netlinkq.QueueNAPI) when it reported any, else the one measured in d.
// NAPI instances whose queue is Unrecorded are left out.
func ResolveNAPIQueues(netlink map[uint32]int, d Snapshot, ifindex int, conv QueueConvention) (map[uint32]int, string, error) {
	if len(netlink) > 0 {
		return netlink, MappedByNetlink, nil
	}
	guesses, err := d.NAPIQueueMap(ifindex, conv)
	if err != nil {
		return nil, "", err
	}
	out := map[uint32]int{}
	for _, g := range guesses {
		if g.Queue != Unrecorded {
			out[g.NAPIID] = g.Queue
		}
	}
	return out, MappedBySkbNAPIID, nil
}
