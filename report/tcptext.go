package report

import (
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// writeTCPSummary prints the TCP layer's first screen: the accept queues
// and the counters that say where connections were refused or dropped.
func writeTCPSummary(w io.Writer, t *evidence.TCPEvidence) {
	if t.Netns != "" {
		fmt.Fprintf(w, "\nTCP read in the network namespace of pid %d (%s): its listeners, connections, counters, sysctls and events; --iface's sections are perfscope's namespace's\n", t.PID, t.Netns)
	}
	Heading(w, "TCP listeners (accept queues, sampled)")
	writeListeners(w, t.Listeners)

	Heading(w, "TCP over the window (Tcp/TcpExt counters of this namespace)")
	if !unavailable(w, t.Counters.Section) {
		c := t.Counters.Window
		secs := time.Duration(t.DurationNs).Seconds()
		rate := func(n uint64) string {
			if secs <= 0 {
				return fmt.Sprint(n)
			}
			return fmt.Sprintf("%d (%s/s)", n, Count(float64(n)/secs))
		}
		ct := Table{Header: []string{"what", "count", "counters"}}
		ct.Add("connections accepted", rate(c.PassiveOpens), "PassiveOpens")
		ct.Add("accept queue full", rate(c.ListenOverflows), "ListenOverflows")
		ct.Add("SYNs dropped at listen", rate(c.ListenDrops), "ListenDrops")
		ct.Add("SYN queue full", fmt.Sprintf("%d dropped, %d cookies", c.TCPReqQFullDrop, c.TCPReqQFullDoCookies), "TCPReqQFullDrop, TCPReqQFullDoCookies")
		ct.Add("SYN cookies", fmt.Sprintf("%d sent, %d received, %d failed", c.SyncookiesSent, c.SyncookiesRecv, c.SyncookiesFailed), "Syncookies*")
		ct.Add("socket backlog drops", rate(c.TCPBacklogDrop), "TCPBacklogDrop")
		ct.Add("receive queue pruned", fmt.Sprintf("%d pruned, %d collapsed, %d dropped", c.PruneCalled, c.TCPRcvCollapsed, c.TCPRcvQDrop), "PruneCalled, TCPRcvCollapsed, TCPRcvQDrop")
		ct.Add("memory pressure", fmt.Sprintf("%d times, %d ms", c.TCPMemoryPressures, c.TCPMemoryPressuresChrono), "TCPMemoryPressures(Chrono)")
		ct.Add("segments in / out", fmt.Sprintf("%d / %d", c.InSegs, c.OutSegs), "InSegs, OutSegs")
		ct.Add("retransmitted", retransText(c), "RetransSegs")
		ct.Add("resets sent", rate(c.OutRsts), "OutRsts")
		ct.Write(w)
		if len(c.Missing) > 0 {
			fmt.Fprintf(w, "not counted by this kernel (read 0): %s\n", strings.Join(c.Missing, ", "))
		}
	}
	ev := t.Events
	if ev.Unavailable == "" && ev.Retransmits.Events+ev.ResetsSent.Events+ev.ResetsReceived.Events+ev.SynAckRetransmits.Events > 0 {
		var kinds []string
		for _, k := range []string{"rto", "fast", "tlp", "syn", "other"} {
			if n := ev.RetransmitKinds[k].Segs; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			}
		}
		fmt.Fprintf(w, "retransmitted segments by kind: %s; SYN-ACKs retransmitted %d; resets sent %d, received %d\n",
			orNone(kinds), ev.SynAckRetransmits.Events, ev.ResetsSent.Events, ev.ResetsReceived.Events)
	}
}

func retransText(c *evidence.TCPCounters) string {
	if c.OutSegs == 0 {
		return fmt.Sprint(c.RetransSegs)
	}
	return fmt.Sprintf("%d (%s of segments out)", c.RetransSegs, Percent(float64(c.RetransSegs)/float64(c.OutSegs)))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func writeListeners(w io.Writer, s evidence.ListenerSection) {
	if unavailable(w, s.Section) {
		return
	}
	lt := Table{Header: []string{"listener", "process", "backlog", "queue now", "peak", "full (samples)", "SYN queue peak", "SYN full (samples)", "reuseport"}}
	spaced := false
	for _, l := range s.Rows {
		who := "-"
		if len(l.PIDs) > 0 {
			who = strings.TrimSpace(l.Comm + " " + joinPIDs(l.PIDs))
		}
		synFull := fmt.Sprint(l.SynFullSamples) // a report from before syn_samples
		if l.SynSamples > 0 {
			synFull = fmt.Sprintf("%d of %d", l.SynFullSamples, l.SynSamples)
			spaced = spaced || l.SynSamples < l.Samples
		}
		lt.Add(l.Local.String(), who, fmt.Sprint(l.Backlog), fmt.Sprint(l.QueueLast), fmt.Sprint(l.QueuePeak),
			fmt.Sprintf("%d of %d", l.FullSamples, l.Samples), fmt.Sprint(l.SynQueuePeak), synFull, fmt.Sprint(l.ReusePort))
	}
	lt.Write(w)
	if spaced {
		fmt.Fprintln(w, synSpacedNote)
	}
}

// synSpacedNote says why a listener's SYN queue was read in fewer samples
// than its accept queue.
const synSpacedNote = "SYN queues read in fewer samples than the accept queues: each read walks every connection of the namespace (TIME_WAIT included), so the reads were spaced out to keep them near 0.1 % of a CPU (at least one every 5 s); ListenDrops and TCPReqQFullDrop count every refused handshake"

// writeTCPDetails prints the busiest connections, the events per
// connection, the settings and sockstat.
func writeTCPDetails(w io.Writer, t *evidence.TCPEvidence) {
	Heading(w, "TCP connections (busiest by bytes over the window)")
	if !unavailable(w, t.Connections.Section) {
		fmt.Fprintf(w, "%d of %d connections\n", len(t.Connections.Rows), t.Connections.Total)
		ct := Table{Header: []string{"local", "remote", "state", "pids", "bytes (window)", "rtt ms", "rttvar", "cwnd", "retrans", "recv-q", "send-q", "rcvbuf", "drops"}}
		for _, c := range t.Connections.Rows {
			ct.Add(c.Local.String(), c.Remote.String(), c.State, joinPIDs(c.PIDs), optBytes(c.BytesWindow),
				fmt.Sprintf("%.2f", float64(c.RTTUs)/1000), fmt.Sprintf("%.2f", float64(c.RTTVarUs)/1000), fmt.Sprint(c.SndCwnd),
				fmt.Sprint(c.TotalRetrans), fmt.Sprint(c.RecvQ), fmt.Sprint(c.SendQ), Bytes(float64(c.Rcvbuf)), optU32(c.Drops))
		}
		ct.Write(w)
		writeTCPSteering(w, t.Connections.Rows, t.Connections.SteeringLost)
	}

	Heading(w, "TCP retransmits and resets per connection")
	ev := t.Events
	if !unavailable(w, ev.Section) {
		if len(ev.Top) == 0 {
			fmt.Fprintln(w, "none")
		} else {
			et := Table{Header: []string{"local", "remote", "event", "kind / reason", "state", "events", "segments"}}
			for _, e := range ev.Top {
				et.Add(addrText(e.Local), addrText(e.Remote), e.Event, e.Kind, e.State, fmt.Sprint(e.Events), fmt.Sprint(e.Segs))
			}
			et.Write(w)
		}
		if ev.LostConns > 0 {
			fmt.Fprintln(w, tcpEventsLost(ev.LostConns))
		}
		if ev.Unattributed > 0 {
			fmt.Fprintf(w, "%d events of connections closed before the end are left out of the rows above: their owner is not known; the totals have them\n", ev.Unattributed)
		}
	}

	writeTCPSocketLocks(w, t.SocketLocks)
	writeTCPDrops(w, t.Drops)

	Heading(w, "TCP settings")
	if t.SettingsUnavailable != "" {
		fmt.Fprintf(w, "unavailable: %s\n", t.SettingsUnavailable)
	}
	s := t.Settings
	var kv []string
	add := func(name string, v *int64) {
		if v != nil {
			kv = append(kv, fmt.Sprintf("%s=%d", name, *v))
		}
	}
	add3 := func(name string, v *[3]int64) {
		if v != nil {
			kv = append(kv, fmt.Sprintf("%s=%d %d %d", name, v[0], v[1], v[2]))
		}
	}
	add("somaxconn", s.Somaxconn)
	add("tcp_max_syn_backlog", s.MaxSynBacklog)
	add("tcp_syncookies", s.Syncookies)
	add("tcp_abort_on_overflow", s.AbortOnOverflow)
	add3("tcp_rmem", s.Rmem)
	add3("tcp_wmem", s.Wmem)
	add3("tcp_mem", s.Mem)
	add("tcp_window_scaling", s.WindowScaling)
	add("tcp_adv_win_scale", s.AdvWinScale)
	add("tcp_moderate_rcvbuf", s.ModerateRcvbuf)
	sort.Strings(kv)
	fmt.Fprintln(w, orNone(kv))
	if ss := t.Sockstat; ss != nil {
		fmt.Fprintf(w, "sockstat: inuse %d, orphan %d, tw %d, alloc %d, mem %d pages (host-wide)\n", ss.InUse, ss.Orphan, ss.TimeWait, ss.Alloc, ss.MemPages)
	}
}

func optU32(p *uint32) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func optBytes(p *uint64) string {
	if p == nil {
		return "-"
	}
	return Bytes(float64(*p))
}

func addrText(a netip.AddrPort) string {
	if !a.IsValid() {
		return "-"
	}
	return a.String()
}

// writeTCPDrops prints the dropped TCP packets by local port and reason.
func writeTCPDrops(w io.Writer, s evidence.TCPDropSection) {
	Heading(w, "TCP drops by local port and reason (skb:kfree_skb)")
	if unavailable(w, s.Section) {
		return
	}
	if len(s.ByPort) == 0 && s.Estimate != nil {
		// Nothing seen while the probe was attached is not none dropped.
		fmt.Fprintf(w, "none seen in the %d sampling windows (%.1f %% of the run) the drop probe was attached: rarer drops can be missed; --exact counts every one\n",
			s.Estimate.Windows, 100*s.Estimate.Coverage)
	} else if len(s.ByPort) == 0 {
		fmt.Fprintln(w, "none")
	} else {
		dt := Table{Header: []string{"port", "reason", "drops"}}
		for _, r := range s.ByPort {
			port := fmt.Sprint(r.Port)
			if r.Port == 0 {
				port = "unattributed"
			}
			dt.Add(port, r.Reason, dropCount(r))
		}
		dt.Write(w)
	}
	if s.Estimate != nil && len(s.ByPort) > 0 {
		estimateNote(w, "drops", s.Estimate)
	}
	fmt.Fprintln(w, "SYNs refused at a full accept queue are not drops here (the kernel frees them without a reason): ListenOverflows counts them")
}
