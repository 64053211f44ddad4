package diagnose

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/evidence"
)

// Rules about the receiving sockets: lock contention, SO_REUSEPORT
// steering, thread pinning and receive buffers.

const reuseportC = `int on = 1;
for (int i = 0; i < nthreads; i++) {        /* one socket per receiving thread */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));  /* before bind */
    bind(fd, (struct sockaddr *)&addr, sizeof(addr));           /* same addr:port */
    start_receiver_thread(fd);
}`

const reuseportGo = `lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	return errors.Join(err, serr)
}}
for i := 0; i < runtime.NumCPU(); i++ { // one socket and goroutine each
	pc, _ := lc.ListenPacket(ctx, "udp", ":9000")
	go serve(pc)
}`

func checkSocketLockContention(in NetInput, t Thresholds) *Finding {
	e := in.Evidence
	if e.Locks.Unavailable != "" {
		return nil
	}
	ns := socketLockNs(e)
	share := lockShare(e, ns)
	port, label := e.Port, fmt.Sprintf("port %d", e.Port)
	sc, attributed := contendedSocket(e)
	if attributed {
		port = sc.Socket.Port
		where := sc.Socket.Local
		if where == "" { // not in perfscope's network namespace
			where = fmt.Sprintf("port %d in netns %d", sc.Socket.Port, sc.Socket.NetNS)
		}
		label = fmt.Sprintf("socket %s (inode %d", where, sc.Socket.Inode)
		if sc.Socket.PID > 0 {
			label += fmt.Sprintf(", pid %d %s", sc.Socket.PID, sc.Socket.Comm)
		}
		label += ")"
	}
	if _, ok := reuseportGroup(e, port); ok {
		return nil // already split: net.reuseport-steering judges what remains
	}
	drops, reasons := e.Drops.OnPort(port)
	delivered, _ := e.Drops.InDatagrams()
	saturated := drops > 0 && float64(drops) >= t.Get(NetThresholds.SocketDrop)*float64(drops+delivered)
	rx := netRXCPUs(e)
	// Several NET_RX CPUs queueing into the one socket of the port.
	var feeders []int
	var fedSocket evidence.UDPSocket
	if socks := socketsOnPort(e, port); len(socks) == 1 {
		fedSocket = socks[0]
		cpus := fedSocket.FeedingCPUs(t.Get(NetThresholds.CrossFeed))
		for _, c := range cpus {
			if rx.Contains(c) {
				feeders = append(feeders, c)
			}
		}
	}
	crossFed := len(feeders) >= 2
	switch {
	case share >= t.Get(NetThresholds.SocketLockWarn):
	case saturated && (share >= t.Get(NetThresholds.SocketLockSaturated) || crossFed):
	default:
		return nil
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d CPUs contend on one UDP socket's lock: %s of their time lost waiting", max(rx.Len(), 1), pct(share)),
		Evidence: []string{
			fmt.Sprintf("socket receive-queue and wakeup locks: %s of wait over %.1fs on %d NET_RX CPUs (%s)", ms(float64(ns)), seconds(e.DurationNs), max(rx.Len(), 1), rx.List()),
		},
		Impact: share,
	}
	if attributed {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %d contended acquisitions, %s waiting, longest %s", label, sc.Count, ms(float64(sc.TotalNs)), ms(float64(sc.MaxNs))))
	}
	for _, s := range e.Locks.Sites {
		if (s.Class == "socket-receive-queue" || s.Class == "socket-wakeup") && len(f.Evidence) < 5 {
			est := ""
			if n := e.Locks.StackEvery; n > 1 {
				// Sites are sampled stacks scaled to every contention.
				est = fmt.Sprintf(" (estimated from 1 in %d stacks)", n)
			}
			f.Evidence = append(f.Evidence, fmt.Sprintf("site %s (%s): %d waits, %s%s", s.Site, s.Class, s.Count, ms(float64(s.TotalNs)), est))
		}
	}
	if drops > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d drops on port %d over the window (%s)", drops, port, strings.Join(reasons, ", ")))
	}
	if crossFed {
		f.Evidence = append(f.Evidence, fmt.Sprintf("softirqs on CPUs %s all queue into it (%s of its wakeups)", cpuset.Of(feeders...).List(), feedShares(fedSocket, feeders)))
	}
	if share < t.Get(NetThresholds.SocketLockWarn) {
		// Below the plain threshold only because the socket is saturated.
		f.Title = fmt.Sprintf("one UDP socket is the bottleneck: it drops %s of its datagrams while %d CPUs feed it", pct(float64(drops)/float64(drops+delivered)), max(rx.Len(), len(feeders), 1))
		f.Impact = math.Max(share, float64(drops)/float64(drops+delivered))
	}
	if socks := socketsOnPort(e, port); len(socks) == 1 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("port %d has one socket and no SO_REUSEPORT group", port))
	}
	if share >= t.Get(NetThresholds.SocketLockCrit) {
		f.Severity = Crit
	}
	f.Recommendation = Recommendation{
		Kind: KindCode,
		Why: "Every CPU running NET_RX enqueues into the same socket, so they serialise on its receive-queue spinlock (queued_spin_lock_slowpath under __udp_enqueue_schedule_skb) and on the wakeup. " +
			"SO_REUSEPORT lets several sockets bind the same port; the kernel picks one per packet by flow hash, so each socket's lock sees a fraction of the CPUs.",
		Code:      []CodeSketch{{Lang: "c", Code: reuseportC}, {Lang: "go", Code: reuseportGo}},
		Expected:  "Makita (LinuxCon Japan 2016): 17k → 2.54M tps (×150) with one SO_REUSEPORT socket per thread; the flame graph's queued_spin_lock_slowpath shrank to a sliver.",
		Reference: Makita2016,
		Caveats:   []string{"The default flow hash can still put two CPUs' packets on one socket; net.reuseport-steering then steers by CPU (SO_ATTACH_REUSEPORT_CBPF)."},
	}
	if share >= SocketLockShareWarn {
		weighEstimate(f, "locks", "the socket lock wait's share", share, SocketLockShareWarn, e.Locks.Estimate, nil)
	} else {
		onEstimate(f, "locks", "the socket lock wait", e.Locks.Estimate)
	}
	if crossFed {
		notesEstimate(f, "sockets", "the wakeups by CPU", e.Sockets.Estimate)
	}
	if drops > 0 {
		notesEstimate(f, "drops", "the drops by reason", e.Drops.Estimate)
	}
	return f
}

// --- 7. reuseport group with contention or imbalance left -------------------

const steeringC = `/* Socket i of the group serves packets whose softirq ran on CPU i
   (kernel tools/testing/selftests/net/reuseport_bpf_cpu.c). Create the
   sockets in CPU order, then attach to any one of them: */
struct sock_filter code[] = {
    { BPF_LD  | BPF_W | BPF_ABS, 0, 0, SKF_AD_OFF + SKF_AD_CPU }, /* A = cpu      */
    { BPF_ALU | BPF_MOD | BPF_K, 0, 0, NSOCKS },                  /* A %= nsocks */
    { BPF_RET | BPF_A, 0, 0, 0 },                                 /* socket A    */
};
struct sock_fprog prog = { .len = 3, .filter = code };
setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog));`

const steeringGo = `// golang.org/x/net/bpf; sockets created in CPU order, one per CPU.
insns, _ := bpf.Assemble([]bpf.Instruction{
	bpf.LoadExtension{Num: bpf.ExtCPUID},
	bpf.ALUOpConstant{Op: bpf.ALUOpMod, Val: uint32(nsocks)},
	bpf.RetA{},
})
filter := make([]unix.SockFilter, len(insns))
for i, in := range insns {
	filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
}
prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
raw.Control(func(fd uintptr) {
	err = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog)
})`

func checkReuseportSteering(in NetInput, t Thresholds) *Finding {
	e := in.Evidence
	port := e.Port
	if sc, ok := contendedSocket(e); ok {
		port = sc.Socket.Port
	}
	g, ok := reuseportGroup(e, port)
	if !ok {
		// Any group will do when --port was not given.
		for _, gg := range e.Sockets.Groups {
			if gg.Size > 1 {
				g, ok, port = gg, true, gg.Port
				break
			}
		}
		if !ok {
			return nil
		}
	}
	share := 0.0
	if e.Locks.Unavailable == "" {
		share = lockShare(e, socketLockNs(e))
	}
	// Imbalance: packets per socket of the group.
	var counts []float64
	for _, s := range socketsOnPort(e, port) {
		if s.ReceivedPkt != nil {
			counts = append(counts, float64(*s.ReceivedPkt))
		}
	}
	skew, mean, top := 0.0, 0.0, 0.0
	if len(counts) > 1 {
		for _, c := range counts {
			mean += c
			top = math.Max(top, c)
		}
		mean /= float64(len(counts))
		if mean > 0 {
			skew = top / mean
		}
	}
	// Cross-fed sockets: several NET_RX CPUs queue into the same socket.
	rx := netRXCPUs(e)
	var crossFed []string
	for _, s := range socketsOnPort(e, port) {
		cpus := s.FeedingCPUs(t.Get(NetThresholds.CrossFeed))
		n := 0
		for _, c := range cpus {
			if rx.Contains(c) {
				n++
			}
		}
		if n >= 2 {
			crossFed = append(crossFed, fmt.Sprintf("socket inode %d was fed by CPUs %s (%s of its wakeups)", s.Inode, cpuset.Of(cpus...).List(), feedShares(s, cpus)))
		}
	}
	if share < t.Get(NetThresholds.ReuseportLock) && skew < t.Get(NetThresholds.ReuseportSkew) && len(crossFed) == 0 {
		return nil
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("SO_REUSEPORT group of %d sockets on port %d still contends or is unbalanced: steer by CPU", g.Size, port),
		Impact:   math.Min(1, share+0.2*math.Max(0, skew-1)),
	}
	if share >= t.Get(NetThresholds.ReuseportLock) {
		f.Evidence = append(f.Evidence, fmt.Sprintf("socket lock wait %s over %.1fs = %s of the NET_RX CPUs' time, with %d sockets", ms(float64(socketLockNs(e))), seconds(e.DurationNs), pct(share), g.Size))
	}
	if skew >= t.Get(NetThresholds.ReuseportSkew) {
		f.Evidence = append(f.Evidence, fmt.Sprintf("busiest socket received %.0f packets, %.2f× the group mean of %.0f", top, skew, mean))
	}
	if len(crossFed) > 0 {
		f.Evidence = append(f.Evidence, crossFed...)
		// Every cross-fed socket bounces its queue between CPUs' caches.
		f.Impact = math.Min(1, f.Impact+0.1*float64(len(crossFed))/float64(g.Size))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("%d CPUs run NET_RX (%s); the flow hash can send two CPUs' packets to one socket", rx.Len(), rx.List()))
	f.Recommendation = Recommendation{
		Kind: KindCode,
		Why: "SO_REUSEPORT picks the socket by flow hash, independent of the CPU that runs the softirq, so two CPUs still meet on one socket's lock while another socket idles. " +
			"A reuseport BPF program returning the current CPU's index gives every CPU its own socket: no cross-CPU lock, and the receiving thread can sit on that CPU.",
		Code:      []CodeSketch{{Lang: "c", Code: steeringC}, {Lang: "go", Code: steeringGo}},
		Expected:  "Makita (LinuxCon Japan 2016): 2.54M → 4.25M tps (+67%) with SO_ATTACH_REUSEPORT_CBPF; softirqs stopped contending.",
		Reference: Makita2016,
		Caveats:   []string{"Needs one socket per CPU that runs NET_RX, created in CPU order, and packets spread over those CPUs (RSS/RPS); SO_ATTACH_REUSEPORT_EBPF does the same with an eBPF program."},
	}
	if share >= ReuseportRemainingShare {
		onEstimate(f, "locks", "the socket lock wait", e.Locks.Estimate)
	}
	switch {
	case skew >= ReuseportSkew && share < ReuseportRemainingShare && len(crossFed) == 0:
		// The imbalance alone decided: weigh the busiest socket's bound.
		var rel *float64
		for _, s := range socketsOnPort(e, port) {
			if s.ReceivedPkt != nil && float64(*s.ReceivedPkt) == top {
				rel = s.ReceivedRelError
			}
		}
		weighEstimate(f, "sockets", "the busiest socket's share over the mean", skew, ReuseportSkew, e.Sockets.Estimate, rel)
	case skew >= ReuseportSkew:
		onEstimate(f, "sockets", "the datagrams read per socket and the wakeups by CPU", e.Sockets.Estimate)
	case len(crossFed) > 0:
		// Which CPUs fed which socket is what the windows saw.
		notesEstimate(f, "sockets", "the wakeups by CPU", e.Sockets.Estimate)
	}
	return f
}

// feedShares prints the wakeup shares of cpus for a socket: "55%, 45%".
func feedShares(s evidence.UDPSocket, cpus []int) string {
	shares := s.WakeupShares()
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = pct(shares[c])
	}
	return strings.Join(parts, ", ")
}

// --- 8. thread pinning -----------------------------------------------------

// pinningChanges: each receiving thread pinned to one CPU.
var pinningChanges = []ChangeShape{{Kind: ChangeThreadAffinity, Target: "<n>", Old: KindForm, New: OneCPU}}

func checkThreadPinning(in NetInput) *Finding {
	e := in.Evidence
	threads := slices.Clone(e.Sockets.Threads)
	targets := netRXCPUs(e).CPUs()
	if len(threads) == 0 || len(targets) == 0 || len(threads) > PinningMaxThreads || len(threads) > 2*len(targets) {
		return nil
	}
	sort.Slice(threads, func(i, j int) bool { return threads[i].TID < threads[j].TID })
	targetSet := cpuset.Of(targets...)
	type move struct {
		t       evidence.ThreadCPU
		cpu     int
		allowed cpuset.Set
	}
	var moves []move
	off := 0
	for i, t := range threads {
		allowed, err := cpuset.ParseList(t.AllowedCPUs)
		if err != nil || allowed.Len() == 1 {
			continue // already pinned (or unreadable): the owner chose
		}
		cpu := targets[i%len(targets)]
		if !targetSet.Contains(t.LastCPU) {
			off++
		}
		moves = append(moves, move{t: t, cpu: cpu, allowed: allowed})
	}
	if off == 0 || len(moves) == 0 {
		return nil
	}
	f := &Finding{
		Severity: Warn,
		Title:    fmt.Sprintf("%d of %d receiving threads ran off the CPUs that run NET_RX; pin one per CPU", off, len(threads)),
		Evidence: []string{fmt.Sprintf("NET_RX runs on CPUs %s", targetSet.List())},
		Impact:   0.15 * float64(off) / float64(len(threads)),
	}
	r := &f.Recommendation
	var pairs []string
	for _, m := range moves {
		if len(f.Evidence) < 9 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("thread %d (%s) last ran on CPU %d, allowed %s", m.t.TID, m.t.Comm, m.t.LastCPU, m.allowed.List()))
		}
		pairs = append(pairs, fmt.Sprintf("%d→%d", m.t.TID, m.cpu))
		r.AddChanges(ThreadAffinityChange(m.t.TID, m.allowed, cpuset.Of(m.cpu)))
	}
	f.Evidence = append(f.Evidence, "pinning (thread→CPU): "+strings.Join(pairs, " "))
	r.Kind = KindSetting
	r.Why = "A thread that reads on another CPU than the one that enqueued its packets pulls every skb and the socket's cache lines across CPUs and wakes remotely; one receiving thread per NET_RX CPU, on that CPU, keeps the path cache-local."
	r.Code = []CodeSketch{{Lang: "c", Code: "cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);   /* the CPU of this thread's socket */\npthread_setaffinity_np(pthread_self(), sizeof(set), &set);"},
		{Lang: "go", Code: "runtime.LockOSThread() // this goroutine owns its OS thread\nvar set unix.CPUSet\nset.Set(cpu)\nunix.SchedSetaffinity(0, &set)"}}
	r.Expected = "Makita (LinuxCon Japan 2016): 4.25M → 5.05M tps (+19%) pinning each thread to its socket's CPU."
	r.Reference = Makita2016
	r.Caveats = []string{
		"The affinity lasts for the life of these threads: make it permanent in the application (code above) or the service unit (CPUAffinity=).",
		"Pin thread i to CPU i only if socket i receives CPU i's packets (net.reuseport-steering); otherwise locality is partial.",
	}
	return f
}

// --- 9. XPS unset ----------------------------------------------------------

// RcvbufSize is the receive buffer one socket needs to absorb a stall of
// RcvbufStallSeconds at ratePerSocket datagrams/s, rounded up to a power of
// two and capped at RcvbufMaxBytes.
func RcvbufSize(ratePerSocket float64) int64 {
	need := ratePerSocket * RcvbufStallSeconds * RcvbufTruesize
	size := int64(1 << 20)
	for float64(size) < need && size < RcvbufMaxBytes {
		size <<= 1
	}
	return size
}

// rcvbufChanges: the socket receive buffer limit and default.
var rcvbufChanges = []ChangeShape{{Kind: ChangeSysctl, Target: "net.core.{rmem_max|rmem_default}", Old: Decimal, New: Decimal}}

func checkUDPRcvbuf(in NetInput, t Thresholds) *Finding {
	f := udpRcvbuf(in, t)
	e := in.Evidence
	// The per-socket reads (and the drops by reason) replace the exact
	// SNMP counters when the sockets are known.
	for _, s := range socketsOnPort(e, e.Port) {
		if s.ReceivedPkt != nil {
			onEstimate(f, "sockets", "the datagrams read per socket", e.Sockets.Estimate)
			notesEstimate(f, "drops", "the drops by reason", e.Drops.Estimate)
			break
		}
	}
	return f
}

func udpRcvbuf(in NetInput, t Thresholds) *Finding {
	e := in.Evidence
	secs := seconds(e.DurationNs)
	if secs <= 0 {
		return nil
	}
	if e.TCP != nil && e.Sockets.Unavailable != "" {
		// A TCP run that measured no UDP socket: the namespace's
		// receive-buffer drops are some other program's.
		return nil
	}
	errs, snmpOK := e.Drops.RcvbufErrors()
	for _, d := range e.Drops.ByPort {
		if !snmpOK && d.Reason == "SOCKET_RCVBUFF" {
			errs += d.Count
		}
	}
	delivered, _ := e.Drops.InDatagrams()
	// Per-port numbers are closer to the application when present.
	socks := socketsOnPort(e, e.Port)
	var portRecv uint64
	portKnown := false
	for _, s := range socks {
		if s.ReceivedPkt != nil {
			portRecv += *s.ReceivedPkt
			portKnown = true
		}
	}
	if portKnown {
		delivered = portRecv
		if n, _ := e.Drops.OnPort(e.Port); n > 0 {
			errs = n
		}
	}
	arrivals := delivered + errs
	if errs == 0 || arrivals == 0 {
		return nil
	}
	dropShare := float64(errs) / float64(arrivals)
	if dropShare < t.Get(NetThresholds.RcvbufDrop) {
		return nil
	}
	nsock := max(len(socks), 1)
	rate := float64(arrivals) / secs
	need := RcvbufSize(rate / float64(nsock))
	f := &Finding{
		Severity: Info,
		Title:    fmt.Sprintf("%s of arriving datagrams dropped: socket receive buffer full", pct(dropShare)),
		Evidence: []string{
			fmt.Sprintf("%d receive-buffer drops and %d datagrams delivered over %.1fs (%.0f arriving/s)", errs, delivered, secs, rate),
			fmt.Sprintf("%.0f datagrams/s per socket × %.0f ms stall × %d B truesize = %d B per socket → %d B (%d MiB)", rate/float64(nsock), RcvbufStallSeconds*1000, RcvbufTruesize, int64(rate/float64(nsock)*RcvbufStallSeconds*RcvbufTruesize), need, need>>20),
		},
		Impact: dropShare,
	}
	switch {
	case dropShare >= 0.10:
		f.Severity = Crit
	case dropShare >= 0.01:
		f.Severity = Warn
	}
	for _, s := range socks {
		if len(f.Evidence) < 6 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("socket %s (inode %d): %d B queued at the end, %d drops", s.Local, s.Inode, s.RxQueueB, s.DropsDelta))
		}
	}
	r := &f.Recommendation
	r.Why = "A UDP socket drops a datagram when its queued bytes (charged at skb truesize) exceed its receive buffer; bursts and short receiver stalls overflow the default buffer long before the receiver is too slow on average."
	r.Code = []CodeSketch{{Lang: "c", Code: fmt.Sprintf("int size = %d;  /* capped by net.core.rmem_max */\nsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));", need)},
		{Lang: "go", Code: fmt.Sprintf("conn.(*net.UDPConn).SetReadBuffer(%d) // capped by net.core.rmem_max", need)}}
	r.Expected = fmt.Sprintf("Buffers of %d MiB per socket absorb a %.0f ms stall at the measured rate; receive-buffer drops stop unless the receiver is slower than arrivals on average.", need>>20, RcvbufStallSeconds*1000)
	r.Reference = Makita2016 + " (its benchmark counts only delivered transactions; drops are what a full buffer costs)."
	r.Caveats = []string{
		"If drops persist at the same rate, the receiver is too slow on average: a bigger buffer only adds latency. Fix throughput (net.socket-lock-contention, net.reuseport-steering) first.",
		"rmem_default applies to sockets created afterwards: restart the service (or have it call SO_RCVBUF).",
	}
	r.Parameters = map[string]int64{"so_rcvbuf_bytes": need}
	var oldMax, oldDefault *int64
	if in.Config != nil {
		oldMax, oldDefault = in.Config.Core.RmemMax, in.Config.Core.RmemDefault
		if w := in.Config.Core.RmemWritable; w != nil && !*w {
			// A network namespace (a container): the sysctls are the
			// host's, read-only here. The socket option is the way.
			r.Kind = KindCode
			f.Evidence = append(f.Evidence, fmt.Sprintf("net.core.rmem_default (%s B) and rmem_max (%s B) are read-only in this network namespace: they follow the host's", intOrUnknown(oldDefault), intOrUnknown(oldMax)))
			if oldMax != nil && *oldMax < need {
				r.Caveats = append(r.Caveats, fmt.Sprintf("SO_RCVBUF is capped at rmem_max (%d B); above it the application needs SO_RCVBUFFORCE (CAP_NET_ADMIN), or the host's rmem_max raised.", *oldMax))
			}
			return f
		}
	}
	if oldMax != nil && oldDefault != nil && *oldDefault >= need && *oldMax >= need {
		// Buffers are already that large: the receiver is the problem.
		r.Kind = KindAdvice
		f.Evidence = append(f.Evidence, fmt.Sprintf("rmem_default is already %d B and rmem_max %d B", *oldDefault, *oldMax))
		r.Code = nil
		return f
	}
	if oldMax == nil || oldDefault == nil {
		// Without the old values there is nothing to restore: say what to
		// set, but do not offer it to --apply.
		r.Kind = KindAdvice
		r.Apply = []string{fmt.Sprintf("sysctl -w net.core.rmem_max=%d", need), fmt.Sprintf("sysctl -w net.core.rmem_default=%d", need)}
		return f
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("net.core.rmem_default = %d B, rmem_max = %d B", *oldDefault, *oldMax))
	r.Kind = KindSetting
	if *oldMax < need {
		r.AddChanges(SysctlChange("net.core.rmem_max", strconv.FormatInt(*oldMax, 10), strconv.FormatInt(need, 10)))
	}
	if *oldDefault < need {
		r.AddChanges(SysctlChange("net.core.rmem_default", strconv.FormatInt(*oldDefault, 10), strconv.FormatInt(need, 10)))
	}
	return f
}

func intOrUnknown(v *int64) string {
	if v == nil {
		return "?"
	}
	return strconv.FormatInt(*v, 10)
}
