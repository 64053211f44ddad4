package measure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/irq"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/report"
)

// NetOptions configure a network run (`perfscope udp`).
type NetOptions struct {
	// Iface is the interface measured (ResolveInterface).
	Iface netdev.Interface
	// Port and PID choose the sockets (and threads) inspected; 0: none.
	Port, PID int
	// Select, from --cgroup, --container or --pod (SelectWorkload),
	// keeps the sockets its processes own, and the lock waits and drops
	// of those sockets; nil: every socket.
	Select *cgroup.Selection
	Method probes.AttachMethod
	// LockStacks takes the stack of 1 in N lock contentions.
	LockStacks int
	// Profile samples on-CPU stacks at Frequency Hz; false skips it.
	Profile   bool
	Frequency int
}

// ResolveInterface checks that name exists here and is up; otherwise the
// error (ErrBadInput) names the interfaces that do exist, or the network
// namespace where this one lives and how to run there.
func ResolveInterface(src Sources, name string) (netdev.Interface, error) {
	nd := src.netdev()
	names := func() string { n, _ := nd.InterfaceNames(); return strings.Join(n, ", ") }
	if name == "" {
		return netdev.Interface{}, BadInput("--iface is required (interfaces here: %s)", names())
	}
	iface, err := nd.Interface(name)
	if errors.Is(err, netdev.ErrNoInterface) {
		if m, ferr := netdev.LiveNamespaceSearch().Find(name); ferr == nil && m != nil {
			return iface, BadInput("interface %s is not in this network namespace: %s", name, m.RunHint())
		}
		return iface, BadInput("unknown interface %s (interfaces here: %s)", name, names())
	}
	if err != nil {
		return iface, fmt.Errorf("read interface %s: %w", name, err)
	}
	if !iface.Up {
		var up []string
		all, _ := nd.InterfaceNames()
		for _, n := range all {
			if i, err := nd.Interface(n); err == nil && i.Up {
				up = append(up, n)
			}
		}
		return iface, BadInput("interface %s is %s; bring it up or choose another (up here: %s)", name, iface.OperState, strings.Join(up, ", "))
	}
	return iface, nil
}

// NetResult is one network run.
type NetResult struct {
	Evidence evidence.NetEvidence
	// Config is the configuration read at the start; nil when unreadable.
	Config *netconfig.NetConfig
	// Flames are the on-CPU stacks of the CPUs doing receive work
	// ("netrx"), of the others ("other") and of all ("all"); nil without
	// a profile.
	Flames map[string]*flame.Profile
	Run    Run
}

// RunNet measures where an interface's packets spend CPU and wait, in one
// window: softirq per CPU, traffic per queue and CPU, IRQs, TX queues,
// lock contention, drops, sockets and an on-CPU profile, each part
// reporting "unavailable: <why>" when its source does not exist here.
func RunNet(ctx context.Context, src Sources, o NetOptions, w Window) (NetResult, error) {
	n := NewNetParts(o)
	s, err := Open(src, n.List()...)
	if err != nil {
		return NetResult{}, err
	}
	defer s.Close()
	run, err := s.Measure(ctx, w)
	if err != nil {
		return NetResult{}, err
	}
	res := n.Assemble(src, o, run)
	res.Run = run
	return res, nil
}

// NetParts are the parts of a network run, in the order they open and
// read (softirq first, as before: its probe reading starts the window).
// A recipe may leave any of them out but the counters; the sections of
// the missing ones say so.
type NetParts struct {
	Softirq  *Softirq
	Queues   *Queues
	Locks    *Locks
	Drops    *Drops
	Sockets  *SocketReads
	Counters *NetCounters
	Profile  *Profile
	// TCP is the TCP layer (`perfscope tcp`); nil in a UDP run.
	TCP *TCP
	// NoProfile says why there is no profile part.
	NoProfile string
}

// NewNetParts are the parts of `perfscope udp`: every network probe, the
// profile with o.Profile.
func NewNetParts(o NetOptions) *NetParts {
	n := &NetParts{
		// The udp report does not use raise→entry latency; skipping its
		// tracepoint saves one BPF run per NET_RX raise (~100 ns per
		// datagram on a loopback flood).
		Softirq:   NewSoftirq(SoftirqOptions{Method: o.Method, NoLatency: true}),
		Queues:    NewQueues(QueueOptions{Method: o.Method, Iface: o.Iface}),
		Locks:     NewLocks(LockOptions{Method: o.Method, StackEvery: o.LockStacks}),
		Drops:     NewDrops(DropOptions{Method: o.Method, Port: o.Port}),
		Sockets:   NewSocketReads(SocketOptions{Method: o.Method, Port: o.Port, PID: o.PID}),
		Counters:  NewNetCounters(NetCounterOptions{Iface: o.Iface.Name}),
		NoProfile: "on-CPU profile: disabled with --no-profile",
	}
	if o.Profile {
		// Every CPU, kernel and user stacks, rooted at the CPU so the
		// profile splits by it.
		// NET_RX on a real NIC runs mostly from irq_exit on idle CPUs:
		// keep those samples of the idle task, drop only its loop.
		n.Profile = NewProfile(ProfileOptions{Frequency: o.Frequency, Root: cpuprofile.RootCPU, KeepIdleInterrupts: true,
			StackEntries: cpuprofile.DefaultStackEntries})
	}
	return n
}

// List is the parts to open, in order.
func (n *NetParts) List() []Part {
	return partsOf(n.Softirq, n.Queues, n.Locks, n.Drops, n.Sockets, n.TCP, n.Counters, n.Profile)
}

// partsOf lists the parts that are there: a nil *Locks stored in a Part
// is not a nil Part, and a recipe leaves parts out.
func partsOf(ps ...Part) []Part {
	var out []Part
	for _, p := range ps {
		if v := reflect.ValueOf(p); p != nil && !(v.Kind() == reflect.Pointer && v.IsNil()) {
			out = append(out, p)
		}
	}
	return out
}

// notInRecipe is a section's note for a part the recipe left out.
func notInRecipe(what, probe string) string {
	return fmt.Sprintf("%s: not measured (the recipe has no %s probe)", what, probe)
}

// Assemble joins the parts' evidence per CPU, queue and socket.
func (n *NetParts) Assemble(src Sources, o NetOptions, run Run) NetResult {
	c := n.Counters
	var soft evidence.SoftirqEvidence
	if n.Softirq != nil {
		soft = n.Softirq.Evidence()
	}
	window := time.Duration(soft.DurationNs)
	if window <= 0 {
		window = run.Duration()
	}
	ev := evidence.NetEvidence{Softirq: soft,
		DurationNs: int64(window), Port: o.Port, PID: o.PID,
		Interface: evidence.NetInterface{Name: o.Iface.Name, Ifindex: o.Iface.Index, Driver: o.Iface.Driver,
			Virtual: o.Iface.Virtual, NUMANode: o.Iface.NUMANode, RXQueues: len(o.Iface.RX), TXQueues: len(o.Iface.TX)},
	}
	netRX := ev.Softirq.NetRXCPUs()
	if o.Iface.Name == "" {
		none := evidence.Section{Unavailable: "no interface: the recipe measures sockets and ports, not an interface"}
		ev.Queues.Section, ev.QueueCPU.Section, ev.IRQs.Section, ev.TX.Section = none, none, none, none
	} else {
		drvInfo, drvErr := src.Ethtool.DriverInfo(o.Iface.Name)
		if drvErr == nil && ev.Interface.Driver == "" {
			ev.Interface.Driver = drvInfo.Driver
		}
		// Queues: the driver's counters, the kernel's from the queue probe.
		var kernel QueueCounts
		var txByCPU map[int]map[int]uint64
		var qdisc []evidence.QdiscRow
		if n.Queues != nil {
			kernel, txByCPU, qdisc = n.Queues.Evidence(src, ev.Interface.Driver, &ev.QueueCPU)
		} else {
			ev.QueueCPU.Unavailable = notInRecipe("NAPI polls per queue and CPU", "netqueue")
		}
		ev.Queues = BuildQueues(o.Iface, c.driverDelta(), c.driverErr(), kernel, window)
		ev.Queues.NICMissed, ev.Queues.NICMissedCounters = c.nicMissed()
		ev.IRQs = c.irqs(src, o.Iface, drvInfo, drvErr, netRX)
		ev.TX = BuildTX(o.Iface, txByCPU, qdisc)
		if n.Queues != nil {
			n.Queues.MarkEstimates(&ev.Queues, &ev.TX)
			ev.Queues.Notes = append(ev.Queues.Notes, n.Queues.Notes()...)
			ev.Queues.Intervals = n.Queues.Intervals()
			if err := n.Queues.OpenErr(); err != nil {
				ev.TX.Unavailable = fmt.Sprintf("per-CPU TX queues and qdisc activity: queue probe unavailable: %v (XPS configuration shown)", err)
			}
		} else {
			ev.Queues.Notes = append(ev.Queues.Notes, notInRecipe("kernel per-queue counts", "netqueue"))
		}
	}
	if n.Locks != nil {
		ev.Locks = n.Locks.Evidence()
	} else {
		ev.Locks.Unavailable = notInRecipe("lock contention", "lockstat")
	}
	ev.Drops = c.drops()
	if n.Drops != nil {
		n.Drops.Add(&ev.Drops)
	} else {
		ev.Drops.Notes = append(ev.Drops.Notes, notInRecipe("drop reasons", "udpdrop")+"; socket drop counters shown")
	}
	ev.Sockets = c.socketSection(src, o.Port, o.PID, o.Select)
	if ev.Sockets.Unavailable == "" {
		var reads []socketReadTick
		if n.Sockets != nil {
			n.Sockets.Add(&ev.Sockets, window)
			reads = n.Sockets.ticks
		} else {
			ev.Sockets.ReceivedUnavailable = notInRecipe("datagrams read", "udpsock")
		}
		c.socketIntervals(&ev.Sockets, reads)
	}
	attributeNet(src, &ev, c.last.udp, o.Select)
	if o.Select != nil {
		ev.Filter, ev.FilterPIDs = o.Select.Filter.String(), o.Select.PIDs()
	}

	if n.TCP != nil {
		t := n.TCP.Evidence(window)
		ev.TCP = &t
		if n.Sockets == nil {
			// The UDP socket view has nothing to say about a TCP port.
			ev.Sockets = evidence.SocketSection{}
			ev.Sockets.Unavailable = "UDP sockets: not listed in a TCP run (tcp.listeners and tcp.connections are)"
		}
	}
	res := NetResult{Evidence: ev, Config: c.config}
	if n.Profile == nil {
		res.Evidence.Profile.Unavailable = n.NoProfile
	} else if err := n.Profile.OpenErr(); err != nil {
		res.Evidence.Profile.Unavailable = fmt.Sprintf("on-CPU profile: %v", err)
	} else {
		res.Evidence.Profile, res.Flames = profileSplit(n.Profile, netRX, soft)
	}
	return res
}

// profileSplit names the run's samples, measures the kernel function
// groups on the CPUs doing receive work, and splits the stacks into
// those CPUs, the others, and all. The NET_RX CPUs the profile did not see
// (undersampled) are set apart with the softirq probe's NET_RX time on
// each (soft), so that the shares say what they cover.
func profileSplit(p *Profile, netRXCPUs []int, soft evidence.SoftirqEvidence) (evidence.ProfileSection, map[string]*flame.Profile) {
	raw := p.Raw()
	sec := evidence.ProfileSection{FrequencyHz: p.Frequency(), NetRXCPUs: netRXCPUs, Lost: raw.Lost.Total()}
	netRX := map[int]bool{}
	for _, c := range netRXCPUs {
		netRX[c] = true
	}
	flames := map[string]*flame.Profile{"netrx": flame.New(flame.Samples), "other": flame.New(flame.Samples), "all": flame.New(flame.Samples)}
	samples := p.Samples()
	for _, s := range samples {
		flames["all"].Add(s.Frames, int64(s.Count))
		if netRX[s.CPU] {
			flames["netrx"].Add(s.Frames, int64(s.Count))
		} else {
			flames["other"].Add(s.Frames, int64(s.Count))
		}
	}
	sec.Groups, sec.Samples, sec.NetRXSamples = evidence.GroupShares(samples, netRX)
	idle := p.Idle()
	sec.IdleInterruptSamples, sec.IdleLoopSamples = idle.Interrupt(), idle.Loop()
	sec.CPUs, sec.ProfileSampling = p.PerCPU(samples)
	sec.NetRXSeen, sec.NetRXUnseen = evidence.SplitSeen(netRXCPUs, sec.CPUs, soft)
	return sec, flames
}

// Report is the run's report: the evidence, the configuration, and the
// network rules' findings.
func (r NetResult) Report(version string) *report.Report {
	rep := envelope("udp", version, r.Run, r.Evidence.DurationNs, report.NetData{NetEvidence: r.Evidence, Config: r.Config})
	rep.Findings = diagnose.DiagnoseNet(diagnose.NetInput{Evidence: r.Evidence, Config: r.Config})
	return rep
}

// NetCounterOptions configure the network counters part.
type NetCounterOptions struct {
	// Iface is the interface whose driver counters are read ("" for none)
	// and whose configuration is read at the start.
	Iface string
	// Port and PID, with Timeline, choose the sockets whose receive
	// queues and drop counters are read at every tick.
	Port, PID int
	Timeline  bool
}

// NetCounters is the part that reads the kernel's and the driver's own
// network counters at both ends of the window — per-queue driver
// statistics (ethtool -S), /proc/interrupts, /proc/net/udp, SNMP and
// softnet_stat — and the configuration at its start. It has no probe.
type NetCounters struct {
	opts        NetCounterOptions
	src         Sources
	first, last netReading
	config      *netconfig.NetConfig
	ticks       []udpTick
}

// udpTick is /proc/net/udp at one tick: the port's sockets (every socket
// without a port; the sockets section keeps its own).
type udpTick struct {
	end     time.Time
	sockets []sockets.UDPSocket
	err     error
}

// NewNetCounters returns the network counters part.
func NewNetCounters(opts NetCounterOptions) *NetCounters { return &NetCounters{opts: opts} }

// netReading is one reading of every counter; each error says why a
// source could not be read.
type netReading struct {
	// stats are the driver's statistics as read (device-level ones like
	// rx_missed_errors beside the per-queue ones in driver).
	stats      []ethtool.Stat
	driver     []ethtool.QueueCounters
	driverErr  error
	interrupts irq.Interrupts
	irqErr     error
	udp        sockets.UDPTable
	udpErr     error
	snmp       netstat.UDPSNMP
	snmpErr    error
	softnet    []netstat.SoftnetCPU
	softnetErr error
	// sockstat is the UDP memory in use (host-wide pages).
	sockstat    netstat.UDPSockstat
	sockstatErr error
}

// Open implements Part.
func (c *NetCounters) Open(src Sources) error {
	c.src = src
	return nil
}

// Probes implements Part: the counters need none.
func (c *NetCounters) Probes() []probes.Probe { return nil }

// Begin implements Part, and reads the configuration once the window's
// first counters are in.
func (c *NetCounters) Begin(context.Context) error {
	c.first = c.read()
	c.config, c.ticks = nil, nil
	if c.src.Config != nil && c.opts.Iface != "" {
		if cfg, err := c.src.Config(c.opts.Iface); err == nil {
			c.config = &cfg
		}
	}
	return nil
}

// Tick implements Ticker: the sockets' receive queues and drop counters
// at the tick. An unreadable table leaves the tick without them.
func (c *NetCounters) Tick(_ context.Context, now time.Time) error {
	if !c.opts.Timeline || (c.opts.Port == 0 && c.opts.PID == 0) {
		return nil
	}
	t, err := c.src.sockets().UDP()
	c.tick(t, err, now)
	return nil
}

// Tail implements Tailer: the window's last reading of the sockets.
func (c *NetCounters) Tail(now time.Time) {
	if c.opts.Timeline && (c.opts.Port != 0 || c.opts.PID != 0) {
		c.tick(c.last.udp, c.last.udpErr, now)
	}
}

func (c *NetCounters) tick(t sockets.UDPTable, err error, now time.Time) {
	tick := udpTick{end: now, err: err}
	for _, k := range t.Sockets {
		if c.opts.Port == 0 || int(k.Local.Port()) == c.opts.Port {
			tick.sockets = append(tick.sockets, k)
		}
	}
	c.ticks = append(c.ticks, tick)
}

// End implements Part.
func (c *NetCounters) End(context.Context) error {
	c.last = c.read()
	return nil
}

// socketIntervals joins the counters' ticks and the socket probe's (reads
// may be nil) into the section's timeline, over the section's own sockets.
func (c *NetCounters) socketIntervals(sec *evidence.SocketSection, reads []socketReadTick) {
	if len(c.ticks) == 0 && len(reads) == 0 {
		return
	}
	mine := map[uint64]bool{}
	for _, k := range sec.Sockets {
		mine[k.Inode] = true
	}
	prevDrops := map[uint64]uint64{}
	for _, k := range c.first.udp.Sockets {
		prevDrops[k.Inode] = k.Drops
	}
	byEnd := map[time.Time]*evidence.SocketInterval{}
	var order []time.Time
	row := func(end time.Time) *evidence.SocketInterval {
		if r, ok := byEnd[end]; ok {
			return r
		}
		r := &evidence.SocketInterval{End: end}
		byEnd[end] = r
		order = append(order, end)
		return r
	}
	for _, t := range c.ticks {
		r := row(t.end)
		if t.err != nil {
			continue
		}
		var q, drops uint64
		for _, k := range t.sockets {
			if !mine[k.Inode] {
				continue
			}
			q += k.RxQueueBytes
			if p, ok := prevDrops[k.Inode]; ok && k.Drops >= p {
				drops += k.Drops - p
			}
			prevDrops[k.Inode] = k.Drops
		}
		r.QueueBytes, r.Drops = &q, &drops
	}
	for _, t := range reads {
		if t.unknown {
			row(t.end) // the row stays, its reads unknown (nil)
			continue
		}
		var n uint64
		for ino, d := range t.reads {
			if mine[ino] {
				n += d
			}
		}
		row(t.end).Datagrams = &n
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Before(order[j]) })
	for _, end := range order {
		sec.Intervals = append(sec.Intervals, *byEnd[end])
	}
}

func (c *NetCounters) read() netReading {
	var r netReading
	if c.opts.Iface != "" {
		stats, err := c.src.Ethtool.Stats(c.opts.Iface)
		if err != nil {
			r.driverErr = err
		} else {
			r.stats, r.driver = stats, ethtool.PerQueue(stats)
		}
	}
	r.interrupts, r.irqErr = c.src.irq().Interrupts()
	r.udp, r.udpErr = c.src.sockets().UDP()
	r.snmp, r.snmpErr = c.src.netstat().UDPSNMP()
	r.softnet, r.softnetErr = c.src.netstat().Softnet()
	r.sockstat, r.sockstatErr = c.src.netstat().UDPSockstat()
	return r
}

// nicMissed is the packets the NIC dropped for want of a free RX
// descriptor over the window (ethtool.Missed: rx_missed_errors,
// rx_out_of_buffer, ...) and the counters summed; nil when the driver
// reports none of them.
func (c *NetCounters) nicMissed() (*uint64, []string) {
	if c.first.driverErr != nil || c.last.driverErr != nil {
		return nil, nil
	}
	n, names := ethtool.Missed(ethtool.SubStats(c.last.stats, c.first.stats))
	if len(names) == 0 {
		return nil, nil
	}
	return &n, names
}

// driverDelta is the driver's per-queue counters over the window.
func (c *NetCounters) driverDelta() []ethtool.QueueCounters {
	if c.first.driverErr != nil || c.last.driverErr != nil {
		return nil
	}
	return ethtool.SubQueues(c.last.driver, c.first.driver)
}

func (c *NetCounters) driverErr() error {
	if c.last.driverErr != nil {
		return c.last.driverErr
	}
	return c.first.driverErr
}

// irqs describes the interface's queue IRQs over the window.
func (c *NetCounters) irqs(src Sources, iface netdev.Interface, drv ethtool.DriverInfo, drvErr error, netRX []int) evidence.IRQSection {
	if c.first.irqErr != nil || c.last.irqErr != nil {
		return evidence.IRQSection{Section: evidence.Section{Unavailable: fmt.Sprintf("/proc/interrupts: %v", errors.Join(c.first.irqErr, c.last.irqErr))}}
	}
	dev := irq.Device{Interface: iface.Name}
	if drvErr == nil {
		dev.PCIAddress = drv.BusInfo
	}
	if link, err := os.Readlink(src.Root.Path(filepath.Join("/sys/class/net", iface.Name, "device"))); err == nil && strings.HasPrefix(filepath.Base(link), "virtio") {
		dev.Virtio = filepath.Base(link)
	}
	dev.MSIIRQs, _ = src.netdev().MSIIRQs(iface.Name)
	qirqs := irq.QueueIRQs(c.last.interrupts, dev)
	aff := map[int]irq.Affinity{}
	for _, q := range qirqs {
		if a, err := src.irq().Affinity(q.IRQ); err == nil {
			aff[q.IRQ] = a
		}
	}
	// The configuration read at the window's start found irqbalance
	// already (scanning every process's comm): not again.
	var bal irq.Irqbalance
	if c.config != nil && c.config.Unavailable["irqbalance"] == "" {
		bal = c.config.Irqbalance
	} else {
		bal, _ = src.irq().Irqbalance()
	}
	topo, err := src.cpus().Topology()
	if err != nil {
		topo = cpuset.Topology{}
	}
	return BuildIRQs(iface, qirqs, c.last.interrupts.Sub(c.first.interrupts), aff, bal, topo, netRX)
}

// drops fills the drops section from the counters: SNMP, softnet_stat and
// the sockets' own drop counters (sk_drops) per port, which the drop
// probe's reasons replace when it runs.
func (c *NetCounters) drops() evidence.DropSection {
	d := evidence.DropSection{ByReason: map[string]uint64{}}
	if c.first.snmpErr == nil && c.last.snmpErr == nil {
		delta := UDPSNMPEvidence(c.last.snmp.Sub(c.first.snmp))
		d.UDPSNMP = &delta
	}
	if c.first.softnetErr == nil && c.last.softnetErr == nil {
		for _, s := range netstat.SubSoftnet(c.last.softnet, c.first.softnet) {
			d.Softnet = append(d.Softnet, evidence.SoftnetCPU(s))
		}
	}
	// The UDP memory at the window's end: what net.ipv4.udp_mem limits.
	if c.last.sockstatErr == nil {
		s := evidence.UDPSockstat(c.last.sockstat)
		d.UDPSockstat = &s
	}
	if c.first.udpErr != nil || c.last.udpErr != nil {
		d.Unavailable = "per-socket drops: /proc/net/udp unreadable"
		return d
	}
	prev := map[uint64]uint64{}
	for _, k := range c.first.udp.Sockets {
		prev[k.Inode] = k.Drops
	}
	byPort := map[int]uint64{}
	for _, k := range c.last.udp.Sockets {
		if p, ok := prev[k.Inode]; ok && k.Drops > p {
			byPort[int(k.Local.Port())] += k.Drops - p
		}
	}
	for port, n := range byPort {
		d.ByPort = append(d.ByPort, evidence.PortDrops{Port: port, Reason: "socket (sk_drops)", Count: n})
	}
	sortDrops(d.ByPort)
	return d
}

// socketSection lists the sockets of port and pid, with the pid's threads.
func (c *NetCounters) socketSection(src Sources, port, pid int, sel *cgroup.Selection) evidence.SocketSection {
	if c.first.udpErr != nil || c.last.udpErr != nil {
		return evidence.SocketSection{Section: evidence.Section{Unavailable: fmt.Sprintf("/proc/net/udp: %v", errors.Join(c.first.udpErr, c.last.udpErr))}}
	}
	var owned map[uint64]bool
	var threads []sockets.Thread
	if pid > 0 {
		owned, _ = src.sockets().SocketInodes(pid)
		threads, _ = src.sockets().Threads(pid)
	} else if sel != nil {
		owned = map[uint64]bool{}
		for _, p := range sel.PIDs() {
			held, _ := src.sockets().SocketInodes(p)
			for ino := range held {
				owned[ino] = true
			}
		}
	}
	return BuildSockets(port, pid, c.first.udp, c.last.udp, owned, threads)
}

// sortDrops orders drops by count, then port and reason, so reports are
// stable.
func sortDrops(d []evidence.PortDrops) {
	sort.Slice(d, func(i, j int) bool {
		if d[i].Count != d[j].Count {
			return d[i].Count > d[j].Count
		}
		if d[i].Port != d[j].Port {
			return d[i].Port < d[j].Port
		}
		return d[i].Reason < d[j].Reason
	})
}
