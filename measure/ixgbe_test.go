package measure_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
)

// The host of Makita's talk, from collectors/netconfig's recorded
// ixgbe-ens1f0 fixture (20 queues on 20 CPUs, RSS spreading over 16, one
// IRQ per queue), and one second of receive traffic laid over it: the
// driver's per-queue counters, /proc/interrupts and /proc/softirqs move on
// queues and CPUs 0-15 only, and the probes saw the same; the NIC missed
// packets (rx_missed_errors) and UDP sockets hold more pages than
// udp_mem's pressure threshold. The udp runner
// must read every source through Sources — the fixture has 20 CPUs, this
// machine does not — and join them into the picture the talk drew.
func TestNetRunnerOnIxgbeFixture(t *testing.T) {
	const fixture = "../collectors/netconfig/testdata/ixgbe-ens1f0"
	const busy, perQueue = 16, 230_000
	dir := t.TempDir()
	for _, phase := range []string{"start", "end"} {
		measure.CopyTree(t, fixture, filepath.Join(dir, phase))
	}
	// start/ is the end minus the window's traffic.
	edit(t, filepath.Join(dir, "start/ethtool/ens1f0/S.txt"), regexp.MustCompile(`(?m)^(\s+rx_queue_(\d+)_packets: )(\d+)$`), func(m []string) string {
		n, _ := strconv.ParseUint(m[3], 10, 64)
		if q, _ := strconv.Atoi(m[2]); q < busy {
			n -= perQueue
		}
		return m[1] + strconv.FormatUint(n, 10)
	})
	edit(t, filepath.Join(dir, "end/proc/interrupts"), regexp.MustCompile(`(?m)^.*ens1f0-TxRx-(\d+)$`), func(m []string) string {
		// Queue q's IRQ fired on CPU q: the (q+1)th count after "NN:".
		q, _ := strconv.Atoi(m[1])
		if q >= busy {
			return m[0]
		}
		colon := strings.Index(m[0], ":")
		loc := regexp.MustCompile(`\d+`).FindAllStringIndex(m[0][colon:], q+1)[q]
		i, j := colon+loc[0], colon+loc[1]
		n, _ := strconv.ParseUint(m[0][i:j], 10, 64)
		return m[0][:i] + strconv.FormatUint(n+perQueue/10, 10) + m[0][j:]
	})
	// The NIC missed `missed` packets in the window: the receive path's
	// device-level counter, beside the per-queue ones.
	const missed = 40_000
	edit(t, filepath.Join(dir, "end/ethtool/ens1f0/S.txt"), regexp.MustCompile(`(?m)^(\s+rx_missed_errors: )(\d+)$`), func(m []string) string {
		n, _ := strconv.ParseUint(m[2], 10, 64)
		return m[1] + strconv.FormatUint(n+missed, 10)
	})
	// UDP memory over the fixture's udp_mem pressure (2053929 pages).
	const udpPages = 2_100_000
	replay.WriteFile(t, filepath.Join(dir, "end/proc/net/sockstat"), fmt.Sprintf("sockets: used 310\nTCP: inuse 5 orphan 0 tw 0 alloc 7 mem 1\nUDP: inuse 12 mem %d\nUDPLITE: inuse 0\nRAW: inuse 0\nFRAG: inuse 0 memory 0\n", udpPages))
	for phase, netRX := range map[string]uint64{"start": 0, "end": perQueue} {
		replay.WriteFile(t, filepath.Join(dir, phase, "proc/softirqs"), softirqsFile(20, busy, netRX))
		replay.WriteFile(t, filepath.Join(dir, phase, "proc/stat"), statFile(20, busy, netRX/1000))
	}

	root := replay.NewPhasedRoot(t, dir)
	t0 := time.Date(2016, 7, 13, 10, 0, 0, 0, time.UTC)
	sq := []softirq.Snapshot{softirqSnapshot(t0, 20, busy, 0, 0), softirqSnapshot(t0.Add(time.Second), 20, busy, perQueue, 300*time.Millisecond)}
	rx := func(n uint64) netqueue.Snapshot {
		s := netqueue.Snapshot{RXRaw: map[netqueue.QueueKey][]netqueue.Traffic{}}
		for q := 0; q < 20; q++ {
			perCPU := make([]netqueue.Traffic, 20)
			if q < busy {
				perCPU[q].Packets = n
			}
			s.RXRaw[netqueue.QueueKey{Ifindex: 2, Queue: q + 1}] = perCPU // ixgbe records queue + 1
		}
		return s
	}
	rec := replay.Recording{Method: "tp_btf", Softirq: sq, Queue: []netqueue.Snapshot{rx(0), rx(perQueue)}}
	recorded := ethtool.Recorded{Dir: filepath.Join(root.Link, "ethtool")}
	src := measure.Sources{
		Root:    procfs.FS{Root: root.Link},
		Ethtool: recorded,
		Netlink: replay.NoNetlink{},
		Config:  netconfig.Sources{FS: procfs.FS{Root: root.Link}, Ethtool: recorded}.Snapshot,
		Symbols: symbols.FS{Root: root.Link},
		Probes:  rec.Opener(),
	}
	iface, err := measure.ResolveInterface(src, "ens1f0")
	if err != nil {
		t.Fatal(err)
	}
	o := measure.NetOptions{Iface: iface, Port: 9000}
	n := measure.NewNetParts(o, 0, 0)
	s, err := measure.Open(src, n.List()...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Measure(context.Background(), measure.Window{Duration: time.Millisecond, OnStart: func() { root.Flip(t) }}); err != nil {
		t.Fatal(err)
	}
	res := n.Assemble(src, o, measure.Run{})
	ev := res.Evidence

	if ev.Interface.Driver != "ixgbe" || ev.Interface.RXQueues != 20 || ev.DurationNs != int64(time.Second) {
		t.Errorf("interface %+v over %v", ev.Interface, time.Duration(ev.DurationNs))
	}
	if got := fmt.Sprint(ev.Softirq.NetRXCPUs()); got != "[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]" {
		t.Errorf("NET_RX CPUs = %s", got)
	}
	// Queues from the driver's counters and the kernel's agree; 16-19 dead.
	b := ev.Queues.RXBalance
	if b.Source != "driver" || fmt.Sprint(b.Dead) != "[16 17 18 19]" || b.Total != busy*perQueue {
		t.Errorf("RX balance = %+v", b)
	}
	if r := ev.Queues.RX[3]; r.Diff == nil || *r.Diff != 0 || *r.KernelPackets != perQueue {
		t.Errorf("queue 3 = %+v", r)
	}
	// One IRQ per queue, its interrupts on its CPU, with the fixture's
	// affinities (and the link IRQ); the NIC's node and irqbalance from the
	// fixture.
	queueIRQs := 0
	for _, q := range ev.IRQs.IRQs {
		if q.Queue >= 0 {
			queueIRQs++
		}
	}
	if queueIRQs != 20 || ev.IRQs.Unavailable != "" {
		t.Fatalf("IRQs = %+v", ev.IRQs)
	}
	if q := ev.IRQs.IRQs[5]; q.Queue != 5 || q.CountByCPU[5] != perQueue/10 || len(q.CountByCPU) != 1 || q.SMPAffinity == "" {
		t.Errorf("IRQ of queue 5 = %+v", q)
	}
	if ev.IRQs.NICNode == nil || !ev.IRQs.Irqbalance || res.Config == nil || len(res.Config.IRQs) < 20 {
		t.Errorf("NIC node %v, irqbalance %v, config %v", ev.IRQs.NICNode, ev.IRQs.Irqbalance, res.Config)
	}
	// The NIC's missed packets over the window, and the UDP memory at its
	// end, read through Sources like the rest.
	if ev.Queues.NICMissed == nil || *ev.Queues.NICMissed != missed || fmt.Sprint(ev.Queues.NICMissedCounters) != "[rx_missed_errors rx_no_buffer_count rx_fifo_errors]" {
		t.Errorf("NIC missed = %v %v, want %d from rx_missed_errors (+ rx_no_buffer_count, rx_fifo_errors)", ev.Queues.NICMissed, ev.Queues.NICMissedCounters, missed)
	}
	if s := ev.Drops.UDPSockstat; s == nil || s.MemPages != udpPages || s.InUse != 12 {
		t.Errorf("UDP sockstat = %+v", s)
	}
	// Unrecorded probes say why; the rules still judge what was read.
	if !strings.Contains(ev.Locks.Unavailable, "not in the recording") || !strings.Contains(ev.Profile.Unavailable, "disabled") {
		t.Errorf("locks %q, profile %q", ev.Locks.Unavailable, ev.Profile.Unavailable)
	}
	var ids []string
	for _, f := range res.Report("test").Findings {
		ids = append(ids, f.ID)
	}
	for _, want := range []string{"net.rss-indirection-narrow", "net.nic-ring-drops", "net.udp-mem-pressure"} {
		if !strings.Contains(strings.Join(ids, " "), want) {
			t.Errorf("findings %v: want %s (the RSS table that leaves queues 16-19 dead is the talk's step; the missed packets and udp_mem are the receive path's)", ids, want)
		}
	}
}

func softirqSnapshot(at time.Time, cpus, busy int, netRX uint64, netRXTime time.Duration) softirq.Snapshot {
	s := softirq.Snapshot{Taken: at, PerCPU: make([][]softirq.VecCounts, cpus)}
	for c := range s.PerCPU {
		s.PerCPU[c] = make([]softirq.VecCounts, len(softirq.Vectors))
		if c < busy {
			s.PerCPU[c][softirq.NetRX] = softirq.VecCounts{Count: netRX, Time: netRXTime}
		}
	}
	return s
}

// softirqsFile is /proc/softirqs with NET_RX counted on the busy CPUs.
func softirqsFile(cpus, busy int, netRX uint64) string {
	var b strings.Builder
	for c := 0; c < cpus; c++ {
		fmt.Fprintf(&b, " %10s", fmt.Sprintf("CPU%d", c))
	}
	b.WriteString("\n")
	for _, v := range softirq.Vectors {
		fmt.Fprintf(&b, "%12s:", v)
		for c := 0; c < cpus; c++ {
			n := uint64(0)
			if v == "NET_RX" && c < busy {
				n = netRX
			}
			fmt.Fprintf(&b, " %10d", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// statFile is /proc/stat with softirq ticks on the busy CPUs.
func statFile(cpus, busy int, softTicks uint64) string {
	var b strings.Builder
	b.WriteString("cpu  0 0 0 0 0 0 0 0 0 0\n")
	for c := 0; c < cpus; c++ {
		soft := uint64(0)
		if c < busy {
			soft = softTicks
		}
		fmt.Fprintf(&b, "cpu%d 0 0 0 %d 0 0 %d 0 0 0\n", c, 1000+softTicks-soft, soft)
	}
	return b.String()
}

func edit(t *testing.T, path string, re *regexp.Regexp, fn func(m []string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := re.ReplaceAllStringFunc(string(b), func(s string) string { return fn(re.FindStringSubmatch(s)) })
	if out == string(b) {
		t.Fatalf("%s: nothing to edit", path)
	}
	replay.WriteFile(t, path, out)
}
