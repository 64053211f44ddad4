package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/lab/udpserver"
	"github.com/perfscope/perfscope/report"
)

// The UDP lab's two halves run as processes inside the lab's network
// namespaces (`ip netns exec NS perfscope lab udp-server ...`), so that
// /proc/net, /sys/class/net and the sockets are the namespace's own, as a
// real server's would be. They are usable by hand too.

func newLabUDPServerCmd(g *Globals) *cobra.Command {
	o := &udpserver.Flags{}
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
			cfg, err := o.Config()
			if err != nil {
				return asUsage(err)
			}
			started := time.Now()
			received, sockets, err := o.Serve(cmd.Context(), cfg, g.Err)
			if err != nil {
				return err
			}
			r := report.New("lab udp-server", Version(), started)
			r.Meta.DurationNs = int64(time.Since(started))
			r.Data = report.LabUDPServerData{Received: received, Sockets: sockets, Mode: string(cfg.Mode)}
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

func newLabUDPFloodCmd(g *Globals) *cobra.Command {
	o := &udpflood.Flags{}
	cmd := &cobra.Command{
		Use:   "udp-flood --target ADDR:PORT",
		Short: "The lab's bounded UDP load generator (loopback or the lab's own addresses only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.Config()
			if err != nil {
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
