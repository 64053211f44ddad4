package tcplab

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/perfscope/perfscope/lab/netlab"
)

// Port is the lab server's TCP port.
const Port = 9000

// Server is the lab's TCP server in the receiver namespace. After the fix
// the lab starts it again: a listener takes its backlog (capped by
// somaxconn) when listen() is called, so a raised somaxconn reaches only
// listeners created after it — the finding's own caveat.
type Server struct {
	// Listeners on the port (more than one: an SO_REUSEPORT group).
	Listeners int `json:"listeners"`
	// Threads are the OS threads accepting on each listener (blocking
	// accept(), as a threaded server does).
	Threads int `json:"threads"`
	// Backlog is listen()'s argument (capped by net.core.somaxconn).
	Backlog int `json:"backlog"`
	// AcceptWork is the CPU a connection costs the accepting thread before
	// it accepts the next (a storm needs a server slower than its clients).
	AcceptWork time.Duration `json:"accept_work_ns"`
}

// Workload is the lab's clients in the sender namespace.
type Workload struct {
	// Clients are client threads, each dialing from the sender namespace.
	Clients int `json:"clients"`
	// Bulk: each client streams data on one connection; otherwise each
	// opens connections back to back (connect, one byte each way, close).
	Bulk bool `json:"bulk"`
}

// Row keys of the before/after table.
const (
	RowConnects     = "connects_per_s"
	RowSlowConnects = "slow_connects_per_s"
	RowOverflows    = "listen_overflows_per_s"
	RowListenDrops  = "listen_drops_per_s"
	RowPassiveOpens = "passive_opens_per_s"
	RowQueuePeak    = "accept_queue_peak"
	RowBacklog      = "accept_backlog"
	RowFullSamples  = "accept_queue_full_samples"
	RowBytes        = "bytes_per_s"
	RowInSegs       = "in_segs_per_s"
	RowNetRXPerMB   = "net_rx_ns_per_mb"
	RowNetRXShare   = "net_rx_share"
	RowPrune        = "prune_called_per_s"
	RowCollapsed    = "rcv_collapsed_per_s"
	RowRcvDropped   = "rcv_dropped_per_s"
	RowRcvWnd       = "rcv_wnd_bytes"
	RowRcvbuf       = "rcvbuf_bytes"
	RowRcvRTT       = "rcv_rtt_ms"
	RowDelayDrops   = "delay_line_drops_per_s"
)

// Scenario plants one TCP fault and names the finding perfscope must
// report for it; the fix is always the finding's typed change, made by
// `perfscope tcp --apply` inside the receiver namespace.
type Scenario struct {
	Name  string `json:"name"`
	Fault string `json:"fault"`
	// Finding must appear before the fix and be gone after it.
	Finding string `json:"finding"`
	// FixText says what the fix is.
	FixText string `json:"fix"`
	// Skip says why this machine cannot reproduce the scenario ("" runs).
	Skip string `json:"-"`

	Lab netlab.Config `json:"-"`
	// Delay, when set, sends the sender's packets to the receiver
	// through a delay line (netlab.DelayLine) for the whole scenario.
	Delay netlab.DelayConfig `json:"-"`
	// Setup runs in the receiver namespace (the planted fault); SenderSetup
	// in the sender's.
	Setup       [][]string `json:"-"`
	SenderSetup [][]string `json:"-"`
	Server      Server     `json:"-"`
	Workload    Workload   `json:"-"`
	// Rows are the table's rows, by key.
	Rows []string `json:"-"`
}

// noTSO makes the sender's veth hand the receiver wire-sized segments, as
// a NIC receives them: with TSO/GSO on, veth passes 64 KiB super-packets
// through and GRO on the receiver has nothing to merge.
var noTSO = [][]string{{"ethtool", "-K", "va", "tso", "off", "gso", "off"}}

// Scenarios are the lab's scenarios, in order; those with Skip set are
// listed with their reason and not run.
var Scenarios = []Scenario{
	{
		Name:     "backlog-overflow",
		Fault:    "net.core.somaxconn 16: a listener asking for a backlog of 4096 gets 16, under a storm of 64 clients connecting back to back to an accept loop that spends 1 ms per connection",
		Finding:  "tcp.accept-overflow",
		FixText:  "perfscope tcp --apply tcp.accept-overflow (net.core.somaxconn raised in the receiver namespace), then the server's listener re-created so that listen(4096) takes the new cap",
		Setup:    [][]string{{"sysctl", "-q", "-w", "net.core.somaxconn=16"}},
		Server:   Server{Listeners: 1, Threads: 1, Backlog: 4096, AcceptWork: time.Millisecond},
		Workload: Workload{Clients: 64},
		Rows:     []string{RowConnects, RowSlowConnects, RowOverflows, RowListenDrops, RowPassiveOpens, RowBacklog, RowQueuePeak, RowFullSamples},
	},
	{
		Name:        "gro-off",
		Fault:       "GRO off on the receiver's veth while 2 clients stream TCP in wire-sized segments (the sender's TSO/GSO off, as a NIC's receive path sees them)",
		Finding:     "tcp.gro-off",
		FixText:     "perfscope tcp --apply tcp.gro-off (rx-gro on through the ethtool ioctl in the receiver namespace)",
		Lab:         netlab.Config{NoGRO: true},
		SenderSetup: noTSO,
		Server:      Server{Listeners: 1, Threads: 1, Backlog: 128},
		Workload:    Workload{Clients: 2, Bulk: true},
		Rows:        []string{RowBytes, RowInSegs, RowNetRXShare, RowNetRXPerMB},
	},
	{
		Name:  "accept-contention",
		Fault: "one listener accepted by many threads vs SO_REUSEPORT listeners, one per thread",
		Skip:  "not reproducible on 2 CPUs: 8 threads blocking in accept() on one listener under 64 clients connecting back to back (7,560 handshakes in 3 s) showed no lock wait on the listener at all in perfscope tcp's lock section (the waits on port 9000 were the accepted connections' sk_lock.slock, 0.1 ms in all), so there is no contention for SO_REUSEPORT listeners to remove: with 2 CPUs at most 2 accepting threads run at once",
	},
	{
		Name:    "rmem-bdp",
		Fault:   "net.ipv4.tcp_rmem 4096 16384 65536 (receive buffers capped at 64 KiB) while 2 clients stream TCP through a 30 ms delay line: a window per round trip is far below what the path carries",
		Finding: "tcp.rcvbuf-limited",
		FixText: "perfscope tcp --apply tcp.rcvbuf-limited (net.ipv4.tcp_rmem's max raised in the receiver namespace), then the clients connect again and their buffers grow into it",
		// No sch_netem (nor sch_fq) on this kernel: the delay is the
		// lab's own, a TUN device on the sender's route (netlab.DelayLine).
		Delay:    netlab.DelayConfig{Delay: 30 * time.Millisecond},
		Setup:    [][]string{{"sysctl", "-q", "-w", "net.ipv4.tcp_rmem=4096 16384 65536"}},
		Server:   Server{Listeners: 1, Threads: 1, Backlog: 128},
		Workload: Workload{Clients: 2, Bulk: true},
		Rows:     []string{RowBytes, RowRcvWnd, RowRcvbuf, RowRcvRTT, RowPrune, RowCollapsed, RowDelayDrops},
	},
	{
		Name:  "rfs-off",
		Fault: "RFS off with the serving threads on other CPUs than the receive softirq",
		Skip:  "net.core.rps_sock_flow_entries, RFS's global table, exists only in the host's network namespace: the lab could neither plant nor apply it without changing a setting every workload on the machine shares",
	},
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return Scenarios[i], true
}

// Names lists the scenarios' names in order.
func Names() []string {
	var n []string
	for _, s := range Scenarios {
		n = append(n, s.Name)
	}
	return n
}

// Select is the scenarios named, in the order given; none named is all.
func Select(names []string) ([]Scenario, error) {
	return netlab.Select(names, Scenarios, func(s Scenario) string { return s.Name })
}

// Help lists the scenarios for lab tcp's help, a line each (and why one
// is skipped on this machine).
func Help() string {
	var b strings.Builder
	for _, s := range Scenarios {
		fmt.Fprintf(&b, "  %-18s %s\n", s.Name, s.Fault)
		if s.Skip != "" {
			fmt.Fprintf(&b, "  %-18s (skipped here: %s)\n", "", s.Skip)
		}
	}
	return b.String()
}
