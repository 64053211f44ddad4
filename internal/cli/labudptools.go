package cli

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/lab/udpserver"
	"github.com/perfscope/perfscope/report"
)

// The UDP lab's two halves run as processes inside the lab's network
// namespaces (`ip netns exec NS perfscope lab udp-server ...`), so that
// /proc/net, /sys/class/net and the sockets are the namespace's own, as a
// real server's would be. They are usable by hand too.

type udpServerOptions struct {
	Listen   string
	Mode     string
	Threads  int
	RcvBuf   int
	Pin      string
	Echo     bool
	For      time.Duration
	Progress time.Duration
}

func newLabUDPServerCmd(g *Globals) *cobra.Command {
	o := &udpServerOptions{}
	cmd := &cobra.Command{
		Use:   "udp-server --listen ADDR:PORT",
		Short: "The lab's UDP server: one socket, SO_REUSEPORT sockets, or reuseport steered by CPU",
		Long: `udp-server receives UDP datagrams until interrupted (or --for elapses) and
prints how many it received as JSON (the perfscope/v2 envelope, command
"lab udp-server"). Modes: single (one socket read by
--threads threads), reuseport (one SO_REUSEPORT socket per thread, chosen by
flow hash), reuseport-cpu (the same, steered by the receiving CPU with
SO_ATTACH_REUSEPORT_CBPF).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			listen, err := netip.ParseAddrPort(o.Listen)
			if err != nil {
				return usageError("--listen %q: want ADDR:PORT", o.Listen)
			}
			mode, err := udpserver.ParseMode(o.Mode)
			if err != nil {
				return asUsage(err)
			}
			cfg := udpserver.Config{Listen: listen, Mode: mode, Threads: o.Threads, RcvBuf: o.RcvBuf, Echo: o.Echo}
			if o.Pin != "" {
				set, err := cpuset.ParseList(o.Pin)
				if err != nil {
					return usageError("--pin %q: %v", o.Pin, err)
				}
				cfg.PinCPUs = set.CPUs()
			}
			if err := cfg.Validate(); err != nil {
				return asUsage(err)
			}
			if o.For < 0 {
				return usageError("--for must be 0 (until interrupted) or positive, got %v", o.For)
			}
			if o.Progress < 0 || o.Progress > 0 && o.Progress < 10*time.Millisecond {
				return usageError("--progress must be 0 (never) or at least 10ms, got %v", o.Progress)
			}
			ctx := cmd.Context()
			if o.For > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.For)
				defer cancel()
			}
			started := time.Now()
			s, err := udpserver.Start(cfg)
			if err != nil {
				return err
			}
			// Say we are ready on stderr so a driver can wait for it.
			fmt.Fprintf(g.Err, "listening on %s (%s, %d sockets)\n", listen, mode, s.Sockets())
			serverProgress(ctx, g, s, o.Progress)
			sockets := s.Sockets() // Stop closes them
			s.Stop()
			r := report.New("lab udp-server", Version(), started)
			r.Meta.DurationNs = int64(time.Since(started))
			r.Data = report.LabUDPServerData{Received: s.Received(), Sockets: sockets, Mode: string(mode)}
			return report.Render(g.Out, r, report.JSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", "", "address and port to bind, e.g. 198.18.0.2:9000")
	f.StringVar(&o.Mode, "mode", "single", "single, reuseport or reuseport-cpu")
	f.IntVar(&o.Threads, "threads", 2, "receiving threads (sockets, in the reuseport modes)")
	f.IntVar(&o.RcvBuf, "rcvbuf", 0, "SO_RCVBUF in bytes, the kernel doubles it (0 = the system default; as root SO_RCVBUFFORCE, not capped by rmem_max)")
	f.StringVar(&o.Pin, "pin", "", "pin thread i to the i-th CPU of this list, e.g. 0-1")
	f.BoolVar(&o.Echo, "echo", false, "send each datagram back, like Makita's echo server")
	f.DurationVar(&o.For, "for", 0, "stop after this long (default: until interrupted)")
	f.DurationVar(&o.Progress, "progress", 0, "print `received N at UNIX_NS` to stderr this often (0: never)")
	return cmd
}

// serverProgress waits for ctx, printing the datagrams read so far every
// interval, with the wall-clock time in Unix nanoseconds, so a driver can
// tell what the server read during another tool's measurement window.
func serverProgress(ctx context.Context, g *Globals, s *udpserver.Server, interval time.Duration) {
	if interval <= 0 {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		fmt.Fprintf(g.Err, "received %d at %d\n", s.Received(), time.Now().UnixNano())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

type udpFloodOptions struct {
	Target     string
	Senders    int
	Flows      int
	Payload    int
	Duration   time.Duration
	MaxPackets uint64
	Rate       int
}

func newLabUDPFloodCmd(g *Globals) *cobra.Command {
	o := &udpFloodOptions{}
	cmd := &cobra.Command{
		Use:   "udp-flood --target ADDR:PORT",
		Short: "The lab's bounded UDP load generator (loopback or the lab's own addresses only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := netip.ParseAddrPort(o.Target)
			if err != nil {
				return usageError("--target %q: want ADDR:PORT", o.Target)
			}
			if o.Rate < 0 {
				return usageError("--rate must be 0 (unpaced) or positive, got %d", o.Rate)
			}
			// Outside loopback only the lab's benchmark range (RFC 2544),
			// which exists only inside the lab's namespaces.
			labNet := netip.MustParsePrefix("198.18.0.0/15")
			if !target.Addr().IsLoopback() && !labNet.Contains(target.Addr()) {
				return usageError("--target %s: udp-flood only sends to loopback or the lab's 198.18.0.0/15", target)
			}
			if o.Payload < 1 {
				return usageError("--payload must be between 1 and %d bytes, got %d", udpflood.MaxPayload, o.Payload)
			}
			cfg := udpflood.Config{
				Target: target, Senders: o.Senders, Flows: o.Flows, Payload: o.Payload, Duration: o.Duration,
				MaxPackets: o.MaxPackets, AllowNonLoopback: true, Rate: o.Rate,
			}
			if err := cfg.Validate(); err != nil {
				return asUsage(err)
			}
			// The address alone proves nothing: in the host's namespace
			// 198.18.0.2 routes out of the default gateway to the real
			// network. Send only where the route stays on this machine.
			if err := udpflood.CheckLocalRoute(target.Addr()); err != nil {
				return asUsage(err)
			}
			started := time.Now()
			res, err := udpflood.Send(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			r := report.New("lab udp-flood", Version(), started)
			r.Meta.DurationNs = int64(res.Elapsed)
			r.Data = report.LabUDPFloodData{Sent: res.Sent, Errors: res.Errors, ElapsedNs: int64(res.Elapsed)}
			return report.Render(g.Out, r, report.JSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Target, "target", "", "destination ADDR:PORT")
	f.IntVar(&o.Senders, "senders", 2, "sending threads")
	f.IntVar(&o.Flows, "flows", 0, "sockets (source ports, so flows the receiver hashes to queues and reuseport sockets) dealt to the senders (0: one per sender)")
	f.IntVar(&o.Payload, "payload", 64, "datagram payload in bytes")
	f.DurationVar(&o.Duration, "duration", 5*time.Second, "stop after this long (at most 10m)")
	f.Uint64Var(&o.MaxPackets, "max-packets", 50_000_000, "stop after this many datagrams")
	f.IntVar(&o.Rate, "rate", 0, "datagrams per second of all senders together (0 = as fast as possible)")
	return cmd
}
