package measure

import (
	"errors"
	"fmt"
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
	"github.com/perfscope/perfscope/probes/ksym"
	"github.com/perfscope/perfscope/spec"
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

// Opener opens each probe, by its spec's name: live, the spec's own
// constructor (spec.Part.Open); in tests, a recording (With). A probe
// with no opener in a run is unavailable in it, said in its section.
type Opener struct {
	Probes map[string]func(opts any) (any, error)
	// KernelNamer opens the kernel's own symbol lookup (probes/ksym) to
	// name sampled kernel addresses; nil, or one that fails, names them
	// from Sources.Symbols' /proc/kallsyms.
	KernelNamer func() (symbols.KernelNamer, error)
	// EntryCost measures what entering a program on a tracepoint costs
	// (probes.MeasureEntryCost), for the overhead's cost per CPU and the
	// budget; nil leaves it unmeasured (0).
	EntryCost func() (time.Duration, error)
}

// LiveProbes loads and attaches the real BPF probes: every probe of the
// catalog whose spec has a constructor.
func LiveProbes() Opener {
	open := map[string]func(any) (any, error){}
	for _, p := range Catalog {
		if p.Open != nil {
			open[p.Name] = p.Open
		}
	}
	return Opener{
		Probes: open,
		KernelNamer: func() (symbols.KernelNamer, error) {
			return as[symbols.KernelNamer](ksym.Open())
		},
		EntryCost: probes.MeasureEntryCost,
	}
}

// With returns o opening s's probe with open instead (a test's
// recording or fake), typed as the part that reads it expects.
func With[O any, P any](o Opener, s *spec.Part, open func(O) (P, error)) Opener {
	openers := make(map[string]func(any) (any, error), len(o.Probes)+1)
	for name, f := range o.Probes {
		openers[name] = f
	}
	openers[s.Name] = func(opts any) (any, error) {
		typed, ok := opts.(O)
		if !ok {
			var want O
			return nil, fmt.Errorf("%s: opened with options %T, want %T", s.Name, opts, want)
		}
		return open(typed)
	}
	o.Probes = openers
	return o
}

// Has says whether the run has an opener for s's probe.
func (o Opener) Has(s *spec.Part) bool { return o.Probes[s.Name] != nil }

// errNoOpener is why a probe with no opener in the run is unavailable.
var errNoOpener = errors.New("no opener for it in this run")

// OpenProbe opens s's probe with opts, as the interface P its part reads.
func OpenProbe[P any](o Opener, s *spec.Part, opts any) (P, error) {
	var zero P
	open := o.Probes[s.Name]
	if open == nil {
		return zero, fmt.Errorf("%s probe: %w", s.Name, errNoOpener)
	}
	p, err := open(opts)
	if err != nil {
		return zero, err
	}
	if p == nil {
		return zero, fmt.Errorf("%s probe: its opener returned none", s.Name)
	}
	v, ok := p.(P)
	if !ok {
		return zero, fmt.Errorf("%s probe: opened a %T, not the probe its part reads", s.Name, p)
	}
	return v, nil
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
