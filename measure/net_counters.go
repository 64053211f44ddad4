package measure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/irq"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

// NetCounterOptions configure the network counters part.
type NetCounterOptions struct {
	// Iface is the interface whose driver counters are read ("" for none)
	// and whose configuration is read at the start.
	Iface string
	// Ifindex is Iface's index, which the netdev netlink family asks for.
	Ifindex int
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
	// qstats are the driver's per-queue statistics from netlink.
	qstats    []netlinkq.QueueStats
	qstatsErr error
	// pagePools are the interface's page pools and their counters.
	pagePools pagePoolReading
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
	r.qstats, r.qstatsErr = c.readQStats()
	r.pagePools = c.readPagePools()
	return r
}

// readQStats reads the interface's per-queue statistics from netlink.
func (c *NetCounters) readQStats() ([]netlinkq.QueueStats, error) {
	if c.opts.Iface == "" || c.opts.Ifindex <= 0 {
		return nil, errors.New("no interface index")
	}
	q, ok := c.src.Netlink.(QStatser)
	if !ok {
		return nil, fmt.Errorf("netdev netlink qstats-get: %w", probes.ErrNotSupported)
	}
	return q.QStats(c.opts.Ifindex)
}

// qstatsDelta is the driver's per-queue statistics over the window, or
// why there are none.
func (c *NetCounters) qstatsDelta() ([]evidence.QueueStats, string) {
	return QStatsDelta(c.first.qstats, c.first.qstatsErr, c.last.qstats, c.last.qstatsErr)
}

// MissedFromQStats fills the NIC's missed packets from qstats'
// rx-hw-drop-overruns (the ring was full) where the driver has no ethtool
// counter of them.
func MissedFromQStats(s *evidence.QueueSection) {
	if s.NICMissed != nil {
		return
	}
	if n, ok := s.QStatsSum("rx", "rx-hw-drop-overruns"); ok {
		s.NICMissed, s.NICMissedCounters = &n, []string{"qstats rx-hw-drop-overruns"}
	}
}

// QStatsDelta is the growth of each queue's counters from first to last
// (a queue read once, or a counter that went backwards, is left out), or
// why there is none.
func QStatsDelta(first []netlinkq.QueueStats, firstErr error, last []netlinkq.QueueStats, lastErr error) ([]evidence.QueueStats, string) {
	switch {
	case errors.Is(firstErr, netlinkq.ErrUnavailable) || errors.Is(firstErr, probes.ErrNotSupported):
		return nil, "this kernel has no per-queue statistics over netlink (qstats-get, Linux 6.10+)"
	case firstErr != nil:
		return nil, fmt.Sprintf("qstats-get: %v", firstErr)
	case lastErr != nil:
		return nil, fmt.Sprintf("qstats-get at the end of the window: %v", lastErr)
	case len(last) == 0:
		return nil, "the driver reports no per-queue statistics (qstats-get lists none)"
	}
	type key struct {
		typ netlinkq.QueueType
		id  int
	}
	before := map[key]netlinkq.QueueStats{}
	for _, q := range first {
		before[key{q.Type, q.ID}] = q
	}
	var out []evidence.QueueStats
	for _, q := range last {
		p, ok := before[key{q.Type, q.ID}]
		if !ok {
			continue
		}
		d := q.Sub(p)
		out = append(out, evidence.QueueStats{Type: string(q.Type), Queue: q.ID, Counters: d.Counters})
	}
	return out, ""
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
