package diagnose

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/evidence"
)

// TCPInput is what the TCP rules read: the window's TCP evidence and the
// measured interface's configuration (nil when it was not read).
type TCPInput struct {
	Evidence evidence.TCPEvidence
	Config   *netconfig.NetConfig
}

// References the TCP rules cite, as their readers know them.
const (
	refIPSysctl    = "Linux kernel documentation, networking/ip-sysctl.rst"
	refSYNHandling = "Marek Majkowski (Cloudflare), \"SYN packet handling in the wild\" (2018)"
	refListen      = "listen(2): the backlog argument is capped by net.core.somaxconn"
	refRACKTLP     = "RFC 8985, \"The RACK-TLP Loss Detection Algorithm for TCP\""
	refTCPRetrans  = "Brendan Gregg, tcpretrans (bcc tools), and \"BPF Performance Tools\" (2019), chapter 10"
	refGRO         = "Linux kernel documentation, networking/segmentation-offloads.rst (Generic Receive Offload)"
)

// TCPThresholds are the TCP rules' tunables (docs/tcp.md).
var TCPThresholds = struct {
	RetransWarn, RetransInfo, ListenFullShare Threshold
}{
	RetransWarn: Threshold{Name: "tcp_retrans_warn_share", Default: 0.01, Min: 0, Max: 1,
		Doc: "retransmitted segments as a share of segments sent that makes a warning"},
	RetransInfo: Threshold{Name: "tcp_retrans_info_share", Default: 0.001, Min: 0, Max: 1,
		Doc: "retransmitted segments as a share of segments sent below which the rule is silent"},
	ListenFullShare: Threshold{Name: "tcp_listen_overflow_crit_share", Default: 0.01, Min: 0, Max: 1,
		Doc: "refused handshakes as a share of accepted plus refused ones that makes an accept-queue overflow critical"},
}

// TCPRules are the rules of `perfscope tcp`.
var TCPRules = []Rule[TCPInput]{
	{ID: "tcp.accept-overflow", Tunables: []Threshold{TCPThresholds.ListenFullShare}, CheckTuned: checkAcceptOverflow, Changes: somaxconnChanges},
	{ID: "tcp.syn-queue-overflow", Check: checkSYNQueueOverflow, Changes: synBacklogChanges},
	{ID: "tcp.backlog-drop", Check: checkBacklogDrop},
	{ID: "tcp.rcvbuf-prune", Check: checkRcvbufPrune, Changes: tcpRmemChanges},
	{ID: "tcp.rcvbuf-limited", Tunables: []Threshold{TCPWindowThresholds.PaceShare, TCPWindowThresholds.UnreadShare, TCPWindowThresholds.MinMiB}, CheckTuned: checkRcvbufLimited, Changes: tcpRmemChanges},
	{ID: "tcp.memory-pressure", Check: checkTCPMemoryPressure, Changes: tcpMemChanges},
	{ID: "tcp.retransmits", Tunables: []Threshold{TCPThresholds.RetransWarn, TCPThresholds.RetransInfo}, CheckTuned: checkRetransmits},
	{ID: "tcp.window-scaling-off", Check: checkWindowScalingOff, Changes: windowScalingChanges},
	{ID: "tcp.gro-off", Check: checkTCPGROOff, Changes: groOnChanges},
	{ID: "tcp.cross-cpu-steering", Tunables: []Threshold{TCPSteeringThresholds.FedShare, TCPSteeringThresholds.MinReads}, CheckTuned: checkTCPCrossCPU, Changes: steeringChanges},
	{ID: "tcp.no-listener", Check: checkNoListener},
}

var (
	somaxconnChanges     = []ChangeShape{{Kind: ChangeSysctl, Target: "net.core.somaxconn", Old: Decimal, New: Decimal}}
	synBacklogChanges    = []ChangeShape{{Kind: ChangeSysctl, Target: "net.ipv4.tcp_max_syn_backlog", Old: Decimal, New: Decimal}}
	tcpRmemChanges       = []ChangeShape{{Kind: ChangeSysctl, Target: "net.ipv4.tcp_rmem", Old: ThreeDecimals, New: ThreeDecimals}}
	tcpMemChanges        = []ChangeShape{{Kind: ChangeSysctl, Target: "net.ipv4.tcp_mem", Old: ThreeDecimals, New: ThreeDecimals}}
	windowScalingChanges = []ChangeShape{{Kind: ChangeSysctl, Target: "net.ipv4.tcp_window_scaling", Old: Decimal, New: Decimal}}
	groOnChanges         = []ChangeShape{{Kind: ChangeEthtoolFeature, Target: "<iface> rx-gro", Old: Values(ValueOff), New: Values(ValueOn)}}
	// steeringChanges: RFS's tables, and what lets RFS move a flow (RPS
	// or accelerated RFS's ntuple filters).
	steeringChanges = slices.Concat(rfsChanges, rpsChanges,
		[]ChangeShape{{Kind: ChangeEthtoolFeature, Target: "<iface> rx-ntuple-filter", Old: Values(ValueOff), New: Values(ValueOn)}})
)

// TCPSomaxconnFloor is the somaxconn perfscope proposes at least: the
// kernel's default since 5.4 (it was 128 before).
const TCPSomaxconnFloor = 4096

func int64Text(v int64) string { return strconv.FormatInt(v, 10) }

func tripleText(v [3]int64) string { return fmt.Sprintf("%d %d %d", v[0], v[1], v[2]) }

// window is the run's counters, or nil.
func (in TCPInput) window() *evidence.TCPCounters { return in.Evidence.Counters.Window }

func (in TCPInput) perSecond(n uint64) string {
	s := seconds(in.Evidence.DurationNs)
	if s <= 0 {
		return fmt.Sprintf("%d", n)
	}
	return fmt.Sprintf("%d in %.1f s (%.1f/s)", n, s, float64(n)/s)
}

func listenerLine(l evidence.TCPListener) string {
	return fmt.Sprintf("listener %s%s: accept queue backlog %d, peak %d, full at %d of %d samples", l.Local, listenerOwner(l), l.Backlog, l.QueuePeak, l.FullSamples, l.Samples)
}

// listenerOwner is " (nginx pid [812])", or " (owner unknown)".
func listenerOwner(l evidence.TCPListener) string {
	who := "owner unknown"
	if len(l.PIDs) > 0 {
		who = fmt.Sprintf("pid %v", l.PIDs)
		if l.Comm != "" {
			who = l.Comm + " " + who
		}
	}
	return " (" + who + ")"
}

// --- accept queue -----------------------------------------------------------

func checkAcceptOverflow(in TCPInput, t Thresholds) *Finding {
	w := in.window()
	if w == nil || w.ListenOverflows == 0 {
		return nil
	}
	e := in.Evidence
	share := float64(w.ListenOverflows) / float64(w.PassiveOpens+w.ListenOverflows)
	f := &Finding{Severity: Warn, Impact: math.Min(1, share)}
	if share >= t.Get(TCPThresholds.ListenFullShare) {
		f.Severity = Crit
	}
	f.Title = fmt.Sprintf("%d handshakes refused because a listener's accept queue was full (%s of new connections)", w.ListenOverflows, pct(share))
	f.Evidence = append(f.Evidence,
		fmt.Sprintf("TcpExt ListenOverflows %s, ListenDrops %d; Tcp PassiveOpens %d", in.perSecond(w.ListenOverflows), w.ListenDrops, w.PassiveOpens))
	var full []evidence.TCPListener
	for _, l := range e.Listeners.Rows {
		if l.Full() {
			full = append(full, l)
		}
	}
	sort.Slice(full, func(i, j int) bool { return full[i].FullSamples > full[j].FullSamples })
	for _, l := range full {
		f.Evidence = append(f.Evidence, listenerLine(l))
	}
	if len(full) == 0 {
		f.Evidence = append(f.Evidence, "no listener was seen full at the samples taken: the queue filled between them, or a listener outside --port overflowed (ListenOverflows is per network namespace)")
	}
	var somaxconn int64 = -1
	if e.Settings.Somaxconn != nil {
		somaxconn = *e.Settings.Somaxconn
		f.Evidence = append(f.Evidence, fmt.Sprintf("net.core.somaxconn %d", somaxconn))
	}
	if e.Settings.AbortOnOverflow != nil && *e.Settings.AbortOnOverflow == 1 {
		f.Evidence = append(f.Evidence, "net.ipv4.tcp_abort_on_overflow is 1: clients get a reset instead of a retry")
	}
	capped := false
	var want int64 = 0
	for _, l := range full {
		want = max(want, int64(l.Backlog))
		if somaxconn >= 0 && int64(l.Backlog) >= somaxconn {
			capped = true
		}
	}
	r := &f.Recommendation
	r.Why = "A listener's accept queue holds connections whose handshake completed until the application calls accept(); its size is the listen() backlog, capped by net.core.somaxconn. When it is full the kernel drops the SYN or the handshake's final ACK (ListenOverflows), and the client waits for a retransmit: a 1 s SYN timeout, 3 s on old clients, on top of every such request."
	r.Expected = "No ListenOverflows at the same connection rate, and no 1 s outliers in connection latency."
	r.Reference = refIPSysctl + " (somaxconn, tcp_abort_on_overflow); " + refListen + "; " + refSYNHandling
	r.Caveats = []string{
		"A bigger queue absorbs bursts; if the queue stays full the application accepts too slowly: more accepting threads, or SO_REUSEPORT listeners (one per thread) so that accepts do not contend on one queue.",
	}
	r.Code = acceptQueueSketches(max(want*4, TCPSomaxconnFloor))
	if capped || (somaxconn >= 0 && somaxconn < TCPSomaxconnFloor) {
		next := max(TCPSomaxconnFloor, somaxconn*4)
		old := int64Text(somaxconn)
		settingOrAdvice(r, []sysctlSetting{{Key: "net.core.somaxconn", Old: &old, New: int64Text(next)}}, false)
		r.Parameters = map[string]int64{"somaxconn": next}
		r.Caveats = append(r.Caveats, "somaxconn only raises the cap: the application must also ask for the bigger backlog (the code sketches), and re-create its listening sockets.")
		return f
	}
	if somaxconn < 0 {
		r.Kind = KindAdvice
		r.Apply = []string{"# read net.core.somaxconn and raise the application's listen backlog up to it"}
		return f
	}
	r.Kind = KindCode
	return f
}

func acceptQueueSketches(backlog int64) []CodeSketch {
	b := int64Text(backlog)
	return []CodeSketch{
		{Lang: "c", Code: "listen(fd, " + b + ");  /* capped by net.core.somaxconn */"},
		{Lang: "go", Code: "// net.Listen already asks for net.core.somaxconn: raise the sysctl, or\n// accept on several SO_REUSEPORT listeners (net.ListenConfig.Control)."},
		{Lang: "java", Code: "new ServerSocket(port, " + b + ");  // Tomcat: server.tomcat.accept-count=" + b + "; Netty: option(ChannelOption.SO_BACKLOG, " + b + ")"},
		{Lang: "nginx", Code: "listen 80 backlog=" + b + " reuseport;"},
	}
}

// --- SYN queue --------------------------------------------------------------

func checkSYNQueueOverflow(in TCPInput) *Finding {
	w := in.window()
	if w == nil {
		return nil
	}
	refused := w.TCPReqQFullDrop
	cookies := w.TCPReqQFullDoCookies + w.SyncookiesSent
	if refused == 0 && cookies == 0 {
		return nil
	}
	e := in.Evidence
	f := &Finding{Severity: Warn, Impact: 0.05}
	if refused > 0 {
		f.Title = fmt.Sprintf("%d SYNs dropped because a listener's SYN queue was full", refused)
		f.Impact = math.Min(1, float64(refused)/float64(w.PassiveOpens+refused))
	} else {
		f.Severity = Info
		f.Title = fmt.Sprintf("%d SYN cookies sent: a listener's SYN queue was full", w.SyncookiesSent)
		f.Impact = 0.02
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("TcpExt TCPReqQFullDrop %d, TCPReqQFullDoCookies %d, SyncookiesSent %s, SyncookiesRecv %d, SyncookiesFailed %d",
		w.TCPReqQFullDrop, w.TCPReqQFullDoCookies, in.perSecond(w.SyncookiesSent), w.SyncookiesRecv, w.SyncookiesFailed))
	var syn []evidence.TCPListener
	for _, l := range e.Listeners.Rows {
		if l.SynQueuePeak > 0 {
			syn = append(syn, l)
		}
	}
	sort.Slice(syn, func(i, j int) bool {
		if syn[i].SynFullSamples != syn[j].SynFullSamples {
			return syn[i].SynFullSamples > syn[j].SynFullSamples
		}
		return syn[i].SynQueuePeak > syn[j].SynQueuePeak
	})
	for _, l := range syn[:min(len(syn), 5)] {
		samples := l.Samples
		if l.SynSamples > 0 { // a report from before syn_samples has none
			samples = l.SynSamples
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("listener %s%s: SYN queue peaked at %d half-open of backlog %d, full at %d of %d samples",
			l.Local, listenerOwner(l), l.SynQueuePeak, l.Backlog, l.SynFullSamples, samples))
	}
	if s := e.Settings.MaxSynBacklog; s != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("net.ipv4.tcp_max_syn_backlog %d", *s))
	}
	if s := e.Settings.Syncookies; s != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("net.ipv4.tcp_syncookies %d", *s))
	}
	r := &f.Recommendation
	r.Why = "Half-open connections wait in the listener's SYN queue, bounded by the listen backlog; without SYN cookies the kernel also stops queueing when net.ipv4.tcp_max_syn_backlog is three-quarters used. When it is full the kernel answers with a SYN cookie (tcp_syncookies 1), which loses TCP options the handshake negotiated (window scaling without timestamps), or drops the SYN (cookies off). A flood of half-open connections (a SYN flood) fills it too: compare SyncookiesRecv with SyncookiesSent (few received means few clients completed)."
	r.Expected = "No TCPReqQFullDrop and no cookies at the same connection rate."
	r.Reference = refIPSysctl + " (tcp_max_syn_backlog, tcp_syncookies); " + refSYNHandling
	r.Caveats = []string{"Keep net.ipv4.tcp_syncookies at 1: it is the defence against SYN floods.", "The listen() backlog bounds this queue too: see tcp.accept-overflow's code sketches."}
	if s := e.Settings.MaxSynBacklog; s != nil && refused > 0 {
		old := int64Text(*s)
		next := max(*s*4, 8192)
		settingOrAdvice(r, []sysctlSetting{{Key: "net.ipv4.tcp_max_syn_backlog", Old: &old, New: int64Text(next)}}, false)
		return f
	}
	r.Kind = KindCode
	r.Code = acceptQueueSketches(TCPSomaxconnFloor)
	return f
}

// --- socket backlog ---------------------------------------------------------

func checkBacklogDrop(in TCPInput) *Finding {
	w := in.window()
	if w == nil || w.TCPBacklogDrop == 0 {
		return nil
	}
	f := &Finding{Severity: Warn, Impact: math.Min(1, float64(w.TCPBacklogDrop)/float64(max(w.InSegs, 1)))}
	f.Title = fmt.Sprintf("%d TCP segments dropped at sockets whose backlog was full while the application held the socket", w.TCPBacklogDrop)
	f.Evidence = append(f.Evidence, fmt.Sprintf("TcpExt TCPBacklogDrop %s of %d segments received", in.perSecond(w.TCPBacklogDrop), w.InSegs))
	for _, c := range connectionsBy(in.Evidence.Connections.Rows, func(c evidence.TCPConnection) uint64 {
		if c.Drops == nil {
			return 0
		}
		return uint64(*c.Drops)
	}, 3) {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s → %s: %d segments dropped at the socket (sk_drops), rcvbuf %d, sndbuf %d bytes", c.Local, c.Remote, *c.Drops, c.Rcvbuf, c.Sndbuf))
	}
	r := &f.Recommendation
	r.Kind = KindCode
	r.Why = "While a thread holds a TCP socket (lock_sock: in recvmsg, sendmsg, setsockopt), softirq queues arriving segments on the socket's backlog, which may hold rcvbuf + sndbuf bytes; past that they are dropped and the sender retransmits. Threads that hold a socket long (large writes, several threads on one socket) or small buffers make it overflow."
	r.Expected = "No TCPBacklogDrop; fewer retransmits on the affected connections."
	r.Reference = refIPSysctl + " (tcp_rmem, tcp_wmem); the socket lock is what `perfscope tcp`'s lock section measures"
	r.Caveats = []string{"A socket with SO_RCVBUF or SO_SNDBUF set by the application is not auto-tuned: remove the option or set it to the bandwidth-delay product."}
	r.Code = []CodeSketch{
		{Lang: "c", Code: "/* one thread per socket; read in large chunks so the lock is released between them */\n/* drop setsockopt(fd, SOL_SOCKET, SO_RCVBUF, ...) unless it is at least the BDP */"},
	}
	return f
}

// connectionsBy returns up to n connections with the largest key > 0.
func connectionsBy(rows []evidence.TCPConnection, key func(evidence.TCPConnection) uint64, n int) []evidence.TCPConnection {
	var out []evidence.TCPConnection
	for _, c := range rows {
		if key(c) > 0 {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return key(out[i]) > key(out[j]) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// --- receive queue pruning ----------------------------------------------------

func checkRcvbufPrune(in TCPInput) *Finding {
	w := in.window()
	if w == nil {
		return nil
	}
	dropped := w.RcvPruned + w.OfoPruned + w.TCPRcvQDrop
	if w.PruneCalled == 0 && w.TCPRcvCollapsed == 0 && dropped == 0 {
		return nil
	}
	e := in.Evidence
	f := &Finding{Severity: Info, Impact: 0.02}
	f.Title = fmt.Sprintf("TCP receive queues over their buffer: %d prunes, %d skbs collapsed, %d segments dropped", w.PruneCalled, w.TCPRcvCollapsed, dropped)
	if dropped > 0 {
		f.Severity = Warn
		f.Impact = math.Min(1, float64(dropped)/float64(max(w.InSegs, 1)))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("TcpExt PruneCalled %s, TCPRcvCollapsed %d, RcvPruned %d, OfoPruned %d, TCPRcvQDrop %d",
		in.perSecond(w.PruneCalled), w.TCPRcvCollapsed, w.RcvPruned, w.OfoPruned, w.TCPRcvQDrop))
	if !w.Has("TcpExt.TCPRcvQDrop") {
		f.Evidence = append(f.Evidence, "this kernel does not count TCPRcvQDrop (4.15+): queue drops may be missing")
	}
	if rm := e.Settings.Rmem; rm != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("net.ipv4.tcp_rmem %d %d %d bytes", rm[0], rm[1], rm[2]))
	}
	if m := e.Settings.ModerateRcvbuf; m != nil && *m == 0 {
		f.Evidence = append(f.Evidence, "net.ipv4.tcp_moderate_rcvbuf is 0: receive buffers do not grow")
	}
	r := &f.Recommendation
	r.Why = "When a socket's receive queue outgrows its buffer the kernel first collapses its skbs into compact ones (copying every byte: CPU in softirq), then prunes out-of-order data, and at last drops in-sequence segments: the sender retransmits and shrinks its window. The buffer grows only to tcp_rmem's maximum (or stays at SO_RCVBUF); an application that reads slowly fills any buffer."
	r.Expected = "PruneCalled and TCPRcvCollapsed near zero; no RcvPruned."
	r.Reference = refIPSysctl + " (tcp_rmem, tcp_moderate_rcvbuf, tcp_adv_win_scale)"
	r.Caveats = []string{"Larger buffers hold more memory per connection: check tcp_mem (tcp.memory-pressure) on hosts with many connections.", "If the application sets SO_RCVBUF, autotuning is off for that socket: remove it or size it to the bandwidth-delay product."}
	if rm := e.Settings.Rmem; rm != nil {
		old := tripleText(*rm)
		next := raiseRmemMax(*rm)
		settingOrAdvice(r, []sysctlSetting{{Key: "net.ipv4.tcp_rmem", Old: &old, New: tripleText(next)}}, false)
		r.Parameters = map[string]int64{"tcp_rmem_max_bytes": next[2]}
		return f
	}
	r.Kind = KindAdvice
	r.Apply = []string{"# read net.ipv4.tcp_rmem and raise its third value"}
	return f
}

// --- memory pressure ------------------------------------------------------------

// TCPMemHeadroom: tcp_mem's pressure threshold should be at least this
// many times the pages TCP sockets hold.
const TCPMemHeadroom = 2

func checkTCPMemoryPressure(in TCPInput) *Finding {
	w := in.window()
	e := in.Evidence
	var entered uint64
	if w != nil {
		entered = w.TCPMemoryPressures
	}
	limits := e.Settings.Mem
	inUse := int64(-1)
	if e.Sockstat != nil {
		inUse = e.Sockstat.MemPages
	}
	over := limits != nil && inUse >= 0 && inUse >= limits[1]
	if entered == 0 && !over {
		return nil
	}
	f := &Finding{Severity: Warn, Impact: 0.1}
	if entered > 0 {
		f.Title = fmt.Sprintf("TCP entered memory pressure %d times: every TCP socket's buffers were held to their minimum", entered)
		f.Evidence = append(f.Evidence, fmt.Sprintf("TcpExt TCPMemoryPressures %d, %d ms under pressure; TCPAbortOnMemory %d", entered, w.TCPMemoryPressuresChrono, w.TCPAbortOnMemory))
	} else {
		f.Severity = Info
		f.Impact = 0.02
		f.Title = "TCP sockets hold more memory than net.ipv4.tcp_mem's pressure threshold"
	}
	if limits != nil && inUse >= 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("/proc/net/sockstat TCP mem %d pages; tcp_mem min %d, pressure %d, max %d pages", inUse, limits[0], limits[1], limits[2]))
	}
	r := &f.Recommendation
	r.Why = "net.ipv4.tcp_mem caps the pages all TCP sockets of the host hold together (min, pressure, max). Above pressure the kernel stops growing buffers and shrinks windows on every connection; at max it drops segments and aborts orphaned connections."
	r.Expected = fmt.Sprintf("No TCPMemoryPressures at the same load: the pressure threshold at %d× the pages in use.", TCPMemHeadroom)
	r.Reference = refIPSysctl + " (tcp_mem)"
	r.Caveats = []string{"tcp_mem is memory the kernel pins for socket buffers: keep its maximum well below the host's RAM, and look for connections whose application stopped reading (a large recv_q) before raising it."}
	if limits == nil {
		r.Kind = KindAdvice
		r.Apply = []string{"# read net.ipv4.tcp_mem on the host and raise all three values"}
		r.Caveats = append(r.Caveats, hostOnlyNote)
		return f
	}
	factor := math.Max(2, math.Ceil(float64(TCPMemHeadroom*max(inUse, 0))/float64(max(limits[1], 1))))
	var next [3]int64
	for i, v := range limits {
		next[i] = int64(float64(v) * factor)
	}
	old := tripleText(*limits)
	settingOrAdvice(r, []sysctlSetting{{Key: "net.ipv4.tcp_mem", Old: &old, New: tripleText(next)}}, false)
	return f
}

// --- retransmits ----------------------------------------------------------------

func checkRetransmits(in TCPInput, t Thresholds) *Finding {
	w := in.window()
	if w == nil || w.OutSegs == 0 {
		return nil
	}
	share := float64(w.RetransSegs) / float64(w.OutSegs)
	if share < t.Get(TCPThresholds.RetransInfo) || w.RetransSegs == 0 {
		return nil
	}
	f := &Finding{Severity: Info, Impact: math.Min(1, share)}
	if share >= t.Get(TCPThresholds.RetransWarn) {
		f.Severity = Warn
	}
	f.Title = fmt.Sprintf("%s of TCP segments sent were retransmissions", pct(share))
	f.Evidence = append(f.Evidence, fmt.Sprintf("Tcp RetransSegs %s of OutSegs %d; TcpExt TCPTimeouts %d, TCPFastRetrans %d, TCPLossProbes %d, TCPSynRetrans %d, TCPSpuriousRTOs %d",
		in.perSecond(w.RetransSegs), w.OutSegs, w.TCPTimeouts, w.TCPFastRetrans, w.TCPLossProbes, w.TCPSynRetrans, w.TCPSpuriousRTOs))
	ev := in.Evidence.Events
	if ev.Unavailable == "" && ev.Retransmits.Events > 0 {
		var kinds []string
		for _, k := range []string{"rto", "fast", "tlp", "syn", "other"} {
			if c := ev.RetransmitKinds[k]; c.Segs > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, c.Segs))
			}
		}
		f.Evidence = append(f.Evidence, "retransmitted segments by kind (tcp:tcp_retransmit_skb): "+strings.Join(kinds, ", "))
		shown := 0
		for _, c := range ev.Top {
			if c.Event != "retransmit" || shown == 3 {
				continue
			}
			shown++
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s → %s: %d segments retransmitted (%s, %s)", c.Local, c.Remote, c.Segs, c.Kind, c.State))
		}
	}
	r := &f.Recommendation
	r.Kind = KindAdvice
	r.Why = "A retransmission is a segment lost (or presumed lost) between the sender and the receiver's socket: at the NIC's rings, a qdisc, a congested link, or a receiver that dropped it (backlog, pruning, accept queue). Fast retransmits cost a round trip; RTOs stall the connection for at least 200 ms; tail loss probes are cheap insurance. RTOs that are mostly spurious point to delayed ACKs or a stalled receiver rather than loss."
	r.Expected = "Retransmissions below 0.1% of segments on a healthy LAN."
	r.Reference = refRACKTLP + "; " + refTCPRetrans
	r.Apply = []string{
		"# find where the segments were lost: the receive side's drops (tcp.backlog-drop, tcp.rcvbuf-prune, net.nic-ring-drops, net.backlog-drops) and the path's (qdisc drops: tc -s qdisc; switch counters)",
	}
	if rto := ev.RetransmitKinds["rto"]; ev.Retransmits.Segs > 0 && rto.Segs*2 > ev.Retransmits.Segs {
		r.Caveats = append(r.Caveats, "Most retransmits were RTOs: whole windows were lost or the receiver stopped acknowledging (a stalled application, a full accept queue during the handshake).")
	}
	return f
}

// --- settings -------------------------------------------------------------------

func checkWindowScalingOff(in TCPInput) *Finding {
	s := in.Evidence.Settings.WindowScaling
	if s == nil || *s != 0 {
		return nil
	}
	f := &Finding{Severity: Warn, Impact: 0.05, Title: "TCP window scaling is off: no connection can have more than 64 KiB in flight"}
	f.Evidence = []string{"net.ipv4.tcp_window_scaling 0"}
	r := &f.Recommendation
	r.Why = "Without window scaling (RFC 7323) the receive window is at most 64 KiB, which caps each connection at 64 KiB per round trip (5 Mbit/s at 100 ms) whatever the buffers."
	r.Expected = "Connections to distant peers reach the bandwidth their buffers allow."
	r.Reference = refIPSysctl + " (tcp_window_scaling); RFC 7323"
	old := "0"
	settingOrAdvice(r, []sysctlSetting{{Key: "net.ipv4.tcp_window_scaling", Old: &old, New: "1"}}, false)
	r.Caveats = []string{"Takes effect for new connections only."}
	return f
}

func checkTCPGROOff(in TCPInput) *Finding {
	c := in.Config
	w := in.window()
	if c == nil || c.Offloads.GRO == nil || *c.Offloads.GRO || w == nil || w.InSegs == 0 {
		return nil
	}
	iface := c.Interface.Name
	f := &Finding{Severity: Warn, Impact: 0.05}
	f.Title = fmt.Sprintf("GRO is off on %s while it receives TCP: every segment takes the stack on its own", iface)
	f.Evidence = []string{
		fmt.Sprintf("ethtool -k %s: generic-receive-offload off", iface),
		fmt.Sprintf("Tcp InSegs %s (all interfaces of the namespace)", in.perSecond(w.InSegs)),
	}
	r := &f.Recommendation
	r.Why = "GRO merges consecutive TCP segments of a flow into one large packet before the IP and TCP layers, so their per-packet cost (routing, netfilter, socket lookup, the socket lock) is paid once per merged packet. Turning it off helps only UDP-only receive paths; a host that serves TCP pays for it on every segment."
	r.Expected = "Fewer NET_RX cycles per byte received; on a 10G NIC receiving bulk TCP, several times fewer packets reach the stack."
	r.Reference = refGRO + "; " + Makita2016 + " (turns GRO off for a UDP-only receive path)"
	r.AddChanges(EthtoolFeatureChange(iface, "rx-gro", false, true))
	r.Kind = KindSetting
	r.Caveats = []string{"If GRO was turned off for a UDP service on the same interface (perfscope udp's net.gro-udp), weigh both: UDP gains a few percent, TCP loses far more."}
	return f
}

// TCPChangeShapes are the change shapes the TCP rule id declares (what a
// revert file of its finding may hold); ok is false for an unknown id.
func TCPChangeShapes(id string) (shapes []ChangeShape, ok bool) {
	for _, r := range TCPRules {
		if r.ID == id {
			return r.Changes, true
		}
	}
	return nil, false
}
