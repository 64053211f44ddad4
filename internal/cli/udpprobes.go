package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
	"github.com/perfscope/perfscope/recipes"
)

// netProbes are the udp command's optional probes. Each one that fails to
// open leaves its error, which its section prints as "unavailable: <why>".
type netProbes struct {
	queue    *netqueue.Probe
	queueErr error
	lock     *lockstat.Probe
	lockErr  error
	drop     *udpdrop.Probe
	dropErr  error
	sock     *udpsock.Probe
	sockErr  error
}

func openNetProbes(o *udpOptions) *netProbes {
	p := &netProbes{}
	// A device without NAPI instances of its own (lo, veth without GRO)
	// gets no napi_poll probe: on loopback it fires once per packet for
	// nothing the report shows. Kernels without the netdev family (< 6.8)
	// cannot tell, and keep it.
	napis, napiErr := netlinkq.NAPIs(o.iface.Index)
	noNAPI := napiErr == nil && len(napis) == 0
	p.queue, p.queueErr = netqueue.Open(netqueue.Options{Method: o.method, Ifindex: o.iface.Index, NoNAPI: noNAPI})
	p.lock, p.lockErr = lockstat.Open(lockstat.Options{Method: o.method, StackEvery: o.LockStacks})
	p.drop, p.dropErr = udpdrop.Open(udpdrop.Options{Method: o.method, Port: uint16(o.Port)})
	// Per-socket reads only matter for the sockets section, which needs
	// --port or --pid; without them the probe is not loaded at all.
	if o.Port != 0 || o.PID != 0 {
		p.sock, p.sockErr = udpsock.Open(udpsock.Options{Method: o.method, Port: uint16(o.Port)})
	} else {
		p.sockErr = errors.New("no --port or --pid given")
	}
	return p
}

func (p *netProbes) Close() {
	if p.queue != nil {
		p.queue.Close()
	}
	if p.lock != nil {
		p.lock.Close()
	}
	if p.drop != nil {
		p.drop.Close()
	}
	if p.sock != nil {
		p.sock.Close()
	}
}

// costs are the bpf_stats of every open probe.
func (p *netProbes) costs() []probes.ProgramCost {
	var out []probes.ProgramCost
	if p.queue != nil {
		out = append(out, p.queue.Costs()...)
	}
	if p.lock != nil {
		out = append(out, p.lock.Costs()...)
	}
	if p.drop != nil {
		out = append(out, p.drop.Costs()...)
	}
	if p.sock != nil {
		out = append(out, p.sock.Costs()...)
	}
	return out
}

// netProbeSample is one reading of every open probe.
type netProbeSample struct {
	queue netqueue.Snapshot
	lock  lockstat.Snapshot
	drop  udpdrop.Snapshot
	sock  udpsock.Snapshot
}

func (p *netProbes) snapshot() (netProbeSample, error) {
	var s netProbeSample
	var err error
	if p.queue != nil {
		if s.queue, err = p.queue.Snapshot(); err != nil {
			return s, fmt.Errorf("read queue probe: %w", err)
		}
	}
	if p.lock != nil {
		if s.lock, err = p.lock.Snapshot(); err != nil {
			return s, fmt.Errorf("read lock probe: %w", err)
		}
	}
	if p.drop != nil {
		if s.drop, err = p.drop.Snapshot(); err != nil {
			return s, fmt.Errorf("read drop probe: %w", err)
		}
	}
	if p.sock != nil {
		if s.sock, err = p.sock.Snapshot(); err != nil {
			return s, fmt.Errorf("read socket probe: %w", err)
		}
	}
	return s, nil
}

// missingNote lists optional hooks that did not attach.
func missingNote(m map[string]error) string {
	var parts []string
	for hook, err := range m {
		parts = append(parts, fmt.Sprintf("%s: %v", hook, err))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// queueSides turns the queue probe's window into the kernel-side per-queue
// counts, the (queue × CPU) NAPI matrix, per-CPU TX queues and qdisc rows.
func queueSides(o *udpOptions, driver string, d netqueue.Snapshot, noNAPI bool) (recipes.QueueCounts, evidence.QueueCPUSection, map[int]map[int]uint64, []evidence.QdiscRow) {
	ifindex := o.iface.Index
	conv := netqueue.ConventionFor(driver)
	var counts recipes.QueueCounts
	counts.RX = map[int]uint64{}
	for q, perCPU := range d.RXQueues(ifindex, conv) {
		if q >= 0 {
			counts.RX[q] = netqueue.TrafficTotal(perCPU).Packets
		}
	}
	counts.TX = map[int]uint64{}
	txByCPU := map[int]map[int]uint64{}
	for k, perCPU := range d.TX {
		if k.Ifindex != ifindex {
			continue
		}
		counts.TX[k.Queue] += netqueue.TrafficTotal(perCPU).Packets
		for cpu, t := range perCPU {
			if t.Packets == 0 {
				continue
			}
			if txByCPU[cpu] == nil {
				txByCPU[cpu] = map[int]uint64{}
			}
			txByCPU[cpu][k.Queue] += t.Packets
		}
	}
	var qdisc []evidence.QdiscRow
	byQ := map[int]*evidence.QdiscRow{}
	for k, perCPU := range d.Qdisc {
		if k.Ifindex != ifindex {
			continue
		}
		r := byQ[k.Queue]
		if r == nil {
			r = &evidence.QdiscRow{TXQueue: k.Queue}
			byQ[k.Queue] = r
		}
		for _, s := range perCPU {
			r.Enqueues += s.Enqueues
			r.Dequeues += s.DequeuedPackets
		}
	}
	for _, q := range sortedKeysQdisc(byQ) {
		qdisc = append(qdisc, *byQ[q])
	}

	var matrix evidence.QueueCPUSection
	var fromNetlink map[uint32]int
	if qs, err := netlinkq.Queues(ifindex); err == nil {
		fromNetlink = netlinkq.QueueNAPI(qs)
	}
	napiQueue, method, err := netqueue.ResolveNAPIQueues(fromNetlink, d, ifindex, conv)
	switch {
	case noNAPI:
		matrix.Unavailable = fmt.Sprintf("%s has no NAPI instance of its own (netdev netlink lists none; loopback and RPS use the per-CPU backlog): napi:napi_poll not attached", o.Iface)
	case err != nil:
		matrix.Unavailable = fmt.Sprintf("NAPI ids of %s could not be mapped to queues: %v", o.Iface, err)
	}
	matrix.Mapping = method
	counts.NAPIWork = map[int]uint64{}
	for k, perCPU := range d.NAPI {
		if k.Ifindex != ifindex {
			continue
		}
		q, ok := napiQueue[k.ID]
		if !ok {
			q = -1
		}
		for cpu, s := range perCPU {
			if s.Polls == 0 && s.Work == 0 {
				continue
			}
			matrix.Cells = append(matrix.Cells, evidence.QueueCPUCell{Queue: q, NAPI: k.ID, CPU: cpu, Polls: s.Polls, Work: s.Work})
			if q >= 0 {
				counts.NAPIWork[q] += s.Work
			}
		}
	}
	if len(matrix.Cells) == 0 && matrix.Unavailable == "" {
		matrix.Unavailable = fmt.Sprintf("no NAPI polls on %s in the window (no per-queue NAPI: on veth it needs GRO or XDP)", o.Iface)
	}
	if len(counts.NAPIWork) == 0 {
		counts.NAPIWork = nil
	}
	sort.Slice(matrix.Cells, func(i, j int) bool {
		a, b := matrix.Cells[i], matrix.Cells[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		return a.CPU < b.CPU
	})
	return counts, matrix, txByCPU, qdisc
}

func sortedKeysQdisc(m map[int]*evidence.QdiscRow) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// lockPrimitive reports frames that take or wait on a lock; the site shown
// for a stack is its first frame past them.
func lockPrimitive(f string) bool {
	f = strings.TrimSuffix(f, "_[k]")
	for _, p := range []string{"spin_lock", "queued_spin", "queued_read", "queued_write", "mutex_lock", "__mutex", "rwsem", "down_read", "down_write", "contention", "__bpf_trace", "bpf_trace_run", "perf_trace"} {
		if strings.Contains(f, p) {
			return true
		}
	}
	return false
}

// lockSection symbolizes and classifies contended sites and names the
// sockets whose locks were contended. The lock probe recognises a socket's
// lock in the kernel and records the socket's inode, port and network
// namespace; this namespace's /proc/net/udp (udp, a zero table when it
// could not be read) adds the bound address and /proc/PID/fd the
// processes, both by inode, so no kernel address is needed.
//
// With stacks sampled (d.StackEvery > 1) the sites' counts and waits, and
// so total_ns_by_class, are lockstat.SiteWaits' estimates: each sampled
// stack scaled to every contention of its lock kind, unbiased for the
// class shares the rules compare. total_ns and the sockets are exact.
func lockSection(d lockstat.Snapshot, udp sockets.UDPTable) evidence.LockSection {
	sec := evidence.LockSection{ByClass: map[string]uint64{}, Lost: d.Lost.Total(), StackEvery: max(d.StackEvery, 1)}
	ksyms, _ := symbols.New(symbols.Default).KernelSymbols()
	for k, sw := range d.SiteWaits() {
		w := sw.Estimated
		if w.Count == 0 {
			continue
		}
		class, site := lockstat.NotSampled, "[unsampled]"
		var frames []string
		if k.StackID != lockstat.Unsampled {
			if ksyms != nil {
				frames = lockstat.Symbolize(d.Stacks[k.StackID], ksyms)
			}
			class, site = lockstat.Classify(frames), "[unknown]"
			for _, f := range frames {
				if !lockPrimitive(f) {
					site = strings.TrimSuffix(f, "_[k]")
					break
				}
			}
		}
		sec.Sites = append(sec.Sites, evidence.LockSite{Class: string(class), Site: site, Stack: frames,
			Count: w.Count, TotalNs: uint64(w.Total), MaxNs: uint64(w.Max), SampledCount: sw.Sampled.Count})
		sec.ByClass[string(class)] += uint64(w.Total)
	}
	// The exact total: the estimates add up to it only up to rounding.
	for _, w := range d.Sites {
		sec.TotalNs += uint64(w.Total)
	}
	sort.Slice(sec.Sites, func(i, j int) bool { return sec.Sites[i].TotalNs > sec.Sites[j].TotalNs })

	// An unreadable namespace link (0) leaves every socket in "this"
	// namespace: inodes are unique across namespaces, so the join by inode
	// still finds only our own sockets in /proc/net/udp.
	netns, _ := sockets.Default.NetNS("self")
	pids, _ := lockstat.SocketOwners(sockets.Default, d.Inodes())
	for _, sw := range d.SocketWaits(lockstat.NewSocketDirectory(netns, udp, pids)) {
		// The probe also names TCP sockets' locks; this command (and its
		// rules, which act on the most contended socket) is about UDP.
		// Their wait still counts in the sites and classes above.
		if sw.Socket.Protocol == "tcp" {
			continue
		}
		sec.Sockets = append(sec.Sockets, socketContention(sw))
	}
	// Sites are per stack, not per lock: name the socket on socket
	// sites when one socket holds most of the socket wait.
	if len(sec.Sockets) > 0 {
		top := sec.Sockets[0]
		var all uint64
		for _, sc := range sec.Sockets {
			all += sc.TotalNs
		}
		if float64(top.TotalNs) >= 0.8*float64(all) {
			for i := range sec.Sites {
				if lockstat.IsSocketClass(lockstat.Class(sec.Sites[i].Class)) {
					s := top.Socket
					sec.Sites[i].Socket = &s
				}
			}
		}
	}
	return sec
}

func socketContention(sw lockstat.SocketWait) evidence.SocketContention {
	ref := sw.Socket
	sc := evidence.SocketContention{
		Socket: evidence.SocketRef{Port: int(ref.Port), Protocol: ref.Protocol, Inode: ref.Inode, NetNS: ref.NetNS,
			OtherNetNS: ref.OtherNetNS, Field: string(ref.Field)},
		Count: sw.Count, TotalNs: uint64(sw.Total), MaxNs: uint64(sw.Max),
	}
	if ref.Local.IsValid() {
		sc.Socket.Local = ref.Local.String()
	}
	if len(ref.PIDs) > 0 {
		sc.Socket.PID = ref.PIDs[0]
		if comm, err := procfs.Default.ReadString(fmt.Sprintf("/proc/%d/comm", ref.PIDs[0])); err == nil {
			sc.Socket.Comm = comm
		}
	}
	for _, f := range sw.ByField {
		sc.ByLock = append(sc.ByLock, evidence.SocketLockWait{Field: string(f.Field), Count: f.Count,
			TotalNs: uint64(f.Total), MaxNs: uint64(f.Max)})
	}
	return sc
}

// addProbeDrops adds the drop probe's per-port reasons to the counters.
func addProbeDrops(sec *evidence.DropSection, p *udpdrop.Probe, d udpdrop.Snapshot) {
	// The probe names the reason; replace the coarser sk_drops rows.
	sec.ByPort = nil
	type key struct {
		port   int
		reason string
	}
	agg := map[key]uint64{}
	for k, n := range d.Ports {
		if n == 0 {
			continue
		}
		reason := k.Kind.String()
		if name := p.ReasonName(k.Kind, k.Reason); name != "" {
			reason += ":" + name
		}
		agg[key{int(k.Port), reason}] += n
	}
	for k, n := range agg {
		sec.ByPort = append(sec.ByPort, evidence.PortDrops{Port: k.port, Reason: k.reason, Count: n})
	}
	sort.Slice(sec.ByPort, func(i, j int) bool { return sec.ByPort[i].Count > sec.ByPort[j].Count })
	for r, n := range d.Reasons {
		if n > 0 {
			sec.ByReason[p.ReasonName(udpdrop.KfreeSkb, r)] += n
		}
	}
}

// addSocketReads fills the sockets' received datagrams from the socket
// probe's window, or says why they are missing.
func addSocketReads(sec *evidence.SocketSection, np *netProbes, d udpsock.Snapshot, window time.Duration) {
	if np.sock == nil {
		sec.ReceivedUnavailable = fmt.Sprintf("socket probe: %v", np.sockErr)
		return
	}
	reads := make(map[uint64]uint64, len(d.Sockets))
	for ino, r := range d.Sockets {
		reads[ino] = r.Datagrams
	}
	recipes.AddSocketReads(sec, reads, window)
	recipes.AddSocketWakeups(sec, d.Wakeups)
	if d.Lost > 0 {
		sec.ReceivedUnavailable = fmt.Sprintf("%d reads not counted: the socket probe's map was full", d.Lost)
	}
}
