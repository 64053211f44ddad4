package udplab

import (
	"fmt"
	"slices"
	"strings"

	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/report/compare"
)

// The lab's server, load and fix kinds are report/compare's, which
// renders them.
type (
	Server = compare.LabUDPServer
	Flood  = compare.LabUDPFlood
	Fix    = compare.LabUDPFix
)

const (
	FixApply        = compare.LabFixApply
	FixServer       = compare.LabFixServer
	FixNone         = compare.LabFixNone
	FixNewNamespace = compare.LabFixNewNamespace
	FixCheck        = compare.LabFixCheck
)

// Scenario plants one of Makita's faults on the lab and names the finding
// perfscope must produce for it.
type Scenario struct {
	Name string `json:"name"`
	// Fault is what the scenario plants, in a few words.
	Fault string `json:"fault"`
	// Step is Makita's step this reproduces.
	Step string `json:"reference_step"`
	// Finding is the finding ID that must appear before and disappear
	// after the fix ("" for the tuned reference).
	Finding string `json:"finding,omitempty"`
	// FixText says what the fix is.
	FixText string `json:"fix"`
	Fix     Fix    `json:"fix_kind"`

	Lab netlab.Config `json:"-"`
	// Setup runs in the receiver namespace before anything starts: the
	// planted fault, or the tuning of the reference rig.
	Setup [][]string `json:"setup,omitempty"`
	// SenderSetup runs in the sender namespace.
	SenderSetup [][]string `json:"-"`
	Before      Server     `json:"server_before"`
	// After is the server after the fix; for FixApply it is Before.
	After Server `json:"server_after"`
	Flood Flood  `json:"flood"`
	// Metrics are the comparison keys (report/compare) of what the fix
	// removes — a lock class's wait, a function group's CPU share —
	// shown after packets/s, drops and lock wait.
	Metrics []string `json:"metrics,omitempty"`
	// Check judges a FixCheck scenario's run: lines for the report and a
	// problem ("" when the run shows what it should).
	Check func(run compare.Run) (lines []string, problem string) `json:"-"`
	// Modules the setup may load on a kernel where they are modules; the
	// lab unloads those that were not loaded before it and that nothing
	// uses once the scenario is over.
	Modules []string `json:"-"`
}

// Describe is the scenario as its report shows it.
func (s Scenario) Describe() compare.LabUDPScenario {
	return compare.LabUDPScenario{Name: s.Name, Fault: s.Fault, ReferenceStep: s.Step, Finding: s.Finding, FixText: s.FixText,
		Fix: s.Fix, Setup: s.Setup, Before: s.Before, After: s.After, Flood: s.Flood, Metrics: s.Metrics}
}

// Addresses and port of the lab (netlab's RFC 2544 pair).
const Port = 9000

// rxIf is the receiver's end of the lab's veth pair (netlab names it).
const rxIf = "vb"

func xps(queue int, mask string) []string {
	return []string{"sh", "-c", fmt.Sprintf("echo %s > /sys/class/net/%s/queues/tx-%d/xps_cpus", mask, rxIf, queue)}
}

// Scenarios are the faults of Makita's talk one machine can reproduce, in the
// order the seed meets them, then the tuned reference. A 2-CPU machine is
// assumed to be the smallest: masks and pins name CPUs 0 and 1.
var Scenarios = []Scenario{
	{
		Name:    "single-socket",
		Fault:   "one UDP socket read by 2 threads, 4 senders",
		Step:    "step 4: SO_REUSEPORT (17k → 2.54M tps)",
		Finding: "net.socket-lock-contention",
		FixText: "restart the server with one SO_REUSEPORT socket per thread (the finding's code sketch)",
		Fix:     FixServer,
		Lab:     netlab.Config{Queues: 4},
		Before:  Server{Mode: "single", Threads: 2},
		After:   Server{Mode: "reuseport", Threads: 2},
		Flood:   Flood{Senders: 4},
		Metrics: []string{"lock_wait_ns_per_s.class.socket-receive-queue"},
	},
	{
		Name:    "reuseport-no-steering",
		Fault:   "SO_REUSEPORT group of 2 sockets chosen by flow hash, threads unpinned",
		Step:    "step 5-6: SO_ATTACH_REUSEPORT_CBPF and pinning (2.54M → 5.05M tps)",
		Finding: "net.reuseport-steering",
		FixText: "restart the server with SO_ATTACH_REUSEPORT_CBPF steering by CPU, each thread pinned to its socket's CPU",
		Fix:     FixServer,
		Lab:     netlab.Config{Queues: 4},
		Before:  Server{Mode: "reuseport", Threads: 2},
		After:   Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1"},
		Flood:   Flood{Senders: 4},
		Metrics: []string{"lock_wait_ns_per_s.class.socket-receive-queue"},
	},
	{
		Name:    "rps-off",
		Fault:   "one RX queue, its softirq on CPU 0 only, RPS off",
		Step:    "step 3: RPS (queues 6-9 → CPUs 16-19)",
		Finding: "net.rps-needed",
		FixText: "perfscope udp --apply net.rps-needed (rps_cpus masks)",
		Fix:     FixApply,
		Lab:     netlab.Config{Queues: 1},
		// Both readers on CPU 1, so CPU 0 holds only the sender and the
		// receive softirq: its NET_RX share is then clearly above the
		// rule's 30 % on this 2-CPU rig (with a reader on CPU 0 too it
		// hovered at 28–31 % and the finding came and went). The price:
		// RPS can only move the receive work onto the readers' CPU, so
		// the rate after the fix shows no gain here.
		Before: Server{Mode: "reuseport-cpu", Threads: 2, Pin: "1"},
		Flood:  Flood{Senders: 1, CPUs: "0"},
	},
	{
		Name:    "xps-off",
		Fault:   "echo server; XPS unset, so both CPUs send on TX queues picked by flow hash",
		Step:    "step 7: XPS (1.09M → 5.05M tps when ixgbe's XPS was removed)",
		Finding: "net.xps-unset",
		FixText: "perfscope udp --apply net.xps-unset (xps_cpus one CPU per queue)",
		Fix:     FixApply,
		Lab:     netlab.Config{Queues: 4},
		Before:  Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1", Echo: true},
		Flood:   Flood{Senders: 4},
		// veth's qdisc is noqueue: the shared queues themselves show it.
		Metrics: []string{"tx.shared_queues"},
	},
	{
		Name:    "gro-on",
		Fault:   "GRO on for a UDP-only receive path",
		Step:    "step 8: GRO off (5.05M → 5.18M tps)",
		Finding: "net.gro-udp",
		FixText: "perfscope udp --apply net.gro-udp (rx-gro off, as ethtool -K vb gro off)",
		Fix:     FixApply,
		Lab:     netlab.Config{Queues: 4},
		Before:  Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1"},
		Flood:   Flood{Senders: 4},
		Metrics: []string{"profile.share.gro"},
	},
	{
		Name:    "netfilter-empty",
		Fault:   "an empty filter table with an input hook (what `iptables -L` leaves behind)",
		Step:    "step 9: unload iptables (5.18M → 5.38M tps)",
		Finding: "net.netfilter-unused",
		FixText: "perfscope udp --apply net.netfilter-unused (nft table deleted over netlink, saved in the revert file)",
		Fix:     FixApply,
		Lab:     netlab.Config{Queues: 4, NoGRO: true},
		Setup: [][]string{
			{"nft", "add", "table", "ip", "filter"},
			{"nft", "add", "chain", "ip", "filter", "INPUT", "{ type filter hook input priority 0; policy accept; }"},
		},
		Before:  Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1"},
		Flood:   Flood{Senders: 4},
		Metrics: []string{"profile.share.netfilter"},
	},
	{
		Name:    "rp-filter",
		Fault:   "strict reverse-path filtering (rp_filter=1)",
		Step:    "step 10: rp_filter=0, accept_local=1 (5.38M → 5.49M tps)",
		Finding: "net.rp-filter",
		FixText: "perfscope udp --apply net.rp-filter (sysctl rp_filter=0, accept_local=1)",
		Fix:     FixApply,
		Lab:     netlab.Config{Queues: 4, NoGRO: true},
		Setup: [][]string{
			{"sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1"},
			{"sysctl", "-qw", "net.ipv4.conf." + rxIf + ".rp_filter=1"},
		},
		Before:  Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1"},
		Flood:   Flood{Senders: 4},
		Metrics: []string{"profile.share.fib-validation"},
	},
	{
		Name:    "rcvbuf-small",
		Fault:   "SO_RCVBUF of 4 KiB on each socket, bursty 40k datagrams/s",
		Step:    "drops the seed's benchmark does not count (Udp RcvbufErrors)",
		Finding: "net.udp-rcvbuf",
		// In a network namespace net.core.rmem_default is the host's,
		// read-only; perfscope then recommends the socket option with a
		// computed size, which the lab's server takes.
		FixText: "restart the server with the SO_RCVBUF the finding computed (so_rcvbuf_bytes)",
		Fix:     FixServer,
		Lab:     netlab.Config{Queues: 4, NoGRO: true},
		Before:  Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1", RcvBuf: 4096},
		After:   Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1", RcvBufFromFinding: true},
		Flood:   Flood{Senders: 2, Rate: 40000},
	},
	{
		Name:  "legacy-iptables",
		Fault: "empty legacy iptables filter and raw tables, as `iptables-legacy -L` leaves them (invisible to iptables-nft and nft)",
		Step:  "step 9: unload iptables (5.18M → 5.38M tps); here the tables are built into the kernel and cannot be unloaded",
		// On this kernel the x_tables code is built in: the honest advice
		// is a namespace the legacy tool never touched.
		Finding: "net.netfilter-unused",
		FixText: "run again in a fresh network namespace pair that no legacy iptables command touched (the finding's advice: the tables stay until reboot)",
		Fix:     FixNewNamespace,
		Lab:     netlab.Config{Queues: 4, NoGRO: true},
		Setup: [][]string{
			{"iptables-legacy", "-t", "filter", "-L", "-n"},
			{"iptables-legacy", "-t", "raw", "-L", "-n"},
		},
		Before:  Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1"},
		Flood:   Flood{Senders: 4},
		Metrics: []string{"profile.share.netfilter"},
		Modules: []string{"iptable_raw", "iptable_filter", "ip_tables"},
	},
	{
		Name:  "rps-idle-profile",
		Fault: "RPS sends every packet's receive processing to CPU 0, which otherwise idles (sender and server on CPU 1): NET_RX runs in the idle task, as on a real NIC",
		Step:  "the NET_RX CPUs whose profile every function-group finding reads",
		// CPU 0: on this project's VMs a halted vCPU 1 misses its
		// cpu-clock ticks (see integration/udpidle_test.go).
		FixText: "nothing to fix: the profile of CPU 0 must show the receive path with the share the softirq probe measures",
		Fix:     FixCheck,
		Lab:     netlab.Config{Queues: 1, NoGRO: true},
		Setup:   [][]string{{"sh", "-c", "echo 1 > /sys/class/net/" + rxIf + "/queues/rx-0/rps_cpus"}},
		Before:  Server{Mode: "single", Threads: 1, Pin: "1"},
		Flood:   Flood{Senders: 1, CPUs: "1", Rate: 60000},
		Check:   checkIdleNetRX(0, 0.05),
	},
	{
		Name:    "tuned",
		Fault:   "none: reuseport steered by CPU, pinned threads, XPS set, GRO off, no netfilter, rp_filter 0",
		Step:    "the end state of Makita's talk on this machine",
		FixText: "nothing to fix: perfscope must report no finding of severity warn or worse",
		Fix:     FixNone,
		Lab:     netlab.Config{Queues: 4, NoGRO: true},
		Setup:   [][]string{xps(0, "1"), xps(1, "2")},
		Before:  Server{Mode: "reuseport-cpu", Threads: 2, Pin: "0-1", Echo: true},
		// Below the receiver's capacity: an overloaded rig drops however
		// well it is tuned, and the drops would be a (true) finding.
		Flood: Flood{Senders: 4, Rate: 30000},
	},
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Names lists the scenarios.
func Names() []string {
	names := make([]string, len(Scenarios))
	for i, s := range Scenarios {
		names[i] = s.Name
	}
	return names
}

// checkIdleNetRX compares, on cpu, the profile's NET_RX share (samples
// through net_rx_action over every tick, idle loop included) with the
// softirq probe's NET_RX time: cpu must be one of the report's NET_RX CPUs
// that the profile saw (not undersampled), the two shares must agree
// within tolerance, and the profile must have kept softirq-on-idle samples.
func checkIdleNetRX(cpu int, tolerance float64) func(compare.Run) ([]string, string) {
	return func(run compare.Run) ([]string, string) {
		var softirq float64
		for _, c := range run.Data.Softirq.CPUs {
			if c.CPU == cpu {
				softirq = c.NetRXShare()
			}
		}
		p := run.Data.Profile
		lines := []string{fmt.Sprintf("softirq probe: CPU %d spent %.1f%% of the window in NET_RX", cpu, softirq*100)}
		if p.Unavailable != "" {
			return lines, "profile unavailable: " + p.Unavailable
		}
		for _, c := range p.CPUs {
			if c.CPU != cpu {
				continue
			}
			lines = append(lines, fmt.Sprintf("profile: CPU %d, %d samples through net_rx_action of %d ticks (%.1f%%); %d softirq/interrupt samples on the idle task kept, %d idle-loop samples left out",
				cpu, c.NetRXSamples, c.Samples+c.IdleLoopSamples, c.NetRXShare*100, c.IdleInterruptSamples, c.IdleLoopSamples))
			// The one definition of NET_RX CPUs (evidence.NetRXBusyShare):
			// the profile's function groups are read on those CPUs.
			switch d := c.NetRXShare - softirq; {
			case !slices.Contains(p.NetRXCPUs, cpu):
				return lines, fmt.Sprintf("RPS did not move NET_RX to CPU %d: the report's NET_RX CPUs are %v", cpu, p.NetRXCPUs)
			case c.Undersampled:
				// The shares compared are then of a handful of ticks.
				return lines, fmt.Sprintf("the profile did not see CPU %d (%s): its share cannot be compared", cpu, c.UndersampledReason)
			case c.IdleInterruptSamples == 0 && 2*c.IdleLoopSamples < c.Samples:
				// The premise failed, not the profile: other work kept
				// the CPU busy, so NET_RX never ran from its idle task.
				return lines, fmt.Sprintf("CPU %d was not idle (%d of %d ticks in the idle loop: other work ran there), so NET_RX never ran in its idle task; run the lab on a quiet machine", cpu, c.IdleLoopSamples, c.Samples+c.IdleLoopSamples)
			case c.IdleInterruptSamples == 0:
				return lines, "no softirq-on-idle samples kept"
			case d > tolerance || d < -tolerance:
				return lines, fmt.Sprintf("profile and softirq probe disagree by %.1f points (tolerance %.0f)", d*100, tolerance*100)
			}
			return lines, ""
		}
		return lines, fmt.Sprintf("no profile samples on CPU %d", cpu)
	}
}

// Select is the scenarios named, in the order given; none named is all.
func Select(names []string) ([]Scenario, error) {
	return netlab.Select(names, Scenarios, func(s Scenario) string { return s.Name })
}

// Help lists the scenarios for lab udp's help, a line each.
func Help() string {
	var b strings.Builder
	for _, s := range Scenarios {
		fmt.Fprintf(&b, "  %-22s %s\n", s.Name, s.Fault)
	}
	return b.String()
}
