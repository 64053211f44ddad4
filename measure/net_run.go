package measure

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
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

// NetParts are the parts of a network run, in the order they open and
// read (softirq first, as before: its probe reading starts the window).
// A recipe may leave any of them out but the counters; the sections of
// the missing ones say so. The softirq, queue, lock and profile parts
// and the counters are the run's frame: every section is built on them.
// The other network probes' parts join their evidence themselves
// (registerNetJoin) and are held by their spec's name (Part).
type NetParts struct {
	Softirq  *Softirq
	Queues   *Queues
	Locks    *Locks
	Counters *NetCounters
	Profile  *Profile
	// NoProfile says why there is no profile part.
	NoProfile string
	// joined are the parts that join themselves, by spec name.
	joined map[string]Part
}

// List is the parts to open, in order.
func (n *NetParts) List() []Part {
	parts := partsOf(n.Softirq, n.Queues, n.Locks)
	parts = append(parts, n.joinedParts()...)
	return append(parts, partsOf(n.Counters, n.Profile)...)
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
			ev.QueueCPU.Unavailable = notInRecipe("NAPI polls per queue and CPU", netqueue.Spec.Name)
		}
		ev.Queues = BuildQueues(o.Iface, c.driverDelta(), c.driverErr(), kernel, window)
		ev.Queues.NICMissed, ev.Queues.NICMissedCounters = c.nicMissed()
		ev.Queues.QStats, ev.Queues.QStatsUnavailable = c.qstatsDelta()
		MissedFromQStats(&ev.Queues)
		ev.Queues.PagePools, ev.Queues.PagePoolUnavailable = PagePoolDelta(o.Iface.Name, c.first.pagePools, c.last.pagePools)
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
			ev.Queues.Notes = append(ev.Queues.Notes, notInRecipe("kernel per-queue counts", netqueue.Spec.Name))
		}
	}
	if n.Locks != nil {
		ev.Locks = n.Locks.Evidence()
	} else {
		ev.Locks.Unavailable = notInRecipe("lock contention", lockstat.Spec.Name)
	}
	ev.Drops = c.drops()
	ev.Sockets = c.socketSection(src, o.Port, o.PID, o.Select)
	j := &netJoin{window: window, ev: &ev, parts: n}
	j.joinStage(netOnCounters)
	if ev.Sockets.Unavailable == "" {
		c.socketIntervals(&ev.Sockets, j.socketReads)
	}
	attributeNet(src, &ev, c.last.udp, o.Select)
	if o.Select != nil {
		ev.Filter, ev.FilterPIDs = o.Select.Filter.String(), o.Select.PIDs()
	}
	j.joinStage(netAbove)
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
