package compare

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

// TCPComparison is what a `perfscope tcp --compare` adds to the receive
// path's metrics: each listener before and after, joined by its address
// and port, and the TCP settings that differ between the runs. The TCP
// counters and events are metrics (keys "tcp.…").
type TCPComparison struct {
	// Listeners are the listening addresses of either run, in address
	// order; a side is null when the run had no listener there.
	Listeners []ListenerChange `json:"listeners"`
	// ListenersUnavailable says, per run, why it listed no listeners
	// ("" when it did).
	ListenersUnavailable [2]string `json:"listeners_unavailable"`
	// Settings are the TCP sysctls whose values differ between the runs.
	Settings []SettingChange `json:"settings_changed"`
	// ZeroInBoth are the keys of the TCP counter and event metrics that
	// read 0 in both runs: left out of the metrics as noise, named here
	// so that "no pruning before or after" is still said.
	ZeroInBoth []string `json:"zero_in_both"`
}

// ListenerChange is one listening address and port in both runs.
type ListenerChange struct {
	Local  netip.AddrPort `json:"local"`
	Before *ListenerSide  `json:"before"`
	After  *ListenerSide  `json:"after"`
}

// ListenerSide is a listening address in one run: the members of its
// SO_REUSEPORT group taken together.
type ListenerSide struct {
	// Members is the number of listening sockets on the address.
	Members int    `json:"members"`
	PIDs    []int  `json:"pids"`
	Comm    string `json:"comm"`
	// Backlog is the largest member's accept-queue bound.
	Backlog uint32 `json:"backlog"`
	// QueuePeak and SynQueuePeak are the fullest sample of any member.
	QueuePeak    uint32 `json:"queue_peak"`
	SynQueuePeak uint32 `json:"syn_queue_peak"`
	// FullSamples and Samples are summed over the members; FullShare is
	// their ratio.
	FullSamples    int     `json:"full_samples"`
	SynFullSamples int     `json:"syn_full_samples"`
	Samples        int     `json:"samples"`
	FullShare      float64 `json:"full_share"`
}

// SettingChange is a sysctl that differs between the runs (its value as
// the kernel prints it, "" when the run could not read it).
type SettingChange struct {
	Name   string `json:"name"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// tcpCounter is one counter of the window compared per second.
type tcpCounter struct {
	key, label, direction string
	of                    func(evidence.TCPCounters) uint64
}

// tcpCounters are the counters a TCP comparison lists, in the order of
// the tcp report: accept and SYN queues, socket memory, retransmits.
var tcpCounters = []tcpCounter{
	{"passive_opens", "connections accepted (PassiveOpens)/s", higher, func(c evidence.TCPCounters) uint64 { return c.PassiveOpens }},
	{"listen_overflows", "accept queue overflows (ListenOverflows)/s", lower, func(c evidence.TCPCounters) uint64 { return c.ListenOverflows }},
	{"listen_drops", "handshakes dropped at listeners (ListenDrops)/s", lower, func(c evidence.TCPCounters) uint64 { return c.ListenDrops }},
	{"req_q_full_drop", "SYNs dropped, SYN queue full (TCPReqQFullDrop)/s", lower, func(c evidence.TCPCounters) uint64 { return c.TCPReqQFullDrop }},
	{"syncookies_sent", "SYN cookies sent/s", lower, func(c evidence.TCPCounters) uint64 { return c.SyncookiesSent }},
	{"backlog_drop", "socket backlog drops (TCPBacklogDrop)/s", lower, func(c evidence.TCPCounters) uint64 { return c.TCPBacklogDrop }},
	{"prune_called", "receive queue pruned (PruneCalled)/s", lower, func(c evidence.TCPCounters) uint64 { return c.PruneCalled }},
	{"rcv_pruned", "segments dropped by pruning (RcvPruned)/s", lower, func(c evidence.TCPCounters) uint64 { return c.RcvPruned }},
	{"ofo_pruned", "out-of-order queue pruned (OfoPruned)/s", lower, func(c evidence.TCPCounters) uint64 { return c.OfoPruned }},
	{"rcv_collapsed", "segments collapsed (TCPRcvCollapsed)/s", lower, func(c evidence.TCPCounters) uint64 { return c.TCPRcvCollapsed }},
	{"rcv_q_drop", "receive queue drops (TCPRcvQDrop)/s", lower, func(c evidence.TCPCounters) uint64 { return c.TCPRcvQDrop }},
	{"memory_pressures", "memory pressure entered (TCPMemoryPressures)/s", lower, func(c evidence.TCPCounters) uint64 { return c.TCPMemoryPressures }},
	{"memory_pressures_ms", "time under memory pressure (ms/s)", lower, func(c evidence.TCPCounters) uint64 { return c.TCPMemoryPressuresChrono }},
	{"retrans_segs", "segments retransmitted (RetransSegs)/s", lower, func(c evidence.TCPCounters) uint64 { return c.RetransSegs }},
	{"out_rsts", "resets sent (OutRsts)/s", lower, func(c evidence.TCPCounters) uint64 { return c.OutRsts }},
}

// tcpRun is one run's TCP numbers, per second of its window.
type tcpRun struct {
	counters map[string]float64
	// missing are counters the run's kernel lacked.
	missing map[string]bool
	// retransShare is RetransSegs/OutSegs.
	retransShare *float64
	// events are the tcpevents probe's counts per second by key
	// ("retransmits.kind.rto", "resets_received"); nil without the probe.
	events map[string]float64
	// memPages is sockstat's TCP pages at the end of the window.
	memPages *float64
	// listeners by address, nil when the run listed none.
	listeners       map[netip.AddrPort]*ListenerSide
	listenersReason string
	settings        map[string]string
}

// counterNames maps a counter key to the kernel's name, for Missing.
var counterNames = map[string]string{"rcv_q_drop": "TcpExt.TCPRcvQDrop"}

func summarizeTCP(t *evidence.TCPEvidence, secs float64) *tcpRun {
	r := &tcpRun{settings: settingValues(t.Settings)}
	if w := t.Counters.Window; w != nil {
		r.counters, r.missing = map[string]float64{}, map[string]bool{}
		for _, c := range tcpCounters {
			r.counters[c.key] = float64(c.of(*w)) / secs
			if name, ok := counterNames[c.key]; ok && !w.Has(name) {
				r.missing[c.key] = true
			}
		}
		r.counters["in_segs"] = float64(w.InSegs) / secs
		if w.OutSegs > 0 {
			r.retransShare = ptr(float64(w.RetransSegs) / float64(w.OutSegs))
		}
	}
	if e := t.Events; e.Unavailable == "" {
		r.events = map[string]float64{
			"resets_sent":        float64(e.ResetsSent.Events) / secs,
			"resets_received":    float64(e.ResetsReceived.Events) / secs,
			"synack_retransmits": float64(e.SynAckRetransmits.Segs) / secs,
		}
		for kind, n := range e.RetransmitKinds {
			r.events["retransmits.kind."+kind] = float64(n.Segs) / secs
		}
	}
	if t.Sockstat != nil {
		r.memPages = ptr(float64(t.Sockstat.MemPages))
	}
	if t.Listeners.Unavailable != "" && len(t.Listeners.Rows) == 0 {
		r.listenersReason = t.Listeners.Unavailable
		return r
	}
	r.listeners = map[netip.AddrPort]*ListenerSide{}
	for _, l := range t.Listeners.Rows {
		s := r.listeners[l.Local]
		if s == nil {
			s = &ListenerSide{Comm: l.Comm}
			r.listeners[l.Local] = s
		}
		s.Members++
		for _, pid := range l.PIDs {
			if !slices.Contains(s.PIDs, pid) {
				s.PIDs = append(s.PIDs, pid)
			}
		}
		slices.Sort(s.PIDs)
		s.Backlog = max(s.Backlog, l.Backlog)
		s.QueuePeak, s.SynQueuePeak = max(s.QueuePeak, l.QueuePeak), max(s.SynQueuePeak, l.SynQueuePeak)
		s.FullSamples += l.FullSamples
		s.SynFullSamples += l.SynFullSamples
		s.Samples += l.Samples
		if s.Samples > 0 {
			s.FullShare = float64(s.FullSamples) / float64(s.Samples)
		}
	}
	return r
}

// settingValues are the TCP sysctls as the kernel prints them, by name.
func settingValues(s evidence.TCPSettings) map[string]string {
	out := map[string]string{}
	one := func(name string, v *int64) {
		if v != nil {
			out[name] = strconv.FormatInt(*v, 10)
		}
	}
	three := func(name string, v *[3]int64) {
		if v != nil {
			out[name] = fmt.Sprintf("%d %d %d", v[0], v[1], v[2])
		}
	}
	one("net.core.somaxconn", s.Somaxconn)
	one("net.ipv4.tcp_max_syn_backlog", s.MaxSynBacklog)
	one("net.ipv4.tcp_syncookies", s.Syncookies)
	one("net.ipv4.tcp_abort_on_overflow", s.AbortOnOverflow)
	three("net.ipv4.tcp_rmem", s.Rmem)
	three("net.ipv4.tcp_wmem", s.Wmem)
	three("net.ipv4.tcp_mem", s.Mem)
	one("net.ipv4.tcp_window_scaling", s.WindowScaling)
	one("net.ipv4.tcp_adv_win_scale", s.AdvWinScale)
	one("net.ipv4.tcp_moderate_rcvbuf", s.ModerateRcvbuf)
	return out
}

// addTCP adds the TCP metrics of two tcp runs to c through add, and the
// listeners and settings that changed.
func (c *Comparison) addTCP(b, a *tcpRun, addMetric func(key, label, unit, direction string, b, a *float64)) {
	t := &TCPComparison{ListenersUnavailable: [2]string{b.listenersReason, a.listenersReason}}
	add := func(key, label, unit, direction string, bv, av *float64) {
		if unit == "events/s" && bv != nil && av != nil && *bv == 0 && *av == 0 {
			t.ZeroInBoth = append(t.ZeroInBoth, key)
			return
		}
		addMetric(key, label, unit, direction, bv, av)
	}
	get := func(m map[string]float64, k string) *float64 {
		if m == nil {
			return nil
		}
		v := m[k]
		return &v
	}
	for _, ct := range tcpCounters {
		bv, av := get(b.counters, ct.key), get(a.counters, ct.key)
		// A counter the kernel lacks reads 0: not measured, not zero.
		if b.missing[ct.key] {
			bv = nil
		}
		if a.missing[ct.key] {
			av = nil
		}
		add("tcp."+ct.key+"_per_s", ct.label, "events/s", ct.direction, bv, av)
	}
	add("tcp.retrans_share", "segments retransmitted / sent", "fraction", lower, b.retransShare, a.retransShare)
	for _, kind := range []string{"rto", "fast", "tlp", "syn", "other"} {
		k := "retransmits.kind." + kind
		add("tcp."+k+"_per_s", "retransmitted segments, "+kind+" (tcpevents)/s", "events/s", lower, get(b.events, k), get(a.events, k))
	}
	add("tcp.synack_retransmits_per_s", "SYN-ACKs retransmitted (tcpevents)/s", "events/s", lower, get(b.events, "synack_retransmits"), get(a.events, "synack_retransmits"))
	add("tcp.resets_sent_per_s", "resets sent (tcpevents)/s", "events/s", lower, get(b.events, "resets_sent"), get(a.events, "resets_sent"))
	add("tcp.resets_received_per_s", "resets received (tcpevents)/s", "events/s", lower, get(b.events, "resets_received"), get(a.events, "resets_received"))
	add("tcp.sockstat.mem_pages", "pages held by TCP sockets (host, at the end)", "pages", lower, b.memPages, a.memPages)

	var addrs []netip.AddrPort
	for l := range b.listeners {
		addrs = append(addrs, l)
	}
	for l := range a.listeners {
		if b.listeners[l] == nil {
			addrs = append(addrs, l)
		}
	}
	slices.SortFunc(addrs, func(x, y netip.AddrPort) int { return x.Compare(y) })
	for _, l := range addrs {
		bs, as := b.listeners[l], a.listeners[l]
		t.Listeners = append(t.Listeners, ListenerChange{Local: l, Before: bs, After: as})
		side := func(s *ListenerSide, run map[netip.AddrPort]*ListenerSide, f func(*ListenerSide) float64) *float64 {
			switch {
			case s != nil:
				return ptr(f(s))
			case run != nil:
				// The run listed listeners but none here: nothing waited.
				return ptr(0)
			}
			return nil
		}
		for _, m := range []struct {
			key, label, unit string
			f                func(*ListenerSide) float64
		}{
			// The fullest sample against the backlog: a bigger backlog
			// holds more waiting connections and is still the fix.
			{"queue_peak_fill", "fullest sample / backlog", "fraction", func(s *ListenerSide) float64 { return fill(s.QueuePeak, s.Backlog) }},
			{"full_share", "samples full", "fraction", func(s *ListenerSide) float64 { return s.FullShare }},
			{"syn_queue_peak_fill", "SYN queue fullest sample / backlog", "fraction", func(s *ListenerSide) float64 { return fill(s.SynQueuePeak, s.Backlog) }},
		} {
			add("tcp.listener."+l.String()+"."+m.key, fmt.Sprintf("listener %s, %s", l, m.label), m.unit, lower, side(bs, b.listeners, m.f), side(as, a.listeners, m.f))
		}
	}
	names := make([]string, 0, len(b.settings)+len(a.settings))
	for n := range b.settings {
		names = append(names, n)
	}
	for n := range a.settings {
		if _, ok := b.settings[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if b.settings[n] != a.settings[n] {
			t.Settings = append(t.Settings, SettingChange{Name: n, Before: b.settings[n], After: a.settings[n]})
		}
	}
	c.TCP = t
}

// fill is queued/backlog (0 for a backlog of 0: listen(fd, 0) still
// admits one connection, so the queue is measured against 1).
func fill(queued, backlog uint32) float64 {
	return float64(queued) / float64(max(backlog, 1))
}

// listenerCells are a listener's cells in one run: backlog, accept queue
// peak, samples full, SYN queue peak, processes ("-" for a run without
// it).
func listenerCells(s *ListenerSide) []string {
	if s == nil {
		return []string{"-", "-", "-", "-", "-"}
	}
	who := s.Comm
	for i, pid := range s.PIDs {
		if i == 0 && who != "" {
			who += " "
		} else if i > 0 {
			who += ","
		}
		who += strconv.Itoa(pid)
	}
	if s.Members > 1 {
		who += fmt.Sprintf(" (%d reuseport)", s.Members)
	}
	return []string{strconv.FormatUint(uint64(s.Backlog), 10), strconv.FormatUint(uint64(s.QueuePeak), 10),
		fmt.Sprintf("%d/%d", s.FullSamples, s.Samples), strconv.FormatUint(uint64(s.SynQueuePeak), 10), who}
}

// tcpTables are the listeners and the changed settings, for the text and
// the page alike; notes say why a run has no listeners.
func tcpTables(t *TCPComparison) (listeners, settings report.Table, notes []string) {
	listeners.Header = []string{"listener", "run", "backlog", "accept peak", "full samples", "SYN peak", "processes"}
	for _, l := range t.Listeners {
		listeners.Add(append([]string{l.Local.String(), "before"}, listenerCells(l.Before)...)...)
		listeners.Add(append([]string{"", "after"}, listenerCells(l.After)...)...)
	}
	for i, why := range t.ListenersUnavailable {
		if why != "" {
			notes = append(notes, fmt.Sprintf("%s run: %s", [2]string{"before", "after"}[i], why))
		}
	}
	settings.Header = []string{"setting", "before", "after"}
	for _, s := range t.Settings {
		settings.Add(s.Name, orUnread(s.Before), orUnread(s.After))
	}
	return listeners, settings, notes
}

func orUnread(v string) string {
	if v == "" {
		return "(not read)"
	}
	return v
}

// writeTCPText prints the listeners before and after and the settings
// that changed.
func writeTCPText(w io.Writer, t *TCPComparison) {
	listeners, settings, notes := tcpTables(t)
	if len(t.ZeroInBoth) > 0 {
		fmt.Fprintf(w, "\nAt 0 in both runs: %s\n", strings.Join(t.ZeroInBoth, ", "))
	}
	report.Heading(w, "Listeners before and after")
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	if len(listeners.Rows) == 0 {
		fmt.Fprintln(w, "No listener in either run.")
	} else {
		listeners.Write(w)
	}
	report.Heading(w, "TCP settings changed")
	if len(settings.Rows) == 0 {
		fmt.Fprintln(w, "None: the TCP sysctls read the same in both runs.")
		return
	}
	settings.Write(w)
}

// tcpPageSection is the listeners and settings on the page.
func tcpPageSection(t *TCPComparison) report.PageSection {
	listeners, settings, notes := tcpTables(t)
	s := report.PageSection{ID: "compare-tcp", Title: "Listeners and TCP settings", Notes: notes}
	if len(t.ZeroInBoth) > 0 {
		s.Notes = append(s.Notes, "At 0 in both runs: "+strings.Join(t.ZeroInBoth, ", ")+".")
	}
	if len(listeners.Rows) > 0 {
		s.Tables = append(s.Tables, report.PageTable{Caption: "Listeners before and after, by address and port", Header: listeners.Header, Rows: listeners.Rows})
	} else {
		s.Notes = append(s.Notes, "No listener in either run.")
	}
	if len(settings.Rows) > 0 {
		s.Tables = append(s.Tables, report.PageTable{Caption: "TCP settings that changed", Header: settings.Header, Rows: settings.Rows})
	} else {
		s.Notes = append(s.Notes, "The TCP sysctls read the same in both runs.")
	}
	return s
}
