package cli

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/recipes"
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
  perfscope udp --iface eth0 --apply net.rps-needed,net.xps-unset   # writes a revert script first
  perfscope udp --revert ./perfscope-revert-20261121-101500.sh
  perfscope udp --compare before.json after.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case len(o.Compare) > 0:
				return o.runCompare(g)
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
	f.StringSliceVar(&o.Apply, "apply", nil, "apply the system-setting recommendations of these finding IDs (after writing a revert script)")
	f.StringVar(&o.RevertDir, "revert-dir", ".", "directory for the revert script --apply writes")
	f.StringVar(&o.Revert, "revert", "", "run a revert script written by --apply, then exit")
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
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", o.PID)); err != nil {
			return usageError("--pid %d: no such process", o.PID)
		}
	}
	if o.FailOn != "" {
		if o.failOn, err = diagnose.ParseSeverity(o.FailOn); err != nil {
			return usageError("--fail-on: %v", err)
		}
	}
	if len(o.Apply) > 0 {
		if st, err := os.Stat(o.RevertDir); err != nil || !st.IsDir() {
			return usageError("--revert-dir %s is not a directory", o.RevertDir)
		}
	}
	if o.FlameDir != "" {
		if err := os.MkdirAll(o.FlameDir, 0o755); err != nil {
			return usageError("--flame %s: %v", o.FlameDir, err)
		}
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
	return s, nil
}

func runUDP(ctx context.Context, o *udpOptions, g *Globals) error {
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
		prof, profErr = cpuprofile.Open(cpuprofile.Options{Frequency: o.Freq})
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
	stats, statsErr := probes.SampleStats(probes.StatsSampleOn, probes.StatsSamplePeriod, func() uint64 {
		costs := append(sp.Costs(), np.costs()...)
		if prof != nil {
			costs = append(costs, prof.Costs()...)
		}
		var n uint64
		for _, c := range costs {
			n += c.RunCount
		}
		return n
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
	data := report.NetData{NetEvidence: ev}
	if cfgErr == nil {
		data.Config = &cfg
	}
	r := report.New("udp", Version(), start.softirq.probe.Taken)
	r.Findings = diagnose.DiagnoseNet(diagnose.NetInput{Evidence: ev, Config: data.Config})
	r.Meta.DurationNs = ev.DurationNs
	r.Data = data
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
		path, applyErr = applyFindings(ctx, o, g, r.Findings)
		if path != "" {
			r.Artifacts = append(r.Artifacts, report.Artifact{Kind: "revert-script", Path: path})
		}
	}
	if o.format == report.JSON {
		if err := report.WriteJSON(g.Out, r); err != nil {
			return err
		}
	} else {
		writeUDPText(g.Out, r, ev, statsErr)
	}
	if applyErr != nil {
		return applyErr
	}
	return failOn(r.Findings, o.failOn)
}

// applyFindings writes the revert script, then applies the chosen
// settings; it reports to stderr so JSON on stdout stays clean.
func applyFindings(ctx context.Context, o *udpOptions, g *Globals, findings []diagnose.Finding) (string, error) {
	plan, err := netapply.NewPlan(findings, o.Apply)
	if err != nil {
		return "", asUsage(fmt.Errorf("--apply: %w", err))
	}
	path, err := netapply.WriteRevertScript(o.RevertDir, &plan)
	if err != nil {
		return "", fmt.Errorf("--apply: write the revert script first: %w", err)
	}
	fmt.Fprintf(g.Err, "revert script: %s (undo with: perfscope udp --revert %s)\n", path, path)
	done, err := netapply.Apply(ctx, plan, netapply.Shell{})
	for _, e := range done {
		fmt.Fprintf(g.Err, "applied [%s]: %s\n", e.FindingID, e.Command)
	}
	return path, err
}

func (o *udpOptions) runRevert(ctx context.Context, g *Globals) error {
	done, err := netapply.Revert(ctx, o.Revert, netapply.Shell{})
	for _, e := range done {
		fmt.Fprintf(g.Out, "reverted [%s]: %s\n", e.FindingID, e.Command)
	}
	if errors.Is(err, netapply.ErrNotRevertScript) || errors.Is(err, os.ErrNotExist) {
		return asUsage(err)
	}
	return err
}

func (o *udpOptions) runCompare(g *Globals) error {
	if len(o.Compare) != 2 {
		return usageError("--compare takes two saved runs: --compare before.json,after.json")
	}
	f, err := report.ParseFormat(o.Output)
	if err != nil {
		return asUsage(err)
	}
	before, err := netcompare.Load(o.Compare[0])
	if err != nil {
		return asUsage(err)
	}
	after, err := netcompare.Load(o.Compare[1])
	if err != nil {
		return asUsage(err)
	}
	c := netcompare.Compare(before, after)
	if f == report.JSON {
		return report.WriteJSON(g.Out, c)
	}
	netcompare.WriteText(g.Out, c)
	return nil
}

// scaleCosts turns sampled bpf_stats into estimates for the whole run; the
// per-run times are measured and stay as they are.
func scaleCosts(ov *evidence.Overhead, s probes.StatsSample, window time.Duration, cpus int) {
	k := s.Scale()
	ov.StatsSample = &evidence.StatsSample{OnNs: int64(s.On), TotalNs: int64(s.Total), Scale: k, Shared: s.Shared}
	var total uint64
	for i := range ov.Programs {
		p := &ov.Programs[i]
		p.RunCount = uint64(math.Round(float64(p.RunCount) * k))
		p.RunTimeNs = uint64(math.Round(float64(p.RunTimeNs) * k))
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
	ev.Softirq = recipes.BuildSoftirq(softirqInput(start.softirq, end.softirq, cpuset.Set{}))
	netRX := netRXCPUs(ev.Softirq)

	// Queues: the driver's counters now; the kernel side comes from the
	// queue probe.
	var driver []ethtool.QueueCounters
	driverErr := end.driverErr
	if driverErr == nil && start.driverErr == nil {
		driver = ethtool.SubQueues(end.driver, start.driver)
	}
	var kernel recipes.QueueCounts
	var txByCPU map[int]map[int]uint64
	var qdisc []evidence.QdiscRow
	if np.queue != nil {
		kernel, ev.QueueCPU, txByCPU, qdisc = queueSides(o, ev.Interface.Driver, end.probes.queue.Sub(start.probes.queue), np.queue.NoNAPI())
	} else {
		ev.QueueCPU.Unavailable = fmt.Sprintf("queue probe: %v", np.queueErr)
	}
	ev.Queues = recipes.BuildQueues(o.iface, driver, driverErr, kernel, window)
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
		ev.IRQs = recipes.BuildIRQs(o.iface, qirqs, end.interrupts.Sub(start.interrupts), aff, bal, topo, sortedCPUs(netRX))
	}

	ev.TX = recipes.BuildTX(o.iface, txByCPU, qdisc)
	if np.queue == nil {
		ev.TX.Unavailable = fmt.Sprintf("per-CPU TX queues and qdisc activity: queue probe unavailable: %v (XPS configuration shown)", np.queueErr)
	}
	if np.lock != nil {
		ev.Locks = lockSection(end.probes.lock.Sub(start.probes.lock), end.udp)
	} else {
		ev.Locks.Unavailable = fmt.Sprintf("lock contention: %v", np.lockErr)
	}
	ev.Drops = buildDrops(o, start, end)
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
		ev.Sockets = recipes.BuildSockets(o.Port, o.PID, start.udp, end.udp, owned, threads)
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

// netRXCPUs are the CPUs doing receive work, by the definition the rules
// use too.
func netRXCPUs(s evidence.SoftirqEvidence) map[int]bool {
	out := map[int]bool{}
	for _, c := range s.NetRXCPUs() {
		out[c] = true
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
		delta := recipes.UDPSNMPEvidence(end.snmp.Sub(start.snmp))
		d.UDPSNMP = &delta
	}
	if start.softnetErr == nil && end.softnetErr == nil {
		for _, c := range netstat.SubSoftnet(end.softnet, start.softnet) {
			d.Softnet = append(d.Softnet, evidence.SoftnetCPU(c))
		}
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
	sec.Groups, sec.Samples, _ = evidence.GroupShares(samples, netRX)
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

// writeFlame writes name.folded and name.svg into dir.
func writeFlame(dir, name string, p *flame.Profile, opts flame.Options) ([]report.Artifact, error) {
	var arts []report.Artifact
	for _, out := range []struct {
		ext, kind string
		write     func(*os.File) error
	}{
		{".folded", "folded", func(f *os.File) error { return flame.WriteFolded(f, p) }},
		{".svg", "flamegraph-svg", func(f *os.File) error { return flame.WriteSVG(f, p, opts) }},
	} {
		path := filepath.Join(dir, name+out.ext)
		f, err := os.Create(path)
		if err != nil {
			return arts, fmt.Errorf("write %s: %w", path, err)
		}
		werr := out.write(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return arts, fmt.Errorf("write %s: %w", path, werr)
		}
		arts = append(arts, report.Artifact{Kind: out.kind, Path: path})
	}
	return arts, nil
}
