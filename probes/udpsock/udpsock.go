// Package udpsock counts, in the kernel, the datagrams each UDP socket's
// owner read (sock:sock_recv_length), keyed by the socket's inode number so
// the counts join /proc/net/udp and /proc/PID/fd without kernel addresses.
// Only sockets of one network namespace, and optionally one local port, are
// counted.
package udpsock

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/perfscope/perfscope/probes"
)

// Hooks are the tracepoints this probe attaches to. sock_recv_length
// appeared in 6.6, sk_data_ready in 6.7 (optional: without it the socket
// counts stay and the CPU feeding each socket is unknown).
var Hooks = Spec.Hooks

// Options configure a probe.
type Options struct {
	Method probes.AttachMethod
	// Port counts only sockets bound to this local port (0: every port).
	Port uint16
	// Netns is the inode of the network namespace whose sockets are
	// counted (probes.NetnsInode); 0 means this process's own.
	Netns uint32

	// oneSlot maps every socket to one slot of the direct-mapped table, so
	// tests cover the hash it falls back to.
	oneSlot bool
}

// Probe is a loaded and attached udpsock probe.
type Probe struct {
	probes.Loaded
}

var _ probes.Snapshotter[Snapshot] = (*Probe)(nil)

// Reads is what one socket's owner read.
type Reads struct {
	// Datagrams counts recvmsg calls (one per datagram of a recvmmsg)
	// that returned a datagram; errors and MSG_PEEK reads are left out.
	Datagrams uint64
	// Bytes is what those calls returned.
	Bytes uint64
}

// Snapshot holds cumulative counts since the probe attached, summed over
// CPUs.
type Snapshot struct {
	Taken time.Time
	// Sockets maps a socket's inode number to its reads.
	Sockets map[uint64]Reads
	// Wakeups maps a socket's inode number to the data-ready wakeups per
	// CPU that queued the datagram: which CPUs' softirqs fed it. Nil when
	// the kernel lacks sock:sk_data_ready.
	Wakeups map[uint64]map[int]uint64
	// Lost counts reads and wakeups not counted because a map was full.
	Lost uint64
}

// Open loads the probe's BPF object and attaches it.
func Open(opts Options) (*Probe, error) {
	netns, err := probes.NetnsOrOwn(opts.Netns)
	if err != nil {
		return nil, fmt.Errorf("udpsock: %w", err)
	}
	spec, err := loadUdpsock()
	if err != nil {
		return nil, fmt.Errorf("load udpsock BPF spec: %w", err)
	}
	att, err := probes.LoadAndAttach(spec, Hooks, opts.Method, func(s *ebpf.CollectionSpec) error {
		vars := map[string]any{"target_port": opts.Port, "target_netns": netns}
		if opts.oneSlot {
			vars["slot_mask"] = uint32(0)
		}
		return probes.SetVariables(s, vars)
	})
	if err != nil {
		return nil, fmt.Errorf("udpsock probe: %w", err)
	}
	return &Probe{Loaded: loaded(att)}, nil
}

// Group is the probe's one hook group: reads and wakeups fire for every
// datagram.
const Group = "udpsock"

func loaded(att *probes.Attached) probes.Loaded {
	slots := map[string]uint32{
		Hooks[0].String(): uint32(udpsockUdpsockHookUDPSOCK_HOOK_RECV_LENGTH),
		Hooks[1].String(): uint32(udpsockUdpsockHookUDPSOCK_HOOK_DATA_READY),
	}
	g := att.Group(Group, probes.PerPacket, Hooks, nil)
	if g != nil {
		totals := att.Collection.Maps["totals"]
		g.Counts = func() (probes.GroupCounts, error) { return readTotals(totals) }
	}
	return probes.NewLoaded(att, slots, selfRuns, g)
}

// readTotals is the group's counts: the datagrams read from the counted
// sockets, and those read from any UDP socket of the namespace (the
// reads Udp/Udp6 InDatagrams count), both since the probe loaded.
func readTotals(m *ebpf.Map) (probes.GroupCounts, error) {
	n, err := probes.SumPerCPUCounters(m, int(udpsockUdpsockTotalUDPSOCK_TOTALS))
	if err != nil {
		return probes.GroupCounts{}, err
	}
	return probes.GroupCounts{Events: n[udpsockUdpsockTotalUDPSOCK_TOTAL_READS], InReference: n[udpsockUdpsockTotalUDPSOCK_TOTAL_NS_READS]}, nil
}

func selfRuns(v udpsockSelfCost) probes.SelfRuns {
	return probes.SelfRuns{Runs: v.Runs, TimedRuns: v.TimedRuns, TimedNs: v.TimedNs}
}

// Snapshot reads the cumulative counts.
func (p *Probe) Snapshot() (Snapshot, error) {
	s := Snapshot{Taken: time.Now(), Sockets: map[uint64]Reads{}}
	maps := p.Maps()
	raw, err := probes.ReadPerCPUHash[uint64, udpsockSockReads](maps["reads"])
	if err != nil {
		return s, err
	}
	add := func(ino uint64, v udpsockSockReads) {
		r := s.Sockets[ino]
		r.Datagrams += v.Datagrams
		r.Bytes += v.Bytes
		s.Sockets[ino] = r
	}
	for ino, perCPU := range raw {
		for _, v := range perCPU {
			add(ino, v)
		}
	}
	// The direct-mapped table holds most sockets' reads (see the BPF
	// file); a socket can be in a slot on one CPU and in the hash on
	// another.
	slots, err := probes.ReadPerCPUArray[udpsockSockSlot](maps["read_slots"])
	if err != nil {
		return s, err
	}
	for _, perCPU := range slots {
		for _, v := range perCPU {
			if v.Ino != 0 {
				add(v.Ino, v.Reads)
			}
		}
	}
	if _, missing := p.Missing()[Hooks[1].String()]; !missing {
		s.Wakeups = map[uint64]map[int]uint64{}
		addWake := func(ino uint64, cpu int, n uint64) {
			if n == 0 {
				return
			}
			if s.Wakeups[ino] == nil {
				s.Wakeups[ino] = map[int]uint64{}
			}
			s.Wakeups[ino][cpu] += n
		}
		for _, perCPU := range slots {
			for cpu, v := range perCPU {
				if v.Ino != 0 {
					addWake(v.Ino, cpu, v.Wakeups)
				}
			}
		}
		wake, err := probes.ReadPerCPUHash[uint64, uint64](maps["wakeups"])
		if err != nil {
			return s, err
		}
		for ino, perCPU := range wake {
			for cpu, n := range perCPU {
				addWake(ino, cpu, n)
			}
		}
	}
	lost, err := probes.SumPerCPUCounters(maps["lost"], int(udpsockUdpsockLostUDPSOCK_LOST_REASONS))
	if err != nil {
		return s, err
	}
	s.Lost = lost[udpsockUdpsockLostUDPSOCK_LOST_SOCKET] + lost[udpsockUdpsockLostUDPSOCK_LOST_WAKEUP]
	return s, nil
}

// Sub returns the reads between prev and s. A socket only in s was created
// (or first read) during the window; its whole count is in the window.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Taken: s.Taken, Sockets: map[uint64]Reads{}, Lost: s.Lost - prev.Lost}
	for ino, r := range s.Sockets {
		p := prev.Sockets[ino]
		if r.Datagrams > p.Datagrams {
			d.Sockets[ino] = Reads{Datagrams: r.Datagrams - p.Datagrams, Bytes: r.Bytes - p.Bytes}
		}
	}
	if s.Wakeups != nil {
		d.Wakeups = map[uint64]map[int]uint64{}
		for ino, byCPU := range s.Wakeups {
			for cpu, n := range byCPU {
				if p := prev.Wakeups[ino][cpu]; n > p {
					if d.Wakeups[ino] == nil {
						d.Wakeups[ino] = map[int]uint64{}
					}
					d.Wakeups[ino][cpu] = n - p
				}
			}
		}
	}
	return d
}
