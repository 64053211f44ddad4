package report

import (
	"fmt"
	"io"

	"github.com/perfscope/perfscope/evidence"
)

// writeTCPSocketLocks prints the listeners and connections whose socket
// lock was contended, split by the waiter's side.
func writeTCPSocketLocks(w io.Writer, s evidence.TCPSocketLockSection) {
	Heading(w, "TCP socket locks (sk_lock.slock waits: process side vs softirq side)")
	if unavailable(w, s.Section) {
		return
	}
	if len(s.Rows) == 0 {
		fmt.Fprintln(w, "none contended")
		return
	}
	waits := func(l evidence.LockWaits) string {
		if l.Count == 0 {
			return "-"
		}
		return fmt.Sprintf("%d, %s", l.Count, Nanos(float64(l.TotalNs)))
	}
	t := Table{Header: []string{"socket", "state", "process", "waits (all)", "process side", "found owned", "softirq side", "to backlog", "context unknown"}}
	known := true
	for _, r := range s.Rows {
		sock := fmt.Sprintf("port %d", r.Port)
		if r.Local.IsValid() {
			sock = r.Local.String()
			if r.Remote.IsValid() && r.Remote.Port() != 0 {
				sock += " ↔ " + r.Remote.String()
			}
		}
		who := "-"
		if len(r.PIDs) > 0 {
			who = fmt.Sprintf("%s %s", r.Comm, joinPIDs(r.PIDs))
		}
		state := r.State
		if state == "" {
			state = "-"
		}
		sp := r.Split
		known = known && sp.ContextKnown
		t.Add(sock, state, who, waits(r.Waits), waits(sp.Process), waits(sp.ProcessOwned), waits(sp.Softirq), waits(sp.SoftirqOwned), waits(sp.Unknown))
	}
	t.Write(w)
	fmt.Fprintln(w, "process side: lock_sock/release_sock; found owned: lock_sock then sleeps for the owner (that sleep is not timed here);")
	fmt.Fprintln(w, "softirq side: the receive path and TCP timers; to backlog: the socket was owned, the segment waited in its backlog")
	if !known {
		fmt.Fprintln(w, "the waiter's context is not told on this kernel or attach method: those waits are under \"context unknown\"")
	}
}

// tcpSteeringTable is, for the listed connections the feed hooks
// counted, the CPU whose softirq fed each and the CPU it was read on.
func tcpSteeringTable(rows []evidence.TCPConnection) Table {
	t := Table{Header: []string{"local", "remote", "fed by CPU (softirq)", "via backlog", "read on CPU"}}
	cpu := func(c int, share float64) string {
		if c < 0 {
			return "-"
		}
		return fmt.Sprintf("%d (%s)", c, Percent(share))
	}
	for _, c := range rows {
		s := c.Steering
		if s == nil {
			continue
		}
		t.Add(c.Local.String(), c.Remote.String(), cpu(s.FedCPU, s.FedShare), fmt.Sprint(s.FedByBacklog), cpu(s.ReadCPU, s.ReadShare))
	}
	return t
}

// tcpSteeringLost says how many deliveries and reads the steering shares
// miss.
func tcpSteeringLost(lost uint64) string {
	return fmt.Sprintf("%d deliveries and reads are missing from these shares (no map entry could be made for their socket)", lost)
}

// tcpEventsLost says how many retransmit and reset events the rows miss.
func tcpEventsLost(lost uint64) string {
	return fmt.Sprintf("%d events are missing from the rows above (the per-connection map was full); the totals have them", lost)
}

// writeTCPSteering prints the steering table and what it misses.
func writeTCPSteering(w io.Writer, rows []evidence.TCPConnection, lost uint64) {
	t := tcpSteeringTable(rows)
	if len(t.Rows) == 0 && lost == 0 {
		return
	}
	Heading(w, "TCP steering (which CPU's softirq fed each connection, which CPU read it; sampled shares)")
	if len(t.Rows) > 0 {
		t.Write(w)
	}
	if lost > 0 {
		fmt.Fprintln(w, tcpSteeringLost(lost))
	}
}
