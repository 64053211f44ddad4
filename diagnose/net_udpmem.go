package diagnose

import (
	"fmt"
	"math"
)

// UDPMemHeadroom: the pressure threshold of net.ipv4.udp_mem should be at
// least this many times the pages UDP sockets hold at peak.
const UDPMemHeadroom = 2

// udpMemChange scales all three udp_mem limits by one factor so that the
// pages in use are at most 1/UDPMemHeadroom of the new pressure threshold
// (at least doubling them).
func udpMemChange(old [3]int64, inUse int64) sysctlSetting {
	factor := math.Max(2, math.Ceil(float64(UDPMemHeadroom*inUse)/float64(max(old[1], 1))))
	value := func(v [3]int64) string { return fmt.Sprintf("%d %d %d", v[0], v[1], v[2]) }
	var scaled [3]int64
	for i, v := range old {
		scaled[i] = int64(float64(v) * factor)
	}
	o := value(old)
	return sysctlSetting{Key: "net.ipv4.udp_mem", Old: &o, New: value(scaled)}
}

// udpMemChanges: UDP's three memory limits.
var udpMemChanges = []ChangeShape{{Kind: ChangeSysctl, Target: "net.ipv4.udp_mem", Old: ThreeDecimals, New: ThreeDecimals}}

func checkUDPMemPressure(in NetInput) *Finding {
	e, c := in.Evidence, in.Config
	var memErrors uint64
	if s := e.Drops.UDPSNMP; s != nil {
		memErrors = s.UDP.MemErrors + s.UDP6.MemErrors
	}
	var inUse int64 = -1
	if e.Drops.UDPSockstat != nil {
		inUse = e.Drops.UDPSockstat.MemPages
	}
	var limits *[3]int64
	if c != nil {
		limits = c.Core.UDPMem
	}
	pressure := limits != nil && inUse >= 0 && inUse >= limits[1]
	if memErrors == 0 && !pressure {
		return nil
	}
	f := &Finding{Severity: Warn, Impact: 0.1}
	if memErrors > 0 {
		f.Title = fmt.Sprintf("%d UDP datagrams dropped because all UDP sockets together hit net.ipv4.udp_mem", memErrors)
		f.Evidence = append(f.Evidence, fmt.Sprintf("Udp/Udp6 MemErrors: %d in %.1f s (the `UDP: ... mem` drops of netstat -su)", memErrors, seconds(e.DurationNs)))
		if arrivals, ok := e.Drops.InDatagrams(); ok && arrivals+memErrors > 0 {
			f.Impact = math.Min(1, float64(memErrors)/float64(arrivals+memErrors))
		}
	} else {
		f.Severity = Info
		f.Title = "UDP sockets hold more memory than net.ipv4.udp_mem's pressure threshold: the kernel trims receive buffers, and drops at its maximum"
		f.Impact = 0.02
	}
	if inUse >= 0 && limits != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("/proc/net/sockstat UDP mem %d pages; udp_mem min %d, pressure %d, max %d pages", inUse, limits[0], limits[1], limits[2]))
	}
	r := &f.Recommendation
	r.Why = "net.ipv4.udp_mem caps the pages all UDP sockets of the host may hold together (min, pressure, max); above pressure each socket is held to its minimum, at max every datagram that needs memory is dropped (counted as MemErrors, not RcvbufErrors) whatever the socket's own SO_RCVBUF."
	r.Expected = fmt.Sprintf("No MemErrors at the same load: the pressure threshold at %d× the pages in use.", UDPMemHeadroom)
	r.Reference = "Linux kernel documentation, networking/ip-sysctl.rst (udp_mem)"
	r.Caveats = []string{"udp_mem is memory the kernel may pin for socket buffers: keep its maximum well below the host's RAM, and look for a reader that stopped reading (a socket with a full queue) before raising it."}
	if limits == nil {
		r.Kind = KindAdvice
		r.Apply = []string{"# read net.ipv4.udp_mem on the host and raise all three values"}
		if c != nil && c.Core.HostOnly {
			r.Caveats = append(r.Caveats, hostOnlyNote)
		}
		return f
	}
	settingOrAdvice(r, []sysctlSetting{udpMemChange(*limits, max(inUse, 0))}, false)
	return f
}
