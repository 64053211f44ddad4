package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/irq"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/internal/netapply"
	"github.com/perfscope/perfscope/internal/netcompare"
	"github.com/perfscope/perfscope/internal/safeio"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/report"
)

type udpOptions struct {
	Iface     string
	Port      int
	PID       int
	Duration  time.Duration
	Output    string
	FlameDir  string
	Freq      int
	NoProfile bool
	Method    string
	FailOn    string
	Apply     []string
	RevertDir string
	Revert    string
	Compare   []string
	// LockStacks is the lock probe's stack sampling: 1 in N contentions.
	LockStacks int

	failOn diagnose.Severity

	format report.Format
	method probes.AttachMethod
	iface  netdev.Interface
	run    func(ctx context.Context, o *udpOptions, g *Globals) error
}

func newUDPCmd(g *Globals) *cobra.Command {
	return udpCmd(g, &udpOptions{run: runUDP})
}

func udpCmd(g *Globals, o *udpOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "udp --iface IF",
		Short: "Where UDP packets spend CPU and wait: per CPU, per queue, per lock, per socket",
		Long: `udp measures, in one run, the four things Makita's talk reads to take a UDP
server from 270k to 7M transactions/s: softirq load per CPU; packets per NIC
queue from the kernel and from the driver's own counters, with dead queues and
skew; which CPU serves which queue (IRQ affinity, NUMA); and an on-CPU profile
of every CPU, split into the CPUs that run NET_RX and the others, with the share
of the kernel functions Makita's talk removes (GRO, netfilter, FIB validation,
audit, IP ID, slab, qdisc and socket spin locks).

Sections whose source does not exist for the interface (no driver counters on
lo, no IRQs on veth) say so in one line; the rest still runs.`,
		Example: `  perfscope udp --iface ens1f0 --port 53 --duration 10s
  perfscope udp --iface eth0 --pid 1234 --flame /tmp/udp -o json > run.json
  perfscope udp --iface eth0 --apply net.rps-needed,net.xps-unset   # writes a revert file first
  perfscope udp --revert ./perfscope-revert-20261121T101500Z-1a2b3c4d.json
  perfscope udp --compare before.json after.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case len(o.Compare) > 0:
				return o.runCompare(cmd.Context(), g)
			case o.Revert != "":
				return o.runRevert(cmd.Context(), g)
			}
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.FailOn, "fail-on", "", "exit 1 when a finding is at or above this severity: info, warn or crit")
	f.StringSliceVar(&o.Apply, "apply", nil, "make the typed changes of these findings' setting recommendations (after writing a revert file)")
	f.StringVar(&o.RevertDir, "revert-dir", ".", "directory for the revert file --apply writes (owned by you or root; sticky if others may write it)")
	f.StringVar(&o.Revert, "revert", "", "restore what a revert file written by --apply records, then exit")
	f.StringSliceVar(&o.Compare, "compare", nil, "compare two saved -o json runs: --compare before.json,after.json (or the flag twice)")
	f.StringVar(&o.Iface, "iface", "", "network interface to measure (required)")
	f.IntVar(&o.Port, "port", 0, "local UDP port of the server to inspect")
	f.IntVar(&o.PID, "pid", 0, "pid of the server to inspect (its sockets and threads)")
	f.DurationVarP(&o.Duration, "duration", "d", 10*time.Second, "how long to measure")
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.FlameDir, "flame", "", "write folded stacks and flame graphs (NET_RX CPUs, other CPUs, all) to this directory")
	f.IntVar(&o.Freq, "freq", cpuprofile.DefaultFrequency, "CPU profile samples per second per CPU")
	f.BoolVar(&o.NoProfile, "no-profile", false, "skip the on-CPU profile")
	f.IntVar(&o.LockStacks, "lock-stacks", lockstat.DefaultStackEvery,
		"take the kernel stack of 1 in N lock contentions (1: every one; per-lock and per-socket waits stay exact, per-site ones are scaled estimates)")
	f.StringVar(&o.Method, "attach-method", "", "force tp_btf, raw_tp or tracepoint")
	return cmd
}

func (o *udpOptions) validate() error {
	var err error
	if o.format, err = report.ParseFormat(o.Output); err != nil {
		return asUsage(err)
	}
	if o.method, err = probes.ParseMethod(o.Method); err != nil {
		return asUsage(err)
	}
	if o.Duration <= 0 {
		return usageError("--duration must be positive, got %v", o.Duration)
	}
	if o.Port < 0 || o.Port > 65535 {
		return usageError("--port %d is not a UDP port (0-65535)", o.Port)
	}
	if o.Freq <= 0 || o.Freq > 10000 {
		return usageError("--freq must be between 1 and 10000 Hz, got %d", o.Freq)
	}
	if o.LockStacks < 1 || o.LockStacks > lockstat.MaxStackEvery {
		return usageError("--lock-stacks must be between 1 and %d, got %d", lockstat.MaxStackEvery, o.LockStacks)
	}
	if o.PID < 0 {
		return usageError("--pid must be positive, got %d", o.PID)
	}
	if o.PID > 0 {
		if err := checkPID(procfs.Default, "--pid", o.PID); err != nil {
			return err
		}
	}
	if o.FailOn != "" {
		if o.failOn, err = diagnose.ParseSeverity(o.FailOn); err != nil {
			return usageError("--fail-on: %v", err)
		}
	}
	if len(o.Apply) > 0 {
		d, err := netapply.OpenTrustedDir(o.RevertDir)
		if err != nil {
			return usageError("--revert-dir: %v", err)
		}
		d.Close()
	}
	if o.FlameDir != "" {
		d, err := safeio.OpenPrivateDir(o.FlameDir)
		if err != nil {
			return usageError("--flame %s: %v; perfscope writes only into a directory that no other user can write to", o.FlameDir, err)
		}
		d.Close()
	}
	return o.resolveIface()
}

// resolveIface checks --iface: it exists here and is up; otherwise the
// sentence names the interfaces that do exist, or the namespace where this
// one lives and how to run there.
func (o *udpOptions) resolveIface() error {
	if o.Iface == "" {
		return usageError("--iface is required (interfaces here: %s)", strings.Join(interfaceNames(), ", "))
	}
	iface, err := netdev.Default.Interface(o.Iface)
	if errors.Is(err, netdev.ErrNoInterface) {
		if m, ferr := netdev.LiveNamespaceSearch().Find(o.Iface); ferr == nil && m != nil {
			return usageError("interface %s is not in this network namespace: %s", o.Iface, m.RunHint())
		}
		return usageError("unknown interface %s (interfaces here: %s)", o.Iface, strings.Join(interfaceNames(), ", "))
	}
	if err != nil {
		return fmt.Errorf("read interface %s: %w", o.Iface, err)
	}
	if !iface.Up {
		return usageError("interface %s is %s; bring it up or choose another (up here: %s)", o.Iface, iface.OperState, strings.Join(upInterfaceNames(), ", "))
	}
	o.iface = iface
	return nil
}

func interfaceNames() []string {
	names, _ := netdev.Default.InterfaceNames()
	return names
}

func upInterfaceNames() []string {
	var up []string
	for _, n := range interfaceNames() {
		if i, err := netdev.Default.Interface(n); err == nil && i.Up {
			up = append(up, n)
		}
	}
	return up
}

// netSample is what the udp command reads at the start and the end.
type netSample struct {
	softirq    softirqSample
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
	probes     netProbeSample
	rx         rxPathSample
}

func takeNetSample(o *udpOptions, p *softirq.Probe) (netSample, error) {
	var s netSample
	var err error
	if s.softirq, err = takeSoftirqSample(p, procfs.Default); err != nil {
		return s, err
	}
	stats, err := ethtool.Ioctl{}.Stats(o.Iface)
	if err != nil {
		s.driverErr = err
	} else {
		s.driver = ethtool.PerQueue(stats)
	}
	s.interrupts, s.irqErr = irq.Default.Interrupts()
	s.udp, s.udpErr = sockets.Default.UDP()
	s.snmp, s.snmpErr = netstat.Default.UDPSNMP()
	s.softnet, s.softnetErr = netstat.Default.Softnet()
	s.rx = takeRXPathSample(stats, err)
	return s, nil
}

func runUDP(ctx context.Context, o *udpOptions, g *Globals) error {
	limitHeap(udpHeapLimit)
	// The udp report does not use raise→entry latency; skipping its
	// tracepoint saves one BPF run per NET_RX raise (~100 ns per datagram
	// on a loopback flood).
	sp, err := softirq.Open(softirq.Options{Method: o.method, NoLatency: true})
	if err != nil {
		return err
	}
	defer sp.Close()

	np := openNetProbes(o)
	defer np.Close()

	var prof *cpuprofile.Profiler
	profErr := errors.New("disabled with --no-profile")
	if !o.NoProfile {
		// NET_RX on a real NIC runs mostly from irq_exit on idle CPUs:
		// keep those samples of the idle task, drop only its loop.
		prof, profErr = cpuprofile.Open(cpuprofile.Options{Frequency: o.Freq, KeepIdleInterrupts: true})
		if profErr == nil {
			defer prof.Close()
			if profErr = prof.Start(); profErr != nil {
				prof.Close()
				prof = nil
			}
		}
	}
	attached := time.Since(g.Started)
	// bpf_stats run for probes.StatsSampleOn of every StatsSamplePeriod:
	// left on, they cost each program run more than most programs do.
	stats, statsErr := probes.SampleStats(probes.StatsSampleOn, probes.StatsSamplePeriod, func() []probes.ProgramCost {
		costs := append(sp.Costs(), np.costs()...)
		if prof != nil {
			costs = append(costs, prof.Costs()...)
		}
		return costs
	})
	if statsErr == nil {
		defer stats.Stop()
	}

	start, err := takeNetSample(o, sp)
	if err != nil {
		return err
	}
	if start.probes, err = np.snapshot(); err != nil {
		return err
	}
	cfg, cfgErr := netconfig.Live().Snapshot(o.Iface)
	select {
	case <-ctx.Done():
	case <-time.After(o.Duration):
	}
	end, err := takeNetSample(o, sp)
	if err != nil {
		return err
	}
	if end.probes, err = np.snapshot(); err != nil {
		return err
	}
	var sample probes.StatsSample
	if statsErr == nil {
		sample = stats.Stop()
	}
	var profile cpuprofile.Profile
	if prof != nil {
		if profile, err = prof.Snapshot(); err != nil {
			profErr = err
			prof = nil
		}
	}

	ev, artifacts, err := buildNetEvidence(o, start, end, np, prof, profile, profErr)
	if err != nil {
		return err
	}
	if cfgErr == nil {
		ev.Config = &cfg
	}
	r := report.New("udp", Version(), start.softirq.probe.Taken)
	r.Findings = diagnose.DiagnoseNet(diagnose.NetInput{Evidence: ev, Config: ev.Config})
	r.Meta.DurationNs = ev.DurationNs
	r.Data = ev
	r.Artifacts = artifacts
	r.Overhead = softirqOverhead(sp, attached, time.Duration(ev.DurationNs), len(ev.Softirq.CPUs))
	addCosts(r.Overhead, np.costs(), time.Duration(ev.DurationNs), len(ev.Softirq.CPUs))
	r.Overhead.EventsLost += ev.Locks.Lost
	if prof != nil {
		addCosts(r.Overhead, prof.Costs(), time.Duration(ev.DurationNs), len(ev.Softirq.CPUs))
		r.Overhead.EventsLost += ev.Profile.Lost
	}
	if statsErr == nil {
		scaleCosts(r.Overhead, sample, time.Duration(ev.DurationNs), len(ev.Softirq.CPUs))
	}
	// --apply: only after the report is complete, so the user sees why.
	var applyErr error
	if len(o.Apply) > 0 {
		var path string
		path, applyErr = applyFindings(ctx, o, g, r)
		if path != "" {
			r.Artifacts = append(r.Artifacts, report.Artifact{Kind: "revert-file", Path: path})
		}
	}
	if o.format == report.JSON {
		if err := report.WriteJSON(g.Out, r); err != nil {
			return err
		}
	} else {
		writeUDPText(g.textOut(), r, ev, statsErr)
	}
	if applyErr != nil {
		return applyErr
	}
	return failOn(r.Findings, o.failOn)
}

// applyFindings makes the chosen findings' typed changes through
// internal/netapply; it reports to stderr so JSON on stdout stays clean.
// A Ctrl-C during the measurement window cancels ctx: nothing is applied
// and no revert file is written.
func applyFindings(ctx context.Context, o *udpOptions, g *Globals, r *report.Report) (string, error) {
	plan, err := netapply.NewPlan(r.Findings, o.Apply)
	if err != nil {
		return "", asUsage(fmt.Errorf("--apply: %w", err))
	}
	res, err := netapply.Apply(ctx, plan, netapply.ApplyOptions{Dir: o.RevertDir, System: netapply.LiveSystem(),
		Run: netapply.RunInfo{Command: "udp", Version: Version(), Started: r.Meta.Started, Interface: o.Iface, Findings: plan.IDs()}})
	if res.RevertFile != "" {
		fmt.Fprintf(g.Err, "revert file: %s (undo with: perfscope udp --revert %s)\n", res.RevertFile, res.RevertFile)
	}
	netapply.WriteLog(g.Err, "unchanged", res.Unchanged)
	netapply.WriteLog(g.Err, "applied", res.Applied)
	if err != nil {
		return res.RevertFile, fmt.Errorf("--apply: %w", err)
	}
	if len(res.Applied) == 0 {
		fmt.Fprintln(g.Err, "--apply: every change was already in place; nothing was changed and no revert file was written")
	}
	return res.RevertFile, nil
}

func (o *udpOptions) runRevert(ctx context.Context, g *Globals) error {
	res, err := netapply.Revert(ctx, o.Revert, netapply.LiveSystem(), netapply.Identity{})
	netapply.WriteLog(g.Out, "reverted", res.Restored)
	netapply.WriteLog(g.Out, "already old", res.AlreadyOld)
	netapply.WriteLog(g.Out, "gone", res.Gone)
	netapply.WriteLog(g.Out, "left as found", res.Conflicts)
	if errors.Is(err, netapply.ErrBadRevertFile) {
		return asUsage(fmt.Errorf("--revert %w", err))
	}
	if isBadInputFile(err) {
		return asUsage(fmt.Errorf("--revert: %w", err))
	}
	if err != nil {
		return fmt.Errorf("--revert: %w", err)
	}
	return nil
}

func (o *udpOptions) runCompare(ctx context.Context, g *Globals) error {
	if len(o.Compare) != 2 {
		return usageError("--compare takes two saved runs: --compare before.json,after.json")
	}
	f, err := report.ParseFormat(o.Output)
	if err != nil {
		return asUsage(err)
	}
	var runs [2]netcompare.Run
	for i, path := range o.Compare {
		if runs[i], err = netcompare.Load(ctx, path); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return asUsage(err)
		}
	}
	before, after := runs[0], runs[1]
	c := netcompare.Compare(before, after)
	if f == report.JSON {
		return report.WriteJSON(g.Out, c)
	}
	netcompare.WriteText(g.textOut(), c)
	return nil
}

// scaleCosts replaces each program's cumulative bpf_stats, which another
// process's statistics windows may have inflated, with what it ran inside
// this run's own sampled windows, scaled to the whole run; per-run times
// are measured and stay as they are.
func scaleCosts(ov *evidence.Overhead, s probes.StatsSample, window time.Duration, cpus int) {
	k := s.Scale()
	ov.StatsSample = &evidence.StatsSample{OnNs: int64(s.On), TotalNs: int64(s.Total), Scale: k, Shared: s.Shared}
	sampled := map[string]probes.ProgramCost{}
	for _, c := range s.Costs {
		sampled[c.Program] = c
	}
	var total uint64
	for i := range ov.Programs {
		p := &ov.Programs[i]
		c := sampled[p.Program]
		*p = evidence.NewProgramCost(p.Program, uint64(math.Round(float64(c.RunCount)*k)), time.Duration(math.Round(float64(c.RunTime)*k)))
		total += p.RunTimeNs
	}
	if window > 0 && cpus > 0 {
		ov.BPFTimeShare = float64(total) / (float64(window) * float64(cpus))
	}
}

// addCosts appends more programs' bpf_stats to an overhead report and
// recomputes the BPF share of CPU time.
func addCosts(ov *evidence.Overhead, costs []probes.ProgramCost, window time.Duration, cpus int) {
	for _, c := range costs {
		ov.Programs = append(ov.Programs, evidence.NewProgramCost(c.Program, c.RunCount, c.RunTime))
	}
	var total uint64
	for _, p := range ov.Programs {
		total += p.RunTimeNs
	}
	if window > 0 && cpus > 0 {
		ov.BPFTimeShare = float64(total) / (float64(window) * float64(cpus))
	}
}

func buildNetEvidence(o *udpOptions, start, end netSample, np *netProbes, prof *cpuprofile.Profiler, profile cpuprofile.Profile, profErr error) (evidence.NetEvidence, []report.Artifact, error) {
	window := end.softirq.probe.Taken.Sub(start.softirq.probe.Taken)
	ev := evidence.NetEvidence{
		DurationNs: int64(window), Port: o.Port, PID: o.PID,
		Interface: evidence.NetInterface{Name: o.iface.Name, Ifindex: o.iface.Index, Driver: o.iface.Driver,
			Virtual: o.iface.Virtual, NUMANode: o.iface.NUMANode, RXQueues: len(o.iface.RX), TXQueues: len(o.iface.TX)},
	}
	drvInfo, drvErr := (ethtool.Ioctl{}).DriverInfo(o.Iface)
	if drvErr == nil && ev.Interface.Driver == "" {
		ev.Interface.Driver = drvInfo.Driver
	}
	ev.Softirq = evidence.BuildSoftirq(softirqInput(start.softirq, end.softirq, cpuset.Set{}))
	netRX := netRXCPUs(ev.Softirq)

	// Queues: the driver's counters now; the kernel side comes from the
	// queue probe.
	var driver []ethtool.QueueCounters
	driverErr := end.driverErr
	if driverErr == nil && start.driverErr == nil {
		driver = ethtool.SubQueues(end.driver, start.driver)
	}
	var kernel evidence.QueueCounts
	var txByCPU map[int]map[int]uint64
	var qdisc []evidence.QdiscRow
	if np.queue != nil {
		kernel, ev.QueueCPU, txByCPU, qdisc = queueSides(o, ev.Interface.Driver, end.probes.queue.Sub(start.probes.queue), np.queue.NoNAPI())
	} else {
		ev.QueueCPU.Unavailable = fmt.Sprintf("queue probe: %v", np.queueErr)
	}
	ev.Queues = evidence.BuildQueues(o.iface, driver, driverErr, kernel, window)
	if np.queue == nil {
		ev.Queues.Notes = append(ev.Queues.Notes, fmt.Sprintf("kernel per-queue counts: queue probe unavailable: %v", np.queueErr))
	} else if m := missingNote(np.queue.Missing()); m != "" {
		ev.Queues.Notes = append(ev.Queues.Notes, "tracepoints unavailable: "+m)
	}

	// IRQs.
	topo, topoErr := cpuset.NewFS("/").Topology()
	if start.irqErr != nil || end.irqErr != nil {
		ev.IRQs.Unavailable = fmt.Sprintf("/proc/interrupts: %v", errors.Join(start.irqErr, end.irqErr))
	} else {
		dev := irq.Device{Interface: o.iface.Name}
		if drvErr == nil {
			dev.PCIAddress = drvInfo.BusInfo
		}
		if link, err := os.Readlink(filepath.Join("/sys/class/net", o.Iface, "device")); err == nil && strings.HasPrefix(filepath.Base(link), "virtio") {
			dev.Virtio = filepath.Base(link)
		}
		dev.MSIIRQs, _ = netdev.Default.MSIIRQs(o.Iface)
		qirqs := irq.QueueIRQs(end.interrupts, dev)
		aff := map[int]irq.Affinity{}
		for _, q := range qirqs {
			if a, err := irq.Default.Affinity(q.IRQ); err == nil {
				aff[q.IRQ] = a
			}
		}
		bal, _ := irq.Default.Irqbalance()
		if topoErr != nil {
			topo = cpuset.Topology{}
		}
		ev.IRQs = evidence.BuildIRQs(o.iface, qirqs, end.interrupts.Sub(start.interrupts), aff, bal, topo, sortedCPUs(netRX))
	}

	ev.TX = evidence.BuildTX(o.iface, txByCPU, qdisc)
	if np.queue == nil {
		ev.TX.Unavailable = fmt.Sprintf("per-CPU TX queues and qdisc activity: queue probe unavailable: %v (XPS configuration shown)", np.queueErr)
	}
	if np.lock != nil {
		ev.Locks = lockSection(end.probes.lock.Sub(start.probes.lock), end.udp)
	} else {
		ev.Locks.Unavailable = fmt.Sprintf("lock contention: %v", np.lockErr)
	}
	ev.Drops = buildDrops(o, start, end)
	addRXPathCounters(&ev, start.rx, end.rx)
	if np.drop != nil {
		addProbeDrops(&ev.Drops, np.drop, end.probes.drop.Sub(start.probes.drop))
	} else {
		ev.Drops.Notes = append(ev.Drops.Notes, fmt.Sprintf("drop reasons: drop probe unavailable: %v (socket drop counters shown)", np.dropErr))
	}

	// Sockets.
	if start.udpErr != nil || end.udpErr != nil {
		ev.Sockets.Unavailable = fmt.Sprintf("/proc/net/udp: %v", errors.Join(start.udpErr, end.udpErr))
	} else {
		var owned map[uint64]bool
		var threads []sockets.Thread
		if o.PID > 0 {
			owned, _ = sockets.Default.SocketInodes(o.PID)
			threads, _ = sockets.Default.Threads(o.PID)
		}
		ev.Sockets = evidence.BuildSockets(o.Port, o.PID, start.udp, end.udp, owned, threads)
		if ev.Sockets.Unavailable == "" {
			addSocketReads(&ev.Sockets, np, end.probes.sock.Sub(start.probes.sock), window)
		}
	}

	var artifacts []report.Artifact
	if prof == nil {
		ev.Profile.Unavailable = fmt.Sprintf("on-CPU profile: %v", profErr)
	} else {
		var err error
		ev.Profile, artifacts, err = buildProfile(o, prof, profile, netRX)
		if err != nil {
			return ev, nil, err
		}
	}
	return ev, artifacts, nil
}

// netRXCPUs are the CPUs that spent at least 1 % of the window in NET_RX,
// or the busiest one when none did.
func netRXCPUs(s evidence.SoftirqEvidence) map[int]bool {
	out := map[int]bool{}
	best, bestShare := -1, 0.0
	for _, c := range s.CPUs {
		sh := c.Vectors["NET_RX"].Share
		if sh >= 0.01 {
			out[c.CPU] = true
		}
		if sh > bestShare {
			best, bestShare = c.CPU, sh
		}
	}
	if len(out) == 0 && best >= 0 {
		out[best] = true
	}
	return out
}

func sortedCPUs(m map[int]bool) []int {
	var out []int
	for c := range m {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// buildDrops fills the drops section from per-socket drop counters until
// the drop probe provides reasons.
func buildDrops(o *udpOptions, start, end netSample) evidence.DropSection {
	d := evidence.DropSection{ByReason: map[string]uint64{}}
	if start.snmpErr == nil && end.snmpErr == nil {
		delta := end.snmp.Sub(start.snmp)
		d.UDPSNMP = &delta
	}
	if start.softnetErr == nil && end.softnetErr == nil {
		d.Softnet = netstat.SubSoftnet(end.softnet, start.softnet)
	}
	if start.udpErr != nil || end.udpErr != nil {
		d.Unavailable = "per-socket drops: /proc/net/udp unreadable"
		return d
	}
	prev := map[uint64]uint64{}
	for _, k := range start.udp.Sockets {
		prev[k.Inode] = k.Drops
	}
	byPort := map[int]uint64{}
	for _, k := range end.udp.Sockets {
		if p, ok := prev[k.Inode]; ok && k.Drops > p {
			byPort[int(k.Local.Port())] += k.Drops - p
		}
	}
	for port, n := range byPort {
		d.ByPort = append(d.ByPort, evidence.PortDrops{Port: port, Reason: "socket (sk_drops)", Count: n})
	}
	sort.Slice(d.ByPort, func(i, j int) bool { return d.ByPort[i].Count > d.ByPort[j].Count })
	return d
}

// buildProfile symbolizes the run's samples, measures the kernel function
// groups, and writes flame graphs when --flame is set.
func buildProfile(o *udpOptions, prof *cpuprofile.Profiler, p cpuprofile.Profile, netRX map[int]bool) (evidence.ProfileSection, []report.Artifact, error) {
	sec := evidence.ProfileSection{FrequencyHz: prof.Frequency(), NetRXCPUs: sortedCPUs(netRX), Lost: p.Lost.Total()}
	sym := symbols.New(symbols.Default)
	p, idle := p.SplitIdle(sym)
	all, netrx, other := flame.New(flame.Samples), flame.New(flame.Samples), flame.New(flame.Samples)
	var samples []evidence.ProfileSample
	for _, s := range p.Samples {
		frames := cpuprofile.Frames(sym, s, cpuprofile.RootCPU)
		samples = append(samples, evidence.ProfileSample{CPU: s.CPU, Frames: frames, Count: s.Count})
		all.Add(frames, int64(s.Count))
		if netRX[s.CPU] {
			netrx.Add(frames, int64(s.Count))
		} else {
			other.Add(frames, int64(s.Count))
		}
	}
	sec.Groups, sec.Samples, sec.NetRXSamples = evidence.GroupShares(samples, netRX)
	sec.IdleInterruptSamples, sec.IdleLoopSamples = idle.Interrupt(), idle.Loop()
	sec.CPUs = evidence.ProfileCPUs(samples, idle.InterruptByCPU, idle.LoopByCPU)
	if o.FlameDir == "" {
		return sec, nil, nil
	}
	var arts []report.Artifact
	for _, part := range []struct {
		name, title string
		p           *flame.Profile
	}{
		{"udp-netrx", "CPUs running NET_RX (" + cpuset.Of(sec.NetRXCPUs...).List() + ")", netrx},
		{"udp-other", "other CPUs", other},
		{"udp-all", "all CPUs", all},
	} {
		a, err := writeFlame(o.FlameDir, part.name, part.p, flame.Options{Title: "perfscope udp --iface " + o.Iface + ": " + part.title})
		if err != nil {
			return sec, arts, err
		}
		arts = append(arts, a...)
	}
	return sec, arts, nil
}

// writeFlame writes name.folded and name.svg into dir, which must be
// private to this user; files are created without following links.
func writeFlame(dir, name string, p *flame.Profile, opts flame.Options) ([]report.Artifact, error) {
	d, err := safeio.OpenPrivateDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--flame %s: %w", dir, err)
	}
	defer d.Close()
	var arts []report.Artifact
	for _, out := range []struct {
		ext, kind string
		write     func(io.Writer) error
	}{
		{".folded", "folded", func(w io.Writer) error { return flame.WriteFolded(w, p) }},
		{".svg", "flamegraph-svg", func(w io.Writer) error { return flame.WriteSVG(w, p, opts) }},
	} {
		path := filepath.Join(dir, name+out.ext)
		if err := d.WriteFile(context.Background(), name+out.ext, 0o644, out.write); err != nil {
			return arts, fmt.Errorf("write %s: %w", path, err)
		}
		arts = append(arts, report.Artifact{Kind: out.kind, Path: path})
	}
	return arts, nil
}
