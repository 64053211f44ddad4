package diagnose

import (
	"fmt"
	"sort"

	"github.com/perfscope/perfscope/evidence"
)

// TCPWindowThresholds are tcp.rcvbuf-limited's tunables.
var TCPWindowThresholds = struct {
	PaceShare, UnreadShare, MinMiB Threshold
}{
	PaceShare: Threshold{Name: "tcp_rcvwnd_pace_share", Default: 0.5, Min: 0.1, Max: 1,
		Doc: "a connection's bytes received per second, as a share of its receive window per round trip, at or above which the window is what paces it"},
	UnreadShare: Threshold{Name: "tcp_rcvwnd_unread_share", Default: 0.5, Min: 0.05, Max: 1,
		Doc: "bytes received but not yet read, as a share of those plus the receive window, at or above which the application's reading (not the buffer) is the limit"},
	MinMiB: Threshold{Name: "tcp_rcvwnd_min_mib", Default: 1, Min: 0, Max: 1 << 20,
		Doc: "MiB a connection must receive over the window before its pace is compared with its window"},
}

// windowLimited is a receiving connection paced by its receive window.
type windowLimited struct {
	row             evidence.TCPConnection
	rate            float64 // bytes received per second over the run's window
	window, rttUs   uint32
	locked          bool // SO_RCVBUF set above tcp_rmem's max: not autotuned
	capRate, paceSh float64
}

// bdp is the bytes a connection must have in flight to carry rate bytes/s
// over rttUs.
func bdp(rate float64, rttUs uint32) float64 { return rate * float64(rttUs) / 1e6 }

// rateText is a byte rate as people read it: "1.3 MB/s (10.4 Mbit/s)".
func rateText(bps float64) string {
	return fmt.Sprintf("%.1f MB/s (%.1f Mbit/s)", bps/1e6, bps*8/1e6)
}

// windowLimitedConns are the window's receiving connections whose receive
// buffer stopped growing (at tcp_rmem's max, or set with SO_RCVBUF above
// it) while they received at about their window per round trip, with the
// application keeping up.
func windowLimitedConns(in TCPInput, t Thresholds) []windowLimited {
	e := in.Evidence
	rm := e.Settings.Rmem
	s := seconds(e.DurationNs)
	if rm == nil || s <= 0 {
		return nil
	}
	var out []windowLimited
	for _, c := range e.Connections.Rows {
		if c.BytesWindow == nil || c.BytesReceived == nil || c.BytesAcked == nil {
			continue
		}
		// A receiver: what it sent (acked by the peer) is a small part of
		// what it received, so bytes_window is bytes received.
		if *c.BytesAcked*10 > *c.BytesReceived || float64(*c.BytesWindow) < t.Get(TCPWindowThresholds.MinMiB)*(1<<20) {
			continue
		}
		// The buffer no longer grows: autotuning reached tcp_rmem's max,
		// or SO_RCVBUF (the only way above it) fixed it.
		if int64(c.Rcvbuf) < rm[2] {
			continue
		}
		window := c.RcvSsthresh
		if c.RcvWnd != nil {
			window = *c.RcvWnd
		}
		rtt := c.RTTUs
		if c.RcvRTTUs != nil {
			rtt = *c.RcvRTTUs
		}
		if window == 0 || rtt == 0 {
			continue
		}
		// A slow reader's data waits in the buffer and its window shrinks
		// to what it reads: the application is the limit, not the buffer.
		if float64(c.RecvQ) >= t.Get(TCPWindowThresholds.UnreadShare)*float64(uint64(c.RecvQ)+uint64(window)) {
			continue
		}
		rate := float64(*c.BytesWindow) / s
		capRate := float64(window) / (float64(rtt) / 1e6)
		if rate < t.Get(TCPWindowThresholds.PaceShare)*capRate {
			continue
		}
		out = append(out, windowLimited{row: c, rate: rate, window: window, rttUs: rtt, locked: int64(c.Rcvbuf) > rm[2], capRate: capRate, paceSh: rate / capRate})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].rate > out[j].rate })
	return out
}

func checkRcvbufLimited(in TCPInput, t Thresholds) *Finding {
	conns := windowLimitedConns(in, t)
	if len(conns) == 0 {
		return nil
	}
	e := in.Evidence
	rm := *e.Settings.Rmem
	var total float64
	capped := 0
	for _, c := range conns {
		total += c.rate
		if !c.locked {
			capped++
		}
	}
	f := &Finding{Severity: Warn, Impact: 0.1}
	f.Title = fmt.Sprintf("%d TCP connections receive at the pace of their receive window: %s in all, capped by receive buffers that cannot grow", len(conns), rateText(total))
	if len(conns) == 1 {
		f.Title = fmt.Sprintf("A TCP connection receives at the pace of its receive window: %s, capped by a receive buffer that cannot grow", rateText(total))
	}
	for _, c := range conns[:min(len(conns), 3)] {
		why := fmt.Sprintf("rcvbuf %d bytes = tcp_rmem's max", c.row.Rcvbuf)
		if c.locked {
			why = fmt.Sprintf("rcvbuf %d bytes, above tcp_rmem's max: set with SO_RCVBUF, not autotuned", c.row.Rcvbuf)
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s ← %s%s: received %s; window %d bytes / RTT %.1f ms caps it at %s (%s of it used); %s; %d bytes unread",
			c.row.Local, c.row.Remote, pidText(c.row.PIDs), rateText(c.rate), c.window, float64(c.rttUs)/1e3, rateText(c.capRate), pct(c.paceSh), why, c.row.RecvQ))
	}
	top := conns[0]
	f.Evidence = append(f.Evidence,
		fmt.Sprintf("at %.1f ms, each connection needs a window of %.1f MB (the bandwidth-delay product) for 1 Gbit/s, %.1f MB for 10 Gbit/s",
			float64(top.rttUs)/1e3, bdp(125e6, top.rttUs)/1e6, bdp(1250e6, top.rttUs)/1e6),
		fmt.Sprintf("net.ipv4.tcp_rmem %d %d %d bytes", rm[0], rm[1], rm[2]))
	if m := e.Settings.ModerateRcvbuf; m != nil && *m == 0 {
		f.Evidence = append(f.Evidence, "net.ipv4.tcp_moderate_rcvbuf is 0: receive buffers do not grow")
	}
	r := &f.Recommendation
	r.Why = "A TCP sender has at most the receiver's advertised window in flight, so a connection carries at most one window per round trip. The window is a share of the receive buffer, which autotuning (tcp_moderate_rcvbuf) grows as the connection needs, up to tcp_rmem's maximum; a socket whose application set SO_RCVBUF is never autotuned. A buffer smaller than the bandwidth-delay product caps the connection below what the path carries, however fast the application reads."
	r.Reference = refIPSysctl + " (tcp_rmem, tcp_moderate_rcvbuf, tcp_adv_win_scale); ss(8) -tim: rcv_rtt, rcv_space, rcv_ssthresh, skmem rb"
	r.Caveats = []string{
		"Autotuning reads tcp_rmem's maximum each time it grows a buffer, so open connections may grow into the new one; new connections do.",
		"Larger buffers hold more memory per connection: check tcp_mem (tcp.memory-pressure) on hosts with many connections.",
	}
	if capped == 0 {
		// Only SO_RCVBUF sockets: the sysctl does not reach them.
		r.Kind = KindCode
		r.Expected = "The connections reach the path's rate once their buffers hold the bandwidth-delay product."
		r.Code = rcvbufSketches(int64(2 * bdp(max(top.rate*4, 125e6), top.rttUs)))
		return f
	}
	next := raiseRmemMax(rm)
	old := tripleText(rm)
	settingOrAdvice(r, []sysctlSetting{{Key: "net.ipv4.tcp_rmem", Old: &old, New: tripleText(next)}}, false)
	r.Parameters = map[string]int64{"tcp_rmem_max_bytes": next[2]}
	// The window is the share of the buffer this connection's skbs allow.
	share := float64(top.window) / float64(top.row.Rcvbuf)
	r.Expected = fmt.Sprintf("The buffers grow past %d bytes: a window of up to about %.1f MB, %s at %.1f ms, where the path allows it.",
		rm[2], share*float64(next[2])/1e6, rateText(share*float64(next[2])/(float64(top.rttUs)/1e6)), float64(top.rttUs)/1e3)
	if capped < len(conns) {
		r.Caveats = append(r.Caveats, "Some connections have SO_RCVBUF set (rcvbuf above tcp_rmem's max): the sysctl does not reach them; their application must set a larger SO_RCVBUF or none.")
		r.Code = rcvbufSketches(int64(2 * bdp(max(top.rate*4, 125e6), top.rttUs)))
	}
	return f
}

// raiseRmemMax is tcp_rmem with its maximum doubled, at least 16 MiB:
// what tcp.rcvbuf-prune and tcp.rcvbuf-limited propose.
func raiseRmemMax(rm [3]int64) [3]int64 {
	next := rm
	next[2] = max(rm[2]*2, 16<<20)
	return next
}

// rcvbufSketches set SO_RCVBUF to size, or leave it to autotuning.
func rcvbufSketches(size int64) []CodeSketch {
	n := int64Text(size)
	return []CodeSketch{
		{Lang: "c", Code: "/* best: do not set SO_RCVBUF, so tcp_rmem's autotuning sizes the buffer; else, before connect()/listen(): */\nint size = " + n + ";  /* capped by net.core.rmem_max */\nsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);"},
		{Lang: "go", Code: "// Go leaves SO_RCVBUF alone unless asked: drop conn.SetReadBuffer, or\nconn.(*net.TCPConn).SetReadBuffer(" + n + ") // capped by net.core.rmem_max"},
		{Lang: "java", Code: "socket.setReceiveBufferSize(" + n + ");  // before connect(); for a server: serverSocket.setReceiveBufferSize before bind()"},
	}
}

// pidText is " (pid [812])", or "" when the owner is unknown.
func pidText(pids []int) string {
	if len(pids) == 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %v)", pids)
}
