package serve

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/perfscope/perfscope/evidence"
)

// unattributed is the listener label of the overflows and drops of a
// window whose samples saw no listener full, or more than one: the
// kernel counts them per network namespace, not per listener.
const unattributed = "unattributed"

// tcpMetrics are the TCP evidence of a recipe with the tcp part: the
// namespace's counters as counters, each window's delta added; the
// listeners' accept and SYN queues as counters of samples and gauges of
// the last window. Listener labels are local addresses ("127.0.0.1:80",
// "[::]:443"; the members of an SO_REUSEPORT group add up), bounded like
// ports: past MaxSeries, "other".
type tcpMetrics struct {
	listenOverflows, listenDrops    *counterFamily
	listenerSamples, listenerFull   *counterFamily
	listenerSynFull, listenerSynRds *counterFamily
	synDrops, syncookies            *counterFamily
	retransmits, retransSegs        *counterFamily
	resets, backlogDrops, segments  *counterFamily
	rcvQueue                        *counterFamily
	memPressures, memPressureSecs   *counterFamily
	queueDesc, peakDesc, backlogDsc *prometheus.Desc
	synPeakDesc, memPagesDesc       *prometheus.Desc
	memLimitDesc                    *prometheus.Desc

	// The last window's listeners and socket memory, for the gauges.
	listeners []listenerRow
	sockstat  *evidence.TCPSockstat
	tcpMem    *[3]int64
}

// listenerRow is one listening address in a window: its SO_REUSEPORT
// members added up (queues, backlogs, full samples), the fullest member's
// peak.
type listenerRow struct {
	local                        string
	last, peak, backlog, synPeak uint32
	samples, full, synFull       int
	synSamples                   int
}

func newTCPMetrics() *tcpMetrics {
	const ns = "perfscope_tcp_"
	return &tcpMetrics{
		listenOverflows: newFamily(ns+"listen_overflows_total", "Connections refused because a listener's accept queue was full (TcpExt ListenOverflows), on the listener the window's samples saw full when exactly one was, else \"unattributed\".", "listener"),
		listenDrops:     newFamily(ns+"listen_drops_total", "SYNs and handshakes a listener dropped (TcpExt ListenDrops: overflows included), attributed like listen_overflows_total.", "listener"),
		listenerSamples: newFamily(ns+"listener_samples_total", "Reads of the listener's accept queue (sock_diag, every sample_interval).", "listener"),
		listenerFull:    newFamily(ns+"listener_full_samples_total", "Reads that found the listener's accept queue fuller than its backlog: the kernel refuses the next handshake.", "listener"),
		listenerSynFull: newFamily(ns+"listener_syn_full_samples_total", "Reads that found the listener's SYN queue (request sockets in SYN-RECV) at its backlog.", "listener"),
		listenerSynRds:  newFamily(ns+"listener_syn_samples_total", "Reads of the listener's SYN queue: fewer than listener_samples_total when their cost (a walk of every connection of the namespace) spaced them out.", "listener"),
		synDrops:        newFamily(ns+"syn_queue_drops_total", "SYNs dropped because the SYN queue was full and SYN cookies were off (TcpExt TCPReqQFullDrop)."),
		syncookies:      newFamily(ns+"syncookies_total", "SYN cookies sent, received valid and failed (TcpExt SyncookiesSent, SyncookiesRecv, SyncookiesFailed).", "direction"),
		retransmits:     newFamily(ns+"retransmits_total", "Retransmits by kind, counted exactly by the tcpevents probe (tcp:tcp_retransmit_skb): rto, fast, tlp, syn, other; synack from tcp:tcp_retransmit_synack.", "kind"),
		retransSegs:     newFamily(ns+"retransmitted_segments_total", "Segments retransmitted (Tcp RetransSegs)."),
		resets:          newFamily(ns+"resets_total", "Resets sent and received, counted exactly by the tcpevents probe (tcp:tcp_send_reset, tcp:tcp_receive_reset).", "direction"),
		backlogDrops:    newFamily(ns+"backlog_drops_total", "Segments dropped because the socket backlog was full while a thread held the socket (TcpExt TCPBacklogDrop)."),
		segments:        newFamily(ns+"segments_total", "Segments received and sent (Tcp InSegs, OutSegs).", "direction"),
		rcvQueue:        newFamily(ns+"receive_queue_events_total", "Receive-queue pruning and collapsing under memory limits (TcpExt PruneCalled, RcvPruned, OfoPruned, TCPRcvCollapsed, TCPRcvQDrop).", "event"),
		memPressures:    newFamily(ns+"memory_pressures_total", "Times TCP entered memory pressure (TcpExt TCPMemoryPressures)."),
		memPressureSecs: newFamily(ns+"memory_pressure_seconds_total", "Time TCP spent under memory pressure (TcpExt TCPMemoryPressuresChrono)."),
		queueDesc:       prometheus.NewDesc(ns+"listener_accept_queue", "Connections waiting for accept() at the last window's last sample.", []string{"listener"}, nil),
		peakDesc:        prometheus.NewDesc(ns+"listener_accept_queue_peak", "The most connections waiting for accept() at any sample of the last window.", []string{"listener"}, nil),
		backlogDsc:      prometheus.NewDesc(ns+"listener_backlog", "The listener's accept queue bound: listen()'s backlog capped by net.core.somaxconn.", []string{"listener"}, nil),
		synPeakDesc:     prometheus.NewDesc(ns+"listener_syn_queue_peak", "The most half-open connections (SYN-RECV) to the listener at any sample of the last window.", []string{"listener"}, nil),
		memPagesDesc:    prometheus.NewDesc(ns+"memory_pages", "Pages TCP sockets hold (/proc/net/sockstat mem, host-wide) at the last window's end.", nil, nil),
		memLimitDesc:    prometheus.NewDesc(ns+"memory_limit_pages", "net.ipv4.tcp_mem's thresholds in pages (low, pressure, high); absent where the namespace hides them.", []string{"threshold"}, nil),
	}
}

func (t *tcpMetrics) families() []*counterFamily {
	return []*counterFamily{t.listenOverflows, t.listenDrops, t.listenerSamples, t.listenerFull, t.listenerSynFull,
		t.listenerSynRds, t.synDrops, t.syncookies, t.retransmits, t.retransSegs, t.resets, t.backlogDrops, t.segments, t.rcvQueue,
		t.memPressures, t.memPressureSecs}
}

func (t *tcpMetrics) descs() []*prometheus.Desc {
	return []*prometheus.Desc{t.queueDesc, t.peakDesc, t.backlogDsc, t.synPeakDesc, t.memPagesDesc, t.memLimitDesc}
}

// add adds one window's TCP evidence; sections marks what it could not
// measure.
func (t *tcpMetrics) add(ev *evidence.TCPEvidence, section func(name, unavailable string)) {
	section("tcp_counters", ev.Counters.Unavailable)
	section("tcp_listeners", ev.Listeners.Unavailable)
	section("tcp_events", ev.Events.Unavailable)
	rows := listenerRows(ev.Listeners.Rows)
	fullOnes := 0
	owner := unattributed
	for _, l := range rows {
		t.listenerSamples.add(float64(l.samples), l.local)
		t.listenerFull.add(float64(l.full), l.local)
		t.listenerSynFull.add(float64(l.synFull), l.local)
		t.listenerSynRds.add(float64(l.synSamples), l.local)
		if l.full > 0 {
			fullOnes++
			owner = l.local
		}
	}
	if fullOnes != 1 {
		owner = unattributed
	}
	// The gauges: the fullest MaxSeries listeners (the counters add the
	// rest up in listener="other").
	t.listeners = rows[:min(len(rows), MaxSeries)]
	if c := ev.Counters.Window; c != nil {
		t.listenOverflows.add(float64(c.ListenOverflows), owner)
		t.listenDrops.add(float64(c.ListenDrops), owner)
		t.synDrops.add(float64(c.TCPReqQFullDrop))
		t.syncookies.add(float64(c.SyncookiesSent), "sent")
		t.syncookies.add(float64(c.SyncookiesRecv), "received")
		t.syncookies.add(float64(c.SyncookiesFailed), "failed")
		t.retransSegs.add(float64(c.RetransSegs))
		t.backlogDrops.add(float64(c.TCPBacklogDrop))
		t.segments.add(float64(c.InSegs), "in")
		t.segments.add(float64(c.OutSegs), "out")
		for _, e := range []struct {
			name string
			n    uint64
		}{{"prune_called", c.PruneCalled}, {"rcv_pruned", c.RcvPruned}, {"ofo_pruned", c.OfoPruned},
			{"rcv_collapsed", c.TCPRcvCollapsed}, {"rcv_q_drop", c.TCPRcvQDrop}} {
			t.rcvQueue.add(float64(e.n), e.name)
		}
		t.memPressures.add(float64(c.TCPMemoryPressures))
		t.memPressureSecs.add(float64(c.TCPMemoryPressuresChrono) / 1e3)
	}
	if e := ev.Events; e.Unavailable == "" {
		for kind, n := range e.RetransmitKinds {
			t.retransmits.add(float64(n.Events), kind)
		}
		t.retransmits.add(float64(e.SynAckRetransmits.Events), "synack")
		t.resets.add(float64(e.ResetsSent.Events), "sent")
		t.resets.add(float64(e.ResetsReceived.Events), "received")
	}
	t.sockstat, t.tcpMem = ev.Sockstat, ev.Settings.Mem
}

// listenerRows joins a window's listener rows by local address, fullest
// first.
func listenerRows(rows []evidence.TCPListener) []listenerRow {
	by := map[string]*listenerRow{}
	var out []*listenerRow
	for _, r := range rows {
		k := r.Local.String()
		l := by[k]
		if l == nil {
			l = &listenerRow{local: k}
			by[k] = l
			out = append(out, l)
		}
		l.last += r.QueueLast
		l.backlog += r.Backlog
		l.peak = max(l.peak, r.QueuePeak)
		l.synPeak = max(l.synPeak, r.SynQueuePeak)
		l.full += r.FullSamples
		l.synFull = max(l.synFull, r.SynFullSamples) // each member counts the group's SYN queue
		l.samples = max(l.samples, r.Samples)
		l.synSamples = max(l.synSamples, r.SynSamples)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].full > out[j].full })
	rs := make([]listenerRow, len(out))
	for i, l := range out {
		rs[i] = *l
	}
	return rs
}

func (t *tcpMetrics) collect(ch chan<- prometheus.Metric) {
	for _, l := range t.listeners {
		ch <- prometheus.MustNewConstMetric(t.queueDesc, prometheus.GaugeValue, float64(l.last), l.local)
		ch <- prometheus.MustNewConstMetric(t.peakDesc, prometheus.GaugeValue, float64(l.peak), l.local)
		ch <- prometheus.MustNewConstMetric(t.backlogDsc, prometheus.GaugeValue, float64(l.backlog), l.local)
		ch <- prometheus.MustNewConstMetric(t.synPeakDesc, prometheus.GaugeValue, float64(l.synPeak), l.local)
	}
	if s := t.sockstat; s != nil {
		ch <- prometheus.MustNewConstMetric(t.memPagesDesc, prometheus.GaugeValue, float64(s.MemPages))
	}
	if m := t.tcpMem; m != nil {
		for i, name := range []string{"low", "pressure", "high"} {
			ch <- prometheus.MustNewConstMetric(t.memLimitDesc, prometheus.GaugeValue, float64(m[i]), name)
		}
	}
}
