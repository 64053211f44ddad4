package evidence

import (
	"fmt"
	"sort"
	"strings"
)

// UDPCounter sums one SNMP counter over Udp and Udp6 (when read), e.g.
// d.UDPCounter(func(c UDPCounters) uint64 { return c.RcvbufErrors }).
// ok is false when SNMP was not read.
func (d DropSection) UDPCounter(get func(UDPCounters) uint64) (n uint64, ok bool) {
	if d.UDPSNMP == nil {
		return 0, false
	}
	n = get(d.UDPSNMP.UDP)
	if d.UDPSNMP.UDP6Known {
		n += get(d.UDPSNMP.UDP6)
	}
	return n, true
}

// RcvbufErrors is Udp + Udp6 RcvbufErrors: datagrams dropped because a
// socket's receive buffer was full.
func (d DropSection) RcvbufErrors() (uint64, bool) {
	return d.UDPCounter(func(c UDPCounters) uint64 { return c.RcvbufErrors })
}

// InDatagrams is Udp + Udp6 InDatagrams: datagrams delivered to sockets.
func (d DropSection) InDatagrams() (uint64, bool) {
	return d.UDPCounter(func(c UDPCounters) uint64 { return c.InDatagrams })
}

// NetRXShare is the fraction of one CPU's time spent in NET_RX softirq.
func (c SoftirqCPU) NetRXShare() float64 { return c.Vectors["NET_RX"].Share }

// Group returns the profile's share of a KernelGroup by name.
func (p ProfileSection) Group(name string) (FunctionShare, bool) {
	for _, g := range p.Groups {
		if g.Group == name {
			return g, true
		}
	}
	return FunctionShare{}, false
}

// NetRXBusyShare is the share of a CPU's time in NET_RX from which the CPU
// does receive work. It is the one definition of "NET_RX CPUs": the udp
// report splits its profile by it and the network rules judge by it, so
// the two never disagree about a CPU.
const NetRXBusyShare = 0.05

// NetRXCPUs are the CPUs doing receive work, in CPU order: those spending
// at least NetRXBusyShare of the window in NET_RX. When none does (a light
// load), it is the busiest CPU that ran NET_RX at all, so a profile still
// has a receive side; none when no CPU ran NET_RX.
func (s SoftirqEvidence) NetRXCPUs() []int {
	var out []int
	best, bestShare := -1, 0.0
	for _, c := range s.CPUs {
		sh := c.NetRXShare()
		if sh >= NetRXBusyShare {
			out = append(out, c.CPU)
		}
		if sh > bestShare {
			best, bestShare = c.CPU, sh
		}
	}
	if len(out) == 0 && best >= 0 {
		out = []int{best}
	}
	sort.Ints(out)
	return out
}

// OnPort is the datagrams dropped on a local port and the reasons with
// their counts ("kfree_skb:SOCKET_RCVBUFF 12"), sorted. The rules and the
// tests read a port's drops through it, so both count a drop once.
func (d DropSection) OnPort(port int) (n uint64, reasons []string) {
	byReason := map[string]uint64{}
	// One drop can be seen by several tracepoints ("udp_fail_queue_rcv_skb:
	// ENOMEM" and "kfree_skb:SOCKET_RCVBUFF" for the same datagram): sum
	// within a source, take the largest source.
	bySource := map[string]uint64{}
	for _, p := range d.ByPort {
		if p.Port == port {
			source, _, _ := strings.Cut(p.Reason, ":")
			bySource[source] += p.Count
			byReason[p.Reason] += p.Count
		}
	}
	for _, c := range bySource {
		n = max(n, c)
	}
	for r, c := range byReason {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, c))
	}
	sort.Strings(reasons)
	return n, reasons
}
