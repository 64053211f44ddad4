package netqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/probes"
)

func TestHooksAreInCatalog(t *testing.T) {
	// CatalogHooks panics at package init otherwise; this pins the
	// optional flags the command relies on.
	want := map[string]bool{"napi:napi_poll": true, "net:netif_receive_skb": false, "net:net_dev_start_xmit": false,
		"qdisc:qdisc_enqueue": true, "qdisc:qdisc_dequeue": true}
	for _, h := range Hooks {
		opt, ok := want[h.String()]
		if !ok || opt != h.Optional {
			t.Errorf("hook %s optional=%v, want present with optional=%v", h, h.Optional, opt)
		}
	}
}

func TestNAPIQueueMap(t *testing.T) {
	s := Snapshot{
		NAPI: map[NAPIKey][]NAPIStats{{ID: 9001, Ifindex: 5}: {{Polls: 1}}, {ID: 9002, Ifindex: 5}: {{Polls: 1}}, {ID: 0}: {{Polls: 3}}},
		NAPIQueues: map[NAPIQueueKey]uint64{
			{NAPIID: 9001, Ifindex: 5, RawQueue: 1}: 90, {NAPIID: 9001, Ifindex: 5, RawQueue: 2}: 10,
			{NAPIID: 9002, Ifindex: 5, RawQueue: 0}: 50,
			{NAPIID: 2, Ifindex: 5, RawQueue: 3}:    500, // a sender CPU, not a NAPI id
			{NAPIID: 9001, Ifindex: 6, RawQueue: 1}: 7,
		},
	}
	got, err := s.NAPIQueueMap(5, RecordedPlusOne)
	if err != nil {
		t.Fatal(err)
	}
	want := []NAPIQueueGuess{{NAPIID: 9001, Queue: 0, Share: 0.9}, {NAPIID: 9002, Queue: Unrecorded, Share: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	veth, _ := s.NAPIQueueMap(5, ConventionFor("veth"))
	if want := "[{9001 1 0.9} {9002 0 1}]"; fmt.Sprint(veth) != want {
		t.Errorf("veth convention: got %v, want %s", veth, want)
	}
	if _, err := s.NAPIQueueMap(7, RecordedPlusOne); !errors.Is(err, ErrNoNAPIQueueEvidence) {
		t.Errorf("device without evidence: err = %v", err)
	}
}

func TestResolveNAPIQueuesPrefersNetlink(t *testing.T) {
	d := Snapshot{NAPI: map[NAPIKey][]NAPIStats{{ID: 9001, Ifindex: 5}: {{Polls: 1}}},
		NAPIQueues: map[NAPIQueueKey]uint64{{NAPIID: 9001, Ifindex: 5, RawQueue: 3}: 10}}
	m, how, err := ResolveNAPIQueues(map[uint32]int{9001: 0}, d, 5, RecordedPlusOne)
	if err != nil || how != MappedByNetlink || m[9001] != 0 {
		t.Errorf("netlink: %v %s %v", m, how, err)
	}
	m, how, err = ResolveNAPIQueues(nil, d, 5, RecordedPlusOne)
	if err != nil || how != MappedBySkbNAPIID || m[9001] != 2 {
		t.Errorf("measured: %v %s %v", m, how, err)
	}
}

func TestSubDropsNothingAndSubtractsPerCPU(t *testing.T) {
	k := QueueKey{Ifindex: 1, Queue: 0}
	prev := Snapshot{RXRaw: map[QueueKey][]Traffic{k: {{Packets: 1, Bytes: 10}, {Packets: 2, Bytes: 20}}}, Lost: Lost{RX: 1}}
	cur := Snapshot{RXRaw: map[QueueKey][]Traffic{k: {{Packets: 5, Bytes: 50}, {Packets: 2, Bytes: 20}},
		{Ifindex: 1, Queue: 1}: {{Packets: 3}, {}}}, Lost: Lost{RX: 4}}
	d := cur.Sub(prev)
	if got := d.RXRaw[k]; got[0].Packets != 4 || got[0].Bytes != 40 || got[1].Packets != 0 {
		t.Errorf("per-CPU delta = %+v", got)
	}
	if got := TrafficTotal(d.RXQueues(1, RecordedPlusOne)[0]); got.Packets != 3 {
		t.Errorf("new key delta = %+v", got)
	}
	if d.Lost.RX != 3 || d.Lost.Total() != 3 {
		t.Errorf("lost = %+v", d.Lost)
	}
}

// Loopback: every datagram is transmitted on lo and received through the
// per-CPU backlog NAPI.
func TestProbeSeesLoopback(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	for _, m := range probes.Methods {
		t.Run(string(m), func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			p, err := Open(Options{Method: m, Ifindex: 1})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if len(p.Missing()) != 0 {
				t.Errorf("hooks missing on this kernel: %v", p.Missing())
			}
			first, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			sink, err := udpflood.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			res, err := udpflood.Send(context.Background(), udpflood.Config{
				Target: sink.AddrPort(), Senders: 2, Duration: 300 * time.Millisecond, MaxPackets: 100000,
			})
			sink.Close()
			if err != nil {
				t.Fatal(err)
			}
			last, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			d := last.Sub(first)
			tx := TrafficTotal(d.TX[QueueKey{Ifindex: 1, Queue: 0}])
			if tx.Packets < res.Sent {
				t.Errorf("lo TX queue 0: %d packets, sent %d datagrams", tx.Packets, res.Sent)
			}
			rx := TrafficTotal(d.RXQueues(1, RecordedPlusOne)[Unrecorded])
			if rx.Packets < res.Sent {
				t.Errorf("lo RX (unrecorded queue): %d packets, sent %d", rx.Packets, res.Sent)
			}
			backlog := NAPITotal(d.NAPI[NAPIKey{}])
			if backlog.Polls == 0 || backlog.Work < res.Sent {
				t.Errorf("backlog NAPI: %+v, sent %d", backlog, res.Sent)
			}
			for k := range d.TX {
				if k.Ifindex != 1 {
					t.Errorf("ifindex filter let through %+v", k)
				}
			}
			if d.Lost.Total() != 0 {
				t.Errorf("lost %+v", d.Lost)
			}
			if err := p.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}

var xdpPackets = regexp.MustCompile(`rx_queue_(\d+)_xdp_packets:\s+(\d+)`)

func queueCounters(t *testing.T, lab *netlab.Lab) map[int]uint64 {
	t.Helper()
	out, err := lab.Run(context.Background(), lab.ReceiverNS, "ethtool", "-S", lab.ReceiverIf)
	if err != nil {
		t.Fatal(err)
	}
	c := map[int]uint64{}
	for _, m := range xdpPackets.FindAllStringSubmatch(out, -1) {
		q, _ := strconv.Atoi(m[1])
		n, _ := strconv.ParseUint(m[2], 10, 64)
		c[q] = n
	}
	return c
}

// waitQdiscDrained waits up to limit for the sender's root qdisc to hold
// no packets and returns how many it still holds (0 once drained).
func waitQdiscDrained(t *testing.T, lab *netlab.Lab, limit time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		out, err := lab.Run(context.Background(), lab.SenderNS, "tc", "-s", "-j", "qdisc", "show", "dev", lab.SenderIf, "root")
		if err != nil {
			t.Fatal(err)
		}
		var qs []struct {
			Qlen uint64 `json:"qlen"`
		}
		if err := json.Unmarshal([]byte(out), &qs); err != nil || len(qs) == 0 {
			t.Fatalf("tc -s -j qdisc show: %q: %v", out, err)
		}
		if qs[0].Qlen == 0 || time.Now().After(deadline) {
			if qs[0].Qlen > 0 {
				t.Logf("the sender's qdisc still holds %d packets after %v", qs[0].Qlen, limit)
			}
			return qs[0].Qlen
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func within(got, want uint64, frac float64) bool {
	diff := float64(got) - float64(want)
	return diff <= frac*float64(want) && -diff <= frac*float64(want)
}

func labIfindex(t *testing.T, lab *netlab.Lab, ns, dev string) int {
	t.Helper()
	out, err := lab.Run(context.Background(), ns, "cat", "/sys/class/net/"+dev+"/ifindex")
	if err != nil {
		t.Fatal(err)
	}
	ifindex, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	return ifindex
}

// A 4-queue veth with GRO runs one NAPI instance per RX queue: the work
// the probe counts per NAPI instance must match the driver's own per-queue
// counters (ethtool -S) within 5 %.
func TestPerQueueNAPIMatchesEthtool(t *testing.T) {
	ctx := context.Background()
	lab := newLab(t, netlab.Config{Queues: 4})
	ifindex := labIfindex(t, lab, lab.ReceiverNS, lab.ReceiverIf)
	senderIfindex := labIfindex(t, lab, lab.SenderNS, lab.SenderIf)
	// veth has no qdisc by default. HTB without classes sends every packet
	// through its direct queue and, unlike pfifo_fast, never lets one
	// bypass an empty queue, so the enqueue/dequeue counts are exact.
	if _, err := lab.Run(ctx, lab.SenderNS, "tc", "qdisc", "replace", "dev", lab.SenderIf, "root", "handle", "1:", "htb"); err != nil {
		t.Fatal(err)
	}

	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	// One probe per end: each counts one device of one namespace.
	p := openIn(t, lab.ReceiverNS, ifindex, probes.MethodAuto)
	sender := openIn(t, lab.SenderNS, senderIfindex, probes.MethodAuto)
	var sink *udpflood.Sink
	if err := testutil.InNetns(lab.ReceiverNS, func() (err error) {
		sink, err = udpflood.Listen(netip.AddrPortFrom(lab.ReceiverAddr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ethBefore := queueCounters(t, lab)
	first, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	senderFirst, err := sender.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Eight senders = eight source ports: the flow hash spreads them over
	// the TX queues, and veth delivers TX queue N to RX queue N.
	var res udpflood.Result
	if err := testutil.InNetns(lab.SenderNS, func() (err error) {
		res, err = udpflood.Send(ctx, udpflood.Config{Target: netip.AddrPortFrom(lab.ReceiverAddr, sink.AddrPort().Port()),
			Senders: 8, Duration: 500 * time.Millisecond, MaxPackets: 200000, AllowNonLoopback: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Packets still queued in the sender's qdisc when the flood stops
	// (veth stops a TX queue while its peer's ring is full) leave later;
	// wait for them, then let the last NAPI polls finish.
	held := waitQdiscDrained(t, lab, 5*time.Second)
	time.Sleep(50 * time.Millisecond)
	last, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	senderLast, err := sender.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ethAfter := queueCounters(t, lab)
	d, sd := last.Sub(first), senderLast.Sub(senderFirst)

	var netlinkMap map[uint32]int
	if err := testutil.InNetns(lab.ReceiverNS, func() error {
		qs, err := netlinkq.Queues(ifindex)
		netlinkMap = netlinkq.QueueNAPI(qs)
		return err
	}); err != nil && !errors.Is(err, netlinkq.ErrUnavailable) {
		t.Fatal(err)
	}
	napiQueue, method, err := ResolveNAPIQueues(netlinkMap, d, ifindex, ConventionFor("veth"))
	if err != nil {
		t.Fatalf("NAPI → queue map: %v (NAPI %v)", err, d.NAPI)
	}
	t.Logf("sent %d; NAPI→queue %v by %s", res.Sent, napiQueue, method)
	busy := 0
	for q := range lab.Queues {
		eth := ethAfter[q] - ethBefore[q]
		var work uint64
		for id, queue := range napiQueue {
			if queue == q {
				work += NAPITotal(d.NAPI[NAPIKey{ID: id, Ifindex: ifindex}]).Work
			}
		}
		t.Logf("queue %d: ethtool %d, NAPI work %d", q, eth, work)
		if eth > 0 {
			busy++
		}
		if !within(work, eth, 0.05) {
			t.Errorf("queue %d: NAPI work %d vs ethtool rx_queue_%d_xdp_packets delta %d: more than 5%% apart", q, work, q, eth)
		}
	}
	// veth hands TX queue N of the sender to RX queue N of the receiver.
	// GRO merges datagrams, so netif_receive_skb may see fewer skbs than
	// were sent, never more.
	var enqAll, deqAll uint64
	for q := range lab.Queues {
		tx := TrafficTotal(sd.TX[QueueKey{Ifindex: senderIfindex, Queue: q}]).Packets
		rx := TrafficTotal(d.RXQueues(ifindex, PeerTXQueue)[q]).Packets
		var enq, deq uint64
		for _, st := range sd.Qdisc[QueueKey{Ifindex: senderIfindex, Queue: q}] {
			enq += st.Enqueues
			deq += st.DequeuedPackets
		}
		enqAll, deqAll = enqAll+enq, deqAll+deq
		t.Logf("queue %d: TX %d, qdisc enqueued %d dequeued %d, RX %d", q, tx, enq, deq, rx)
		// A requeued packet (driver busy) reaches start_xmit twice, so
		// allow 1 % between qdisc and driver counts; a packet the qdisc
		// still holds was enqueued and not yet dequeued.
		if rx > tx || (tx > 0) != (rx > 0) || !within(deq, tx, 0.01) || (held == 0 && !within(enq, tx, 0.01)) || enq < deq {
			t.Errorf("queue %d: sender TX %d, qdisc enqueued %d / dequeued %d, receiver RX %d, qdisc holds %d: want enqueued ≈ dequeued ≈ TX >= RX", q, tx, enq, deq, rx, held)
		}
	}
	if held > 0 && !within(enqAll, deqAll+held, 0.01) {
		t.Errorf("qdisc enqueued %d, dequeued %d and still holds %d: want enqueued ≈ dequeued + held", enqAll, deqAll, held)
	}
	if busy < 2 {
		t.Errorf("only %d queue(s) carried traffic; the flood should spread over several", busy)
	}
	for _, pr := range []*Probe{p, sender} {
		if err := pr.Close(); err != nil {
			t.Error(err)
		}
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}

// newLab is a root test's lab, closed when the test ends.
func newLab(t *testing.T, cfg netlab.Config) *netlab.Lab {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	lab, err := netlab.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	})
	return lab
}

// openIn opens a probe on device ifindex of the lab namespace ns.
func openIn(t *testing.T, ns string, ifindex int, m probes.AttachMethod) *Probe {
	t.Helper()
	inode, err := probes.NetnsInode("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(Options{Method: m, Ifindex: ifindex, Netns: inode})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func snapshot(t *testing.T, p *Probe) Snapshot {
	t.Helper()
	s, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lo is ifindex 1 in every network namespace: a probe on lo of one
// namespace must not count loopback traffic of another. Both namespaces
// are the lab's own, so no other traffic on the machine interferes.
func TestNetnsFilterTellsSameIfindexApart(t *testing.T) {
	ctx := context.Background()
	lab := newLab(t, netlab.Config{Queues: 1, NoGRO: true})
	for _, m := range probes.Methods {
		t.Run(string(m), func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			busy, idle := openIn(t, lab.ReceiverNS, 1, m), openIn(t, lab.SenderNS, 1, m)
			busyFirst, idleFirst := snapshot(t, busy), snapshot(t, idle)
			var res udpflood.Result
			if err := testutil.InNetns(lab.ReceiverNS, func() error {
				sink, err := udpflood.Listen("127.0.0.1:0")
				if err != nil {
					return err
				}
				defer sink.Close()
				res, err = udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 2,
					Duration: 300 * time.Millisecond, MaxPackets: 50000})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			b, i := snapshot(t, busy).Sub(busyFirst), snapshot(t, idle).Sub(idleFirst)
			if tx := TrafficTotal(b.TX[QueueKey{Ifindex: 1, Queue: 0}]).Packets; tx < res.Sent {
				t.Errorf("lo of %s: %d TX packets, sent %d", lab.ReceiverNS, tx, res.Sent)
			}
			for k, perCPU := range i.TX {
				if n := TrafficTotal(perCPU).Packets; n > 0 {
					t.Errorf("lo of the idle %s counted %d TX packets on %+v: the flood ran in %s", lab.SenderNS, n, k, lab.ReceiverNS)
				}
			}
			for k, perCPU := range i.RXRaw {
				if n := TrafficTotal(perCPU).Packets; n > 0 {
					t.Errorf("lo of the idle %s counted %d RX packets on %+v", lab.SenderNS, n, k)
				}
			}
			for _, p := range []*Probe{busy, idle} {
				if err := p.Close(); err != nil {
					t.Error(err)
				}
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}

// A device without NAPI instances (lo) needs no napi_poll: the probe leaves
// it unattached, says why, and still counts the device's queues.
func TestNoNAPILeavesNAPIPollOut(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	p, err := Open(Options{Ifindex: 1, NoNAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Missing()[Hooks[0].String()]; !errors.Is(err, ErrNoNAPI) || p.Attached.Links() != len(Hooks)-1 {
		t.Errorf("napi_poll: missing %v, %d links of %d hooks", err, p.Attached.Links(), len(Hooks))
	}
	first := snapshot(t, p)
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	res, err := udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: 1,
		Duration: 200 * time.Millisecond, MaxPackets: 20000})
	sink.Close()
	if err != nil {
		t.Fatal(err)
	}
	d := snapshot(t, p).Sub(first)
	if tx := TrafficTotal(d.TX[QueueKey{Ifindex: 1, Queue: 0}]).Packets; tx < res.Sent {
		t.Errorf("lo TX queue 0: %d packets, sent %d", tx, res.Sent)
	}
	if len(d.NAPI) != 0 {
		t.Errorf("NAPI counted without napi_poll: %+v", d.NAPI)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}
