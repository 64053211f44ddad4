package measure

import (
	"errors"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/collectors/irq"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/collectors/tcpdiag"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/ksym"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	offcpuprobe "github.com/perfscope/perfscope/probes/offcpu"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/tcpevents"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// Sources are everything a runner reads. Live reads the running system; a
// test points Root at a fixture directory, Ethtool at recorded ethtool
// output, and Probes at recorded snapshots, and runs the same code.
type Sources struct {
	// Root is where /proc and /sys are read: "/" live, a fixture
	// directory in tests. Every file-based collector reads below it.
	Root procfs.FS
	// Ethtool answers the SIOCETHTOOL requests (driver info, statistics).
	Ethtool ethtool.Source
	// Netlink lists an interface's NAPI instances and queues.
	Netlink Netlink
	// Config reads the configuration of an interface and the host at the
	// start of a network run; nil leaves the report without it.
	Config func(iface string) (netconfig.NetConfig, error)
	// Symbols is where kallsyms, process mappings and binaries are read.
	Symbols symbols.FS
	// names is the one symbolizer of a session, shared by its parts (set
	// by Open): kallsyms is read and indexed once for the lock sites and
	// the profile alike, each binary's symbols once.
	names *symbols.Symbolizer
	// JVMs is where HotSpot JVMs publish hsperfdata.
	JVMs hsperf.FS
	// Probes opens the BPF probes.
	Probes Opener
	// Packets opens a counter of the packets through this namespace's
	// interfaces, exact and always counting: the overhead budget scales
	// per-packet estimates by it. Nil (or one that fails to open) scales
	// them by time.
	Packets func() (PacketCounter, error)
	// UDPReads opens a counter of the UDP datagrams this namespace's
	// sockets read (Udp/Udp6 InDatagrams): the budget scales the sampled
	// socket reads by it. Nil: by Packets.
	UDPReads func() (PacketCounter, error)
	// Workloads attributes processes to their cgroup, container and
	// Kubernetes pod for one run, caching each answer; nil leaves a run
	// unattributed (a recording replayed from fixtures).
	Workloads *cgroup.Index
	// Softirqs opens a counter of the softirqs the kernel ran, every
	// vector and CPU (/proc/softirqs): a sampled softirq probe's times are
	// its windows' time per run times it. Nil: scaled by time.
	Softirqs func() (PacketCounter, error)
	// TCPDiag lists this namespace's TCP sockets through sock_diag
	// (tcpdiag.Sockets); nil leaves a tcp run without listeners and
	// connections.
	TCPDiag func(tcpdiag.Query) ([]tcpdiag.Socket, error)
}

// PacketCounter counts packets; a session reads it many times a second
// and closes it when it closes.
type PacketCounter interface {
	Packets() (uint64, error)
	Close() error
}

// counterOpener adapts an opener of a concrete counter to Sources' type,
// returning a nil interface, not a typed nil, when opening fails.
func counterOpener[C PacketCounter](open func() (C, error)) func() (PacketCounter, error) {
	return func() (PacketCounter, error) {
		c, err := open()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Live reads the running system.
func Live() Sources {
	return Sources{
		Root:      procfs.Default,
		Ethtool:   ethtool.Ioctl{},
		Netlink:   liveNetlink{},
		Config:    netconfig.Live().Snapshot,
		Symbols:   symbols.Default,
		JVMs:      hsperf.Default,
		Probes:    LiveProbes(),
		Packets:   counterOpener(procfs.Default.OpenNetDevCounter),
		UDPReads:  counterOpener(netstat.Default.OpenUDPReadsCounter),
		Workloads: liveWorkloads(),
		Softirqs:  counterOpener(procfs.Default.OpenSoftirqsCounter),
		TCPDiag:   tcpdiag.Sockets,
	}
}

// symbolizer is the session's symbolizer; a Sources that no session
// opened gets one of its own.
func (s Sources) symbolizer() *symbols.Symbolizer {
	if s.names == nil {
		return symbols.New(s.Symbols)
	}
	return s.names
}

// The collectors below Root.
func (s Sources) sockets() sockets.FS { return sockets.FS{FS: s.Root} }
func (s Sources) netstat() netstat.FS { return netstat.FS{FS: s.Root} }
func (s Sources) irq() irq.FS         { return irq.FS{FS: s.Root} }
func (s Sources) netdev() netdev.FS   { return netdev.FS{FS: s.Root} }
func (s Sources) cpus() cpuset.FS     { return cpuset.FS{FS: s.Root} }

// Netlink is the netdev generic-netlink family (Linux 6.8+).
type Netlink interface {
	NAPIs(ifindex int) ([]netlinkq.NAPI, error)
	Queues(ifindex int) ([]netlinkq.Queue, error)
}

// QStatser reads the drivers' per-queue statistics (qstats-get, Linux
// 6.10+); a Netlink without it reports none.
type QStatser interface {
	QStats(ifindex int) ([]netlinkq.QueueStats, error)
}

type liveNetlink struct{}

func (liveNetlink) QStats(ifindex int) ([]netlinkq.QueueStats, error) {
	return netlinkq.QStats(ifindex)
}

func (liveNetlink) NAPIs(ifindex int) ([]netlinkq.NAPI, error)   { return netlinkq.NAPIs(ifindex) }
func (liveNetlink) Queues(ifindex int) ([]netlinkq.Queue, error) { return netlinkq.Queues(ifindex) }

// What the runners need of each probe: the probes.Probe contract and the
// probe's typed snapshot, plus the few extras a probe offers.
type (
	SoftirqProbe = probes.Snapshotter[softirq.Snapshot]
	LockProbe    = probes.Snapshotter[lockstat.Snapshot]
	SocketProbe  = probes.Snapshotter[udpsock.Snapshot]
	QueueProbe   interface {
		probes.Snapshotter[netqueue.Snapshot]
		// NoNAPI says napi:napi_poll was left out on purpose.
		NoNAPI() bool
	}
	DropProbe interface {
		probes.Snapshotter[udpdrop.Snapshot]
		// ReasonName names a drop reason the way the kernel's BTF does.
		ReasonName(kind udpdrop.Kind, reason uint32) string
	}
	TCPEventsProbe interface {
		probes.Snapshotter[tcpevents.Snapshot]
		// ResetReason names a sent reset's reason as the kernel's BTF does.
		ResetReason(detail uint32) string
	}
	// OffCPUProbe is the off-CPU probe with its programs' own counts.
	OffCPUProbe interface {
		probes.Snapshotter[offcpuprobe.Snapshot]
		SelfCosts() (probes.SelfCosts, error)
	}
	CPUProfileProbe interface {
		probes.Snapshotter[cpuprofile.Profile]
		Start() error
		Stop() error
		// Pause and Resume stop and restart sampling without detaching:
		// the profile part pauses from its Open to its window's Begin.
		Pause() error
		Resume() error
		// EventChoice is the event Start sampled with and why.
		EventChoice() cpuprofile.EventChoice
		// PIDs lists the processes sampled since the previous call
		// (cheap: one small map, read and emptied).
		PIDs() ([]int, error)
		// Drain returns the samples since the last Drain and empties
		// them out of the kernel (a profiler opened Continuous).
		Drain() (cpuprofile.Profile, error)
		CPUs() int
		Frequency() int
	}
)

// Opener opens each probe. Adding a probe to perfscope is adding a field
// here and its line in LiveProbes; tests replace fields with recordings.
type Opener struct {
	Softirq    func(softirq.Options) (SoftirqProbe, error)
	Queue      func(netqueue.Options) (QueueProbe, error)
	Lock       func(lockstat.Options) (LockProbe, error)
	Drop       func(udpdrop.Options) (DropProbe, error)
	Socket     func(udpsock.Options) (SocketProbe, error)
	CPUProfile func(cpuprofile.Options) (CPUProfileProbe, error)
	TCPEvents  func(tcpevents.Options) (TCPEventsProbe, error)

	OffCPU func(offcpuprobe.Options) (OffCPUProbe, error)
	// KernelNamer opens the kernel's own symbol lookup (probes/ksym) to
	// name sampled kernel addresses; nil, or one that fails, names them
	// from Sources.Symbols' /proc/kallsyms.
	KernelNamer func() (symbols.KernelNamer, error)
	// EntryCost measures what entering a program on a tracepoint costs
	// (probes.MeasureEntryCost), for the overhead's cost per CPU and the
	// budget; nil leaves it unmeasured (0).
	EntryCost func() (time.Duration, error)
}

// LiveProbes loads and attaches the real BPF probes.
func LiveProbes() Opener {
	return Opener{
		Softirq:    func(o softirq.Options) (SoftirqProbe, error) { return as[SoftirqProbe](softirq.Open(o)) },
		Queue:      func(o netqueue.Options) (QueueProbe, error) { return as[QueueProbe](netqueue.Open(o)) },
		Lock:       func(o lockstat.Options) (LockProbe, error) { return as[LockProbe](lockstat.Open(o)) },
		Drop:       func(o udpdrop.Options) (DropProbe, error) { return as[DropProbe](udpdrop.Open(o)) },
		Socket:     func(o udpsock.Options) (SocketProbe, error) { return as[SocketProbe](udpsock.Open(o)) },
		CPUProfile: func(o cpuprofile.Options) (CPUProfileProbe, error) { return as[CPUProfileProbe](cpuprofile.Open(o)) },
		TCPEvents:  func(o tcpevents.Options) (TCPEventsProbe, error) { return as[TCPEventsProbe](tcpevents.Open(o)) },

		OffCPU: func(o offcpuprobe.Options) (OffCPUProbe, error) { return as[OffCPUProbe](offcpuprobe.Open(o)) },
		KernelNamer: func() (symbols.KernelNamer, error) {
			return as[symbols.KernelNamer](ksym.Open())
		},
		EntryCost: probes.MeasureEntryCost,
	}
}

// errEntryUnmeasured is why a run without Opener.EntryCost (a recording)
// has no entry cost.
var errEntryUnmeasured = errors.New("not measured (no BPF in this run)")

// entryCost measures the entry cost once per window, before it.
func (o Opener) entryCost() (time.Duration, error) {
	if o.EntryCost == nil {
		return 0, errEntryUnmeasured
	}
	return o.EntryCost()
}

// as returns p as the interface I, or a nil I with err: a nil pointer
// stored in an interface would not compare equal to nil.
func as[I any, P any](p *P, err error) (I, error) {
	var zero I
	if err != nil {
		return zero, err
	}
	return any(p).(I), nil
}
