package udpsock

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/probes"
)

func TestSubKeepsOnlyNewReads(t *testing.T) {
	prev := Snapshot{Sockets: map[uint64]Reads{10: {Datagrams: 5, Bytes: 50}, 11: {Datagrams: 3, Bytes: 3}}, Lost: 1}
	cur := Snapshot{Sockets: map[uint64]Reads{10: {Datagrams: 9, Bytes: 90}, 11: {Datagrams: 3, Bytes: 3}, 12: {Datagrams: 2, Bytes: 8}}, Lost: 4}
	d := cur.Sub(prev)
	if d.Sockets[10] != (Reads{Datagrams: 4, Bytes: 40}) || d.Sockets[12] != (Reads{Datagrams: 2, Bytes: 8}) || len(d.Sockets) != 2 || d.Lost != 3 {
		t.Errorf("delta = %+v", d)
	}
}

// inode is the socket inode of conn, as /proc/net/udp lists it.
func inode(t *testing.T, conn *net.UDPConn) uint64 {
	t.Helper()
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	var statErr error
	if err := raw.Control(func(fd uintptr) { statErr = unix.Fstat(int(fd), &st) }); err != nil {
		t.Fatal(err)
	}
	if statErr != nil {
		t.Fatal(statErr)
	}
	return st.Ino
}

// A paced loopback flood into a sink that keeps up: the datagrams the probe
// counts for the sink's socket equal what the sink read. The lab's two
// namespaces make the second half exact and isolated from other traffic:
// the sink lives in the receiver namespace, a probe there counts its reads,
// and a probe of this process's namespace, filtered to the same port, does
// not. The group's totals: a probe of the sink's port counts its reads as
// its events and every UDP read of the namespace (a second sink's on
// another port too) as the reference's, which the budget scales by.
func TestProbeCountsReadsPerSocketInItsNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	ctx := context.Background()
	lab, err := netlab.New(ctx, netlab.Config{Queues: 1, NoGRO: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	})
	labNetns, err := probes.NetnsInode("/var/run/netns/" + lab.ReceiverNS)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range probes.Methods {
		t.Run(string(m), func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			var sink *udpflood.Sink
			if err := testutil.InNetns(lab.ReceiverNS, func() (err error) {
				sink, err = udpflood.Listen("127.0.0.1:0")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			port := sink.AddrPort().Port()
			ino := inode(t, sink.Conn)

			there, err := Open(Options{Method: m, Netns: labNetns})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			here, err := Open(Options{Method: m, Port: port})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			onPort, err := Open(Options{Method: m, Netns: labNetns, Port: port})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			first, err := there.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			totals := func(p *Probe) probes.GroupCounts {
				t.Helper()
				c, err := p.HookGroups()[0].Counts()
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			allBefore, portBefore := totals(there), totals(onPort)
			before := sink.Received()
			var second *udpflood.Sink
			var res udpflood.Result
			if err := testutil.InNetns(lab.ReceiverNS, func() (err error) {
				if second, err = udpflood.Listen("127.0.0.1:0"); err != nil {
					return err
				}
				// Paced so the sinks keep up: every datagram is read.
				if _, err := udpflood.Send(ctx, udpflood.Config{Target: second.AddrPort(), Senders: 1,
					Duration: 200 * time.Millisecond, MaxPackets: 1000, Rate: 20000}); err != nil {
					return err
				}
				res, err = udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 1,
					Duration: 500 * time.Millisecond, MaxPackets: 5000, Rate: 20000})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			for i := 0; i < 100 && sink.Received()-before < res.Sent; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			read := sink.Received() - before
			otherRead := second.Received()
			all, mine := totals(there), totals(onPort)
			t.Logf("totals: namespace probe %+v, port probe %+v; the sinks read %d and %d", all, mine, read, otherRead)
			if otherRead == 0 || all.Events-allBefore.Events != read+otherRead || all.InReference-allBefore.InReference != read+otherRead ||
				mine.Events-portBefore.Events != read || mine.InReference-portBefore.InReference != read+otherRead {
				t.Errorf("totals: every read of the namespace %+v→%+v, its port's %+v→%+v; the sinks read %d (port %d) and %d",
					allBefore, all, portBefore, mine, read, port, otherRead)
			}
			last, err := there.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			d := last.Sub(first)
			got := d.Sockets[ino]
			t.Logf("sent %d, sink read %d, probe counted %+v for inode %d", res.Sent, read, got, ino)
			if read == 0 {
				t.Fatal("the sink read nothing")
			}
			if got.Datagrams != read || got.Bytes != read*64 {
				t.Errorf("inode %d: probe counted %+v, the sink read %d datagrams of 64 bytes", ino, got, read)
			}
			if d.Lost != 0 {
				t.Errorf("lost %d", d.Lost)
			}
			// Every queued datagram whose queue was empty woke the reader
			// (all of them before 6.13): at least one, at most one each.
			var wakeups uint64
			for _, n := range d.Wakeups[ino] {
				wakeups += n
			}
			t.Logf("wakeups by CPU: %v", d.Wakeups[ino])
			if wakeups == 0 || wakeups > read {
				t.Errorf("inode %d: %d data-ready wakeups for %d datagrams read", ino, wakeups, read)
			}
			other, err := here.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if r, ok := other.Sockets[ino]; ok {
				t.Errorf("the probe of this namespace counted %+v for a socket of %s", r, lab.ReceiverNS)
			}
			if w, ok := other.Wakeups[ino]; ok {
				t.Errorf("the probe of this namespace counted wakeups %v for a socket of %s", w, lab.ReceiverNS)
			}
			for _, p := range []*Probe{there, here, onPort} {
				if err := p.Close(); err != nil {
					t.Error(err)
				}
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}

// Two sockets that share a slot of the direct-mapped table: the first
// takes it, the second is counted in the hash, and both counts are exact.
func TestReadsOfSocketsSharingASlot(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	p, err := Open(Options{Method: probes.MethodBTF, oneSlot: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	read := map[uint64]uint64{}
	for range 2 {
		sink, err := udpflood.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		res, err := udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: 1,
			Duration: 300 * time.Millisecond, MaxPackets: 2000, Rate: 20000})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100 && sink.Received() < res.Sent; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		read[inode(t, sink.Conn)] = sink.Received()
		sink.Close()
	}
	last, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	d := last.Sub(first)
	for ino, n := range read {
		if got := d.Sockets[ino].Datagrams; got != n || n == 0 {
			t.Errorf("inode %d: probe counted %d, the sink read %d", ino, got, n)
		}
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}

// The budget's mechanics on a real probe, for every attach method: the
// programs count their own runs; a detached hook group costs nothing and
// counts nothing (not even its own runs), and attached again without a
// reload it counts on from where it was.
func TestGroupDetachesAndAttachesWithoutReload(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	for _, m := range probes.Methods {
		t.Run(string(m), func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			sink, err := udpflood.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			ino := inode(t, sink.Conn)
			p, err := Open(Options{Method: m, Port: sink.AddrPort().Port()})
			if err != nil {
				t.Fatal(err)
			}
			groups := p.HookGroups()
			if len(groups) != 1 || groups[0].Name != Group || groups[0].Class != probes.PerPacket || !groups[0].IsAttached() {
				t.Fatalf("hook groups %+v", groups)
			}
			g := groups[0]
			links := p.Attached.Links()
			// flood sends n paced datagrams and returns the probe's count
			// of the sink's reads and its programs' own runs of
			// sock_recv_length over the flood, with what the sink read.
			flood := func(n uint64) (counted, runs, read uint64) {
				t.Helper()
				s0, err := p.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				c0, err := p.SelfCosts()
				if err != nil {
					t.Fatal(err)
				}
				before := sink.Received()
				res, err := udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: 1,
					Duration: 500 * time.Millisecond, MaxPackets: n, Rate: 20000})
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 100 && sink.Received()-before < res.Sent; i++ {
					time.Sleep(10 * time.Millisecond)
				}
				s1, err := p.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				c1, err := p.SelfCosts()
				if err != nil {
					t.Fatal(err)
				}
				hook := Hooks[0].String()
				return s1.Sub(s0).Sockets[ino].Datagrams, probes.Total(c1.Sub(c0)[hook]).Runs, sink.Received() - before
			}
			counted, runs, read := flood(2000)
			if read == 0 || counted != read || runs < read {
				t.Fatalf("attached: counted %d reads and %d runs, the sink read %d", counted, runs, read)
			}
			if _, err := g.Detach(); err != nil {
				t.Fatal(err)
			}
			if g.IsAttached() || p.Attached.Links() != links-len(g.Hooks) {
				t.Fatalf("detached: %d links of %d, attached %v", p.Attached.Links(), links, g.IsAttached())
			}
			if counted, runs, read := flood(2000); read == 0 || counted != 0 || runs != 0 {
				t.Errorf("detached: counted %d reads and %d runs, the sink read %d", counted, runs, read)
			}
			if _, err := g.Attach(); err != nil {
				t.Fatal(err)
			}
			if !g.IsAttached() || p.Attached.Links() != links {
				t.Fatalf("attached again: %d links of %d", p.Attached.Links(), links)
			}
			counted, runs, read = flood(2000)
			if read == 0 || counted != read || runs < read {
				t.Errorf("attached again: counted %d reads and %d runs, the sink read %d", counted, runs, read)
			}
			costs, err := p.SelfCosts()
			if err != nil {
				t.Fatal(err)
			}
			tot := probes.Total(costs[Hooks[0].String()])
			t.Logf("sock_recv_length: %d runs, %d timed, %v per timed run", tot.Runs, tot.TimedRuns, tot.PerRun())
			if tot.TimedRuns == 0 || tot.TimedRuns > tot.Runs/32 || tot.PerRun() <= 0 || tot.PerRun() > 100*time.Microsecond {
				t.Errorf("self timing: %+v", tot)
			}
			if err := p.Close(); err != nil {
				t.Error(err)
			}
			if _, err := g.Attach(); err == nil {
				t.Error("a closed probe's group attached again")
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}
