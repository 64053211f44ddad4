package evidence

import "github.com/perfscope/perfscope/collectors/netstat"

// UDPCounter sums one SNMP counter over Udp and Udp6 (when read), e.g.
// d.UDPCounter(func(c netstat.UDPCounters) uint64 { return c.RcvbufErrors }).
// ok is false when SNMP was not read.
func (d DropSection) UDPCounter(get func(netstat.UDPCounters) uint64) (n uint64, ok bool) {
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
	return d.UDPCounter(func(c netstat.UDPCounters) uint64 { return c.RcvbufErrors })
}

// InDatagrams is Udp + Udp6 InDatagrams: datagrams delivered to sockets.
func (d DropSection) InDatagrams() (uint64, bool) {
	return d.UDPCounter(func(c netstat.UDPCounters) uint64 { return c.InDatagrams })
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
