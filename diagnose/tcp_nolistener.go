package diagnose

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// tcpNoListenerMin is the NO_SOCKET drops on one port below which the rule
// is silent: a port scan knocks once or twice per port, a client that
// keeps connecting to a port nobody serves knocks again and again.
const tcpNoListenerMin = 10

// checkNoListener fires when SYNs to a local port were dropped because no
// socket took them (skb:kfree_skb NO_SOCKET, counted per port) and no
// listener on that port was seen over the window: clients connect to a
// service that is down, still starting, or listening on another address
// or port.
func checkNoListener(in TCPInput) *Finding {
	ev := in.Evidence
	// "no listener" (on --port, or at all) is the listener section saying
	// it found none: the case this rule is for, not a read that failed.
	if ev.Drops.Unavailable != "" || (ev.Listeners.Unavailable != "" && !strings.HasPrefix(ev.Listeners.Unavailable, evidence.NoListenerFound)) {
		return nil
	}
	listening := map[int]bool{}
	for _, l := range ev.Listeners.Rows {
		listening[int(l.Local.Port())] = true
	}
	type port struct {
		port  int
		count uint64
	}
	var ports []port
	var total uint64
	for _, r := range ev.Drops.ByPort {
		if r.Reason != "NO_SOCKET" || r.Port == 0 || listening[r.Port] || r.Count < tcpNoListenerMin {
			continue
		}
		ports = append(ports, port{r.Port, r.Count})
		total += r.Count
	}
	if len(ports) == 0 {
		return nil
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].count > ports[j].count })
	names := make([]string, len(ports))
	f := &Finding{Severity: Warn, Impact: math.Min(1, float64(total)/float64(max(total+in.passiveOpens(), 1)))}
	for i, p := range ports {
		names[i] = fmt.Sprint(p.port)
		if i < 5 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("port %d: %s dropped with NO_SOCKET (skb:kfree_skb), no listener on it over the window", p.port, in.perSecond(p.count)))
		}
	}
	f.Title = fmt.Sprintf("%d TCP packets to port %s dropped: no socket listens there", total, strings.Join(names, ", "))
	r := &f.Recommendation
	r.Kind = KindAdvice
	r.Why = "The kernel found no socket for these segments (a SYN to a port nobody listens on is answered with a reset and freed with the drop reason NO_SOCKET): the clients' connections fail. The service is down or restarting, listens on another port or address (127.0.0.1 instead of 0.0.0.0, IPv6 only), or the clients are configured with the wrong port."
	r.Expected = "No NO_SOCKET drops on the port; the clients' connects succeed (Tcp AttemptFails on the clients down)."
	r.Reference = "RFC 9293 §3.10.7.1 (a segment to a CLOSED port is answered with a reset); the kernel's drop reasons, include/net/dropreason-core.h (SKB_DROP_REASON_NO_SOCKET); Brendan Gregg, tcpdrop (bcc tools)"
	r.Apply = []string{"ss -ltnp    # which ports and addresses have a listener, and whose", "start the service, or point its listen address or its clients at the same port"}
	return f
}

// passiveOpens is the window's accepted connections, 0 without counters.
func (in TCPInput) passiveOpens() uint64 {
	if w := in.window(); w != nil {
		return w.PassiveOpens
	}
	return 0
}
