package bench

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/tcpevents"
)

// refusedConnects connects to a closed loopback port for d, from a thread
// inside network namespace ns, and returns the connects per second: every
// one is a SYN answered by a reset (tcp_send_reset) that the client
// receives (tcp_receive_reset), the densest load of tcpevents' hooks a
// test can make without loss.
func refusedConnects(b *testing.B, ns string, d time.Duration) float64 {
	b.Helper()
	var n int
	err := testutil.InNetns(ns, func() error {
		start := time.Now()
		for time.Since(start) < d {
			c, err := net.DialTimeout("tcp4", "127.0.0.1:7399", time.Second)
			if err == nil {
				c.Close()
				return fmt.Errorf("port 7399 accepted a connection")
			}
			n++
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return float64(n) / d.Seconds()
}

// BenchmarkTCPEventsOverhead alternates 3 s of refused connects in a
// namespace of its own without and with the tcpevents probe (counting
// that namespace), three rounds, and reports connects/s of each, the loss
// in %, and the probe's own cost per handler run (selfcost, 1 run in 64
// timed).
func BenchmarkTCPEventsOverhead(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	ns := fmt.Sprintf("psbtcpev%d", os.Getpid())
	exec.Command("ip", "netns", "del", ns).Run()
	b.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{{"netns", "add", ns}, {"-n", ns, "link", "set", "lo", "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			b.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	inode, err := probes.NetnsInode("/run/netns/" + ns)
	if err != nil {
		b.Fatal(err)
	}
	const window = 3 * time.Second
	for i := 0; i < b.N; i++ {
		var off, on float64
		var runs, timed uint64
		var timedNs uint64
		for range 3 {
			off += refusedConnects(b, ns, window)
			p, err := tcpevents.Open(tcpevents.Options{Netns: inode, Port: benchPort})
			if err != nil {
				b.Fatal(err)
			}
			on += refusedConnects(b, ns, window)
			costs, err := p.SelfCosts()
			if err != nil {
				p.Close()
				b.Fatal(err)
			}
			for _, perCPU := range costs {
				for _, c := range perCPU {
					runs += c.Runs
					timed += c.TimedRuns
					timedNs += c.TimedNs
				}
			}
			p.Close()
		}
		off, on = off/3, on/3
		b.ReportMetric(off, "connects/s-off")
		b.ReportMetric(on, "connects/s-on")
		b.ReportMetric(100*(off-on)/off, "loss-%")
		if timed > 0 {
			b.ReportMetric(float64(timedNs)/float64(timed), "ns/handler")
		}
		b.ReportMetric(float64(runs), "handler-runs")
	}
}

var benchPort = func() uint16 { v, _ := strconv.Atoi(os.Getenv("TCPEV_PORT")); return uint16(v) }()
