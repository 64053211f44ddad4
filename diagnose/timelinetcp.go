package diagnose

import (
	"fmt"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// TCPPauseThresholds are jvm-net.overflows-during-pause's thresholds: a
// pause as long as the UDP rule's (min_stopped_ms), and any overflow in
// it (a running JVM that accepts in time overflows none) rising above
// `rise` times the running intervals' median.
var TCPPauseThresholds = struct{ MinOverflows Threshold }{
	MinOverflows: Threshold{Name: "min_overflows_per_s", Default: 1, Min: 0, Max: 1e9,
		Doc: "the interval's accept-queue overflows plus backlog drops per second must reach this"},
}

// checkOverflowsDuringPause finds the pause during which the JVM's
// listener refused connections — the namespace's ListenOverflows (and
// TCPBacklogDrop) rose in an interval the JVM was stopped for a GC or a
// safepoint: its accepting threads stopped while the kernel kept
// completing handshakes into a queue too small to hold a pause's worth.
// The pause episodes and the rise over the running intervals are the UDP
// rule's, counted in overflows.
func checkOverflowsDuringPause(tl evidence.Timeline, t Thresholds) *Finding {
	minStopped := int64(t.Get(TimelineThresholds.MinStopped) * float64(time.Millisecond))
	rows, all := overflowRows(tl)
	episodes, running, baseline, arrival := pausesAndBaseline(rows, minStopped)
	if len(episodes) == 0 {
		return nil
	}
	th := Thresholds{TimelineThresholds.MinDrops.Name: t.Get(TCPPauseThresholds.MinOverflows), TimelineThresholds.DropRise.Name: t.Get(TimelineThresholds.DropRise)}
	worst, inPauses := worstPause(rows, episodes, baseline, th)
	if worst == nil {
		return nil
	}
	peak := rows[worst.peak]
	listener := "the JVM's listeners"
	if tl.TCPPort > 0 {
		listener = fmt.Sprintf("TCP port %d", tl.TCPPort)
	}
	jvm := "the JVM"
	if tl.PID > 0 {
		jvm = fmt.Sprintf("the JVM (pid %d)", tl.PID)
	}
	stopped := time.Duration(worst.stopped).Round(time.Millisecond)
	f := &Finding{Severity: Warn,
		Title: fmt.Sprintf("accept-queue overflows on %s rose to %s/s in the interval %s was stopped for %v", listener, count(peak.dropsPS), jvm, stopped)}
	pause := rows[worst.first : worst.last+1]
	var overflows, backlogDrops uint64
	for _, r := range pause {
		overflows += or0(r.ListenOverflows)
		backlogDrops += or0(r.TCPBacklogDrops)
	}
	span := "interval ending " + peak.End.Format("15:04:05.000")
	if worst.first != worst.last {
		span = fmt.Sprintf("intervals ending %s and %s (the collection began in one and ended in the next)",
			rows[worst.first].End.Format("15:04:05.000"), rows[worst.last].End.Format("15:04:05.000"))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %d connections refused (ListenOverflows) and %d segments dropped from socket backlogs (TCPBacklogDrop) while %s was stopped for %v%s",
		span, overflows, backlogDrops, jvm, stopped, pauseDetail(timelineRows(pause))))
	if peak.AcceptQueuePeak != nil && peak.AcceptBacklog != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the fullest accept queue in that interval: %d waiting, backlog %d", *peak.AcceptQueuePeak, *peak.AcceptBacklog))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("intervals in which the JVM ran (stopped < %v): median %s overflows/s over %d intervals",
		time.Duration(minStopped), count(baseline), len(running)))
	if all > 0 {
		share := float64(inPauses) / float64(all)
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s of the window's %d overflows and backlog drops fell while the JVM was stopped", pct(share), all))
		if share >= 0.9 {
			f.Severity = Crit
		}
	}
	if peak.arrivePS > 0 {
		f.Impact = min(peak.dropsPS/peak.arrivePS, 1)
	}
	rate := arrival
	if rate == 0 {
		rate = peak.arrivePS
	}
	f.Recommendation = backlogForPause(rate, worst.stopped, tl.TCPPort)
	return f
}

func or0(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// overflowRows are the timeline's intervals that have both the JVM's
// stopped time and the TCP counters, in the pause rule's shape: its
// "drops" the overflows plus backlog drops, its arrivals the connections
// accepted (PassiveOpens) plus those refused.
func overflowRows(tl evidence.Timeline) (rows []pauseRow, all uint64) {
	for _, r := range tl.Rows {
		st := r.StoppedNs()
		if st == nil || r.ListenOverflows == nil || r.DurationNs <= 0 {
			continue
		}
		n := *r.ListenOverflows + or0(r.TCPBacklogDrops)
		secs := float64(r.DurationNs) / 1e9
		x := pauseRow{TimelineRow: r, stopped: *st, dropsPS: float64(n) / secs}
		x.Drops = &n
		x.arrivePS = float64(*r.ListenOverflows+or0(r.PassiveOpens)) / secs
		all += n
		rows = append(rows, x)
	}
	return rows, all
}

// backlogForPause recommends a listen backlog that holds the connections
// arriving at rate while the JVM is stopped for stoppedNs.
func backlogForPause(rate float64, stoppedNs int64, port int) Recommendation {
	stopped := time.Duration(stoppedNs).Round(time.Millisecond)
	need := int64(rate*float64(stoppedNs)/1e9) + 1
	backlog := max(roundUpPow2(float64(need)), 128)
	p := port
	if p == 0 {
		p = 8080
	}
	return Recommendation{
		Kind: KindCode,
		Why: "While the JVM is stopped at a safepoint (a GC pause or another VM operation) no thread calls accept(); " +
			"the kernel still completes handshakes and queues them on the listener until its backlog is full, then refuses the rest " +
			"(ListenOverflows): clients wait for a retransmitted SYN, 1 s and more. Either the backlog holds a pause's worth of new connections or the pauses get shorter.",
		Expected:   fmt.Sprintf("No overflows in the pause intervals once the backlog holds %v of new connections at %s/s.", stopped, count(rate)),
		Parameters: map[string]int64{"listen_backlog": backlog},
		Code: []CodeSketch{
			{Lang: "java", Code: fmt.Sprintf("ServerSocketChannel ch = ServerSocketChannel.open();\nch.bind(new InetSocketAddress(%d), %d); // %v at %s new connections/s", p, backlog, stopped, count(rate))},
			{Lang: "properties", Code: fmt.Sprintf("# Spring Boot on Tomcat: the acceptor's backlog\nserver.tomcat.accept-count=%d", backlog)},
			{Lang: "java", Code: fmt.Sprintf("// Netty\nnew ServerBootstrap().option(ChannelOption.SO_BACKLOG, %d);", backlog)},
		},
		Caveats: []string{
			"The kernel caps the backlog at net.core.somaxconn: raise it too (tcp.accept-overflow gives the typed change).",
			"Shorter pauses fix the cause: the gc-pressure recipe measures allocation per request and the GC log (a smaller young generation or a pause-time goal).",
		},
	}
}
