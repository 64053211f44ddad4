package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// tcpSection draws the TCP layer of a `perfscope tcp` run: each
// listener's accept queue against its backlog, the window's counters, the
// busiest connections and the retransmits and resets per connection.
func tcpSection(t evidence.TCPEvidence) PageSection {
	s := PageSection{ID: "tcp", Title: "TCP: listeners, connections, retransmits"}
	if t.Netns != "" {
		s.Notes = append(s.Notes, fmt.Sprintf("Read in the network namespace of pid %d (%s): its listeners, connections, counters, sysctls and events; the interface's sections are perfscope's namespace's.", t.PID, t.Netns))
	}
	if t.SettingsUnavailable != "" {
		s.Notes = append(s.Notes, "Settings: "+t.SettingsUnavailable)
	}
	if t.Events.Unattributed > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d events of connections closed before the end are left out of the rows: their owner is not known; the totals have them.", t.Events.Unattributed))
	}
	if t.Listeners.Unavailable != "" {
		s.Notes = append(s.Notes, "Listeners: "+t.Listeners.Unavailable)
	} else {
		chart := BarChart{Title: "Accept queue per listener", Desc: "The most connections found waiting for accept() in any sample, next to the listener's backlog (listen()'s argument capped by net.core.somaxconn): a peak above the backlog is a full queue, and the kernel refuses the next handshake."}
		lt := PageTable{Caption: "Listeners", Header: []string{"listener", "process", "backlog", "queue now", "peak", "full samples", "samples", "SYN queue peak", "SYN full samples", "SYN samples", "SO_REUSEPORT group"}}
		for _, l := range t.Listeners.Rows {
			label := shorten(l.Local.String(), 27)
			chart.Bars = append(chart.Bars, ChartBar{Label: label, Value: float64(l.QueuePeak), Series: "peak"},
				ChartBar{Label: label, Value: float64(l.Backlog), Series: "backlog"})
			lt.Add(l.Local.String(), strings.TrimSpace(l.Comm+" "+joinPIDs(l.PIDs)), fmt.Sprint(l.Backlog), fmt.Sprint(l.QueueLast),
				fmt.Sprint(l.QueuePeak), fmt.Sprint(l.FullSamples), fmt.Sprint(l.Samples), fmt.Sprint(l.SynQueuePeak), fmt.Sprint(l.SynFullSamples), fmt.Sprint(l.SynSamples), fmt.Sprint(l.ReusePort))
			if l.SynSamples > 0 && l.SynSamples < l.Samples && !slices.Contains(s.Notes, synSpacedNote) {
				s.Notes = append(s.Notes, synSpacedNote)
			}
		}
		s.Charts = append(s.Charts, chart)
		s.Tables = append(s.Tables, lt)
	}
	if c := t.Counters.Window; c != nil {
		ct := PageTable{Caption: "Tcp and TcpExt counters over the window", Header: []string{"counter", "count"}}
		for _, kv := range []struct {
			name string
			v    uint64
		}{
			{"PassiveOpens", c.PassiveOpens}, {"ListenOverflows", c.ListenOverflows}, {"ListenDrops", c.ListenDrops},
			{"TCPReqQFullDrop", c.TCPReqQFullDrop}, {"SyncookiesSent", c.SyncookiesSent}, {"TCPBacklogDrop", c.TCPBacklogDrop},
			{"PruneCalled", c.PruneCalled}, {"TCPRcvCollapsed", c.TCPRcvCollapsed}, {"TCPRcvQDrop", c.TCPRcvQDrop},
			{"TCPMemoryPressures", c.TCPMemoryPressures}, {"InSegs", c.InSegs}, {"OutSegs", c.OutSegs},
			{"RetransSegs", c.RetransSegs}, {"TCPTimeouts", c.TCPTimeouts}, {"TCPFastRetrans", c.TCPFastRetrans},
			{"TCPLossProbes", c.TCPLossProbes}, {"OutRsts", c.OutRsts},
		} {
			ct.Add(kv.name, fmt.Sprint(kv.v))
		}
		s.Tables = append(s.Tables, ct)
	} else {
		s.Notes = append(s.Notes, "Counters: "+t.Counters.Unavailable)
	}
	if t.Connections.Unavailable != "" {
		s.Notes = append(s.Notes, "Connections: "+t.Connections.Unavailable)
	} else {
		cn := PageTable{Caption: fmt.Sprintf("Busiest connections (%d of %d)", len(t.Connections.Rows), t.Connections.Total),
			Header: []string{"local", "remote", "state", "pids", "bytes (window)", "RTT ms", "cwnd", "retransmits", "rcvbuf", "drops"}}
		for _, c := range t.Connections.Rows {
			cn.Add(c.Local.String(), c.Remote.String(), c.State, joinPIDs(c.PIDs), optBytes(c.BytesWindow),
				fmt.Sprintf("%.2f", float64(c.RTTUs)/1000), fmt.Sprint(c.SndCwnd), fmt.Sprint(c.TotalRetrans), Bytes(float64(c.Rcvbuf)), optU32(c.Drops))
		}
		s.Tables = append(s.Tables, cn)
		if st := tcpSteeringTable(t.Connections.Rows); len(st.Rows) > 0 {
			s.Tables = append(s.Tables, PageTable{Caption: "Steering: which CPU's softirq fed each connection, which CPU read it (sampled shares)", Header: st.Header, Rows: st.Rows})
		}
		if t.Connections.SteeringLost > 0 {
			s.Notes = append(s.Notes, "Steering: "+tcpSteeringLost(t.Connections.SteeringLost)+".")
		}
	}
	if ev := t.Events; ev.Unavailable != "" {
		s.Notes = append(s.Notes, "Retransmits and resets per connection: "+ev.Unavailable)
	} else {
		et := PageTable{Caption: "Retransmits and resets per connection (exact)", Header: []string{"local", "remote", "event", "kind / reason", "state", "events", "segments"}}
		for _, e := range ev.Top {
			et.Add(addrText(e.Local), addrText(e.Remote), e.Event, e.Kind, e.State, fmt.Sprint(e.Events), fmt.Sprint(e.Segs))
		}
		s.Tables = append(s.Tables, et)
		if ev.LostConns > 0 {
			s.Notes = append(s.Notes, "Retransmits and resets: "+tcpEventsLost(ev.LostConns)+".")
		}
	}
	if d := t.Drops; d.Unavailable != "" {
		s.Notes = append(s.Notes, "TCP drops by reason: "+d.Unavailable)
	} else {
		dt := PageTable{Caption: "TCP drops by local port and reason (skb:kfree_skb; port 0: not attributable to a port; SYNs refused at a full accept queue are ListenOverflows, not drops here)", Header: []string{"port", "reason", "drops"}}
		for _, r := range d.ByPort {
			dt.Add(fmt.Sprint(r.Port), r.Reason, dropCount(r))
		}
		s.Tables = append(s.Tables, dt)
		if d.Estimate != nil {
			note := "TCP drops: " + d.Estimate.String()
			if len(d.ByPort) == 0 {
				note = fmt.Sprintf("TCP drops: none seen in the %d sampling windows (%.1f %% of the run) the drop probe was attached; rarer drops can be missed (--exact counts every one)", d.Estimate.Windows, 100*d.Estimate.Coverage)
			}
			s.Notes = append(s.Notes, note)
		}
	}
	return s
}

// dropCount is a drop row's count with its bound when sampled.
func dropCount(r evidence.PortDrops) string {
	if r.RelError != nil {
		return fmt.Sprintf("%d ± %s", r.Count, Percent(*r.RelError))
	}
	return fmt.Sprint(r.Count)
}
