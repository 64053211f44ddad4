package cli

import (
	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/measure"
)

func newTCPCmd(g *Globals) *cobra.Command {
	return tcpCmd(g, &udpOptions{proto: "tcp", recipe: "tcp-rx", src: measure.Live(), run: runUDP})
}

func tcpCmd(g *Globals, o *udpOptions) *cobra.Command {
	return netCmd(g, o, &cobra.Command{
		Use:   "tcp --iface IF",
		Short: "Where TCP connections spend CPU and wait: accept queues, retransmits, resets, per CPU, queue and lock",
		Long: `tcp measures, in one run, the receive path perfscope udp measures (softirq
per CPU, packets per NIC queue from the kernel and the driver, IRQ affinity,
lock contention per socket, an on-CPU profile split into the CPUs running
NET_RX and the others) and the TCP layer above it, as ss -tie, nstat and bcc's
tcpretrans show it by hand:

  - every listener's accept queue, sampled through sock_diag every
    --sample-interval: connections waiting for accept() now and at the
    fullest sample against its backlog, the samples that found it full, its
    processes and SO_REUSEPORT group, next to the namespace's
    ListenOverflows and ListenDrops over the window;
  - the Tcp and TcpExt counters over the window (SYN queue and cookies,
    socket backlog drops, receive-queue pruning and collapsing, memory
    pressure, retransmits) and the sysctls that size them;
  - the busiest connections at the end (bytes over the window) with their
    RTT, cwnd, retransmits, windows and buffers, and their processes;
  - retransmits by kind (rto, fast, tlp, syn) and resets sent (with the
    kernel's reason) and received, per connection, counted exactly;
  - packets dropped per local port and reason (skb:kfree_skb, the reasons
    named as the kernel names them; the port from the socket or the TCP
    header, NO_SOCKET for a port nobody listens on).

Findings are the tcp.* rules beside the receive path's net.* ones; a TCP
run never advises turning GRO off. perfscope reads the TCP layer of its
own network namespace, or of --pid's when that process lives in another
(a container's): its sockets, counters, sysctls and events are read there,
while --iface is an interface of perfscope's namespace.`,
		Example: `  perfscope tcp --iface eth0 --port 443 --duration 10s
  perfscope tcp --iface eth0 --pid 1234 -o json > run.json
  perfscope tcp --iface eth0 --port 8080 --apply tcp.accept-overflow   # writes a revert file first
  perfscope tcp --revert ./perfscope-revert-20261121T101500Z-1a2b3c4d.json
  perfscope tcp --iface veth1a2b --pid 1234   # a container's process: its namespace's sockets
  perfscope tcp --compare before.json,after.json`,
	})
}
