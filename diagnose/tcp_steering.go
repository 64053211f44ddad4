package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/evidence"
)

// TCPSteeringThresholds are tcp.cross-cpu-steering's tunables.
var TCPSteeringThresholds = struct {
	FedShare, MinReads Threshold
}{
	FedShare: Threshold{Name: "tcp_steering_cpu_share", Default: 0.8, Min: 0.5, Max: 1,
		Doc: "share of a connection's softirq deliveries (and of its reads) on one CPU for it to count as fed (read) there"},
	MinReads: Threshold{Name: "tcp_steering_min_events", Default: 100, Min: 1, Max: 1e9,
		Doc: "deliveries and reads a connection needs over the window before its CPUs are compared"},
}

const refScaling = "Linux kernel documentation, networking/scaling.rst (RFS, accelerated RFS); socket(7) SO_INCOMING_CPU; Cloudflare, \"Perfect locality and three epic SystemTap scripts\" (2017)"

// reuseportSketch serves each connection on the CPU that receives it.
var reuseportSketch = CodeSketch{Lang: "c", Code: "/* per CPU: a listener in an SO_REUSEPORT group, served by a thread pinned to that CPU */\nint one = 1, cpu = sched_getcpu();\nsetsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);\nsetsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, sizeof cpu); /* kernel picks the group member whose CPU received the SYN */\n/* or, for accepted connections: getsockopt(conn, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) and hand the connection to that CPU's thread */"}

// crossCPUConn is a connection fed by one CPU's softirq and read on another.
type crossCPUConn struct {
	row     evidence.TCPConnection
	fed, rd int
	fs, rs  float64
}

// crossCPUConns are the connections of the window fed on one CPU and read
// on another (each side's share at least share, min events each).
func crossCPUConns(rows []evidence.TCPConnection, share float64, min uint64) []crossCPUConn {
	var out []crossCPUConn
	for _, c := range rows {
		s := c.Steering
		if s == nil || s.FedCPU < 0 || s.ReadCPU < 0 || s.FedCPU == s.ReadCPU {
			continue
		}
		var fed, read uint64
		for _, n := range s.FedByCPU {
			fed += n
		}
		for _, n := range s.ReadOnCPU {
			read += n
		}
		if fed < min || read < min || s.FedShare < share || s.ReadShare < share {
			continue
		}
		out = append(out, crossCPUConn{row: c, fed: s.FedCPU, rd: s.ReadCPU, fs: s.FedShare, rs: s.ReadShare})
	}
	return out
}

// rfsOn reports whether RFS steers on the interface: the global flow table
// and at least one RX queue's rps_flow_cnt are set (hardware aRFS needs
// them too, with the ntuple feature on).
func rfsOn(in TCPInput) (on, known bool) {
	c := in.Config
	if c == nil {
		return false, false
	}
	if c.Core.RPSSockFlowEntries != nil && *c.Core.RPSSockFlowEntries == 0 {
		return false, true
	}
	for _, q := range c.Interface.RX {
		if q.RPSFlowCnt > 0 {
			// The queue tables are set; in a namespace the global one is
			// the host's, assumed set with them.
			return true, true
		}
	}
	return false, c.Core.RPSSockFlowEntries != nil
}

// rfsMoves says whether RFS can move a flow's softirq on the interface:
// through RPS (a queue with rps_cpus set: RFS then picks the reader's CPU
// whatever the mask holds) or through accelerated RFS (ntuple filters on).
func rfsMoves(c *netconfig.NetConfig) bool {
	for _, q := range c.Interface.RX {
		if !q.RPSCPUs.IsEmpty() {
			return true
		}
	}
	return c.Offloads.NTuple != nil && *c.Offloads.NTuple
}

// reuseportGroups are the listeners of the connections' local ports that
// are SO_REUSEPORT groups: "address (N listeners)", each once.
func reuseportGroups(in TCPInput, conns []crossCPUConn) []string {
	var out []string
	for _, l := range in.Evidence.Listeners.Rows {
		if l.ReusePort < 2 {
			continue
		}
		for _, c := range conns {
			if c.row.Local.Port() == l.Local.Port() {
				g := fmt.Sprintf("%s (%d listeners)", l.Local, l.ReusePort)
				if !slices.Contains(out, g) {
					out = append(out, g)
				}
				break
			}
		}
	}
	return out
}

func checkTCPCrossCPU(in TCPInput, t Thresholds) *Finding {
	conns := crossCPUConns(in.Evidence.Connections.Rows, t.Get(TCPSteeringThresholds.FedShare), uint64(t.Get(TCPSteeringThresholds.MinReads)))
	if len(conns) == 0 {
		return nil
	}
	on, known := rfsOn(in)
	if on {
		if rfsMoves(in.Config) {
			return nil // RFS steers already: the softirq CPU follows the reader through RPS or aRFS
		}
		return rfsStuck(in, conns)
	}
	f := &Finding{Severity: Info, Impact: 0.03}
	f.Title = fmt.Sprintf("%d TCP connections are fed by one CPU's softirq and read by a thread on another, and RFS is off", len(conns))
	crossCPUEvidence(f, conns)
	c := in.Config
	if !known {
		f.Evidence = append(f.Evidence, "net.core.rps_sock_flow_entries: not visible in this network namespace (host-wide)")
	} else {
		f.Evidence = append(f.Evidence, fmt.Sprintf("net.core.rps_sock_flow_entries = %d; rps_flow_cnt = 0 on every RX queue of %s", *c.Core.RPSSockFlowEntries, c.Interface.Name))
	}
	r := &f.Recommendation
	r.Why = "The protocol work of a segment runs on the CPU whose softirq received it; a thread reading the socket on another CPU takes the data, the socket lock and the wakeup across CPUs (cache lines bounce, the socket lock is contended from both CPUs). RFS records the CPU each flow is read on and steers its packets' protocol processing there (RPS queues, or the NIC itself with accelerated RFS); an application can do the reverse with SO_INCOMING_CPU: serve each connection on the CPU that receives it."
	r.Expected = "Each connection's softirq on the CPU of its reader: fewer cross-CPU wakeups and socket-lock waits from the softirq side (the socket_locks section's softirq column)."
	r.Reference = refScaling
	r.Caveats = []string{
		"RFS steers through RPS (rps_cpus on the RX queues) or, on NICs with ntuple filters, accelerated RFS (ethtool -K IF ntuple on); with neither, the flow table records CPUs but nothing moves.",
		"A server with one listener per CPU (SO_REUSEPORT) whose threads are pinned gets the same locality without RFS by choosing the listener by SO_INCOMING_CPU (code sketch).",
	}
	r.Code = []CodeSketch{reuseportSketch}
	if c == nil {
		r.Kind = KindCode
		return f
	}
	global, perQueue := rfsEntries(c)
	if c.Core.RPSSockFlowEntries != nil && *c.Core.RPSSockFlowEntries == 0 {
		settingOrAdvice(r, []sysctlSetting{{Key: "net.core.rps_sock_flow_entries", Old: i64s(c.Core.RPSSockFlowEntries), New: strconv.FormatInt(global, 10)}}, c.Core.HostOnly)
	} else {
		r.Kind = KindSetting
		if c.Core.RPSSockFlowEntries == nil {
			r.Caveats = append(r.Caveats, "rps_flow_cnt steers nothing while the host-wide net.core.rps_sock_flow_entries is 0: check it on the host ("+
				SysctlChange("net.core.rps_sock_flow_entries", "0", strconv.FormatInt(global, 10)).Command(strconv.FormatInt(global, 10))+")")
		}
	}
	for _, q := range c.Interface.RX {
		if q.RPSFlowCnt != 0 {
			continue
		}
		ch := RPSFlowCntChange(c.Interface.Name, q.Index, 0, perQueue)
		if r.Kind == KindSetting {
			r.AddChanges(ch)
		} else {
			r.Apply = append(r.Apply, "# and: "+ch.Command(ch.New))
		}
	}
	r.Parameters = map[string]int64{"rps_sock_flow_entries": global, "rps_flow_cnt": perQueue}
	addReuseport(f, in, conns)
	return f
}

// crossCPUEvidence lists up to three connections with their CPUs.
func crossCPUEvidence(f *Finding, conns []crossCPUConn) {
	for i, c := range conns {
		if i == 3 {
			break
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s → %s: %s of its segments delivered by CPU %d's softirq, %s of its reads on CPU %d",
			c.row.Local, c.row.Remote, pct(c.fs), c.fed, pct(c.rs), c.rd))
	}
}

// addReuseport says when the port is served by an SO_REUSEPORT group: the
// group can keep each connection on its receiving CPU by itself.
func addReuseport(f *Finding, in TCPInput, conns []crossCPUConn) {
	groups := reuseportGroups(in, conns)
	if len(groups) == 0 {
		return
	}
	f.Evidence = append(f.Evidence, "SO_REUSEPORT group: "+strings.Join(groups, ", "))
	f.Recommendation.Caveats = append([]string{"The port is served by an SO_REUSEPORT group: with a listener per CPU and its thread pinned there, SO_INCOMING_CPU on each listener (or a reuseport BPF program choosing by CPU, SO_ATTACH_REUSEPORT_EBPF) lands every connection on the CPU that receives it, without RFS (code sketch)."},
		f.Recommendation.Caveats...)
}

// rfsStuck is the finding when RFS's tables are set but nothing can move
// a flow: no queue has rps_cpus and ntuple filters (accelerated RFS) are
// off. The flow table records readers' CPUs and steers nothing.
func rfsStuck(in TCPInput, conns []crossCPUConn) *Finding {
	c := in.Config
	f := &Finding{Severity: Info, Impact: 0.03}
	f.Title = fmt.Sprintf("%d TCP connections are fed by one CPU's softirq and read by a thread on another: RFS's tables are set but nothing steers by them (no RX queue has rps_cpus, ntuple filters are off)", len(conns))
	crossCPUEvidence(f, conns)
	nt := "not listed by the device"
	if c.Offloads.NTuple != nil {
		nt = "off"
		if c.Offloads.NTupleFixed {
			nt = "off, fixed (the device cannot turn it on)"
		}
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("rps_flow_cnt set on %s's RX queues; rps_cpus empty on all of them; rx-ntuple-filter %s", c.Interface.Name, nt))
	r := &f.Recommendation
	r.Why = "RFS records the CPU each flow is read on, but moves a flow's protocol processing only through RPS (an RX queue with rps_cpus set: the packet is queued to the reader's CPU) or through the NIC (accelerated RFS, which programs ntuple filters so that the flow's packets arrive on a queue whose IRQ runs on the reader's CPU). With neither, every segment is processed where the NIC's IRQ runs."
	r.Expected = "Each connection's softirq on the CPU of its reader: fewer cross-CPU wakeups and socket-lock waits from the softirq side (the socket_locks section's softirq column)."
	r.Reference = refScaling
	r.Code = []CodeSketch{reuseportSketch}
	nr := c.Topology.NrCPUIDs()
	switch {
	case c.Offloads.NTuple != nil && !c.Offloads.NTupleFixed:
		r.Kind = KindSetting
		r.AddChanges(EthtoolFeatureChange(c.Interface.Name, ethtool.FeatureNTuple, false, true))
		r.Caveats = append(r.Caveats, "Accelerated RFS also needs a driver that implements it (ndo_rx_flow_steer) and a kernel built with CONFIG_RFS_ACCEL; otherwise set rps_cpus on the RX queues so that RFS steers through RPS.")
	case !c.Topology.Online.IsEmpty():
		// RPS with every online CPU: RFS then queues each flow to its
		// reader's CPU; a packet of a flow not yet read goes by the hash.
		r.Kind = KindSetting
		for _, q := range c.Interface.RX {
			r.AddChanges(QueueMaskChange(c.Interface.Name, "rx", q.Index, q.RPSCPUs, c.Topology.Online, nr))
		}
		r.Caveats = append(r.Caveats, "RPS costs an inter-processor interrupt per batch of packets moved; on a NIC with as many queues as CPUs and IRQs spread, accelerated RFS (ntuple filters) moves flows without it where the device supports it.")
	default:
		r.Kind = KindCode
	}
	addReuseport(f, in, conns)
	return f
}
